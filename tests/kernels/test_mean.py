"""kernels/mean.py: ``compiled`` (rows of the trailing axes, NumPy's pairwise sums) and ``ufuncs`` (np.mean's
sum and division as two calls) equal np.mean bit for bit in float32 and float64 over the axes a global
average pool and others reduce, views, NaN / inf and empty dims, and decline (the next one runs) where
they do not apply; the chooser and the binder name what runs, and a compiled program's mean step
runs it."""
from __future__ import annotations

import numpy as np
import pytest

import lazyarray as la
from lazyarray import jit, kernels
from lazyarray.kernels import mean as M

RNG = np.random.default_rng(5)


@pytest.mark.parametrize("axis,keepdims", [((2, 3), True), ((2, 3), False), (1, False), (-1, True), (None, True),
                                           ((0, 2), True)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("view", ["c", "batch-last", "strided"])
def test_ufuncs_equal_np_mean_bit_for_bit(axis, keepdims, dtype, view):
    x = (RNG.standard_normal((3, 5, 7, 9)) * 10).astype(dtype)
    if view == "batch-last":
        x = np.ascontiguousarray(x.transpose(1, 2, 3, 0)).transpose(3, 0, 1, 2)
    elif view == "strided":
        x = x[:, ::2, 1:, ::3]
    got = M._ufuncs(np, x, axis, keepdims, None)
    want = np.mean(x, axis=axis, keepdims=keepdims)
    assert got is not None and got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("shape,axis,keepdims", [((1, 16, 8, 8), (2, 3), True), ((2, 32, 7, 7), (3, 2), True),
                                                  ((3, 5, 11, 11), (2, 3), False), ((4, 9, 1, 1), (2, 3), True),
                                                  ((5, 128), 1, False), ((5, 100), -1, True), ((3, 4, 2, 3), (1, 2, 3), True),
                                                  ((6,), 0, True), ((0, 4, 3, 3), (2, 3), True)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_compiled_equals_np_mean_bit_for_bit(shape, axis, keepdims, dtype):
    pytest.importorskip("numba")
    for scale in (1.0, 1e3, 1e-3):
        x = (RNG.standard_normal(shape) * scale).astype(dtype)
        if x.size > 4:
            x.reshape(-1)[:3] = (np.nan, np.inf, -0.0)
        got = M._compiled(np, x, axis, keepdims, None)
        want = np.mean(x, axis=axis, keepdims=keepdims)
        assert got is not None and got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_array_equal(got, want)


def test_compiled_declines_what_it_does_not_take():
    x = RNG.standard_normal((2, 3, 12, 12)).astype(np.float32)
    assert M._compiled(np, x, (2, 3), True, None) is None  # (144 values a row: over one pairwise block)
    assert M._compiled(np, x[:, :, :8, :8], (2, 3), True, None) is None  # (not C-ordered)
    assert M._compiled(np, x, (1, 2), True, None) is None  # (not the trailing axes)
    assert M._compiled(np, x[0, 0, 0, :5], None, False, None) is None  # (a 0-d result)
    assert M._compiled(np, x.astype(np.float16), (2, 3), True, None) is None


def test_what_it_declines_runs_np_mean():
    x = RNG.standard_normal((2, 3, 4)).astype(np.float32)
    assert M._ufuncs(np, x, None, False, None) is None  # (a 0-d result)
    assert M._ufuncs(np, x.astype(np.float16), (1, 2), True, None) is None  # (float16 sums in float32)
    assert M._ufuncs(np, x.astype(np.int32), 1, False, None) is None
    empty = np.zeros((2, 0, 4), np.float32)
    assert M._ufuncs(np, empty, 1, False, None) is None  # (an empty reduction: NumPy's warning and NaN)
    np.testing.assert_array_equal(M._ufuncs(np, empty, 2, False, None), np.mean(empty, axis=2))  # (nothing to divide)
    for arr, axis in ((x, None), (x.astype(np.float16), (1, 2)), (x.astype(np.int32), 1)):
        np.testing.assert_array_equal(M.run_mean(np, arr, axis), np.mean(arr, axis=axis))


def test_choose_bind_and_a_program_step_run_ufuncs():
    x = RNG.standard_normal((1, 16, 8, 8)).astype(np.float32)
    want = "mean[compiled]" if jit.enabled() else "mean[ufuncs]"
    assert str(kernels.choose("mean", np, x, axis=(2, 3), keepdims=True)) == want
    assert str(kernels.choose("mean", np, x[:, :, ::2], axis=(2, 3), keepdims=True)) == "mean[ufuncs]"
    assert str(kernels.choose("mean", np, x.astype(np.float16), axis=(2, 3))) == "mean[reference]"
    b = kernels.bind("mean", np, x, axis=(2, 3), keepdims=True)
    np.testing.assert_array_equal(b.fn(x), np.mean(x, axis=(2, 3), keepdims=True))
    v = la.sym.var("x", shape=x.shape)
    op = la.CachedOp(la.sym.mean(la.sym.relu(v), axis=(2, 3), keepdims=True) * 2.0)
    for _ in range(2):  # (a compiled program's first run and a later one)
        got = op(x=la.array(x)).asnumpy()
        np.testing.assert_array_equal(got, np.mean(np.maximum(x, 0), axis=(2, 3), keepdims=True) * np.float32(2.0))


@pytest.mark.parametrize("shape,axis,keepdims", [((1, 10, 3, 3), (2, 3), False), ((4, 16, 8, 8), (2, 3), True),
                                                  ((0, 4, 3, 3), (-2, -1), False), ((5, 100), -1, True)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_bound_compiled_step_equals_np_mean_and_hands_other_arrays_on(monkeypatch, shape, axis, keepdims, dtype):
    pytest.importorskip("numba")
    monkeypatch.setattr(la.config, "jit", True)
    x = RNG.standard_normal(shape).astype(dtype)
    if x.size > 4:
        x.reshape(-1)[:3] = (np.nan, np.inf, -0.0)
    b = kernels.bind("mean", np, x, axis=axis, keepdims=keepdims)
    assert str(b.choice) == "mean[compiled]"
    want = np.mean(x, axis=axis, keepdims=keepdims)
    got = b.fn(x)
    assert got.shape == want.shape and got.dtype == want.dtype and got.tobytes() == want.tobytes()
    wide = np.zeros(shape[:-1] + (2 * shape[-1],), dtype)  # (a strided view, another dtype: the generic binding)
    wide[..., ::2] = x
    assert b.fn(wide[..., ::2]).tobytes() == want.tobytes()
    assert b.fn(x.astype(np.float16)).dtype == np.float16
