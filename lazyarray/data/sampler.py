"""Samplers: the order in which a ``DataLoader`` reads a dataset, as Gluon's ``gluon.data.sampler``.

A sampler is an iterable of sample indices with a ``len``; a batch sampler is an iterable of lists
of indices. ``RandomSampler(n, seed=s)`` gives a new permutation each epoch, the same sequence of
permutations for the same seed.

>>> from lazyarray.data import BatchSampler, SequentialSampler
>>> list(BatchSampler(SequentialSampler(5), 2, last_batch="keep"))
[[0, 1], [2, 3], [4]]
>>> list(BatchSampler(SequentialSampler(5), 2, last_batch="discard"))
[[0, 1], [2, 3]]
"""
from __future__ import annotations

import itertools
import operator
from collections.abc import Iterable, Iterator

import numpy as np

from ..errors import ParamError, ParamValueError

LAST_BATCH = ("keep", "discard", "rollover")


def check_count(value, where: str, name: str, *, minimum: int = 1) -> int:
    """``value`` as an int of at least ``minimum``, or a ``ParamError`` / ``ParamValueError`` that
    names ``where``, the argument and the fix."""
    try:
        n = operator.index(value)
    except TypeError:
        raise ParamError(f"{where}: {name} must be an int, got {type(value).__name__} {value!r}; "
                         f"pass a whole number >= {minimum}") from None
    if n < minimum:
        raise ParamValueError(f"{where}: {name}={n} is below {minimum}; pass a whole number >= {minimum}")
    return n


def check_last_batch(value, where: str) -> str:
    if value not in LAST_BATCH:
        raise ParamValueError(f"{where}: last_batch={value!r} is not one of {', '.join(map(repr, LAST_BATCH))}: "
                              "'keep' yields the short last batch, 'discard' drops it, 'rollover' carries its "
                              "samples into the next epoch")
    return value


class Sampler:
    """Base class: an iterable of sample indices with a length."""

    def __iter__(self) -> Iterator[int]:
        raise NotImplementedError

    def __len__(self) -> int:
        raise NotImplementedError


class SequentialSampler(Sampler):
    """``start, start + 1, ..., start + length - 1``.

    >>> list(SequentialSampler(3, start=2))
    [2, 3, 4]
    """

    def __init__(self, length: int, start: int = 0):
        self._length = check_count(length, "SequentialSampler", "length", minimum=0)
        self._start = check_count(start, "SequentialSampler", "start", minimum=0)

    def __iter__(self) -> Iterator[int]:
        return iter(range(self._start, self._start + self._length))

    def __len__(self) -> int:
        return self._length


class RandomSampler(Sampler):
    """A permutation of ``range(length)`` each epoch, from a NumPy generator seeded with ``seed``
    (None: fresh entropy). The n-th epoch of two samplers with one seed gives the same order.

    >>> a, b = RandomSampler(6, seed=1), RandomSampler(6, seed=1)
    >>> list(a) == list(b) and sorted(a) == list(range(6))
    True
    """

    def __init__(self, length: int, seed: int | None = None):
        self._length = check_count(length, "RandomSampler", "length", minimum=0)
        self._rng = np.random.default_rng(seed)

    def __iter__(self) -> Iterator[int]:
        return iter(self._rng.permutation(self._length).tolist())

    def __len__(self) -> int:
        return self._length


class IntervalSampler(Sampler):
    """``0, interval, 2*interval, ..., 1, 1 + interval, ...`` (Gluon's, for strided sequence batches);
    with ``rollover=False`` only the first pass ``0, interval, ...``.

    >>> list(IntervalSampler(7, 3))
    [0, 3, 6, 1, 4, 2, 5]
    """

    def __init__(self, length: int, interval: int, rollover: bool = True):
        self._length = check_count(length, "IntervalSampler", "length", minimum=0)
        self._interval = check_count(interval, "IntervalSampler", "interval")
        if self._length and self._interval > self._length:
            raise ParamValueError(f"IntervalSampler: interval={interval} is larger than length={length}; "
                                  "pass an interval <= length")
        self._rollover = bool(rollover)

    def __iter__(self) -> Iterator[int]:
        starts = range(self._interval) if self._rollover else range(1)
        return itertools.chain.from_iterable(range(s, self._length, self._interval) for s in starts)

    def __len__(self) -> int:
        return self._length if self._rollover else len(range(0, self._length, self._interval))


class FilterSampler(Sampler):
    """The indices ``i`` of ``dataset`` where ``fn(dataset[i])`` is true (computed once)."""

    def __init__(self, fn, dataset):
        self._indices = [i for i in range(len(dataset)) if fn(dataset[i])]

    def __iter__(self) -> Iterator[int]:
        return iter(self._indices)

    def __len__(self) -> int:
        return len(self._indices)


class BatchSampler(Sampler):
    """Lists of ``batch_size`` indices from ``sampler``. The last, short batch is kept (``"keep"``),
    dropped (``"discard"``) or carried into the next epoch (``"rollover"``, Gluon's: the next
    ``iter`` starts with the left-over indices).

    >>> b = BatchSampler(SequentialSampler(5), 2, last_batch="rollover")
    >>> list(b), list(b)
    ([[0, 1], [2, 3]], [[4, 0], [1, 2], [3, 4]])
    """

    def __init__(self, sampler: Iterable[int], batch_size: int, last_batch: str = "keep"):
        self._sampler = sampler
        self._batch_size = check_count(batch_size, "BatchSampler", "batch_size")
        self._last_batch = check_last_batch(last_batch, "BatchSampler")
        self._prev: list[int] = []

    def __iter__(self) -> Iterator[list[int]]:
        size = self._batch_size
        order = self._prev + list(self._sampler)  # one epoch's indices: slicing a list is the cheap way
        self._prev = []
        full = len(order) - len(order) % size
        for i in range(0, full, size):
            yield order[i:i + size]
        if full < len(order):
            if self._last_batch == "keep":
                yield order[full:]
            elif self._last_batch == "rollover":
                self._prev = order[full:]

    def __len__(self) -> int:
        n = len(self._prev) + len(self._sampler)
        if self._last_batch == "keep":
            return -(-n // self._batch_size)
        return n // self._batch_size
