"""Datasets (``lazyarray/data/dataset.py``): indexing, transforms and the Gluon views."""
from __future__ import annotations

import numpy as np
import pytest

import lazyarray as la
from lazyarray.data import ArrayDataset, SimpleDataset
from lazyarray.errors import ParamError, ParamValueError, ShapeError


def test_array_dataset_samples_and_single_field():
    x, y = np.arange(12.0).reshape(4, 3), [1, 0, 1, 1]
    ds = ArrayDataset(x, y)
    assert len(ds) == 4
    a, b = ds[2]
    np.testing.assert_array_equal(a, x[2])
    assert b == 1
    np.testing.assert_array_equal(ArrayDataset(x)[1], x[1])


def test_lazyarray_arrays_become_numpy_samples():
    ds = ArrayDataset(la.array([[1.0, 2.0], [3.0, 4.0]]))
    assert isinstance(ds[0], np.ndarray) and ds[0].tolist() == [1.0, 2.0]


def test_different_lengths_are_refused():
    with pytest.raises(ShapeError, match=r"ArrayDataset: .*\[3, 2\]"):
        ArrayDataset(np.zeros(3), np.zeros(2))
    with pytest.raises(ParamError, match="ArrayDataset"):
        ArrayDataset()


def test_transform_and_transform_first_lazy_and_eager():
    ds = ArrayDataset(np.arange(4), np.arange(4) * 10)
    assert ds.transform(lambda a, b: a + b)[3] == 33
    assert ds.transform_first(lambda a: -a)[2] == (-2, 20)
    eager = ds.transform_first(lambda a: a * 2, lazy=False)
    assert isinstance(eager, SimpleDataset) and eager[1] == (2, 10)
    assert SimpleDataset([5, 6]).transform(lambda v: v + 1)[0] == 6
    with pytest.raises(ParamError, match="transform_first: fn must be callable"):
        ds.transform_first(3)


def test_take_filter_shard_as_gluon():
    ds = SimpleDataset(list(range(10)))
    assert list(ds.take(3)) == [0, 1, 2] and len(ds.take(None)) == 10 and len(ds.take(99)) == 10
    assert [ds.filter(lambda v: v % 3 == 0)[i] for i in range(4)] == [0, 3, 6, 9]
    shards = [[s[i] for i in range(len(s))] for s in (ds.shard(3, k) for k in range(3))]
    assert shards == [[0, 1, 2, 3], [4, 5, 6], [7, 8, 9]]
    with pytest.raises(ParamValueError, match="index=3 is not below num_shards=3"):
        ds.shard(3, 3)


def test_gather_equals_reading_sample_by_sample():
    x, y = np.random.default_rng(0).standard_normal((9, 2, 2)).astype(np.float32), np.arange(9)
    ds = ArrayDataset(x, y)
    for idx in ([2, 3, 4], [7, 0, 3], [8]):
        gx, gy = ds.gather(idx)
        np.testing.assert_array_equal(gx, np.stack([ds[i][0] for i in idx]))
        np.testing.assert_array_equal(gy, np.stack([ds[i][1] for i in idx]))
    assert ArrayDataset(np.zeros(3), [1, 2, 3]).gather([0, 1]) is None  # a list field: per sample
    sub = ds.shard(3, 1)
    np.testing.assert_array_equal(sub.gather([0, 2])[1], [3, 5])
