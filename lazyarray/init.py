"""Parameter initializers (``la.init``): ``Xavier``, ``Normal``, ``Uniform``, ``Zero``, ``One``,
``Constant``.

An initializer is a small callable object: ``init(shape, dtype, device)`` returns a new
backend array. Random ones draw from the device's generator, so ``la.random.seed(n)``
makes initialization reproducible.

>>> import lazyarray as la
>>> la.init.Constant(0.5)((2,), "float32").tolist()
[0.5, 0.5]
"""
from __future__ import annotations

import math

import numpy as np

from .aval import check_alloc
from .device import Device, current_device
from .errors import ParamValueError, ShapeError
from .rng import generator


class Initializer:
    """Base class: subclasses implement ``_fill(shape, dtype, rng) -> numpy array``."""

    def __call__(self, shape, dtype="float32", device: Device | None = None):
        device = current_device() if device is None else device
        shape = tuple(int(d) for d in shape)
        if any(d <= 0 for d in shape):
            raise ShapeError(f"{self!r}: cannot initialize shape {shape}; every dim must be known (> 0)")
        check_alloc(repr(self), shape, dtype, "value")
        value = np.asarray(self._fill(shape, np.dtype(dtype), generator(device)), dtype=dtype)
        if device.kind == "cpu":
            return value
        return device.xp.asarray(value)

    def _fill(self, shape, dtype, rng):
        raise NotImplementedError

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in vars(self).items())
        return f"{type(self).__name__}({args})"


class Zero(Initializer):
    """All zeros (biases, batch-norm beta and running mean)."""

    def _fill(self, shape, dtype, rng):
        return np.zeros(shape, dtype)


class One(Initializer):
    """All ones (batch-norm gamma and running variance)."""

    def _fill(self, shape, dtype, rng):
        return np.ones(shape, dtype)


class Constant(Initializer):
    """Every element equal to ``value``."""

    def __init__(self, value: float):
        self.value = value

    def _fill(self, shape, dtype, rng):
        return np.full(shape, self.value, dtype)


class Uniform(Initializer):
    """Samples from ``U[-scale, scale)``."""

    def __init__(self, scale: float = 0.07):
        self.scale = scale

    def _fill(self, shape, dtype, rng):
        return rng.uniform(-self.scale, self.scale, shape)


class Normal(Initializer):
    """Samples from ``N(0, sigma**2)``."""

    def __init__(self, sigma: float = 0.01):
        self.sigma = sigma

    def _fill(self, shape, dtype, rng):
        return rng.normal(0.0, self.sigma, shape)


class Xavier(Initializer):
    """Glorot initialization (MXNet's ``Xavier``): variance scaled by fan-in / fan-out.

    ``rnd_type`` is ``"uniform"`` or ``"gaussian"``; ``factor_type`` is ``"avg"``, ``"in"``
    or ``"out"``; the scale is ``sqrt(magnitude / factor)``. For an (out, in, kh, kw) conv
    weight, fan-in is ``in * kh * kw``.
    """

    def __init__(self, rnd_type: str = "uniform", factor_type: str = "avg", magnitude: float = 3.0):
        if rnd_type not in ("uniform", "gaussian"):
            raise ParamValueError(f"Xavier: rnd_type must be 'uniform' or 'gaussian', got {rnd_type!r}")
        if factor_type not in ("avg", "in", "out"):
            raise ParamValueError(f"Xavier: factor_type must be 'avg', 'in' or 'out', got {factor_type!r}")
        self.rnd_type, self.factor_type, self.magnitude = rnd_type, factor_type, magnitude

    def _fill(self, shape, dtype, rng):
        if len(shape) < 2:
            raise ShapeError(f"Xavier needs a weight of at least 2 dims (out, in, ...), got shape {shape}; "
                             "use la.init.Zero() or Normal() for vectors")
        receptive = math.prod(shape[2:])
        fan_in, fan_out = shape[1] * receptive, shape[0] * receptive
        factor = {"avg": (fan_in + fan_out) / 2.0, "in": fan_in, "out": fan_out}[self.factor_type]
        scale = math.sqrt(self.magnitude / factor)
        if self.rnd_type == "uniform":
            return rng.uniform(-scale, scale, shape)
        return rng.normal(0.0, scale, shape)


def create(init) -> Initializer:
    """An initializer from an instance, a name (``"zeros"``, ``"ones"``, ``"xavier"``, ...) or None."""
    if isinstance(init, Initializer):
        return init
    names = {"zeros": Zero, "zero": Zero, "ones": One, "one": One, "xavier": Xavier,
             "normal": Normal, "uniform": Uniform}
    if isinstance(init, str) and init.lower() in names:
        return names[init.lower()]()
    raise ParamValueError(f"unknown initializer {init!r}; pass la.init.Xavier(), Normal(), Uniform(), "
                          f"Zero(), One(), Constant(v) or one of {sorted(names)}")


__all__ = ["Constant", "Initializer", "Normal", "One", "Uniform", "Xavier", "Zero", "create"]
