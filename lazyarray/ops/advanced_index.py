"""Integer-array indexing inside a tuple key: ``x[0, idx]``, ``x[:, rows, cols]``, ``x[idx, ..., 1]``.

``x[idx]`` alone is ``take`` and ``x[mask]`` is ``boolean_mask``; this op covers a tuple key that
mixes integer index arrays with ints, slices, ``None`` and ``...`` (NumPy's advanced indexing,
which the Array API standard 2024.12 adopts for integer arrays). The arrays are inputs of the
op (so they may be lazy); the rest of the key is the ``key`` param with a placeholder ``0`` at
each array's position, listed in ``positions``.

The result shape follows NumPy: the index arrays (and the ints, which count as 0-d index arrays
once any array is present) broadcast together; the broadcast shape takes the place of the first
of them when they are adjacent in the key, and goes first otherwise. The gradient adds ``g``
back at the indexed positions (``add.at``: repeated indices accumulate).
"""
from __future__ import annotations

from ..errors import AxisError, DTypeError, ShapeError, fmt_shape
from .params import INTS, KEY, Param
from .registry import OpDef, register


def _full_key(key, positions, indices):
    k = list(key)
    for pos, idx in zip(positions, indices):
        k[pos] = idx
    return tuple(k)


def _broadcast(shapes):
    ndim = max((len(s) for s in shapes), default=0)
    out = []
    for dims in zip(*[(1,) * (ndim - len(s)) + tuple(s) for s in shapes]):
        known = {d for d in dims if d is not None and d != 1}
        if len(known) > 1:
            raise ShapeError(f"index arrays of shapes {', '.join(fmt_shape(s) for s in shapes)} do not "
                             "broadcast together")
        out.append(known.pop() if known else (None if None in dims else 1))
    return tuple(out)


def _slice_len(s: slice, n):
    return None if n is None else len(range(*s.indices(n)))


def advanced_index_shape(x, key, positions, index_shapes):
    """The result shape of ``x[key]`` with index arrays of ``index_shapes`` at ``positions``."""
    consumed = sum(1 for k in key if k is not None and k is not Ellipsis)
    if consumed > len(x):
        raise AxisError(f"index {_text(key, positions)} has {consumed} indices for an array of "
                        f"{len(x)} dims {fmt_shape(x)}")
    arrays = dict(zip(positions, index_shapes))
    parts, adv_shapes, adv_slots, dim = [], [], [], 0  # parts: (kind, dims)
    for i, k in enumerate(key):
        if k is Ellipsis:
            for _ in range(len(x) - consumed):
                parts.append(("basic", (x[dim],)))
                dim += 1
        elif k is None:
            parts.append(("basic", (1,)))
        elif isinstance(k, slice):
            parts.append(("basic", (_slice_len(k, x[dim]),)))
            dim += 1
        else:  # an int or an index array: both advanced
            n = x[dim]
            if i not in arrays and n is not None and not -n <= k < n:
                raise AxisError(f"index {k} is out of range for axis {dim} of size {n} in "
                                f"{_text(key, positions)} on {fmt_shape(x)}")
            adv_shapes.append(arrays.get(i, ()))
            adv_slots.append(len(parts))
            parts.append(("adv", ()))
            dim += 1
    rest = tuple(x[dim:])
    bshape = _broadcast(adv_shapes)
    adjacent = adv_slots == list(range(adv_slots[0], adv_slots[0] + len(adv_slots)))
    basic = [d for kind, dims in parts if kind == "basic" for d in dims]
    if not adjacent:
        return bshape + tuple(basic) + rest
    before = [d for kind, dims in parts[:adv_slots[0]] for d in dims]
    after = [d for kind, dims in parts[adv_slots[-1] + 1:] for d in dims]
    return tuple(before) + bshape + tuple(after) + rest


def _text(key, positions):
    def one(i, k):
        if i in positions:
            return "<array>"
        if isinstance(k, slice):
            t = ("" if k.start is None else str(k.start)) + ":" + ("" if k.stop is None else str(k.stop))
            return t + (f":{k.step}" if k.step is not None else "")
        return "..." if k is Ellipsis else ("None" if k is None else str(k))
    return "[" + ", ".join(one(i, k) for i, k in enumerate(key)) + "]"


def _dtype(dtypes, key, positions):
    for d in dtypes[1:]:
        if d.kind not in "iu":
            raise DTypeError(f"index arrays inside a tuple key must be integers, got {d}; a boolean "
                             "mask must be the whole key (x[mask]); cast with .astype('int64')")
    return dtypes[0]


def _kernel(xp, x, *indices, key, positions, out=None):
    return x[_full_key(key, positions, indices)]


def _grad_kernel(xp, g, like, *indices, key, positions, out=None):
    res = xp.zeros(like.shape, dtype=g.dtype)
    xp.add.at(res, _full_key(key, positions, indices), g)  # repeated indices accumulate
    return res


_PARAMS = (Param("key", KEY), Param("positions", INTS))

register(OpDef(
    "advanced_index", ("x", "*indices"), _kernel, params=_PARAMS,
    shape=lambda shapes, key, positions: advanced_index_shape(shapes[0], key, positions, shapes[1:]),
    dtype=_dtype,
    grad=lambda F, ins, y, g, key, positions:
    [F.advanced_index_grad(g, ins[0], list(ins[1:]), key=key, positions=positions)] + [None] * (len(ins) - 1),
    doc="x[key] for a tuple key holding integer index arrays (NumPy advanced indexing)"))

register(OpDef(
    "advanced_index_grad", ("g", "like", "*indices"), _grad_kernel, params=_PARAMS,
    shape=lambda shapes, key, positions: shapes[1], dtype=lambda dtypes, key, positions: dtypes[0],
    grad=lambda F, ins, y, g, key, positions:
    [F.advanced_index(g, list(ins[2:]), key=key, positions=positions)] + [None] * (len(ins) - 1),
    doc="zeros shaped like `like` with g added at [key] (advanced_index's gradient)"))
