"""``la.data.DataLoader`` (``lazyarray/data/loader.py``): order, last_batch, workers (threads and
spawned processes) giving identical batches, named errors, and no worker left behind."""
from __future__ import annotations

import multiprocessing
import threading

import numpy as np
import pytest

import lazyarray as la
from lazyarray.data import ArrayDataset, DataLoader, DataLoaderError, SimpleDataset, batchify
from lazyarray.data import transforms as T
from lazyarray.errors import ParamError, ParamValueError

IMAGES = np.random.default_rng(0).integers(0, 256, (30, 6, 6, 3), dtype=np.uint8)
LABELS = np.arange(30)


class FailsAt:
    """A dataset whose sample ``bad`` raises (a module-level class: worker processes unpickle it)."""

    def __init__(self, n: int, bad: int):
        self.n, self.bad = n, bad

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if i == self.bad:
            raise KeyError(f"no record {i}")
        return np.float32(i)


def augmented():
    aug = T.Compose([T.RandomFlipLeftRight(), T.RandomResizedCrop(4, scale=(0.3, 1.0)), T.ToTensor()])
    return ArrayDataset(IMAGES, LABELS).transform_first(aug)


def as_numpy(batches):
    return [tuple(b.asnumpy() for b in batch) for batch in batches]


def workers_alive() -> list:
    return [t for t in threading.enumerate() if t.name.startswith("lazyarray-data-worker")] + \
        multiprocessing.active_children()


@pytest.mark.parametrize("last_batch,sizes", [("keep", [4] * 7 + [2]), ("discard", [4] * 7)])
def test_sequential_batches_equal_numpy_slices(last_batch, sizes):
    loader = DataLoader(ArrayDataset(IMAGES, LABELS), batch_size=4, last_batch=last_batch)
    got = as_numpy(loader)
    assert [len(y) for _, y in got] == sizes and len(loader) == len(sizes)
    for k, (x, y) in enumerate(got):
        np.testing.assert_array_equal(x, IMAGES[4 * k:4 * k + 4])
        np.testing.assert_array_equal(y, LABELS[4 * k:4 * k + 4])


def test_shuffle_follows_the_seeded_permutation_and_rollover():
    loader = DataLoader(SimpleDataset(list(range(10))), batch_size=4, shuffle=True, seed=5, last_batch="rollover")
    rng = np.random.default_rng(5)
    first, second = rng.permutation(10).tolist(), rng.permutation(10).tolist()
    assert [b.asnumpy().tolist() for b in loader] == [first[:4], first[4:8]]
    assert [b.asnumpy().tolist() for b in loader] == [(first[8:] + second)[i:i + 4] for i in (0, 4, 8)]


def test_zero_two_threads_two_processes_give_identical_batches():
    runs = {}
    for name, kwargs in {"0": {}, "threads": {"num_workers": 2},
                         "processes": {"num_workers": 2, "thread_pool": False}}.items():
        with DataLoader(augmented(), batch_size=4, shuffle=True, seed=11, **kwargs) as loader:
            runs[name] = [as_numpy(loader) for _ in range(2)]  # two epochs: workers are reused
    assert runs["0"][0][0][0].shape == (4, 3, 4, 4)
    assert not all(np.array_equal(a[0], b[0]) for a, b in zip(runs["0"][0], runs["0"][1]))  # epochs differ
    for name in ("threads", "processes"):
        for ea, eb in zip(runs["0"], runs[name]):
            for a, b in zip(ea, eb):
                np.testing.assert_array_equal(a[0], b[0], err_msg=name)
                np.testing.assert_array_equal(a[1], b[1], err_msg=name)
    assert workers_alive() == []


@pytest.mark.parametrize("kwargs", [{}, {"num_workers": 2}, {"num_workers": 2, "thread_pool": False}],
                         ids=["main", "threads", "processes"])
def test_a_failing_sample_is_named_and_no_worker_is_left(kwargs):
    loader = DataLoader(FailsAt(20, bad=13), batch_size=4, **kwargs)
    with pytest.raises(DataLoaderError, match=r"batch 3: reading sample 13 raised KeyError: 'no record 13'") as info:
        for _ in loader:
            pass
    assert info.value.index == 13 and info.value.batch == 3
    assert isinstance(info.value.original, KeyError) and isinstance(info.value, la.LazyArrayError)
    assert workers_alive() == []
    if not kwargs:
        return
    # the loader starts workers again for the next epoch, and close() stops them
    loader._dataset.bad = -1  # noqa: SLF001  (threads share the dataset; processes get it pickled afresh)
    assert len(list(loader)) == 5
    loader.close()
    assert workers_alive() == []


def test_batchify_failure_is_named():
    loader = DataLoader(SimpleDataset([np.zeros(2), np.zeros(3)]), batch_size=2, num_workers=1)
    with pytest.raises(DataLoaderError, match="batchifying the samples raised ShapeError"):
        list(loader)
    assert workers_alive() == []


def test_pad_batchify_device_and_a_batch_larger_than_the_dataset():
    seqs = SimpleDataset([[1, 2, 3], [4], [5, 6]])
    loader = DataLoader(seqs, batch_size=10, batchify_fn=batchify.Pad(val=0), device=la.cpu(1))
    (batch,) = list(loader)
    assert batch.device == la.cpu(1) and batch.asnumpy().tolist() == [[1, 2, 3], [4, 0, 0], [5, 6, 0]]


def test_batch_sampler_argument():
    bs = la.data.BatchSampler(la.data.SequentialSampler(5), 2, "discard")
    assert [b.asnumpy().tolist() for b in DataLoader(SimpleDataset([0, 1, 2, 3, 4]), batch_sampler=bs)] == \
        [[0, 1], [2, 3]]
    with pytest.raises(ParamError, match="batch_sampler decides the batches"):
        DataLoader(SimpleDataset([0]), batch_size=2, batch_sampler=bs)


@pytest.mark.parametrize("kwargs,cls,match", [
    ({"batch_size": 0}, ParamValueError, "batch_size=0 is below 1"),
    ({"batch_size": -3}, ParamValueError, "batch_size=-3 is below 1"),
    ({}, ParamError, "batch_size is missing"),
    ({"batch_size": 2, "shuffle": True, "sampler": la.data.SequentialSampler(3)}, ParamError, "shuffle=True and a"),
    ({"batch_size": 2, "last_batch": "drop"}, ParamValueError, "last_batch='drop' is not one of"),
    ({"batch_size": 5, "last_batch": "discard"}, ParamValueError, "batch_size=5 is larger than the dataset"),
    ({"batch_size": 2, "num_workers": -1}, ParamValueError, "num_workers=-1"),
    ({"batch_size": 2, "timeout": 0}, ParamValueError, "timeout=0"),
    ({"batch_size": 2, "device": "gpu"}, ParamError, "device must be a la.Device"),
])
def test_bad_arguments_are_named(kwargs, cls, match):
    with pytest.raises(cls, match=f"DataLoader: {match}"):
        DataLoader(SimpleDataset([1, 2, 3]), **kwargs)


def test_an_empty_dataset_is_refused():
    with pytest.raises(ParamValueError, match="DataLoader: the dataset is empty"):
        DataLoader(SimpleDataset([]), batch_size=2)


def test_unpicklable_dataset_for_processes_names_the_fix():
    ds = SimpleDataset([1, 2, 3]).transform(lambda v: v)
    with pytest.raises(DataLoaderError, match="thread_pool=True"):
        list(DataLoader(ds, batch_size=2, num_workers=1, thread_pool=False))
    assert workers_alive() == []
