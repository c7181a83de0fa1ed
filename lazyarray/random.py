"""Random arrays: ``la.random.seed``, ``la.random.uniform``, ``la.random.normal``."""
from __future__ import annotations

from .aval import as_dtype
from .creation import _device, _shape
from .device import Device
from .ndarray import NDArray, _make
from .rng import generator, seed  # noqa: F401  (re-exported: la.random.seed)


def uniform(low=0.0, high=1.0, shape=(1,), dtype="float32", device: Device | None = None) -> NDArray:
    """Samples from ``U[low, high)``."""
    dev = _device(device)
    v = generator(dev).uniform(low, high, _shape(shape, "uniform")).astype(as_dtype(dtype, "uniform"))
    return _make(v, None, dev)


def normal(loc=0.0, scale=1.0, shape=(1,), dtype="float32", device: Device | None = None) -> NDArray:
    """Samples from ``N(loc, scale**2)``."""
    dev = _device(device)
    v = generator(dev).normal(loc, scale, _shape(shape, "normal")).astype(as_dtype(dtype, "normal"))
    return _make(v, None, dev)
