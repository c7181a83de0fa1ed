"""ONNX linear quantization -> registry ops: QuantizeLinear and DequantizeLinear with integer types.

Scales and zero points are scalars, per-axis vectors or (opset 21) blocks along ``axis``; float8,
float4, int4 and int2 results are values of those formats in a wide dtype (narrow.py).
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from .. import sym as S
from .import_nn import conv
from .import_ops import Converter, OnnxNode, axis_key, dtype_of, np_dtype, shape_of
from .narrow import narrow_format


def _along(n: OnnxNode, p, xshape: tuple, axis: int, block: int):
    """A scale or zero point shaped to broadcast against the input."""
    ps = shape_of(p)
    if ps is None or len(ps) == 0 or (len(ps) == 1 and ps[0] == 1 and block == 0):
        return p
    axis %= len(xshape)
    if block:
        return S.getitem(S.repeat_elements(p, repeats=block, axis=axis),
                         key=axis_key(axis, slice(0, xshape[axis]), None))
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
    fmt = narrow_format(n.in_types[2] if zp is not None and len(n.in_types) > 2 else int(n.attr("output_dtype", 0)))
    if fmt is not None:
        return [_quantize_narrow(n, fmt, S.divide(x, _along(n, scale, xs, axis, block)),
                                 None if zp is None else _along(n, zp, xs, axis, block))]
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


def _quantize_narrow(n: OnnxNode, fmt: str, y, zp):
    """``x / scale`` into a narrow format (narrow.py): the integer ones round half to even, add the
    zero point and saturate to their range; float8 casts (saturating by ``saturate``; its zero point
    is 0 by the spec); float4 adds the zero point and casts."""
    if fmt.startswith(("int", "uint")):
        lo, hi = _INT_RANGES[fmt]
        y = S.round(y)
        if zp is not None:
            y = S.add(y, S.cast(zp, dtype=dtype_of(y)))
        y = S.minimum(S.maximum(y, float(lo)), float(hi))
        return S.round_to_format(y, format=fmt)
    if zp is not None and fmt == "float4_e2m1fn":
        y = S.add(y, S.cast(zp, dtype=dtype_of(y)))
    return S.round_to_format(y, format=fmt, saturate=bool(n.attr("saturate", 1)))


_INT_RANGES = {"int4": (-8, 7), "uint4": (0, 15), "int2": (-2, 1), "uint2": (0, 3)}


QUANT_CONVERTERS: dict[str, Converter] = {"QuantizeLinear": quantize, "DequantizeLinear": dequantize}


# -- integer and quantized linear algebra ----------------------------------------------------------
# MatMulInteger / ConvInteger / QLinearMatMul / QLinearConv compute on zero-point-shifted integers in
# float64, where every product and sum of 8-bit values is exact (below 2**53), then cast to int32 or
# requantize; DynamicQuantizeLinear picks a uint8 scale and zero point from the data's range.
def _shifted(n: OnnxNode, x, zp, per_axis: int | None = None):
    """``x - zero_point`` in float64; ``per_axis``: a 1-D zero point runs along that axis."""
    y = S.cast(x, dtype="float64")
    if zp is None:
        return y
    z = S.cast(zp, dtype="float64")
    zs = shape_of(zp)
    if per_axis is not None and zs is not None and len(zs) == 1 and zs[0] != 1:
        rank = n.rank(0 if per_axis == 0 else 1, n.op)
        z = S.reshape(z, shape=tuple(-1 if i == per_axis else 1 for i in range(rank)))
    elif zs is not None and len(zs) == 1:
        z = S.reshape(z, shape=())
    return S.subtract(y, z)


def _requantize(n: OnnxNode, acc, scale, zp, like):
    """round(acc * scale) + zero point, saturated to the zero point's (else ``like``'s) integer type."""
    out = np.dtype(dtype_of(zp) if zp is not None else dtype_of(like))
    if out.kind not in "iu":
        n.fail(f"{n.op} output type {out} is not supported (8-bit integer types only)")
    y = S.round(S.multiply(acc, S.cast(scale, dtype="float64")))
    if zp is not None:
        y = S.add(y, S.cast(zp, dtype="float64"))
    info = np.iinfo(out)
    return S.cast(S.minimum(S.maximum(y, float(info.min)), float(info.max)), dtype=out)


def _to_int32(y):
    return S.cast(y, dtype="int32")


def matmul_integer(n: OnnxNode) -> list:
    n.arity(2, 4)
    a = _shifted(n, n.inputs[0], n.input(2))
    b_zp = n.input(3)
    b = _shifted(n, n.inputs[1], b_zp, per_axis=n.rank(1, "MatMulInteger") - 1 if b_zp is not None else None)
    return [_to_int32(S.matmul(a, b))]


def _conv_node(n: OnnxNode, x, w, bias=None) -> OnnxNode:
    return replace(n, op="Conv", inputs=[x, w] + ([bias] if bias is not None else []))


def conv_integer(n: OnnxNode) -> list:
    n.arity(2, 4)
    x = _shifted(n, n.inputs[0], n.input(2))
    w = _shifted(n, n.inputs[1], n.input(3), per_axis=0)
    return [_to_int32(conv(_conv_node(n, x, w))[0])]


def _scale_product(n: OnnxNode, a_scale, b_scale, y_scale, per_axis_shape=None):
    """a_scale * b_scale / y_scale in the scales' type (as the spec computes it), then float64."""
    s = S.divide(S.multiply(a_scale, b_scale), y_scale)
    if per_axis_shape is not None:
        s = S.reshape(s, shape=per_axis_shape)
    return S.cast(s, dtype="float64")


def qlinear_matmul(n: OnnxNode) -> list:
    n.arity(8)
    a, a_s, a_zp, b, b_s, b_zp, y_s, y_zp = n.inputs
    bs = shape_of(b_s)
    per_col = bs is not None and len(bs) == 1 and bs[0] != 1
    acc = S.matmul(_shifted(n, a, a_zp), _shifted(n, b, b_zp, per_axis=n.rank(3, "QLinearMatMul") - 1
                                                   if per_col else None))
    scale = _scale_product(n, S.reshape(a_s, shape=()) if shape_of(a_s) == (1,) else a_s,
                           b_s if per_col else S.reshape(b_s, shape=()) if bs == (1,) else b_s,
                           S.reshape(y_s, shape=()) if shape_of(y_s) == (1,) else y_s)
    zp = S.reshape(y_zp, shape=()) if shape_of(y_zp) == (1,) else y_zp
    return [_requantize(n, acc, scale, zp, a)]


def qlinear_conv(n: OnnxNode) -> list:
    n.arity(8, 9)
    x, x_s, x_zp, w, w_s, w_zp, y_s, y_zp = n.inputs[:8]
    bias = n.input(8)
    rank = n.rank(3, "QLinearConv")
    xq = _shifted(n, x, x_zp)
    wq = _shifted(n, w, w_zp, per_axis=0)
    acc = conv(_conv_node(n, xq, wq, None if bias is None else S.cast(bias, dtype="float64")))[0]
    ws = shape_of(w_s)
    per_ch = (1, -1) + (1,) * (rank - 2) if ws is not None and len(ws) == 1 and ws[0] != 1 else None
    scale = _scale_product(n, x_s, w_s, y_s, per_ch)
    return [_requantize(n, acc, scale, y_zp, x)]


def dynamic_quantize(n: OnnxNode) -> list:
    """uint8 y, scale = (max(0, x) - min(0, x)) / 255 (1 when that is 0, as onnxruntime does; onnx.reference
    says 1 / 255, which quantizes the all-zero x the same), zero point = round(-min / scale)."""
    n.arity(1)
    x = n.inputs[0]
    hi, lo = S.maximum(S.max(x), 0.0), S.minimum(S.min(x), 0.0)
    span = S.subtract(hi, lo)
    scale = S.where(S.equal(span, 0.0), S.ones_like(span), S.divide(span, 255.0))
    zp = S.round(S.minimum(S.maximum(S.divide(S.negative(lo), scale), 0.0), 255.0))
    y = S.minimum(S.maximum(S.add(S.round(S.divide(x, scale)), zp), 0.0), 255.0)
    return [S.cast(y, dtype="uint8"), S.cast(scale, dtype=dtype_of(x)), S.cast(zp, dtype="uint8")]


QLINEAR_CONVERTERS: dict[str, Converter] = {
    "MatMulInteger": matmul_integer, "ConvInteger": conv_integer, "QLinearMatMul": qlinear_matmul,
    "QLinearConv": qlinear_conv, "DynamicQuantizeLinear": dynamic_quantize}
