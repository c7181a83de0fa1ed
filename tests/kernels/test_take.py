"""take's ``gather`` (``kernels/take.py``): ``numpy.take`` with its own bounds check, a 0-d index of a
2+-dim array as a basic index and a copy; bit for bit the reference over float dtypes, axes, views,
empty dims, negative indices; out-of-range indices raise as the reference does; the tuning switch
and non-NumPy arrays keep the reference; eager calls and compiled steps run it (``explain()``)."""
from __future__ import annotations

import numpy as np
import pytest

import lazyarray as la
from lazyarray import kernels
from lazyarray.kernels import take as ktake
from lazyarray.ops import registry

TAKE = registry.get("take")
RNG = np.random.default_rng(5)


def _ref(x, idx, axis=0):
    return TAKE.kernel(np, x, idx, axis=axis)


def _same(got, want):
    assert got.dtype == want.dtype and got.shape == want.shape and got.flags.c_contiguous
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("axis", [0, 1, -1])
@pytest.mark.parametrize("idx", [np.array([[1, 0, 3, -1, 2, 2, -4]]), np.array(2), np.array(-1), np.array([0]),
                                 np.array([], np.int64), np.array([[3], [1]], np.int32)])
def test_gather_equals_the_reference(dtype, axis, idx):
    x = RNG.standard_normal((4, 5, 6)).astype(dtype)
    _same(ktake.take_gather(np, x, idx, axis), _ref(x, idx, axis))


def test_views_and_empty_dims():
    x = RNG.standard_normal((8, 6, 5)).astype(np.float32)[::2, :, ::-2]  # a strided view
    idx = np.arange(12).reshape(3, 4)[:, ::2] % 4  # non-contiguous indices
    for axis in (0, 1, 2):
        got = ktake.take_gather(np, x, idx % x.shape[axis], axis)
        _same(got, _ref(x, idx % x.shape[axis], axis))
        assert not np.shares_memory(got, x)
    s = ktake.take_gather(np, x, np.array(1), 1)  # a 0-d index: a copy, never a view of x
    _same(s, _ref(x, np.array(1), 1))
    assert not np.shares_memory(s, x)
    e = np.zeros((0, 3), np.float64)
    _same(ktake.take_gather(np, e, np.array([0, 2]), 1), _ref(e, np.array([0, 2]), 1))
    _same(ktake.take_gather(np, e, np.array([], np.int64), 0), _ref(e, np.array([], np.int64), 0))


@pytest.mark.parametrize("idx,axis", [(np.array([0, 4]), 0), (np.array([-5]), 0), (np.array(4), 0),
                                      (np.array(-6), 1), (np.array([1]), 2)])
def test_out_of_range_raises_as_the_reference(idx, axis):
    x = np.ones((4, 5, 0), np.float32)
    with pytest.raises(IndexError, match="take: index out of range") as want:
        _ref(x, idx, axis)
    with pytest.raises(IndexError, match="take: index out of range") as got:
        ktake.take_gather(np, x, idx, axis)
    assert str(got.value) == str(want.value)


def test_what_keeps_the_reference():
    x, idx = RNG.standard_normal((3, 4)), np.array([1, 2])
    assert kernels.choose(TAKE, np, x, idx).impl is ktake.GATHER
    with la.tuning(take_gather=False):
        assert kernels.choose(TAKE, np, x, idx).impl is ktake.REFERENCE
    assert ktake.take_gather(object(), x, idx) is None  # another array module: the reference
    assert ktake.GATHER in kernels.IMPLS["take"] and ktake.GATHER.fallback is ktake.REFERENCE


def test_eager_and_compiled_calls_run_it():
    table = RNG.standard_normal((10, 4)).astype(np.float32)
    ids = np.array([[3, 1, 9, 0]])
    with la.profile() as prof:
        y = la.take(la.array(table), la.array(ids))
    _same(y.asnumpy(), table[ids])
    assert {e.impl for e in prof.events if e.name.endswith("take")} == {"gather"}
    t, i = la.sym.var("t", shape=(10, 4)), la.sym.var("i", shape=(1, 4), dtype="int64")
    op = la.CachedOp(la.sym.take(t, i) * 2)
    for _ in range(3):  # (steps bind at their second run)
        out = op(la.array(table), la.array(ids))
    np.testing.assert_array_equal(out.asnumpy(), table[ids] * 2)
    assert "take[gather]" in str(op.explain(la.array(table), la.array(ids)))
    with la.tuning(take_gather=False):
        np.testing.assert_array_equal(op(la.array(table), la.array(ids)).asnumpy(), table[ids] * 2)
        assert "take[reference]" in str(op.explain(la.array(table), la.array(ids)))
    with pytest.raises(la.LazyArrayError, match="out of range"):
        op(la.array(table), la.array(np.array([[3, 1, 10, 0]])))
