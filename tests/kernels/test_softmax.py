"""The row-chunked (threaded) softmax / log_softmax kernels for large arrays (lazyarray/kernels/softmax.py)
equal the plain ones."""
from __future__ import annotations

import os

import numpy as np
import pytest

import lazyarray as la
from lazyarray.kernels import softmax as ksoftmax


def _ref_softmax(x):
    x = x.astype("float64")
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


@pytest.mark.parametrize("n_threads", [1, 2])
@pytest.mark.parametrize("shape", [(700, 1000), (3, 300, 400), (5, 70000)])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_large_softmax_runs_by_rows_and_equals_numpy(shape, dtype, n_threads):
    x = (np.random.default_rng(0).standard_normal(shape) * 4).astype(dtype)
    assert ksoftmax.by_rows(np, x, -1)
    la.set_num_threads(n_threads)
    try:
        got = la.nn.softmax(la.array(x)).asnumpy()
        got_log = la.nn.log_softmax(la.array(x)).asnumpy()
    finally:
        la.set_num_threads(os.cpu_count() or 1)
    assert got.dtype == np.dtype(dtype) and got.shape == shape
    tol = 1e-5 if dtype == "float32" else 1e-12
    np.testing.assert_allclose(got, _ref_softmax(x), rtol=tol, atol=tol * 1e-3)
    np.testing.assert_allclose(got_log, np.log(_ref_softmax(x)), rtol=tol, atol=tol)


def test_small_or_other_axis_takes_the_plain_kernel():
    assert not ksoftmax.by_rows(np, np.zeros((10, 10), "float32"), -1)
    assert not ksoftmax.by_rows(np, np.zeros((1000, 1000), "float32"), 0)
    x = np.random.default_rng(1).standard_normal((1000, 600)).astype("float32")
    got = la.nn.softmax(la.array(x), axis=0).asnumpy()
    np.testing.assert_allclose(got, _ref_softmax(x.T).T, rtol=1e-5, atol=1e-8)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_in_place_is_the_reference_bit_for_bit_for_every_row_length(dtype):
    pytest.importorskip("numba")
    from lazyarray.kernels import softmax as sm
    from lazyarray.ops import registry

    ref = registry.get("softmax").kernel
    rng = np.random.default_rng(7)
    for n in range(1, sm.BLOCK + 1):
        x = (rng.standard_normal((4, 2, n)) * 5).astype(dtype)
        x[0, 0, :1] = -np.inf  # one masked score
        x[0, 1] = -np.inf  # a fully masked row: NaN, as the reference gives
        x[1, 0, n // 2] = np.nan
        x[2, 1] = -0.0
        want = ref(np, x)
        got = x.copy()
        assert sm.in_place(got)
        np.testing.assert_array_equal(got, want, err_msg=f"row length {n}")


def test_in_place_declines_what_it_does_not_take(monkeypatch):
    from lazyarray.kernels import softmax as sm

    for x in (np.ones((2, sm.BLOCK + 1), "float32"), np.ones((4, 3), "float32").T, np.ones((2, 3), "float16"),
              np.ones((2, 0), "float32")):
        before = x.copy()
        assert not sm.in_place(x)
        np.testing.assert_array_equal(x, before)
    monkeypatch.setattr(la.config, "jit", False)
    assert not sm.in_place(np.ones((2, 3), "float32"))
