"""Array creation: ``array``, ``zeros``, ``ones``, ``full``, ``arange``.

Creation makes normal arrays (also inside deferred compute, where they become constants of the
recorded graph when used), except for a shape holding a symbolic size (a symbolic trace's
``x.shape[0]``): ``zeros``/``ones``/``full`` then record a ``fill`` node and ``arange`` an ``iota`` node,
computed per call.

Sizes are checked before anything is allocated: a shape must be non-negative ints below
``2**63`` whose byte count fits the address space (``ShapeError``) and the allocation must
fit ``aval.max_alloc_bytes()`` (``OutOfMemoryError``; the machine's physical memory unless
``LAZYARRAY_MAX_ALLOC_BYTES`` says otherwise). Fill values and bounds must be real numbers
(``DTypeError``); nested lists must be rectangular and at most 64 deep (``ShapeError``).
"""
from __future__ import annotations

import math

import numpy as np

from .aval import as_dtype, check_alloc, check_scalar
from .device import Device, as_device, current_device
from .dim import DimExpr, has_symbols
from .dispatch import apply
from .errors import DTypeError, OpOverflowError, ParamValueError, ShapeError
from .ndarray import NDArray, array_from, make_array
from .ops import registry
from .storage import SPARSE_TYPES

_MAX_DIMS = 64  # NumPy's limit


def creation_device(device: Device | str | None) -> Device:
    """The device an array is created on: the default device, a ``Device``, or a string such as
    ``"cpu(1)"`` or ``"gpu"`` (anything else, or a GPU that is not usable, is a ``DeviceError``)."""
    if device is None:
        return current_device()
    return device if isinstance(device, Device) else as_device(device, "array creation")


def checked_shape(shape, where: str) -> tuple:
    """A shape argument (an int or a sequence) as a tuple of non-negative sizes, else ``ShapeError``."""
    if isinstance(shape, (int, np.integer)) and not isinstance(shape, (bool, np.bool_)):
        shape = (shape,)
    elif isinstance(shape, (tuple, list)):
        shape = tuple(shape)
    else:
        raise ShapeError(f"{where}: shape must be an int or a tuple of ints, got {shape!r} "
                         f"({type(shape).__name__})")
    if any(isinstance(d, (bool, np.bool_)) or not isinstance(d, (int, np.integer, DimExpr)) or d < 0 for d in shape):
        raise ShapeError(f"{where}: shape must be non-negative ints, got {shape}")
    return tuple(d if isinstance(d, DimExpr) else int(d) for d in shape)


def checked_real(value, where: str, name: str):
    """``value`` if it is a real number (Python or NumPy), else ``DTypeError``."""
    if isinstance(value, (bool, int, float, np.bool_, np.integer, np.floating)):
        return check_scalar(value, where)
    if isinstance(value, (complex, np.complexfloating)):
        check_scalar(value, where)
    raise DTypeError(f"{where}: {name} must be a real number, got {value!r} ({type(value).__name__})")


def _nesting_problem(obj) -> str:
    """Why nested lists do not make an array: too deep, or ragged (named where)."""
    depth, x = 0, obj
    while isinstance(x, (list, tuple)) and depth <= 10_000:
        depth += 1
        x = x[0] if len(x) else None
    if depth > _MAX_DIMS:
        return (f"the nested lists are {depth if depth <= 10_000 else 'more than 10000'} levels deep, "
                f"but an array has at most {_MAX_DIMS} dims")
    level, shape = [obj], []
    while level:
        seqs = [isinstance(x, (list, tuple, np.ndarray, NDArray)) for x in level]
        if not any(seqs):
            break
        if not all(seqs):
            return (f"ragged nested lists: at depth {len(shape)} some entries are lists and some are "
                    f"numbers (shape so far {tuple(shape)}); every row must have the same length")
        lens = sorted({len(x) for x in level})
        if len(lens) > 1:
            return (f"ragged nested lists: the lists at depth {len(shape)} have different lengths "
                    f"{lens[:6]}{'...' if len(lens) > 6 else ''} (shape so far {tuple(shape)}); "
                    "every row must have the same length")
        shape.append(lens[0])
        level = [y for x in level for y in x]
    return "the nested lists do not form a rectangular array"


def _host_data(obj) -> np.ndarray:
    """Python / NumPy data as a NumPy array, or ``ShapeError`` for ragged or too-deep lists."""
    if isinstance(obj, np.ndarray):
        return obj
    try:
        return np.asarray(obj)
    except (ValueError, RecursionError):
        if isinstance(obj, (list, tuple)):
            raise ShapeError(f"array: {_nesting_problem(obj)}") from None
        raise


def array(obj, dtype=None, device: Device | None = None) -> NDArray:
    """An array from a list, scalar, NumPy array or NDArray (always a copy).

    Python floats default to float32 (Python complex numbers to complex64); NumPy arrays keep
    their dtype. String and object data are refused (``DTypeError``), and so is complex data
    with an explicit real ``dtype`` (the cast would drop the imaginary part); ragged or more
    than 64-deep lists raise ``ShapeError``.

    >>> import lazyarray as la
    >>> la.array([1.0, 2.0]).dtype
    dtype('float32')
    """
    dt = None if dtype is None else as_dtype(dtype, "array")
    if not isinstance(obj, (NDArray,) + tuple(SPARSE_TYPES)) and not hasattr(obj, "__cuda_array_interface__"):
        src = _host_data(obj)
        as_dtype(src.dtype, "array")  # refused before any cast
        if src.dtype.kind == "c" and dt is not None and dt.kind != "c":
            raise DTypeError(f"array: complex data cannot become {dt} (the imaginary part would be lost); "
                             "take la.real(...) explicitly or ask for a complex dtype")
        if dt is None and not isinstance(obj, (np.ndarray, np.generic)) and src.dtype in (np.float64, np.complex128):
            # Python floats default to float32 (complex to complex64); NumPy arrays keep their dtype
            dt = np.dtype(np.float32 if src.dtype == np.float64 else np.complex64)
        obj = src
    out = array_from(obj, creation_device(device), dt)
    as_dtype(out.dtype, "array")  # reject complex / string / object data with a clear message
    return out


def full(shape, fill_value, dtype=None, device: Device | None = None) -> NDArray:
    """An array of ``shape`` filled with ``fill_value``: float32 unless ``dtype`` is given (the API
    contract: ``la.full((2,), 3)`` is float32, where NumPy and the Array API standard would give
    int64), complex64 for a complex ``fill_value``."""
    if dtype is None:
        dtype = "complex64" if isinstance(fill_value, (complex, np.complexfloating)) else "float32"
    return _filled(shape, fill_value, dtype, device, "full")


def zeros(shape, dtype="float32", device: Device | None = None) -> NDArray:
    """An array of zeros (``dtype=None`` is the default float, float32)."""
    return _filled(shape, 0, "float32" if dtype is None else dtype, device, "zeros")


def ones(shape, dtype="float32", device: Device | None = None) -> NDArray:
    """An array of ones (``dtype=None`` is the default float, float32)."""
    return _filled(shape, 1, "float32" if dtype is None else dtype, device, "ones")


def _filled(shape, fill_value, dtype, device, where: str) -> NDArray:
    dev = creation_device(device)
    dt = as_dtype(dtype, where)
    shape = check_alloc(where, checked_shape(shape, where), dt)
    if dt.kind == "c" and isinstance(fill_value, (complex, np.complexfloating)):
        check_scalar(fill_value, where)
    else:
        checked_real(fill_value, where, "fill_value")
    try:
        fill = np.asarray(fill_value, dtype=dt)[()]  # a NumPy scalar of dt
    except OverflowError:
        raise OpOverflowError(f"{where}: fill_value {fill_value!r} does not fit {dt}; pass a value in range "
                              "or a wider dtype") from None
    except ValueError as exc:  # NaN / inf to an integer dtype
        raise ParamValueError(f"{where}: fill_value {fill_value!r} cannot be stored as {dt}: {exc}") from None
    if has_symbols(shape):  # a size of a symbolic trace (x.shape[0]): filled per call, in the graph
        return apply(registry.get("fill"), (), {"shape": shape, "value": fill.item(), "dtype": dt, "device": dev},
                     make_array)
    return make_array(dev.xp.full(shape, fill, dtype=dt), None, dev)


def _arange_length(start, stop, step) -> tuple[int, np.dtype]:
    """The element count of ``arange(start, stop, step)`` and the dtype NumPy computes it in."""
    if step == 0:
        raise ParamValueError("arange: step must not be zero")
    if all(isinstance(v, (int, np.integer)) for v in (start, stop, step)):
        start, stop, step = int(start), int(stop), int(step)
        if any(not -2**63 <= v < 2**63 for v in (start, stop, step)):
            raise ParamValueError(f"arange: integer bounds ({start}, {stop}, {step}) must fit int64")
        return max(0, -(-(stop - start) // step)), np.dtype(np.int64)
    start, stop, step = float(start), float(stop), float(step)
    span = (stop - start) / step
    if not math.isfinite(span):
        raise ParamValueError(f"arange: cannot count the values from {start} to {stop} in steps of {step}; "
                              "the bounds and the step must be finite")
    return max(0, math.ceil(span)), np.dtype(np.float64)


def arange(start, stop=None, step=1, dtype=None, device: Device | None = None) -> NDArray:
    """Evenly spaced values in ``[start, stop)`` like ``numpy.arange`` (float steps give float32)."""
    dev = creation_device(device)
    dt = None if dtype is None else as_dtype(dtype, "arange")
    args = (0, start, step) if stop is None else (start, stop, step)
    if any(isinstance(a, DimExpr) for a in args):  # a size of a symbolic trace: counted per call, in the graph
        if not all(isinstance(a, (int, np.integer, DimExpr)) and not isinstance(a, bool) for a in args):
            raise ParamValueError(f"arange: bounds {args} mix a symbolic size with non-integers; use ints")
        return apply(registry.get("iota"), (), {"bounds": tuple(a if isinstance(a, DimExpr) else int(a) for a in args),
                                               "dtype": np.dtype("int64") if dt is None else dt, "device": dev}, make_array)
    for name, v in zip(("start", "stop", "step"), args):
        checked_real(v, "arange", name)
    n, work = _arange_length(*args)
    check_alloc("arange", (n,), work)  # the values are computed in int64 / float64 first
    if dt is not None:
        check_alloc("arange", (n,), dt)
    if work == np.int64:
        v = np.arange(*(int(a) for a in args), dtype=np.int64)
    else:
        v = np.arange(*(float(a) for a in args))
    if dt is not None:
        v = v.astype(dt)
    elif v.dtype == np.float64:
        v = v.astype(np.float32)
    return array_from(v, dev, None) if dev.kind != "cpu" else make_array(v, None, dev)
