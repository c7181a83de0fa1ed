"""Abstract values: what is known about an array without computing it.

An ``Aval`` is the static shape (``None`` for a dim known only after computing), the
dtype, the device and the storage type. Op rules map input avals to output avals; the
graph stores one per node output; the executor keys its cache on them.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .device import Device
from .errors import DTypeError, fmt_shape

STYPES = ("default", "csr", "row_sparse")

# The dtypes lazyarray supports. Others (complex, strings, objects) are rejected
# at the door with a message instead of failing deep inside a kernel.
SUPPORTED_DTYPES = tuple(
    np.dtype(n)
    for n in (
        "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
        "float16", "float32", "float64",
    )
)


class Aval(NamedTuple):
    """Shape (tuple, ``None`` = unknown dim), ``numpy.dtype``, ``Device`` and storage type."""

    shape: tuple
    dtype: np.dtype
    device: Device
    stype: str = "default"

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def known(self) -> bool:
        """True when every dim is known."""
        return None not in self.shape

    @property
    def nbytes(self) -> int | None:
        """Bytes of a dense value with this aval, ``None`` when a dim is unknown."""
        if None in self.shape:
            return None
        n = 1
        for d in self.shape:
            n *= d
        return n * self.dtype.itemsize

    def __str__(self) -> str:
        s = f"{self.dtype}{fmt_shape(self.shape)}"
        if self.stype != "default":
            s += f"<{self.stype}>"
        return f"{s} @{self.device}"


def as_dtype(dtype, where: str = "") -> np.dtype:
    """Normalize a dtype-like (``"float32"``, ``np.float32``, ...) to a supported ``numpy.dtype``."""
    try:
        dt = np.dtype(dtype)
    except TypeError:
        raise DTypeError(f"{where}: {dtype!r} is not a dtype; use e.g. 'float32' or 'int64'") from None
    if dt not in SUPPORTED_DTYPES:
        names = ", ".join(str(d) for d in SUPPORTED_DTYPES)
        raise DTypeError(f"{where}: dtype {dt} is not supported; use one of {names}")
    return dt
