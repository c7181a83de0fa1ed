"""The pooling kernels (lazyarray/ops/pool.py) write the planned ``out`` buffer they are given,
with the values they return without one (which tests/blocks/test_conv_ops.py checks against NumPy)."""
from __future__ import annotations

import numpy as np
import pytest

from lazyarray.kernels.pool import run_max_pool2d
from lazyarray.ops import pool

# every test twice: the NumPy kernels and the compiled max pools (pool_jit.py)
pytestmark = pytest.mark.usefixtures("kernel_path")


@pytest.mark.parametrize("kernel,params", [
    (run_max_pool2d, {"kernel": (2, 2)}),
    (run_max_pool2d, {"kernel": (3, 3), "stride": (2, 2), "padding": (1, 1), "ceil_mode": True}),
    (run_max_pool2d, {"kernel": (1, 1)}),  # one tap: a copy
    (pool.avg_pool2d_kernel, {"kernel": (2, 2)}),
    (pool.avg_pool2d_kernel, {"kernel": (3, 3), "stride": (2, 2), "padding": (1, 1), "count_include_pad": False}),
], ids=["max2", "max3-s2-p1-ceil", "max1", "avg2", "avg3-exclude-pad"])
def test_pooling_writes_into_out(kernel, params):
    x = np.random.default_rng(0).standard_normal((2, 3, 7, 6)).astype("float32")
    expected = kernel(np, x, **params)
    out = np.full(expected.shape, np.nan, np.float32)
    assert kernel(np, x, out=out, **params) is out
    np.testing.assert_array_equal(out, expected)
    assert np.array_equal(kernel(np, x, **params), expected)  # x untouched, the result not shared


# -- windows that tile the image: the two flat passes of ``_fold_tiles`` -----------------------------
_TILINGS = [((2, 2), (2, 3, 12, 12)), ((2, 2), (1, 16, 6, 6)), ((3, 3), (2, 2, 9, 6)),
            ((2, 3), (2, 3, 4, 9)), ((1, 2), (2, 2, 3, 8)), ((2, 1), (2, 2, 8, 3)), ((1, 1), (1, 2, 3, 3)),
            ((4, 4), (1, 1, 4, 4))]  # the last: one window covers the image


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("kernel,shape", _TILINGS, ids=[f"{k[0]}x{k[1]}-{s[2]}x{s[3]}" for k, s in _TILINGS])
@pytest.mark.parametrize("which", ["max", "avg"])
def test_tiling_windows_match_the_reference(which, kernel, shape, dtype):
    from ops.cases import _avg_pool2d_ref, _max_pool2d_ref
    x = np.random.default_rng(1).standard_normal(shape).astype(dtype)
    params = {"kernel": kernel, "stride": kernel}
    assert pool._tiles(x, kernel, kernel, (0, 0), (0, 0))
    fn, ref = (run_max_pool2d, _max_pool2d_ref) if which == "max" else (pool.avg_pool2d_kernel, _avg_pool2d_ref)
    expected = ref(x, **params)
    got = fn(np, x, **params)
    assert got.shape == expected.shape and got.dtype == x.dtype
    tol = 1e-6 if dtype == "float32" else 1e-12
    np.testing.assert_allclose(got, expected, rtol=tol, atol=tol)
    out = np.full(expected.shape, np.nan, dtype)
    assert fn(np, x, out=out, **params) is out
    np.testing.assert_array_equal(out, got)
    strided = np.full(expected.shape[:3] + (2 * expected.shape[3],), np.nan, dtype)[..., ::2]  # not contiguous
    assert fn(np, x, out=strided, **params) is strided
    np.testing.assert_array_equal(strided, got)


def test_tiling_max_pool_of_integers_and_of_a_view():
    from ops.cases import _max_pool2d_ref
    rng = np.random.default_rng(2)
    xi = rng.integers(-50, 50, (2, 3, 6, 4)).astype(np.int32)
    got = run_max_pool2d(np, xi)
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, _max_pool2d_ref(xi.astype(np.float64)))
    view = rng.standard_normal((2, 6, 4, 3)).astype(np.float32).transpose(0, 3, 1, 2)  # NCHW, not contiguous
    assert not pool._tiles(view, (2, 2), (2, 2), (0, 0), (0, 0))  # the tap views instead
    np.testing.assert_array_equal(run_max_pool2d(np, view), _max_pool2d_ref(view))
    remainder = rng.standard_normal((1, 2, 5, 4)).astype(np.float32)  # a row left over: not a tiling
    assert not pool._tiles(remainder, (2, 2), (2, 2), (0, 0), (0, 0))
    np.testing.assert_array_equal(run_max_pool2d(np, remainder), _max_pool2d_ref(remainder))


def _stored_batch_last(a):
    """``a`` (NCHW) as the executor stores it batch last: an NCHW view of (C, H, W, N) memory."""
    return np.ascontiguousarray(a.transpose(1, 2, 3, 0)).transpose(3, 0, 1, 2)


@pytest.mark.parametrize("kernel,shape", _TILINGS[:6], ids=[f"{k[0]}x{k[1]}-{s[2]}x{s[3]}" for k, s in _TILINGS[:6]])
@pytest.mark.parametrize("where", ["input", "both"])
@pytest.mark.parametrize("which", ["max", "avg"])
def test_tiling_windows_of_batch_last_arrays(which, where, kernel, shape):
    """Tiles of an input stored batch last fold in its memory order (``_fold_batch_last_tiles``),
    into a batch-last ``out`` in place, or a C-order one, or a new array: the reference's values."""
    from lazyarray.ops.conv import is_batch_last as _batch_last
    from ops.cases import _avg_pool2d_ref, _max_pool2d_ref
    x = np.random.default_rng(3).standard_normal((max(shape[0], 2),) + shape[1:]).astype("float32")
    xb = _stored_batch_last(x)
    assert _batch_last(xb) and pool._tiles(xb, kernel, kernel, (0, 0), (0, 0))
    fn, ref = (run_max_pool2d, _max_pool2d_ref) if which == "max" else (pool.avg_pool2d_kernel, _avg_pool2d_ref)
    params = {"kernel": kernel, "stride": kernel}
    expected = ref(x, **params)
    np.testing.assert_allclose(fn(np, xb, **params), expected, rtol=1e-6, atol=1e-6)
    blank = np.full(expected.shape, np.nan, np.float32)
    out = _stored_batch_last(blank) if where == "both" else blank
    assert fn(np, xb, out=out, **params) is out
    np.testing.assert_allclose(out, expected, rtol=1e-6, atol=1e-6)
