"""Array API manipulation, sorting, searching and set ops: ``flip``, ``roll``,
``take_along_axis``, ``sort``, ``argsort``, ``searchsorted``, ``unique_values``.

``unique_values`` has a data-dependent length: its shape rule answers ``None`` for it, as
``nonzero`` and boolean masks do, and the length is known once it has run.
"""
from __future__ import annotations

import numpy as np

from ..errors import AxisError, DTypeError, ShapeError, fmt_shape
from .params import AXIS, BOOL, INT, Param, choice
from .registry import OpDef, normalize_axis, register


def _axes(axis, ndim, op):
    """``axis`` (None = all, an int, a tuple) as a tuple of normalized axes."""
    if axis is None:
        return tuple(range(ndim))
    return tuple(normalize_axis(a, ndim, op) for a in ((axis,) if isinstance(axis, int) else axis))


def _flip_shape(shapes, axis=None):
    _axes(axis, len(shapes[0]), "flip")
    return shapes[0]


register(OpDef("flip", ("x",), lambda xp, x, axis=None, out=None: xp.flip(x, axis=axis),
               params=(Param("axis", AXIS, None),), shape=_flip_shape, view=True,
               grad=lambda F, ins, y, g, axis=None: [F.flip(g, axis=axis)],
               doc="x with the order of elements reversed along axis (None = every axis)"))


def _roll_shape(shapes, shift, axis=None):
    shifts = (shift,) if isinstance(shift, int) else shift
    if axis is None:
        if len(shifts) != 1:
            raise ShapeError(f"roll: axis=None takes one shift, got {shift}")
    else:
        axes = _axes(axis, len(shapes[0]), "roll")
        if len(shifts) != len(axes) and len(shifts) != 1:
            raise ShapeError(f"roll: {len(shifts)} shifts for {len(axes)} axes; pass one shift per axis")
    return shapes[0]


def _neg(shift):
    return -shift if isinstance(shift, int) else tuple(-s for s in shift)


register(OpDef("roll", ("x",), lambda xp, x, shift, axis=None, out=None: xp.roll(x, shift, axis=axis),
               params=(Param("shift", AXIS), Param("axis", AXIS, None)), shape=_roll_shape,
               grad=lambda F, ins, y, g, shift, axis=None: [F.roll(g, shift=_neg(shift), axis=axis)],
               doc="elements shifted by shift along axis, wrapping around (None = the flattened array)"))


# -- take_along_axis -----------------------------------------------------------------------------------
def _along_shape(shapes, axis=-1):
    x, idx = shapes
    if len(x) != len(idx):
        raise ShapeError(f"take_along_axis: indices {fmt_shape(idx)} must have as many dims as x {fmt_shape(x)}")
    ax = normalize_axis(axis, len(x), "take_along_axis")
    out = []
    for i, (a, b) in enumerate(zip(x, idx)):
        if i == ax:
            out.append(b)
        elif a is None or b is None:
            out.append(b if a is None or a == 1 else a)
        elif a != b and 1 not in (a, b):
            raise ShapeError(f"take_along_axis: indices {fmt_shape(idx)} do not broadcast against x "
                             f"{fmt_shape(x)} outside axis {axis}")
        else:
            out.append(max(a, b) if 1 in (a, b) else a)
    return tuple(out)


def _index_dtype(dtypes, axis=-1):
    if dtypes[1].kind not in "iu":
        raise DTypeError(f"indices must be integers, got {dtypes[1]}")
    return dtypes[0]


def _take_along(xp, x, indices, axis=-1, out=None):
    return xp.take_along_axis(x, indices, axis=axis)


def _along_grad(xp, g, like, indices, axis=-1, out=None):
    res = xp.zeros(like.shape, dtype=g.dtype)
    ax = axis % like.ndim
    grids = list(xp.meshgrid(*[xp.arange(n) for n in g.shape], indexing="ij", sparse=True))
    grids[ax] = indices
    xp.add.at(res, tuple(grids), g)  # repeated indices add up
    return res


register(OpDef("take_along_axis", ("x", "indices"), _take_along, params=(Param("axis", INT, -1),),
               shape=_along_shape, dtype=_index_dtype,
               grad=lambda F, ins, y, g, axis=-1: [F.take_along_axis_grad(g, ins[0], ins[1], axis=axis), None],
               doc="the elements of x at indices along axis (numpy.take_along_axis)"))
register(OpDef("take_along_axis_grad", ("g", "like", "indices"), _along_grad, params=(Param("axis", INT, -1),),
               shape=lambda shapes, axis=-1: shapes[1], dtype=lambda dtypes, axis=-1: dtypes[0],
               doc="zeros shaped like `like` with g added at indices along axis (take_along_axis's gradient)"))


# -- sorting and searching -------------------------------------------------------------------------------
_SPARAMS = (Param("axis", INT, -1), Param("descending", BOOL, False), Param("stable", BOOL, True))


def _argsort(xp, x, axis=-1, descending=False, stable=True, out=None):
    if not descending:
        return xp.argsort(x, axis=axis, kind="stable").astype(np.int64)
    # Stable and descending: sort the reversed array ascending, then map the indices back, so
    # equal elements keep their original order (as array_api_strict does).
    ax = axis % x.ndim
    res = xp.flip(xp.argsort(xp.flip(x, axis=ax), axis=ax, kind="stable"), axis=ax)
    return (x.shape[ax] - 1 - res).astype(np.int64)


def _sort(xp, x, axis=-1, descending=False, stable=True, out=None):
    if not descending:
        return xp.sort(x, axis=axis, kind="stable")
    return xp.take_along_axis(x, _argsort(xp, x, axis, descending, stable), axis=axis)


def _sort_shape(op):
    def rule(shapes, axis=-1, descending=False, stable=True):
        if not shapes[0]:
            raise AxisError(f"{op}: needs an array of at least 1 dim, got a 0-d array")
        normalize_axis(axis, len(shapes[0]), op)
        return shapes[0]

    return rule


def _sort_grad(F, ins, y, g, axis=-1, descending=False, stable=True):
    order = F.argsort(ins[0], axis=axis, descending=descending, stable=stable)
    return [F.take_along_axis_grad(g, ins[0], order, axis=axis)]


register(OpDef("sort", ("x",), _sort, params=_SPARAMS, shape=_sort_shape("sort"), grad=_sort_grad,
               doc="x sorted along axis (stable; descending=True: largest first)"))
register(OpDef("argsort", ("x",), _argsort, params=_SPARAMS, shape=_sort_shape("argsort"),
               dtype=lambda dtypes, **p: np.dtype("int64"),
               doc="the indices that sort x along axis, as int64 (stable; descending=True: largest first)"))


def _searchsorted_shape(shapes, side="left"):
    if len(shapes[0]) != 1:
        raise ShapeError(f"searchsorted: the sorted array must be 1-D, got {fmt_shape(shapes[0])}")
    return shapes[1]


register(OpDef("searchsorted", ("x1", "x2"),
               lambda xp, x1, x2, side="left", out=None: xp.searchsorted(x1, x2, side=side).astype(np.int64),
               params=(Param("side", choice("left", "right"), "left"),), shape=_searchsorted_shape,
               dtype=lambda dtypes, side="left": np.dtype("int64"),
               doc="where each element of x2 would go in the sorted 1-D x1 to keep it sorted, as int64"))


# -- set functions (data-dependent lengths) ----------------------------------------------------------
register(OpDef("unique_values", ("x",), lambda xp, x, out=None: xp.unique(x.reshape(-1)),
               shape=lambda shapes: (None,),
               doc="the distinct elements of x, sorted, as a 1-D array (length known only after computing)"))


def _unique_all(xp, x, out=None):
    flat = x.reshape(-1)
    values, index, inverse, counts = xp.unique(flat, return_index=True, return_inverse=True, return_counts=True)
    return (values, index.astype(np.int64), inverse.reshape(x.shape).astype(np.int64), counts.astype(np.int64))


register(OpDef("unique_all", ("x",), _unique_all, num_outputs=4,
               shape=lambda shapes: [(None,), (None,), shapes[0], (None,)],
               dtype=lambda dtypes: [dtypes[0]] + [np.dtype("int64")] * 3,
               doc="(values, indices, inverse_indices, counts): the distinct elements of x sorted, the first "
                   "index of each in x flattened, each element's position in values (shaped like x), and how "
                   "often each occurs (lengths known only after computing)"))
register(OpDef("isin", ("x1", "x2"),
               lambda xp, a, b, invert=False, out=None: xp.isin(a, b, invert=invert),
               params=(Param("invert", BOOL, False),), shape=lambda shapes, invert=False: shapes[0],
               dtype=lambda dtypes, invert=False: np.dtype("bool"),
               doc="whether each element of x1 is in x2, as bool shaped like x1 (invert=True: is not)"))
