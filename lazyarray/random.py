"""Random arrays: ``la.random.seed``, ``la.random.uniform``, ``la.random.normal``.

Each function applies a registry op (``random_uniform``, ``random_normal``: no array inputs, the
shape / dtype / device and the distribution as params) whose kernel draws from the device's
generator when it runs. So eager calls draw now; under ``la.deferred()`` (and so inside a
hybridized block's ``forward``) they record a node, and a compiled graph draws anew at every call
instead of returning one captured sample. ``la.random.seed(n)`` reseeds every device's generator:
the same sequence of calls then gives the same draws, eager or hybridized.

NumPy's spellings are accepted: ``uniform(low, high, size)``, ``normal(loc, scale, size)``;
``shape=`` is an alias of ``size=``. With neither, one sample is drawn (a 0-d array), as NumPy does.
Shapes are checked like ``la.zeros``' (``ShapeError`` / ``OutOfMemoryError`` before anything is
drawn); the samples are drawn in float64 and then cast, so the limit counts 8 bytes a value.
"""
from __future__ import annotations

import numpy as np

from .aval import as_dtype, check_alloc
from .creation import checked_real, checked_shape, creation_device
from .device import Device
from .dispatch import apply
from .errors import ParamError
from .ndarray import NDArray, make_array
from .ops import registry
from .rng import generator, seed  # noqa: F401  (re-exported: la.random.seed)


def _size(size, shape, where: str) -> tuple:
    """``size=`` (NumPy) or its alias ``shape=``: one of them, or both equal; neither = one sample."""
    if size is None and shape is None:
        return ()
    if size is not None and shape is not None:
        a, b = checked_shape(size, where), checked_shape(shape, where)
        if a != b:
            raise ParamError(f"{where}: size={size!r} and shape={shape!r} disagree; shape is an alias of "
                             "size, pass one of them")
        return a
    return checked_shape(size if size is not None else shape, where)


def _sample(op: str, where: str, a: tuple, b: tuple, size, shape, dtype, device) -> NDArray:
    dev = creation_device(device)
    dt = as_dtype(dtype, where)
    shape = _size(size, shape, where)
    check_alloc(where, shape, np.float64, "samples")
    check_alloc(where, shape, dt)
    params = {a[0]: float(checked_real(a[1], where, a[0])), b[0]: float(checked_real(b[1], where, b[0])),
              "shape": shape, "dtype": dt, "device": dev}
    return apply(registry.get(op), (), params, make_array)


def uniform(low=0.0, high=1.0, size=None, shape=None, dtype="float32", device: Device | None = None) -> NDArray:
    """Samples from ``U[low, high)`` (``numpy.random.uniform``'s arguments; ``shape`` = ``size``)."""
    return _sample("random_uniform", "uniform", ("low", low), ("high", high), size, shape, dtype, device)


def normal(loc=0.0, scale=1.0, size=None, shape=None, dtype="float32", device: Device | None = None) -> NDArray:
    """Samples from ``N(loc, scale**2)`` (``numpy.random.normal``'s arguments; ``shape`` = ``size``)."""
    return _sample("random_normal", "normal", ("loc", loc), ("scale", scale), size, shape, dtype, device)

