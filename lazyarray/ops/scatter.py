"""Scatter ops: write (or combine) ``updates`` into a copy of ``x`` at integer indices.

* ``scatter_along_axis(x, indices, updates, axis, reduce)``: the inverse of ``take_along_axis``:
  ``out[i][j][indices[i][j][k]][...] = updates[i][j][k][...]`` along ``axis`` (``indices`` and
  ``updates`` share a shape that may be smaller than ``x`` off the axis), as ONNX ScatterElements
  and ``torch.scatter_reduce``.
* ``scatter_nd(x, indices, updates, reduce)``: ``indices[..., :k]`` address the first ``k`` axes of
  ``x``; ``updates`` has shape ``indices.shape[:-1] + x.shape[k:]`` (ONNX ScatterND,
  ``tf.tensor_scatter_nd_update``).

``reduce`` picks how an update meets the value there: ``"none"`` overwrites (with repeated
indices the last update wins), ``"add"``/``"mul"``/``"max"``/``"min"`` combine, each repeated index
in turn (``ufunc.at``). Negative indices count from the end. No gradient yet (an error says so).
"""
from __future__ import annotations

from ..errors import DTypeError, ShapeError, fmt_shape
from .params import INT, Param, choice
from .registry import OpDef, normalize_axis, register

_REDUCE = Param("reduce", choice("none", "add", "mul", "max", "min"), "none")
_UFUNC = {"add": "add", "mul": "multiply", "max": "maximum", "min": "minimum"}


def _combine(xp, res, key, updates, reduce):
    if reduce == "none":
        res[key] = updates
    else:
        getattr(xp, _UFUNC[reduce]).at(res, key, updates)
    return res


def _check_dtypes(op, dtypes):
    if dtypes[1].kind not in "iu":
        raise DTypeError(f"{op}: indices must be integers, got {dtypes[1]}")
    return dtypes[0]


# -- scatter_along_axis ----------------------------------------------------------------------------
def _along_shape(shapes, axis=0, reduce="none"):
    x, idx, upd = shapes
    if len(idx) != len(x) or tuple(idx) != tuple(upd):
        raise ShapeError(f"scatter_along_axis: indices {fmt_shape(idx)} and updates {fmt_shape(upd)} must have "
                         f"one shape, with as many dims as x {fmt_shape(x)}")
    ax = normalize_axis(axis, len(x), "scatter_along_axis")
    for i, (a, b) in enumerate(zip(x, idx)):
        if i != ax and a is not None and b is not None and b > a:
            raise ShapeError(f"scatter_along_axis: indices {fmt_shape(idx)} are larger than x {fmt_shape(x)} "
                             f"on axis {i}")
    return x


def _along_key(xp, x, indices, axis):
    ax = axis % x.ndim
    key = list(xp.meshgrid(*[xp.arange(n) for n in indices.shape], indexing="ij", sparse=True))
    key[ax] = xp.where(indices < 0, indices + x.shape[ax], indices)
    return tuple(key)


def _scatter_along(xp, x, indices, updates, axis=0, reduce="none", out=None):
    return _combine(xp, x.copy(), _along_key(xp, x, indices, axis), updates.astype(x.dtype, copy=False), reduce)


register(OpDef("scatter_along_axis", ("x", "indices", "updates"), _scatter_along,
               params=(Param("axis", INT, 0), _REDUCE), shape=_along_shape,
               dtype=lambda dtypes, **p: _check_dtypes("scatter_along_axis", dtypes),
               doc="a copy of x with updates written (or combined by reduce) at indices along axis "
                   "(the inverse of take_along_axis; ONNX ScatterElements)"))


# -- scatter_nd ------------------------------------------------------------------------------------
def _nd_shape(shapes, reduce="none"):
    x, idx, upd = shapes
    k = idx[-1] if idx else None
    if not idx or (k is not None and k > len(x)):
        raise ShapeError(f"scatter_nd: indices {fmt_shape(idx)} must have a last axis of at most x's rank "
                         f"({len(x)})")
    if k is not None:
        want = tuple(idx[:-1]) + tuple(x[k:])
        if len(want) != len(upd) or any(a is not None and b is not None and a != b for a, b in zip(want, upd)):
            raise ShapeError(f"scatter_nd: updates {fmt_shape(upd)} must have shape indices.shape[:-1] + "
                             f"x.shape[{k}:] = {fmt_shape(want)}")
    return x


def _nd_key(xp, x, indices):
    k = indices.shape[-1]
    return tuple(xp.where(indices[..., i] < 0, indices[..., i] + x.shape[i], indices[..., i]) for i in range(k))


def _scatter_nd(xp, x, indices, updates, reduce="none", out=None):
    return _combine(xp, x.copy(), _nd_key(xp, x, indices), updates.astype(x.dtype, copy=False), reduce)


register(OpDef("scatter_nd", ("x", "indices", "updates"), _scatter_nd, params=(_REDUCE,), shape=_nd_shape,
               dtype=lambda dtypes, **p: _check_dtypes("scatter_nd", dtypes),
               doc="a copy of x with updates written (or combined by reduce) at the points indices[..., :k] "
                   "of its first k axes (ONNX ScatterND)"))
