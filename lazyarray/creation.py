"""Array creation: ``array``, ``zeros``, ``ones``, ``full``, ``arange``.

Creation always makes normal arrays (also inside deferred compute, where they become
constants of the recorded graph when used).
"""
from __future__ import annotations

import numpy as np

from .aval import as_dtype
from .device import Device, current_device
from .errors import ShapeError
from .ndarray import NDArray, _make, array_from


def _device(device: Device | None) -> Device:
    return current_device() if device is None else device


def _shape(shape, where: str) -> tuple:
    shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
    if any(not isinstance(d, (int, np.integer)) or d < 0 for d in shape):
        raise ShapeError(f"{where}: shape must be non-negative ints, got {shape}")
    return tuple(int(d) for d in shape)


def array(obj, dtype=None, device: Device | None = None) -> NDArray:
    """An array from a list, scalar, NumPy array or NDArray (always a copy).

    Python floats default to float32; NumPy arrays keep their dtype.

    >>> import lazyarray as la
    >>> la.array([1.0, 2.0]).dtype
    dtype('float32')
    """
    dt = None if dtype is None else as_dtype(dtype, "array")
    out = array_from(obj, _device(device), dt)
    as_dtype(out.dtype, "array")  # reject complex / string / object data with a clear message
    return out


def full(shape, fill_value, dtype="float32", device: Device | None = None) -> NDArray:
    """An array of ``shape`` filled with ``fill_value``."""
    dev = _device(device)
    dt = as_dtype(dtype, "full")
    with_xp = dev.xp
    return _make(with_xp.full(_shape(shape, "full"), fill_value, dtype=dt), None, dev)


def zeros(shape, dtype="float32", device: Device | None = None) -> NDArray:
    """An array of zeros."""
    return full(shape, 0, dtype, device)


def ones(shape, dtype="float32", device: Device | None = None) -> NDArray:
    """An array of ones."""
    return full(shape, 1, dtype, device)


def arange(start, stop=None, step=1, dtype=None, device: Device | None = None) -> NDArray:
    """Evenly spaced values in ``[start, stop)`` like ``numpy.arange`` (float steps give float32)."""
    dev = _device(device)
    v = np.arange(start, stop, step) if stop is not None else np.arange(start)
    if dtype is not None:
        v = v.astype(as_dtype(dtype, "arange"))
    elif v.dtype == np.float64:
        v = v.astype(np.float32)
    return array_from(v, dev, None) if dev.kind != "cpu" else _make(v, None, dev)
