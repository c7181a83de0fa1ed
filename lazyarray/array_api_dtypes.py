"""The Array API standard's dtype objects and dtype functions: ``iinfo``, ``finfo``,
``result_type``, ``can_cast``, ``isdtype`` and the inspection namespace
(``la.__array_namespace_info__()``); ``array_api.py`` re-exports them.

>>> import lazyarray as la
>>> la.isdtype(la.int32, "integral"), la.result_type(la.int32, la.float32)
(True, dtype('float64'))
"""
from __future__ import annotations

import builtins
from typing import NamedTuple

import numpy as np

from .aval import SUPPORTED_DTYPES, as_dtype
from .device import Device, cpu, current_device, gpu, gpu_available
from .errors import DTypeError, ParamError, ParamValueError

# -- dtype objects (module-level names; ``bool`` is only bound in ``la``, not inside the package) --
DTYPES = {n: np.dtype(n) for n in ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
                                   "uint64", "float32", "float64", "complex64", "complex128")}


def _dtype_of(x) -> np.dtype:
    """The dtype of an array or a dtype-like."""
    dt = getattr(x, "dtype", None)
    if isinstance(dt, np.dtype):
        return dt
    return as_dtype(x, "dtype")


def iinfo(type) -> np.iinfo:  # noqa: A002 (the standard's parameter name)
    """Machine limits of an integer dtype (or of an integer array's dtype): ``bits, max, min, dtype``.

    >>> import lazyarray as la
    >>> la.iinfo(la.int8).max
    127
    """
    dt = _dtype_of(type)
    if dt.kind not in "iu":
        raise DTypeError(f"iinfo: {dt} is not an integer dtype; use la.finfo for floating dtypes")
    return np.iinfo(dt)


class FInfo(NamedTuple):
    """Machine limits of a floating dtype, as the standard spells them: Python ``float`` limits and
    the real dtype they describe (``float32`` for ``complex64``)."""

    bits: int
    eps: float
    max: float
    min: float
    smallest_normal: float
    dtype: np.dtype


def finfo(type) -> FInfo:  # noqa: A002
    """Machine limits of a floating dtype (or a float array's dtype): ``bits, eps, max, min, smallest_normal``
    (Python floats) and ``dtype``; a complex dtype gives the limits of its real part.

    >>> import lazyarray as la
    >>> la.finfo(la.float32).bits, la.finfo(la.complex64).dtype
    (32, dtype('float32'))
    """
    dt = _dtype_of(type)
    if dt.kind not in "fc":
        raise DTypeError(f"finfo: {dt} is not a floating dtype; use la.iinfo for integer dtypes")
    f = np.finfo(dt)
    return FInfo(int(f.bits), float(f.eps), float(f.max), float(f.min), float(f.smallest_normal), np.dtype(f.dtype))


def result_type(*arrays_and_dtypes):
    """The dtype of an op on these arrays / dtypes / Python scalars (the standard's promotion,
    which NumPy 2 implements: Python scalars are weak).

    >>> import lazyarray as la
    >>> la.result_type(la.int8, la.uint8), la.result_type(la.float32, 1.0)
    (dtype('int16'), dtype('float32'))
    """
    if not arrays_and_dtypes:
        raise ParamError("result_type: needs at least one array or dtype")
    args = []
    for a in arrays_and_dtypes:
        if isinstance(a, (builtins.bool, int, float, complex)):
            args.append(a)
        else:
            args.append(_dtype_of(a))
    if builtins.all(isinstance(a, (builtins.bool, int, float, complex)) for a in args):
        raise ParamError("result_type: at least one argument must be an array or a dtype, got only Python scalars")
    return np.result_type(*args)


_KIND_GROUP = {"b": "bool", "i": "int", "u": "int", "f": "float", "c": "complex"}


def can_cast(from_, to) -> builtins.bool:
    """True when ``from_`` (a dtype or an array) converts to dtype ``to`` under the standard's
    promotion rules (no cast between kinds: int to float is ``False``, unlike NumPy's ``can_cast``).

    >>> import lazyarray as la
    >>> la.can_cast(la.int8, la.int16), la.can_cast(la.int64, la.float64)
    (True, False)
    """
    src, dst = _dtype_of(from_), _dtype_of(to)
    if src == dst:
        return True
    if _KIND_GROUP[src.kind] != _KIND_GROUP[dst.kind]:
        return False
    try:
        return np.result_type(src, dst) == dst
    except TypeError:
        return False


_KINDS = {
    "bool": "b", "signed integer": "i", "unsigned integer": "u", "integral": "iu",
    "real floating": "f", "complex floating": "c", "numeric": "iufc",
}


def isdtype(dtype, kind) -> builtins.bool:
    """True when ``dtype`` is of ``kind``: a dtype, a kind name (``"bool"``, ``"signed integer"``,
    ``"unsigned integer"``, ``"integral"``, ``"real floating"``, ``"complex floating"``,
    ``"numeric"``) or a tuple of them.

    >>> import lazyarray as la
    >>> la.isdtype(la.float32, ("integral", "real floating"))
    True
    """
    if not isinstance(dtype, np.dtype):
        raise DTypeError(f"isdtype: dtype must be a dtype object (e.g. la.float32), got {dtype!r}"[:200])
    if isinstance(kind, tuple):
        return builtins.any(isdtype(dtype, k) for k in kind)
    if isinstance(kind, str):
        if kind not in _KINDS:
            raise ParamValueError(f"isdtype: unknown kind {kind!r}; use one of {', '.join(_KINDS)}"[:300])
        return dtype.kind in _KINDS[kind]
    if isinstance(kind, np.dtype):
        return dtype == kind
    raise ParamError(f"isdtype: kind must be a dtype, a kind name or a tuple of them, got {kind!r}"[:200])


# -- the inspection namespace ---------------------------------------------------------------------
class _Info:
    """What ``la.__array_namespace_info__()`` answers (the standard's inspection API)."""

    __module__ = "lazyarray"

    def capabilities(self) -> dict:
        # Boolean indexing and nonzero give data-dependent shapes (unknown dims, resolved when computed).
        return {"boolean indexing": True, "data-dependent shapes": True, "max dimensions": 64}

    def default_device(self) -> Device:
        return current_device()

    def default_dtypes(self, *, device=None) -> dict:
        # Python floats become float32 (``la.array([1.5]).dtype``), ints int64.
        return {"real floating": DTYPES["float32"], "complex floating": DTYPES["complex64"],
                "integral": DTYPES["int64"], "indexing": DTYPES["int64"]}

    def devices(self) -> list[Device]:
        return [cpu(0)] + ([gpu(0)] if gpu_available() else [])

    def dtypes(self, *, device=None, kind=None) -> dict:
        return {n: d for n, d in DTYPES.items() if kind is None or isdtype(d, kind)}


def __array_namespace_info__() -> _Info:
    """The standard's inspection namespace: default device and dtypes, supported dtypes, devices."""
    return _Info()


assert builtins.all(d in SUPPORTED_DTYPES for d in DTYPES.values())
