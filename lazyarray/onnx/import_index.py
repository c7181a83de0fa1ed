"""ONNX operators about indices -> registry ops: TopK, OneHot, Hardmax, NonZero, EyeLike, CumProd,
Compress (``boolean_mask``), GatherND (``advanced_index``), Unique (``unique_all``).

Sizes these ops take as tensors (``K``, ``depth``) are read at load time, like every shape.
"""
from __future__ import annotations

import math

import numpy as np

from .. import sym as S
from .import_einsum import EINSUM_CONVERTERS
from .import_ops import (
    Converter,
    OnnxNode,
    axis_key,
    check_size,
    constant,
    cum_sum,
    dtype_of,
    foldable,
    iota_along,
    np_dtype,
)


def top_k(n: OnnxNode) -> list:
    n.arity(2)
    x = n.inputs[0]
    k = n.ints(1, "K")[0]
    axis = int(n.attr("axis", -1))
    largest = bool(n.attr("largest", 1))
    # a stable sort keeps the lower index first among equal values, as ONNX asks
    order = S.argsort(x, axis=axis, descending=largest, stable=True)
    idx = S.getitem(order, key=axis_key(axis, slice(0, k), None))
    return [S.take_along_axis(x, idx, axis=axis), S.cast(idx, dtype="int64")]


def one_hot(n: OnnxNode) -> list:
    n.arity(3)
    idx = n.inputs[0]
    depth = np.asarray(n.const(1, "depth")).reshape(-1)
    if depth.size != 1:
        n.fail(f"depth must be one number, got {depth.size} values")
    depth = depth[0]
    if depth.dtype.kind in "fc" and not np.isfinite(depth) or depth.dtype.kind not in "iufc":
        n.fail(f"depth={depth!r}: must be a finite number")
    depth = int(depth.real)
    if depth < 1:
        n.fail(f"depth={depth}: must be at least 1")
    values = np.asarray(n.const(2, "values")).reshape(-1)
    if values.size != 2:
        n.fail(f"values must hold [off, on], got {values.tolist()}")
    rank = n.rank(0, "OneHot") + 1
    axis = int(n.attr("axis", -1))
    if not -rank <= axis < rank:
        n.fail(f"axis={axis} is out of range for an output of rank {rank}")
    axis %= rank
    out = list(n.shape(0))
    out.insert(axis, depth)
    if all(isinstance(d, int) for d in out):  # the result's size, before anything is built
        check_size(n, out, values.dtype)
    check_size(n, (depth,), np.int64, "positions 0 .. depth - 1")
    idx = S.cast(idx, dtype="int64")
    idx = S.where(S.less(idx, 0), S.add(idx, depth), idx)  # negative indices count from depth
    hot = S.equal(S.expand_dims(idx, axis=axis), iota_along(depth, axis, rank, np.int64))
    return [S.where(hot, constant(values[1:2].reshape(())), constant(values[0:1].reshape(())))]


def hardmax(n: OnnxNode) -> list:
    n.arity(1)
    x = n.inputs[0]
    shape = n.known_shape(0, "Hardmax")
    axis = int(n.attr("axis", -1)) % len(shape)
    first = S.argmax(x, axis=axis, keepdims=True)  # the first maximum, as ONNX asks
    hot = S.equal(S.cast(first, dtype="int64"), iota_along(shape[axis], axis, len(shape), np.int64))
    return [S.cast(hot, dtype=dtype_of(x))]


def non_zero(n: OnnxNode) -> list:
    n.arity(1)
    return [S.transpose(S.nonzero(n.inputs[0]))]  # our op gives (count, rank), ONNX (rank, count)


def eye_like(n: OnnxNode) -> list:
    n.arity(1)
    shape = n.known_shape(0, "EyeLike")
    if len(shape) != 2:
        n.fail(f"takes a 2-D input, got shape {shape}")
    dt = np_dtype(int(n.attr("dtype")), n.where) if "dtype" in n.attrs else np.dtype(dtype_of(n.inputs[0]))
    k = int(n.attr("k", 0))
    if all(isinstance(d, int) for d in shape) and foldable(check_size(n, shape, dt)[1]):
        return [constant(np.eye(shape[0], shape[1], k=k, dtype=dt))]
    # large (or symbolic): ones where column == row + k, computed when the graph runs
    rows, cols = iota_along(shape[0], 0, 2, np.int64), iota_along(shape[1], 1, 2, np.int64)
    return [S.cast(S.equal(S.add(rows, k) if k else rows, cols), dtype=dt)]


def cum_prod(n: OnnxNode) -> list:
    return cum_sum(n, S.cumulative_prod, 1)


def compress(n: OnnxNode) -> list:
    """``boolean_mask`` along the axis (moved first), over the first ``len(condition)`` entries."""
    n.arity(2)
    x, cond = n.inputs[0], S.cast(n.inputs[1], dtype="bool")
    cond_len = n.known_shape(1, "Compress")[0]
    axis = n.attr("axis")
    if axis is None:
        x, axis = S.reshape(x, shape=(-1,)), 0
    rank = n.rank(0, "Compress") if n.attr("axis") is not None else 1
    axis = int(axis) % rank
    if axis:
        x = S.transpose(x, axes=(axis, *[a for a in range(rank) if a != axis]))
    size = S.getitem(x, key=(slice(0, cond_len),))
    y = S.boolean_mask(size, cond)
    if axis:
        y = S.transpose(y, axes=(*range(1, axis + 1), 0, *range(axis + 1, rank)))
    return [y]


def gather_nd(n: OnnxNode) -> list:
    """``x[b0, ..., idx[..., 0], idx[..., 1], ...]``: NumPy's advanced indexing, with one ``arange``
    per batch dim (shaped to broadcast against the index arrays) in front."""
    n.arity(2)
    ishape = n.known_shape(1, "GatherND")
    nb, q = int(n.attr("batch_dims", 0)), ishape[-1]
    idx = n.inputs[1]
    arrays = []
    for b in range(nb):
        shape = [1] * (len(ishape) - 1)
        shape[b] = ishape[b]
        arrays.append(constant(np.arange(ishape[b], dtype=np.int64).reshape(shape)))
    arrays += [S.cast(S.getitem(idx, key=(Ellipsis, j)), dtype="int64") for j in range(q)]
    return [S.advanced_index(n.inputs[0], arrays, key=(0,) * (nb + q), positions=tuple(range(nb + q)))]


def unique(n: OnnxNode) -> list:
    """``unique_all`` of the flattened input, or with ``axis`` of one rank key per slice along it;
    ``sorted=0`` reorders by first occurrence."""
    n.arity(1)
    if n.attr("axis") is None:
        res = S.unique_all(n.inputs[0])
    else:
        res = S.unique_all(_slice_rank(n))
    values, first, inverse, counts = (res[i] for i in range(4))
    inverse = S.reshape(inverse, shape=(-1,))
    if not int(n.attr("sorted", 1)):  # the distinct values in the order they first occur
        order = S.argsort(first)
        values, first, counts = (S.take(t, order) for t in (values, first, counts))
        inverse = S.take(S.argsort(order), inverse)
    if n.attr("axis") is not None:  # the distinct slices themselves, in the order of their keys
        values = S.take(n.inputs[0], first, axis=int(n.attr("axis")) % len(n.shape(0)))
    return [values, first, inverse, counts]


_UNIQUE_AXIS_LIMIT = 1 << 26  # elements of the pairwise comparison; past it, refuse rather than exhaust memory


def _slice_rank(n: OnnxNode):
    """Per slice of the input along ``axis``: how many slices are lexicographically smaller (NumPy's
    ``unique(axis=)`` order). Equal slices get equal ranks and unequal ones different ranks, so the
    ranks' ``unique_all`` is the slices'. Compared pairwise, (N, N, M) for N slices of M elements;
    NaN sorts after every number and equals NaN, as in the flattened form."""
    shape = n.known_shape(0, "Unique with axis")
    axis = int(n.attr("axis")) % len(shape)
    rows, cols = shape[axis], math.prod(shape) // max(shape[axis], 1)
    if rows * rows * cols > _UNIQUE_AXIS_LIMIT:
        n.fail(f"axis={n.attr('axis')} of a {shape} input compares {rows}x{rows} slices of {cols} elements "
               f"pairwise (over {_UNIQUE_AXIS_LIMIT} elements); split the input or unique it in NumPy")
    perm = (axis,) + tuple(i for i in range(len(shape)) if i != axis)
    x = S.reshape(S.transpose(n.inputs[0], axes=perm), shape=(rows, cols))
    a, b = S.reshape(x, shape=(rows, 1, cols)), S.reshape(x, shape=(1, rows, cols))
    less, differ = S.less(a, b), S.not_equal(a, b)
    if np.dtype(dtype_of(x)).kind in "fc":
        nan_a, nan_b = S.isnan(a), S.isnan(b)
        less = S.logical_or(less, S.logical_and(S.logical_not(nan_a), nan_b))
        differ = S.logical_and(differ, S.logical_not(S.logical_and(nan_a, nan_b)))
    first = S.expand_dims(S.argmax(S.cast(differ, dtype="int8"), axis=-1), axis=-1)  # first differing element
    smaller = S.logical_and(S.any(differ, axis=-1), S.squeeze(S.take_along_axis(less, first, axis=-1), axis=-1))
    return S.sum(S.cast(smaller, dtype="int64"), axis=0)  # [j]: how many slices i are smaller than slice j


def reverse_sequence(n: OnnxNode) -> list:
    """Each batch entry's first ``sequence_lens[b]`` steps reversed: ``take_along_axis`` of the index
    ``len - 1 - t`` (``t`` past the length: ``t``), shaped to broadcast over the other axes."""
    n.arity(2)
    shape = n.known_shape(0, "ReverseSequence")
    b_ax, t_ax = int(n.attr("batch_axis", 1)) % len(shape), int(n.attr("time_axis", 0)) % len(shape)
    steps = [1] * len(shape)
    steps[t_ax] = shape[t_ax]
    lens = [1] * len(shape)
    lens[b_ax] = shape[b_ax]
    t = constant(np.arange(shape[t_ax], dtype=np.int64).reshape(steps))
    length = S.reshape(S.cast(n.inputs[1], dtype="int64"), shape=tuple(lens))
    idx = S.where(S.less(t, length), S.subtract(S.subtract(length, 1), t), t)
    return [S.take_along_axis(n.inputs[0], idx, axis=t_ax)]


INDEX_CONVERTERS: dict[str, Converter] = {
    "ReverseSequence": reverse_sequence,
    "Compress": compress, "GatherND": gather_nd, "Unique": unique, **EINSUM_CONVERTERS,
    "TopK": top_k, "OneHot": one_hot, "Hardmax": hardmax, "NonZero": non_zero, "EyeLike": eye_like,
    "CumProd": cum_prod,
}
