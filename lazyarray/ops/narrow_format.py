"""``round_to_format``: values rounded to a narrow number format (bfloat16, float8, float4, int4,
int2), kept in a wide dtype lazyarray computes with.

NumPy has no dtype for these formats, and lazyarray's arrays use NumPy dtypes only. Every value of
them is exactly a float32 (the float formats) or an int8 / uint8 (the integer ones), so a value
*in* such a format is stored in that wide dtype, and this op is the one place that rounds into the
format: ``x`` (bool, integer or float) becomes the nearest value of ``format`` by the conversions of
``ml_dtypes``, which ONNX's reference and JAX use (float64 goes through float32 there, as here),
returned in the storage dtype. ONNX models with such tensors import this way (``lazyarray/onnx/import_narrow.py``).

``saturate`` (float8 formats, as ONNX's Cast): values beyond the format's range, infinities
included, become its largest finite value instead of inf/NaN. ``float8_e8m0fnu`` (powers of two
only) rounds by ``round_mode``: "up", "down" or "nearest" on the exponent. Floats become int4 / int2
as NumPy casts floats to integers (toward zero, wrapping out of range); ONNX leaves both open and
onnxruntime rounds to nearest, so round and clip first (``la.round``, ``la.clip``) where it matters.
"""
from __future__ import annotations

import numpy as np

from ..errors import DTypeError, LazyArrayError
from .params import BOOL, Param, choice
from .registry import OpDef, register

# format -> the wide NumPy dtype holding its values exactly
FORMATS = {
    "bfloat16": np.dtype(np.float32),
    "float8_e4m3fn": np.dtype(np.float32),
    "float8_e4m3fnuz": np.dtype(np.float32),
    "float8_e5m2": np.dtype(np.float32),
    "float8_e5m2fnuz": np.dtype(np.float32),
    "float8_e8m0fnu": np.dtype(np.float32),
    "float4_e2m1fn": np.dtype(np.float32),
    "int4": np.dtype(np.int8),
    "uint4": np.dtype(np.uint8),
    "int2": np.dtype(np.int8),
    "uint2": np.dtype(np.uint8),
}
SATURATING = ("float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz")


def ml_dtype(format: str) -> np.dtype:
    """The ``ml_dtypes`` dtype of ``format`` (``ml_dtypes`` is installed with the ``onnx`` extra)."""
    try:
        import ml_dtypes
    except ImportError:
        raise LazyArrayError(f"round_to_format: the {format} format needs the ml_dtypes package "
                             "(pip install 'lazyarray[onnx]')") from None
    return np.dtype(getattr(ml_dtypes, format))


def _e8m0(x: np.ndarray, saturate: bool, round_mode: str) -> np.ndarray:
    """float32 -> float8_e8m0fnu by the exponent bits: powers of two, NaN for NaN/inf, rounding the
    mantissa away by ``round_mode``; ``saturate`` keeps the top exponent from rolling into NaN."""
    bits = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    exp = ((bits >> 23) & 0xFF).astype(np.uint16)
    special = exp == 0xFF
    mant = bits & 0x7FFFFF
    if round_mode == "up":
        up = mant > 0
    elif round_mode == "nearest":  # round half to even on the exponent's last bit
        half, rest = (bits & 0x400000) > 0, (bits & 0x3FFFFF) > 0
        up = half & (rest | (exp > 0))
    else:  # down
        up = np.zeros(exp.shape, bool)
    up &= ~special
    if saturate:
        up &= exp != 0xFE
    exp = np.where(special, 0xFF, exp + up).astype(np.uint8)
    return exp.view(ml_dtype("float8_e8m0fnu"))


def to_format(x: np.ndarray, format: str, saturate: bool = True, round_mode: str = "up") -> np.ndarray:
    """NumPy ``x`` as an ``ml_dtypes`` array of ``format``."""
    dt = ml_dtype(format)
    if format == "float8_e8m0fnu":
        return _e8m0(x, saturate, round_mode)
    if saturate and format in SATURATING and x.dtype.kind in "fc":
        import ml_dtypes
        top = float(ml_dtypes.finfo(dt).max)
        x = np.where(np.isnan(x), x, np.clip(x, -top, top))
    return x.astype(dt)


def _round_to_format(xp, x, format="bfloat16", saturate=True, round_mode="up", out=None):
    host = x if xp is np else xp.asnumpy(x)
    with np.errstate(invalid="ignore", over="ignore"):
        y = to_format(np.asarray(host), format, saturate, round_mode).astype(FORMATS[format])
    return y if xp is np else xp.asarray(y)


def _round_to_format_dtype(dtypes, format="bfloat16", **_):
    if np.dtype(dtypes[0]).kind not in "biuf":
        raise DTypeError(f"round_to_format: x is {np.dtype(dtypes[0])}; it takes real numbers (bool, int, float)")
    return FORMATS[format]


register(OpDef(
    "round_to_format", ("x",), _round_to_format,
    params=(Param("format", choice(*FORMATS), "bfloat16"), Param("saturate", BOOL, True),
            Param("round_mode", choice("up", "down", "nearest"), "up")),
    dtype=_round_to_format_dtype,
    doc="x rounded to the narrow number format (bfloat16, float8_*, float4_e2m1fn, int4, uint4, int2, uint2), "
        "stored in float32 (float formats) or int8/uint8 (integer formats)"))
