"""Random number state: one generator per device, seeded together by ``la.random.seed``.

Process-wide, as NumPy's and PyTorch's default generators are: ``GENERATORS`` (a named cache: device
-> its generator, made at the device's first draw) and ``SEED`` (the seed ``la.random.seed`` gave;
absent: each generator starts from fresh entropy). ``drawing_from(gen)`` overrides the CPU draws
of this thread / task only (a ``ContextVar``).
"""
from __future__ import annotations

import contextvars
from contextlib import contextmanager

import numpy as np

from .caches import NamedCache
from .device import Device

# device -> its generator, made from SEED at its first draw; ``seed`` drops them all. (The bound is
# far above the devices a process uses: an evicted generator would start its stream again.)
GENERATORS = NamedCache("random generators", 1024)
SEED = NamedCache("random seed", 1)  # None -> the seed la.random.seed gave (clear(): fresh entropy)
# a CPU generator this thread / task draws from instead (``drawing_from``)
_OVERRIDE: contextvars.ContextVar = contextvars.ContextVar("lazyarray_rng_override", default=None)


def generator(device: Device):
    """The generator of ``device`` (NumPy ``Generator`` on CPUs, CuPy's on GPUs)."""
    if device.kind == "cpu":
        own = _OVERRIDE.get()
        if own is not None:
            return own
    g = GENERATORS.peek(device)
    return g if g is not None else GENERATORS.get_or_make(device, _new_generator, device)


def _new_generator(device: Device):
    base = SEED.peek(None)
    seed = None if base is None else base + 7919 * device.id + (0 if device.kind == "cpu" else 104729)
    return np.random.default_rng(seed) if device.kind == "cpu" else device.xp.random.default_rng(seed)


def seed(value: int) -> None:
    """Reseed every device's generator (deterministic per device)."""
    SEED.put(None, int(value))
    GENERATORS.clear()


@contextmanager
def drawing_from(gen):
    """Within the block, this thread's (this task's) CPU draws come from ``gen`` (other threads keep theirs).

    Used by distributed workers so a piece draws the same dropout masks wherever it runs.
    """
    token = _OVERRIDE.set(gen)
    try:
        yield gen
    finally:
        _OVERRIDE.reset(token)
