"""ops/conv_jit.py: the compiled im2col writes the columns NumPy's three copies write, bit for bit,
for every geometry, and declines what it does not cover."""
from __future__ import annotations

import numpy as np
import pytest

from lazyarray import jit
from lazyarray.ops import conv, conv_jit

pytest.importorskip("numba")

GEOMETRIES = [((3, 3), (1, 1), (1, 1), (1, 1)), ((1, 1), (1, 1), (0, 0), (1, 1)), ((3, 2), (2, 1), (0, 0), (1, 1)),
              ((2, 2), (3, 3), (1, 0), (1, 1)), ((3, 3), (1, 1), (2, 1), (2, 1)), ((3, 3), (2, 2), (1, 1), (1, 1))]


def _batch_last(a):
    return np.ascontiguousarray(a.transpose(1, 2, 3, 0)).transpose(3, 0, 1, 2)


def _numpy_columns(x, kernel, stride, padding, dilation):
    padded, interior, taps, cols = conv._im2col_views(np, x.shape, x.dtype, *kernel, stride, padding, dilation)
    if padded is not None:
        padded[...] = 0
    interior[...] = x.transpose(1, 2, 3, 0)
    cols[...] = taps
    return cols.copy()


@pytest.mark.parametrize("geometry", GEOMETRIES, ids=lambda g: f"k{g[0]}-s{g[1]}-p{g[2]}-d{g[3]}")
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_compiled_columns_equal_numpys_copies(monkeypatch, geometry, dtype):
    monkeypatch.setattr(jit, "_ON", [True])
    kernel, stride, padding, dilation = geometry
    x = _batch_last(np.random.default_rng(0).standard_normal((5, 3, 9, 7)).astype(dtype))
    x.transpose(1, 2, 3, 0)[0, 0, 0, :3] = [np.nan, -0.0, np.inf]
    want = _numpy_columns(x, kernel, stride, padding, dilation)
    cols = np.full(want.shape, 7.0, dtype)  # (stale values where the padding must write zeros)
    assert conv_jit.im2col(x, cols, stride, padding, dilation)
    np.testing.assert_array_equal(cols, want)
    assert np.array_equal(np.signbit(cols), np.signbit(want))


def test_what_it_does_not_cover_is_declined(monkeypatch):
    monkeypatch.setattr(jit, "_ON", [True])
    x = np.ones((4, 2, 5, 5), np.float32)
    cols = np.empty((2, 3, 3, 5, 5, 4), np.float32)
    geo = ((1, 1), (1, 1), (1, 1))
    assert not conv_jit.im2col(x, cols, *geo)  # C order, not batch last
    assert not conv_jit.im2col(_batch_last(x).astype(np.float16), cols.astype(np.float16), *geo)
    assert not conv_jit.im2col(_batch_last(x), cols.astype(np.float64), *geo)
    assert conv_jit.im2col(_batch_last(x), cols, *geo)
    monkeypatch.setattr(jit, "_ON", [False])
    assert not conv_jit.im2col(_batch_last(x), cols, *geo)
