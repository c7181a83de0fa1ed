"""ONNX export of sorting, searching, set functions and data-dependent indexing.

The converters follow ``export_ops``' convention (``f(g, node, ins) -> [tensor names]``) and join
its ``CONVERTERS`` table. ONNX forms:

* ``sort`` / ``argsort``: ``TopK`` with ``k`` the axis length (read from the input's shape when the
  model runs). TopK puts equal elements in index order, which is our stable order both ways.
* ``searchsorted``: for each value, the count of sorted elements below it (``left``) or not above
  it (``right``): a comparison against every element and a ``ReduceSum``.
* ``isin``: an ``Equal`` against every element of ``x2`` and a ``ReduceMax``.
* ``advanced_index`` (``x[rows, :, cols]``): the slices applied first, the indexed axes moved to the
  front, one ``GatherND`` with the broadcast index arrays stacked, then NumPy's placement of the
  broadcast dims (in place of the first index when the indices are adjacent, first otherwise).
* ``boolean_mask``: ``Compress`` of ``x`` flattened over the mask's dims; ``nonzero``: ``NonZero``
  transposed to our ``(n, ndim)``.
* ``unique_values`` / ``unique_all``: ``Unique`` with ``sorted=1`` (its four outputs are the Array
  API's ``unique_all``; the inverse indices are reshaped to ``x``'s shape).
* ``roll`` / ``fftshift`` / ``ifftshift``: two ``Slice``s joined by ``Concat`` per rolled axis.
* ``slice_like``, ``sum_to``, ``sum_like``, ``size``, ``one_hot_like``: ``Shape``-driven forms, so a
  dynamic axis is read when the model runs.
"""
from __future__ import annotations

import numpy as np

from .export_base import INT64_MAX, fail, in_dtype, input_rank, input_shape, out_dtype
from .export_nn import one_hot_of

I64 = np.dtype("int64")


def _static(g, node, i: int, what: str) -> tuple:
    s = input_shape(node, i)
    if s is None or None in s:
        raise fail(g, node, f"{what} needs input {i}'s shape to be static, got {s} (a dynamic axis); "
                             "export with that axis static")
    return tuple(s)


def _dim(g, x: str, axis: int) -> str:
    """The 1-element int64 tensor holding ``x``'s size along ``axis``, read when the model runs."""
    return g.op("Shape", [x], start=axis, end=axis + 1 if axis != -1 else INT64_MAX)


# -- sorting and searching ------------------------------------------------------------------------------
def _topk(g, node, x, axis: int, descending: bool):
    k = _dim(g, x, axis)
    dt = in_dtype(node, 0)
    if dt.kind in "bu" and dt != np.dtype("uint64"):  # TopK kernels: floats, int32/64 (+ uint64)
        x = g.cast(x, dt, np.dtype("int32"))
    vals, idx = g.op("TopK", [x, k], n_out=2, axis=axis, largest=int(descending), sorted=1)
    return g.cast(vals, np.dtype("int32"), dt) if dt.kind in "bu" and dt != np.dtype("uint64") else vals, idx


def _sort(index: bool):
    def convert(g, node, ins):
        rank = input_rank(g, node)
        axis = int(node.params.get("axis", -1)) % rank
        vals, idx = _topk(g, node, ins[0], axis, bool(node.params.get("descending", False)))
        return [idx if index else vals]
    return convert


def _searchsorted(g, node, ins):
    common = np.result_type(in_dtype(node, 0), in_dtype(node, 1))
    a = g.cast(ins[0], in_dtype(node, 0), common)  # (n,)
    v = g.op("Unsqueeze", [g.cast(ins[1], in_dtype(node, 1), common), g.ints([-1])])  # (..., 1)
    below = g.op("Less" if node.params.get("side", "left") == "left" else "LessOrEqual", [a, v])
    return [g.op("ReduceSum", [g.cast(below, np.dtype(bool), I64), g.ints([-1])], keepdims=0)]


def _isin(g, node, ins):
    common = np.result_type(in_dtype(node, 0), in_dtype(node, 1))
    a = g.op("Unsqueeze", [g.cast(ins[0], in_dtype(node, 0), common), g.ints([-1])])
    b = g.op("Reshape", [g.cast(ins[1], in_dtype(node, 1), common), g.ints([-1])])
    hit = g.cast(g.op("Equal", [a, b]), np.dtype(bool), np.dtype("int32"))
    none = g.op("ConstantOfShape", [g.op("Shape", [a])], value=g.tensor(np.zeros(1, np.int32)))
    hit = g.op("Concat", [hit, none], axis=-1)  # a column of misses, so an empty x2 finds nothing
    found = g.cast(g.op("ReduceMax", [hit, g.ints([-1])], keepdims=0), np.dtype("int32"), np.dtype(bool))
    return [g.op("Not", [found]) if node.params.get("invert") else found]


# -- indexing ---------------------------------------------------------------------------------------------
def _advanced_index(g, node, ins):
    shape = input_shape(node, 0)
    if shape is None:
        raise fail(g, node, "advanced indexing needs the rank of x; give la.onnx.export input_shapes")
    key, arrays, dtypes = _full_key(node, ins, len(shape))
    # 1. new axes become size-1 axes taken whole; 2. slices are applied, keeping their axes
    x, key, sizes = _apply_slices(g, node, ins[0], key, shape)
    # 3. the indexed axes (arrays, and ints as 0-d arrays) to the front, one GatherND
    idx_axes = [ax for ax, k in enumerate(key) if not isinstance(k, slice)]
    idx = [_index_tensor(g, x, key, ax, arrays, dtypes, sizes) for ax in idx_axes]
    positions = list(node.params["positions"])
    ishapes = [input_shape(node, positions.index(p) + 1) if p in arrays else () for p in idx_axes]
    same = all(s == ishapes[0] for s in ishapes)  # (equal shapes, static or not, need no broadcasting)
    if any(s is None for s in ishapes) or (not same and any(None in s for s in ishapes)):
        raise fail(g, node, "index arrays of different shapes need static shapes (to broadcast them)")
    bshape = None if same else list(np.broadcast_shapes(*[tuple(s) for s in ishapes]))
    rest = [ax for ax in range(len(sizes)) if ax not in idx_axes]
    if idx_axes != list(range(len(idx_axes))):
        x = g.op("Transpose", [x], perm=idx_axes + rest)
    if bshape is None:  # index arrays of one shape (static or not): stacked as they are
        stacked = g.op("Concat", [g.op("Unsqueeze", [t, g.ints([-1])]) for t in idx], axis=-1) if len(idx) > 1 \
            else g.op("Unsqueeze", [idx[0], g.ints([-1])])
        bshape = list(ishapes[0])
    else:
        stacked = g.op("Concat", [g.op("Unsqueeze", [g.op("Expand", [t, g.ints(bshape)]), g.ints([-1])])
                                  for t in idx], axis=-1)
    y = g.op("GatherND", [x, stacked])  # shape: bshape + the rest
    adjacent = idx_axes == list(range(idx_axes[0], idx_axes[-1] + 1))
    first = idx_axes[0]
    if adjacent and first > 0:  # the broadcast dims go where the first index was
        nb, nr = len(bshape), len(rest)
        perm = list(range(nb, nb + first)) + list(range(nb)) + list(range(nb + first, nb + nr))
        y = g.op("Transpose", [y], perm=perm)
    return [y]


def _full_key(node, ins, rank: int) -> tuple:
    """``(key, index arrays by axis, their dtypes by axis)``: the Ellipsis expanded and the key
    filled with whole slices to one entry per axis of ``x`` (and per new axis)."""
    key, positions = list(node.params["key"]), list(node.params["positions"])
    arrays = dict(zip(positions, ins[1:]))
    dtypes = {p: in_dtype(node, i + 1) for i, p in enumerate(positions)}
    consumed = sum(1 for k in key if k is not None and k is not Ellipsis)
    if Ellipsis in key:
        at = key.index(Ellipsis)
        key[at:at + 1] = [slice(None)] * (rank - consumed)
        arrays = {(p if p < at else p + rank - consumed - 1): t for p, t in arrays.items()}
        dtypes = {(p if p < at else p + rank - consumed - 1): t for p, t in dtypes.items()}
    key += [slice(None)] * (rank + key.count(None) - len(key))
    return key, arrays, dtypes


def _apply_slices(g, node, x, key: list, shape) -> tuple:
    """``(x, key, sizes)`` after the new axes (``Unsqueeze``) and the slices (one ``Slice``): the key
    left has whole slices and indices; ``sizes``: the axis lengths after slicing (None: dynamic)."""
    new = [i for i, k in enumerate(key) if k is None]
    if new:
        x = g.op("Unsqueeze", [x, g.ints(new)])
        shape = list(shape)
        for i in new:
            shape.insert(i, 1)
        key = [slice(None) if k is None else k for k in key]
    starts, ends, axes, steps = [], [], [], []
    sizes = list(shape)
    for ax, k in enumerate(key):
        if isinstance(k, slice) and k != slice(None) and shape[ax] is None:
            raise fail(g, node, f"advanced indexing slices axis {ax}, which is not static (a dynamic axis); "
                                 "export with that axis static")
        if isinstance(k, slice) and k != slice(None):
            lo, hi, st = k.indices(shape[ax])
            starts.append(lo)
            ends.append(hi if hi >= 0 else INT64_MIN_SLICE)
            axes.append(ax)
            steps.append(st)
            sizes[ax] = len(range(lo, hi, st))
    if axes:
        x = g.op("Slice", [x, g.ints(starts), g.ints(ends), g.ints(axes), g.ints(steps)])
    return x, key, sizes


def _index_tensor(g, x, key: list, ax: int, arrays: dict, dtypes: dict, sizes: list):
    """The int64 index of axis ``ax`` (an index array, or an int as a 0-d array), negative
    indices counted from the end (of a dynamic axis: its size when the model runs)."""
    if ax in arrays:
        t = g.cast(arrays[ax], dtypes[ax], I64)
    else:
        t = g.ints([int(key[ax])], scalar=True)
    n = g.scalar(sizes[ax], I64) if sizes[ax] is not None else \
        g.op("Squeeze", [g.op("Gather", [g.op("Shape", [x]), g.ints([ax])], axis=0), g.ints([0])])
    return g.op("Where", [g.op("Less", [t, g.scalar(0, I64)]), g.op("Add", [t, n]), t])


INT64_MIN_SLICE = np.iinfo(np.int64).min


def _boolean_mask(g, node, ins):
    xs = input_shape(node, 0)
    ms = input_shape(node, 1)
    if xs is None or ms is None or None in xs[len(ms):]:
        raise fail(g, node, "x[mask] needs the shape of x past the mask's dims to be static")
    rest = [int(d) for d in xs[len(ms):]]
    flat = g.op("Reshape", [ins[0], g.ints([-1] + rest)])
    mask = g.op("Reshape", [g.cast(ins[1], in_dtype(node, 1), np.dtype(bool)), g.ints([-1])])
    return [g.op("Compress", [flat, mask], axis=0)]


def _nonzero(g, node, ins):
    x = ins[0]
    if input_rank(g, node) == 0:  # NumPy treats a 0-d array as 1-d here
        x = g.op("Reshape", [x, g.ints([1])])
    return [g.op("Transpose", [g.op("NonZero", [x])], perm=[1, 0])]


def _unique(all_outputs: bool):
    def convert(g, node, ins):
        flat = g.op("Reshape", [ins[0], g.ints([-1])])
        y, first, inverse, counts = g.op("Unique", [flat], n_out=4, sorted=1)
        if not all_outputs:
            return [y]
        return [y, first, g.op("Reshape", [inverse, g.op("Shape", [ins[0]])]), counts]
    return convert


def _roll_axis(g, x: str, shift: int, n: int, axis: int) -> str:
    s = shift % n if n else 0
    if s == 0:
        return x
    tail = g.op("Slice", [x, g.ints([n - s]), g.ints([n]), g.ints([axis])])
    head = g.op("Slice", [x, g.ints([0]), g.ints([n - s]), g.ints([axis])])
    return g.op("Concat", [tail, head], axis=axis)


def _roll(g, node, ins):
    shift, axis = node.params["shift"], node.params.get("axis")
    x = ins[0]
    if axis is None:
        shape = _static(g, node, 0, "roll with axis=None")
        flat = g.op("Reshape", [x, g.ints([-1])])
        y = _roll_axis(g, flat, int(np.sum(shift)), int(np.prod(shape)), 0)
        return [g.op("Reshape", [y, g.ints(list(shape))]) if y != flat else g.op("Identity", [x])]
    shifts = [int(s) for s in np.broadcast_to(shift, np.shape(axis))] if np.ndim(axis) else [int(np.sum(shift))]
    shape = input_shape(node)
    axes = [int(a) % len(shape) for a in np.atleast_1d(axis)]
    if any(shape[a] is None for a in axes):
        raise fail(g, node, f"roll along axes {axes} of {shape}: a rolled axis must be static (a dynamic axis)")
    total: dict[int, int] = {}
    for a, s in zip(axes, shifts):
        total[a] = total.get(a, 0) + s
    y = x
    for a, s in total.items():
        y = _roll_axis(g, y, s, shape[a], a)
    return [y if y != x else g.op("Identity", [x])]


def _fftshift(inverse: bool):
    def convert(g, node, ins):
        shape = input_shape(node)
        axes = node.params.get("axes")
        axes = range(len(shape)) if axes is None else [int(a) % len(shape) for a in np.atleast_1d(axes)]
        if any(shape[a] is None for a in axes):
            raise fail(g, node, f"{node.op.name} along axes {list(axes)} of {shape}: a shifted axis must be static")
        y = ins[0]
        for a in axes:
            y = _roll_axis(g, y, -(shape[a] // 2) if inverse else shape[a] // 2, shape[a], a)
        return [y if y != ins[0] else g.op("Identity", [y])]
    return convert


# -- shapes read when the model runs -------------------------------------------------------------------------
def _slice_like(g, node, ins):
    axis = int(node.params.get("axis", 0)) % input_rank(g, node)
    n = _dim(g, ins[1], axis)
    if node.params.get("drop"):
        return [g.op("Slice", [ins[0], n, g.ints([INT64_MAX]), g.ints([axis])])]
    return [g.op("Slice", [ins[0], g.ints([0]), n, g.ints([axis])])]


def _sum_down(g, node, x, xs: tuple, target: tuple, to):
    """``x`` (shape ``xs``) summed over the axes broadcasting gave it beyond ``target``, reshaped to ``to``."""
    lead = len(xs) - len(target)
    if lead < 0:
        raise fail(g, node, f"cannot sum a rank-{len(xs)} array down to rank {len(target)}")
    axes = list(range(lead)) + [lead + i for i, d in enumerate(target) if d == 1 and xs[lead + i] != 1]
    y = g.op("ReduceSum", [x, g.ints(axes)], keepdims=1) if axes else x
    return g.op("Reshape", [y, to])


def _sum_to(g, node, ins):
    target = tuple(int(d) for d in node.params["shape"])
    return [_sum_down(g, node, ins[0], input_shape(node, 0), target, g.ints(list(target)))]


def _sum_like(g, node, ins):
    like = input_shape(node, 1)
    if like is None:
        raise fail(g, node, "the rank of `like` is unknown")
    return [_sum_down(g, node, ins[0], input_shape(node, 0), tuple(like), g.op("Shape", [ins[1]]))]


def _size(g, node, ins):
    axis = node.params.get("axis")
    if axis is None:
        n = g.op("Size", [ins[0]])
    else:
        rank = input_rank(g, node)
        dims = g.op("Gather", [g.op("Shape", [ins[0]]), g.ints([int(a) % rank for a in np.atleast_1d(axis)])])
        n = g.op("ReduceProd", [dims], keepdims=0)
    return [g.cast(n, I64, out_dtype(node))]


def _one_hot_like(g, node, ins):
    dt = out_dtype(node)
    idx = g.cast(ins[0], in_dtype(node, 0), I64)
    depth = _dim(g, ins[1], -1)
    return [one_hot_of(g, node, idx, depth, g.const(np.array([0, 1], dtype=dt)))]


CONVERTERS = {
    "sort": _sort(False), "argsort": _sort(True), "searchsorted": _searchsorted, "isin": _isin,
    "advanced_index": _advanced_index, "boolean_mask": _boolean_mask, "nonzero": _nonzero,
    "unique_values": _unique(False), "unique_all": _unique(True),
    "roll": _roll, "fftshift": _fftshift(False), "ifftshift": _fftshift(True),
    "slice_like": _slice_like, "sum_to": _sum_to, "sum_like": _sum_like, "size": _size,
    "one_hot_like": _one_hot_like,
}
