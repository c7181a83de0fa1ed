"""Random arrays: ``la.random.seed``, ``la.random.uniform``, ``la.random.normal``.

Shapes are checked like ``la.zeros``' (``ShapeError`` / ``OutOfMemoryError`` before anything is
drawn); the samples are drawn in float64 and then cast, so the limit counts 8 bytes a value.
"""
from __future__ import annotations

import numpy as np

from .aval import as_dtype, check_alloc
from .creation import _device, _real, _shape
from .device import Device
from .ndarray import NDArray, _make
from .rng import generator, seed  # noqa: F401  (re-exported: la.random.seed)


def _draw_shape(shape, dtype, where: str) -> tuple:
    shape = check_alloc(where, _shape(shape, where), np.float64, "samples")
    check_alloc(where, shape, dtype)
    return shape


def uniform(low=0.0, high=1.0, shape=(1,), dtype="float32", device: Device | None = None) -> NDArray:
    """Samples from ``U[low, high)``."""
    dev = _device(device)
    dt = as_dtype(dtype, "uniform")
    shape = _draw_shape(shape, dt, "uniform")
    v = generator(dev).uniform(_real(low, "uniform", "low"), _real(high, "uniform", "high"), shape).astype(dt)
    return _make(v, None, dev)


def normal(loc=0.0, scale=1.0, shape=(1,), dtype="float32", device: Device | None = None) -> NDArray:
    """Samples from ``N(loc, scale**2)``."""
    dev = _device(device)
    dt = as_dtype(dtype, "normal")
    shape = _draw_shape(shape, dt, "normal")
    v = generator(dev).normal(_real(loc, "normal", "loc"), _real(scale, "normal", "scale"), shape).astype(dt)
    return _make(v, None, dev)
