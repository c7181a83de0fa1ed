"""Samplers against references written with plain Python / NumPy (``lazyarray/data/sampler.py``)."""
from __future__ import annotations

import numpy as np
import pytest

from lazyarray.data import BatchSampler, IntervalSampler, RandomSampler, SequentialSampler
from lazyarray.errors import ParamError, ParamValueError


def reference_batches(order: list[int], size: int, last_batch: str, carry: list[int]) -> tuple[list, list]:
    """Batches of ``carry + order`` and the left-over for the next epoch, by hand."""
    items = carry + order
    full = [items[i:i + size] for i in range(0, len(items) - size + 1, size)]
    rest = items[len(full) * size:]
    if last_batch == "keep":
        return full + ([rest] if rest else []), []
    return full, rest if last_batch == "rollover" else []


def test_sequential_and_start():
    assert list(SequentialSampler(5)) == [0, 1, 2, 3, 4] and len(SequentialSampler(5)) == 5
    assert list(SequentialSampler(3, start=4)) == [4, 5, 6]
    assert list(SequentialSampler(0)) == []


def test_random_sampler_is_numpys_permutation_per_epoch():
    s, rng = RandomSampler(20, seed=7), np.random.default_rng(7)
    for _ in range(3):
        assert list(s) == rng.permutation(20).tolist()
    assert list(RandomSampler(20, seed=7)) == list(RandomSampler(20, seed=7))
    assert len(s) == 20


def test_interval_sampler():
    ref = [i for s in range(3) for i in range(s, 10, 3)]
    assert list(IntervalSampler(10, 3)) == ref and len(IntervalSampler(10, 3)) == 10
    assert list(IntervalSampler(10, 3, rollover=False)) == [0, 3, 6, 9] == list(range(0, 10, 3))
    assert len(IntervalSampler(10, 3, rollover=False)) == 4


@pytest.mark.parametrize("last_batch", ["keep", "discard", "rollover"])
@pytest.mark.parametrize("n,size", [(10, 3), (9, 3), (2, 5), (7, 1)])
def test_batch_sampler_modes_over_epochs(n, size, last_batch):
    sampler = RandomSampler(n, seed=1)
    order_rng = np.random.default_rng(1)
    b = BatchSampler(sampler, size, last_batch)
    carry: list[int] = []
    for _ in range(4):
        expect_len = -(-(len(carry) + n) // size) if last_batch == "keep" else (len(carry) + n) // size
        assert len(b) == expect_len
        want, carry = reference_batches(order_rng.permutation(n).tolist(), size, last_batch, carry)
        assert list(b) == want


@pytest.mark.parametrize("make,cls", [
    (lambda: BatchSampler(SequentialSampler(3), 0), ParamValueError),
    (lambda: BatchSampler(SequentialSampler(3), -2), ParamValueError),
    (lambda: BatchSampler(SequentialSampler(3), 1.5), ParamError),
    (lambda: BatchSampler(SequentialSampler(3), 2, "drop"), ParamValueError),
    (lambda: SequentialSampler(-1), ParamValueError),
    (lambda: IntervalSampler(3, 5), ParamValueError),
])
def test_bad_arguments_are_named(make, cls):
    with pytest.raises(cls, match=r"(BatchSampler|SequentialSampler|IntervalSampler): \w+"):
        make()
