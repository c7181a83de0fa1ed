"""``repeat_elements``: NumPy's / the Array API's ``repeat`` (each element repeated), behind
``la.repeat(x, repeats, axis=None)``.

The registry op named ``repeat`` is PyTorch's ``Tensor.repeat`` (tiling; ``la.tile`` and the
method ``x.repeat(*sizes)``), kept under that name so saved graphs keep their meaning.
``repeats`` is one count for every element or one count per element along ``axis`` (with
``axis=None`` the array is flattened first). The gradient adds up each element's copies.
"""
from __future__ import annotations

import numpy as np

from ..errors import ShapeError, fmt_shape
from .params import INTS, OPT_INT, Param
from .registry import OpDef, normalize_axis, register


def _layout(shape, repeats, axis):
    """(the length repeated, the output shape) for an input of ``shape``."""
    if axis is None:
        n = 1
        for d in shape:
            n = None if n is None or d is None else n * d
        lead, tail = (), ()
    else:
        ax = normalize_axis(axis, len(shape), "repeat")
        n, lead, tail = shape[ax], tuple(shape[:ax]), tuple(shape[ax + 1:])
    if any(r < 0 for r in repeats):
        raise ShapeError(f"repeat: repeats {tuple(repeats)} must be >= 0")
    if len(repeats) == 1:
        total = None if n is None else n * repeats[0]
    else:
        if n is not None and len(repeats) != n:
            raise ShapeError(f"repeat: {len(repeats)} repeats for {n} elements along axis {axis} of "
                             f"{fmt_shape(shape)}; give one count, or one per element")
        total = sum(repeats)
    return n, lead + (total,) + tail


def _kernel(xp, x, repeats, axis=None, out=None):
    return xp.repeat(x, repeats[0] if len(repeats) == 1 else xp.asarray(repeats, dtype=np.intp), axis=axis)


def _shape(shapes, repeats, axis=None):
    return _layout(shapes[0], repeats, axis)[1]


def _grad(F, ins, y, g, repeats, axis=None):
    return [F.repeat_elements_grad(g, ins[0], repeats=repeats, axis=axis)]


def _grad_kernel(xp, g, like, repeats, axis=None, out=None):
    """Each element's gradient: the sum of its copies' (segment sums along the repeated axis)."""
    flat = axis is None
    gg = g.reshape(-1) if flat else g
    ax = 0 if flat else axis % like.ndim
    n = like.size if flat else like.shape[ax]
    counts = np.full(n, repeats[0]) if len(repeats) == 1 else np.asarray(repeats, dtype=np.intp)
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.intp)
    if gg.shape[ax] == 0:
        res = xp.zeros(like.shape if not flat else (n,), dtype=g.dtype)
    else:
        res = xp.add.reduceat(gg, xp.asarray(np.minimum(starts, gg.shape[ax] - 1)), axis=ax, dtype=g.dtype)
        empty = counts == 0  # reduceat gives g[start] for an empty segment: those sums are 0
        if empty.any():
            idx = [slice(None)] * res.ndim
            idx[ax] = xp.asarray(np.nonzero(empty)[0])
            res[tuple(idx)] = 0
    return res.reshape(like.shape)


_PARAMS = (Param("repeats", INTS), Param("axis", OPT_INT, None))

register(OpDef("repeat_elements", ("x",), _kernel, params=_PARAMS, shape=_shape, grad=_grad,
               doc="NumPy's repeat: each element repeated repeats times (or repeats[i] times) along axis "
                   "(the flattened array when axis is None): la.repeat"))
register(OpDef("repeat_elements_grad", ("g", "like"), _grad_kernel, params=_PARAMS,
               shape=lambda shapes, repeats, axis=None: shapes[1],
               dtype=lambda dtypes, **p: dtypes[0],
               grad=lambda F, ins, y, g, repeats, axis=None: [F.repeat_elements(g, repeats=repeats, axis=axis), None],
               doc="the gradient of repeat_elements: each element's copies summed"))
