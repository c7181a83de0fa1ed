"""ONNX scatter operators -> the registry's scatter ops (``ops/scatter.py``).

ScatterElements (and its deprecated alias Scatter) -> ``scatter_along_axis``; ScatterND ->
``scatter_nd``; TensorScatter (the KV-cache update of opset 24) -> ``scatter_along_axis`` with the
write positions ``write_indices[b] + arange(sequence_length)`` (modulo the cache length in
``circular`` mode) spread over the update's shape.
"""
from __future__ import annotations

import numpy as np

from .. import sym as S
from .import_ops import Converter, OnnxNode, constant

_REDUCTIONS = ("none", "add", "mul", "max", "min")


def _reduction(n: OnnxNode) -> str:
    red = n.attr("reduction", b"none")
    red = red.decode() if isinstance(red, bytes) else str(red)
    if red not in _REDUCTIONS:
        n.fail(f"{n.op} reduction={red!r} is not supported; supported: {', '.join(_REDUCTIONS)}")
    return red


def scatter_elements(n: OnnxNode) -> list:
    n.arity(3)
    x, idx, upd = n.inputs
    return [S.scatter_along_axis(x, idx, upd, axis=int(n.attr("axis", 0)), reduce=_reduction(n))]


def scatter_nd(n: OnnxNode) -> list:
    n.arity(3)
    x, idx, upd = n.inputs
    return [S.scatter_nd(x, idx, upd, reduce=_reduction(n))]


def tensor_scatter(n: OnnxNode) -> list:
    n.arity(2, 3)
    past, upd, where = n.inputs[0], n.inputs[1], n.input(2)
    shape, ushape = n.known_shape(0, "TensorScatter"), n.known_shape(1, "TensorScatter")
    axis = int(n.attr("axis", -2)) % len(shape)
    mode = n.attr("mode", b"linear")
    mode = mode.decode() if isinstance(mode, bytes) else str(mode)
    if mode not in ("linear", "circular"):
        n.fail(f"TensorScatter mode={mode!r} is not supported; supported: linear, circular")
    if axis == 0:
        n.fail("TensorScatter with axis 0 (the batch axis) is not supported: the write index is per batch entry")
    if len(ushape) != len(shape) or any(a != b for i, (a, b) in enumerate(zip(shape, ushape)) if i != axis) \
            or ushape[axis] > shape[axis]:
        n.fail(f"TensorScatter: update {ushape} does not fit the cache {shape} along axis {axis}")
    steps = np.arange(ushape[axis], dtype=np.int64).reshape([-1 if i == axis else 1 for i in range(len(shape))])
    pos = constant(steps)
    if where is not None:
        start = S.reshape(S.cast(where, dtype="int64"), shape=(shape[0],) + (1,) * (len(shape) - 1))
        pos = S.add(pos, start)
    if mode == "circular":
        pos = S.remainder(pos, shape[axis])
    pos = S.broadcast_to(pos, shape=tuple(ushape))
    return [S.scatter_along_axis(past, pos, upd, axis=axis)]


SCATTER_CONVERTERS: dict[str, Converter] = {"ScatterElements": scatter_elements, "Scatter": scatter_elements,
                                            "ScatterND": scatter_nd, "TensorScatter": tensor_scatter}
