"""``bitcast``: the same bytes read as another dtype of the same item size (``ndarray.view``; ONNX
BitCast, ``torch.Tensor.view(dtype)``, ``jax.lax.bitcast_convert_type`` without size changes)."""
from __future__ import annotations

import numpy as np

from ..errors import DTypeError
from .params import DTYPE, Param
from .registry import OpDef, register


def _bitcast(xp, x, dtype, out=None):
    return (x if x.flags["C_CONTIGUOUS"] else x.copy()).view(dtype)  # (ascontiguousarray makes 0-d 1-d)


def _bitcast_dtype(dtypes, dtype):
    src, dst = np.dtype(dtypes[0]), np.dtype(dtype)
    if src.itemsize != dst.itemsize:
        raise DTypeError(f"bitcast: {src} ({src.itemsize * 8} bits) and {dst} ({dst.itemsize * 8} bits) differ in "
                         "width; bitcast keeps the shape, so the widths must match")
    return dst


register(OpDef("bitcast", ("x",), _bitcast, params=(Param("dtype", DTYPE),), dtype=_bitcast_dtype,
               doc="the bits of x reinterpreted as dtype, of the same width (no value conversion)"))
