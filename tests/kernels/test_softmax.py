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
