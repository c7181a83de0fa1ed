"""Random number state: one generator per device, seeded together by ``la.random.seed``."""
from __future__ import annotations

import numpy as np

from .device import Device

_GENERATORS: dict[Device, object] = {}
_SEED = [None]


def generator(device: Device):
    """The generator of ``device`` (NumPy ``Generator`` on CPUs, CuPy's on GPUs)."""
    g = _GENERATORS.get(device)
    if g is None:
        seed = None if _SEED[0] is None else _SEED[0] + 7919 * device.id + (0 if device.kind == "cpu" else 104729)
        g = np.random.default_rng(seed) if device.kind == "cpu" else device.xp.random.default_rng(seed)
        _GENERATORS[device] = g
    return g


def seed(value: int) -> None:
    """Reseed every device's generator (deterministic per device)."""
    _SEED[0] = int(value)
    _GENERATORS.clear()
