"""kernels/conv_jit.py: the compiled im2col writes the columns NumPy's three copies write, bit for bit,
for every geometry, and declines what it does not cover."""
from __future__ import annotations

import numpy as np
import pytest
from ops.test_conv_grad import GRAD_GEOMETRIES

import lazyarray as la
from lazyarray.kernels import conv2d_grad, conv_batch_last, conv_jit
from lazyarray.kernels.conv2d import run_conv2d

pytest.importorskip("numba")

GEOMETRIES = [((3, 3), (1, 1), (1, 1), (1, 1)), ((1, 1), (1, 1), (0, 0), (1, 1)), ((3, 2), (2, 1), (0, 0), (1, 1)),
              ((2, 2), (3, 3), (1, 0), (1, 1)), ((3, 3), (1, 1), (2, 1), (2, 1)), ((3, 3), (2, 2), (1, 1), (1, 1))]


def _batch_last(a):
    return np.ascontiguousarray(a.transpose(1, 2, 3, 0)).transpose(3, 0, 1, 2)


def _numpy_columns(x, kernel, stride, padding, dilation):
    padded, interior, taps, cols = conv_batch_last.im2col_views(np, x.shape, x.dtype, *kernel, stride, padding, dilation)
    if padded is not None:
        padded[...] = 0
    interior[...] = x.transpose(1, 2, 3, 0)
    cols[...] = taps
    return cols.copy()


@pytest.mark.parametrize("geometry", GEOMETRIES, ids=lambda g: f"k{g[0]}-s{g[1]}-p{g[2]}-d{g[3]}")
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_compiled_columns_equal_numpys_copies(monkeypatch, geometry, dtype):
    monkeypatch.setattr(la.config, "jit", True)
    kernel, stride, padding, dilation = geometry
    x = _batch_last(np.random.default_rng(0).standard_normal((5, 3, 9, 7)).astype(dtype))
    x.transpose(1, 2, 3, 0)[0, 0, 0, :3] = [np.nan, -0.0, np.inf]
    want = _numpy_columns(x, kernel, stride, padding, dilation)
    cols = np.full(want.shape, 7.0, dtype)  # (stale values where the padding must write zeros)
    assert conv_jit.im2col(x, cols, stride, padding, dilation)
    np.testing.assert_array_equal(cols, want)
    assert np.array_equal(np.signbit(cols), np.signbit(want))


def test_what_it_does_not_cover_is_declined(monkeypatch):
    monkeypatch.setattr(la.config, "jit", True)
    x = np.ones((4, 2, 5, 5), np.float32)
    cols = np.empty((2, 3, 3, 5, 5, 4), np.float32)
    geo = ((1, 1), (1, 1), (1, 1))
    assert not conv_jit.im2col(x, cols, *geo)  # C order, not batch last
    assert not conv_jit.im2col(_batch_last(x).astype(np.float16), cols.astype(np.float16), *geo)
    assert not conv_jit.im2col(_batch_last(x), cols.astype(np.float64), *geo)
    assert conv_jit.im2col(_batch_last(x), cols, *geo)
    monkeypatch.setattr(la.config, "jit", False)
    assert not conv_jit.im2col(_batch_last(x), cols, *geo)




@pytest.mark.parametrize("geometry", GRAD_GEOMETRIES, ids=lambda g: f"k{g[0]}-s{g[1]}-p{g[2]}-d{g[3]}")
@pytest.mark.parametrize("shape", [(5, 3, 9, 7), (3, 2, 12, 10), (1, 3, 9, 7)],
                         ids=["small-images", "larger-images", "one-image"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_conv_gradients_equal_the_numpy_path_bit_for_bit(both_paths, geometry, shape, dtype):
    """The compiled im2col feeds the same product (weight gradient); the compiled scatter adds the
    same terms in the same order (input gradient): equal bits, not just close values."""
    kernel, stride, padding, dilation = geometry
    rng = np.random.default_rng(1)
    x = rng.standard_normal(shape).astype(dtype)
    x[0, 0, 0, :2] = [np.inf, -0.0]
    w = rng.standard_normal((4, shape[1]) + kernel).astype(dtype)
    y = run_conv2d(np, x, w, None, stride, padding, dilation)
    g = rng.standard_normal(y.shape).astype(dtype)
    for fn in (lambda: conv2d_grad.run_weight_grad(np, g, x, kernel, stride, padding, dilation),
               lambda: conv2d_grad.run_input_grad(np, g, w, x, stride, padding, dilation)):
        got, want = both_paths(fn)
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_array_equal(got, want)


def test_the_compiled_scatters_run_and_decline_what_they_do_not_cover(monkeypatch):
    monkeypatch.setattr(la.config, "jit", True)
    parts = np.ones((2, 3, 5, 5, 3, 3), np.float32)
    assert conv_jit.scatter_windows(np.zeros((2, 3, 7, 7), np.float32), parts, (1, 1), (1, 1))
    assert not conv_jit.scatter_windows(np.zeros((2, 3, 7, 7)), parts, (1, 1), (1, 1))  # float64 into float32
    buf = np.zeros(2 * 3 * 7 * 7 * 9, np.float32)
    assert not conv_jit.scatter_windows(buf[:2 * 3 * 7 * 7].reshape(2, 3, 7, 7),
                                        buf[:2 * 3 * 5 * 5 * 9].reshape(parts.shape), (1, 1), (1, 1))  # overlapping
    cols = np.ones((3, 3, 3, 5, 5, 2), np.float32)
    assert conv_jit.add_columns(np.zeros((3, 7, 7, 2), np.float32), cols, (1, 1), (1, 1))
    assert not conv_jit.add_columns(np.zeros((3, 7, 7, 2)), cols, (1, 1), (1, 1))  # float64 into float32
    monkeypatch.setattr(la.config, "jit", False)
    assert not conv_jit.scatter_windows(np.zeros((2, 3, 7, 7), np.float32), parts, (1, 1), (1, 1))
    assert not conv_jit.add_columns(np.zeros((3, 7, 7, 2), np.float32), cols, (1, 1), (1, 1))
