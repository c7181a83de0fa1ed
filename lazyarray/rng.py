"""Random number state: one generator per device, seeded together by ``la.random.seed``."""
from __future__ import annotations

import threading
from contextlib import contextmanager

import numpy as np

from .device import Device

_GENERATORS: dict[Device, object] = {}
_SEED = [None]
_OVERRIDE = threading.local()  # a CPU generator this thread draws from instead (``drawing_from``)


def generator(device: Device):
    """The generator of ``device`` (NumPy ``Generator`` on CPUs, CuPy's on GPUs)."""
    if device.kind == "cpu":
        own = getattr(_OVERRIDE, "generator", None)
        if own is not None:
            return own
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


@contextmanager
def drawing_from(gen):
    """Within the block, this thread's CPU draws come from ``gen`` (other threads keep theirs).

    Used by distributed workers so a piece draws the same dropout masks wherever it runs.
    """
    saved = getattr(_OVERRIDE, "generator", None)
    _OVERRIDE.generator = gen
    try:
        yield gen
    finally:
        _OVERRIDE.generator = saved
