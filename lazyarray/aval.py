"""Abstract values: what is known about an array without computing it.

An ``Aval`` is the static shape (``None`` for a dim known only after computing), the
dtype, the device and the storage type. Op rules map input avals to output avals; the
graph stores one per node output; the executor keys its cache on them.
"""
from __future__ import annotations

import functools
import os
from typing import NamedTuple

import numpy as np

from .device import Device
from .dim import DimExpr, has_symbols
from .errors import DTypeError, OutOfMemoryError, ShapeError, fmt_shape
from .tuning_table import current

STYPES = ("default", "csr", "row_sparse")

# The dtypes lazyarray supports. Others (extended precision, strings, objects, structured) are
# rejected at the door with a message instead of failing deep inside a kernel. This tuple is also
# the JSON loader's allow-list: only plain numeric dtypes, never ``object``.
SUPPORTED_DTYPES = tuple(
    np.dtype(n)
    for n in (
        "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
        "float16", "float32", "float64", "complex64", "complex128",
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
        """True when every dim is a concrete int (no ``None``, no symbolic dim)."""
        return None not in self.shape and not has_symbols(self.shape)

    @property
    def nbytes(self) -> int | None:
        """Bytes of a dense value with this aval, ``None`` when a dim is unknown or symbolic."""
        if not self.known:
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


# -- sizes ------------------------------------------------------------------------------
# Every shape an op rule or a creation function produces is checked here before any kernel
# sees it: NumPy refuses most impossible sizes itself, but some kernels (``np.tile``) crash the
# process on sizes whose products overflow.
INTP_MAX = int(np.iinfo(np.intp).max)  # 2**63 - 1 on 64-bit machines: the largest array in bytes
MAX_ALLOC_ENV = "LAZYARRAY_MAX_ALLOC_BYTES"


def _bytes_text(n: int) -> str:
    for unit, size in (("EiB", 2**60), ("PiB", 2**50), ("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= size:
            return f"{n} bytes ({n / size:.3g} {unit})"
    return f"{n} bytes"


@functools.lru_cache(maxsize=1)
def physical_memory() -> int:
    """The machine's physical memory in bytes (``2**63 - 1`` where the OS does not say)."""
    try:
        n = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return INTP_MAX
    return n if n > 0 else INTP_MAX


def max_alloc_bytes() -> int:
    """The largest single allocation lazyarray asks for, in bytes.

    The tuning table's ``max_alloc_bytes`` when set (``LAZYARRAY_MAX_ALLOC_BYTES``, an int such as
    ``8000000000`` or ``8e9``, read at import; ``la.tuning(max_alloc_bytes=...)`` in code), else
    the machine's physical memory: no array larger than the whole machine is ever requested.
    Larger requests raise ``la.OutOfMemoryError`` before anything is allocated.
    """
    n = current().max_alloc_bytes
    return physical_memory() if n is None else n


def check_shape(where: str, shape, dtype=None, what: str = "result") -> tuple:
    """``shape`` as a tuple of ints (``None`` dims kept), or ``ShapeError``.

    Refuses non-integer and negative dims, dims of ``2**63`` or more, and shapes whose
    element count times the itemsize of ``dtype`` does not fit the address space (NumPy's
    own rule: the product of the non-zero dims times the itemsize must fit ``intp``).
    """
    return _checked(where, shape, dtype, what)[0]


def _checked(where: str, shape, dtype, what: str) -> tuple[tuple, int | None]:
    """``check_shape`` and the byte count (``None`` when a dim is unknown)."""
    out = []
    n = 1
    zero = unknown = False
    for d in shape:
        if d is None:
            out.append(None)
            unknown = True
            continue
        if isinstance(d, DimExpr):  # symbolic: its bounds must allow a size >= 0
            if d.bounds()[1] < 0:
                raise ShapeError(f"{where}: {what} shape {fmt_shape(shape)} has a dim {d} that is always negative")
            out.append(d)
            unknown = True
            continue
        if d.__class__ is not int:
            if isinstance(d, (bool, np.bool_)) or not isinstance(d, (int, np.integer)):
                raise ShapeError(f"{where}: {what} shape {fmt_shape(shape)} has a dim {d!r} "
                                 f"({type(d).__name__}); sizes must be ints")
            d = int(d)
        if d < 0:
            raise ShapeError(f"{where}: {what} shape {fmt_shape(shape)} has a negative dim {d}; "
                             "sizes must be >= 0")
        if d > INTP_MAX:
            raise ShapeError(f"{where}: {what} shape {fmt_shape(shape)} has a dim {d} >= 2**63; "
                             f"no array can have more than {INTP_MAX} elements")
        if d:
            n *= d
        else:
            zero = True
        out.append(d)
    itemsize = 1 if dtype is None else (dtype.itemsize if isinstance(dtype, np.dtype) else np.dtype(dtype).itemsize)
    nbytes = n * itemsize
    if nbytes > INTP_MAX:
        dt = "" if dtype is None else f" of {np.dtype(dtype)}"
        raise ShapeError(f"{where}: {what} shape {fmt_shape(shape)}{dt} asks for {n} elements x {itemsize} "
                         f"bytes = {nbytes} bytes, more than any array can hold ({INTP_MAX} bytes); "
                         "check the sizes passed")
    return tuple(out), (None if unknown else 0 if zero else nbytes)


def check_alloc(where: str, shape, dtype, what: str = "result") -> tuple:
    """``check_shape``, then ``OutOfMemoryError`` when a dense ``dtype`` array of ``shape`` is
    larger than ``max_alloc_bytes()``. Unknown (``None``) dims are not counted."""
    shape, nbytes = _checked(where, shape, dtype, what)
    if nbytes is None:
        return shape
    limit = max_alloc_bytes()
    if nbytes > limit:
        src = (f"the tuning table's max_alloc_bytes={limit} ({MAX_ALLOC_ENV} at import, or "
               "la.tuning(max_alloc_bytes=...))" if current().max_alloc_bytes is not None
               else f"the machine's physical memory; set {MAX_ALLOC_ENV} (at import) or "
               "la.tuning(max_alloc_bytes=...) to change it")
        raise OutOfMemoryError(f"{where}: {what} {np.dtype(dtype)}{fmt_shape(shape)} needs {_bytes_text(nbytes)}, "
                               f"more than the allocation limit of {_bytes_text(limit)} ({src})")
    return shape


_SUPPORTED = frozenset(SUPPORTED_DTYPES)


def check_scalar(value, where: str):
    """A scalar operand as is, or ``DTypeError`` for NumPy scalars of an unsupported dtype
    (``np.longdouble``, ``np.clongdouble``) and other number types (``Fraction``, ``Decimal``:
    NumPy would make object arrays of them)."""
    if isinstance(value, np.generic):
        if value.dtype in _SUPPORTED:
            return value
        dt = value.dtype
    elif isinstance(value, (bool, int, float, complex)):
        return value
    else:
        dt = "not a NumPy dtype"
    names = ", ".join(str(d) for d in SUPPORTED_DTYPES)
    raise DTypeError(f"{where}: {type(value).__name__} scalar {value!r} ({dt}) is not supported; "
                     f"lazyarray computes with {names}")


def is_supported(dtype) -> bool:
    """True when lazyarray computes with ``dtype``."""
    return dtype in _SUPPORTED


def check_operand(value, where: str, target: np.dtype | None = None):
    """A value written into an array of dtype ``target`` (``x[key] = value``): NumPy arrays and
    scalars of a supported dtype, Python numbers, nested lists of them (returned as a NumPy array).
    Complex data written into a real array raises ``DTypeError`` instead of losing its imaginary
    part in the cast."""
    if isinstance(value, (np.ndarray, np.generic)):
        if value.dtype not in _SUPPORTED and value.dtype.kind in "cfV":  # (strings / objects: NumPy's error)
            raise DTypeError(f"{where}: cannot write {value.dtype} data into a lazyarray; "
                             f"extended-precision values are not supported")
        if value.dtype.kind == "c" and target is not None and target.kind != "c":
            _complex_into_real(value.dtype, target, where)
        return value
    if isinstance(value, complex):
        if target is not None and target.kind != "c":
            _complex_into_real("complex", target, where)
        return value
    if isinstance(value, (list, tuple)):
        try:
            arr = np.asarray(value)
        except (ValueError, TypeError, RecursionError):
            return value  # ragged: NumPy's own error, raised by the assignment
        return check_operand(arr, where, target)
    return value


def _complex_into_real(src, target, where: str):
    raise DTypeError(f"{where}: cannot write {src} data into a {target} array (the imaginary part would be "
                     f"lost); take .real explicitly (la.real(v)) or make the array complex")
