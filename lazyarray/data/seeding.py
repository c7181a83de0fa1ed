"""The random generator of the sample being read: how a seeded ``DataLoader`` makes random transforms
give the same batches with 0, 2 thread or 2 process workers.

A seeded loader reads each sample inside ``sample_seed((seed, epoch, batch, position))``; random
transforms draw from ``sample_rng()`` when it is set and from their own generator otherwise. The
generator lives in a ``ContextVar``: each worker thread sees only the sample it is reading.

>>> from lazyarray.data.seeding import sample_rng, sample_seed
>>> sample_rng() is None
True
>>> with sample_seed((0, 1, 2, 3)):
...     a = sample_rng().random()
>>> with sample_seed((0, 1, 2, 3)):
...     a == sample_rng().random()
True
"""
from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar

import numpy as np

_SAMPLE_RNG: ContextVar[np.random.Generator | None] = ContextVar("lazyarray_data_sample_rng", default=None)


def sample_rng() -> np.random.Generator | None:
    """The generator of the sample a seeded loader is reading in this thread, or None."""
    return _SAMPLE_RNG.get()


@contextlib.contextmanager
def sample_seed(key: tuple[int, ...] | None) -> Iterator[None]:
    """Read one sample with a generator seeded by ``key`` (None: leave the transforms' own)."""
    if key is None:
        yield
        return
    token = _SAMPLE_RNG.set(np.random.default_rng(key))
    try:
        yield
    finally:
        _SAMPLE_RNG.reset(token)
