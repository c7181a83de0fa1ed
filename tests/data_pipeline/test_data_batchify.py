"""Batchify functions (``lazyarray/data/batchify.py``) against NumPy stacking and padding."""
from __future__ import annotations

import numpy as np
import pytest

import lazyarray as la
from lazyarray.data import batchify
from lazyarray.errors import ShapeError


def test_default_batchify_arrays_scalars_tuples_dicts():
    rng = np.random.default_rng(0)
    xs = [rng.standard_normal((2, 3)).astype(np.float32) for _ in range(4)]
    out = batchify.default_batchify(xs)
    assert isinstance(out, la.NDArray) and out.dtype == np.float32
    np.testing.assert_array_equal(out.asnumpy(), np.stack(xs))
    assert batchify.default_batchify([1, 2, 3]).dtype == np.int64
    assert batchify.default_batchify([0.5, 1.5]).dtype == np.float32  # Python floats: la.array's default
    assert batchify.default_batchify([np.float64(0.5), np.float64(1.0)]).dtype == np.float64
    a, b = batchify.default_batchify([(xs[0], 1), (xs[1], 0)])
    np.testing.assert_array_equal(a.asnumpy(), np.stack(xs[:2]))
    assert b.asnumpy().tolist() == [1, 0]
    d = batchify.default_batchify([{"x": xs[0], "n": 2}, {"x": xs[1], "n": 3}])
    assert d["x"].shape == (2, 2, 3) and d["n"].asnumpy().tolist() == [2, 3]
    la_in = batchify.default_batchify([la.array([1.0, 2.0]), la.array([3.0, 4.0])])
    assert la_in.asnumpy().tolist() == [[1.0, 2.0], [3.0, 4.0]]


def test_ragged_samples_name_pad():
    with pytest.raises(ShapeError, match="Pad"):
        batchify.default_batchify([np.zeros(2), np.zeros(3)])
    with pytest.raises(ShapeError, match="no samples"):
        batchify.default_batchify([])


def test_pad_against_numpy():
    seqs = [np.arange(1, 4), np.arange(5, 6), np.arange(7, 9)]
    want = np.full((3, 3), -1, np.int64)
    for k, s in enumerate(seqs):
        want[k, :len(s)] = s
    x, n = batchify.Pad(val=-1, ret_length=True)(seqs)
    np.testing.assert_array_equal(x.asnumpy(), want)
    assert n.asnumpy().tolist() == [3, 1, 2] and n.dtype == np.int64
    assert batchify.Pad(round_to=4)(seqs).shape == (3, 4)
    feats = [np.ones((2, 5), np.float32), np.ones((4, 5), np.float32)]
    padded = batchify.Pad(axis=0, val=0.0)(feats).asnumpy()
    assert padded.shape == (2, 4, 5) and padded.dtype == np.float32 and padded[0, 2:].sum() == 0
    assert batchify.Pad(axis=1)([np.ones((2, 1)), np.ones((2, 3))]).shape == (2, 2, 3)
    with pytest.raises(ShapeError, match="outside axis 0"):
        batchify.Pad()([np.ones((2, 3)), np.ones((2, 4))])


def test_stack_and_tuple():
    x, y = batchify.Tuple(batchify.Pad(), batchify.Stack("float32"))([([1, 2], 0), ([3], 1)])
    assert x.asnumpy().tolist() == [[1, 2], [3, 0]] and y.dtype == np.float32
    with pytest.raises(ShapeError, match="Tuple: samples of"):
        batchify.Tuple(batchify.Stack())([(1, 2)])
