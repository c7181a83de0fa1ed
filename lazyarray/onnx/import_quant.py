"""ONNX linear quantization -> registry ops: QuantizeLinear and DequantizeLinear with integer types.

Scales and zero points are scalars, per-axis vectors or (opset 21) blocks along ``axis``; float8
and 4-bit types have no NumPy dtype and are refused where the file declares them.
"""
from __future__ import annotations

import numpy as np

from .. import sym as S
from .import_ops import Converter, OnnxNode, _axis_key, dtype_of, np_dtype, shape_of


def _along(n: OnnxNode, p, xshape: tuple, axis: int, block: int):
    """A scale or zero point shaped to broadcast against the input."""
    ps = shape_of(p)
    if ps is None or len(ps) == 0 or (len(ps) == 1 and ps[0] == 1 and block == 0):
        return p
    axis %= len(xshape)
    if block:
        return S.getitem(S.repeat_elements(p, repeats=block, axis=axis),
                         key=_axis_key(axis, slice(0, xshape[axis]), None))
    if len(ps) != 1:
        n.fail(f"a per-axis scale or zero point must be 1-D, got shape {ps}")
    shape = [1] * len(xshape)
    shape[axis] = ps[0]
    return S.reshape(p, shape=tuple(shape))


def dequantize(n: OnnxNode) -> list:
    n.arity(2, 3)
    x, scale, zp = n.inputs[0], n.inputs[1], n.input(2)
    xs = n.known_shape(0, "DequantizeLinear")
    axis, block = int(n.attr("axis", 1)), int(n.attr("block_size", 0))
    y = S.cast(x, dtype="float32")
    if zp is not None:
        y = S.subtract(y, S.cast(_along(n, zp, xs, axis, block), dtype="float32"))
    y = S.multiply(y, _along(n, scale, xs, axis, block))
    out = np_dtype(int(n.attr("output_dtype")), n.where) if n.attr("output_dtype") else np.dtype(dtype_of(scale))
    return [S.cast(y, dtype=out) if dtype_of(y) != out else y]


def quantize(n: OnnxNode) -> list:
    n.arity(2, 3)
    x, scale, zp = n.inputs[0], n.inputs[1], n.input(2)
    xs = n.known_shape(0, "QuantizeLinear")
    axis, block = int(n.attr("axis", 1)), int(n.attr("block_size", 0))
    if zp is not None:
        out = np.dtype(dtype_of(zp))
    elif n.attr("output_dtype"):
        out = np_dtype(int(n.attr("output_dtype")), n.where)
    else:
        out = np.dtype(np.uint8)
    if out.kind not in "iu":
        n.fail(f"quantizing to {out} is not supported (integer types only)")
    y = S.round(S.divide(x, _along(n, scale, xs, axis, block)))  # round half to even, as ONNX asks
    if zp is not None:
        y = S.add(y, S.cast(_along(n, zp, xs, axis, block), dtype=dtype_of(y)))
    info = np.iinfo(out)
    y = S.minimum(S.maximum(y, float(info.min)), float(info.max))  # saturate to the type's range
    return [S.cast(y, dtype=out)]


QUANT_CONVERTERS: dict[str, Converter] = {"QuantizeLinear": quantize, "DequantizeLinear": dequantize}
