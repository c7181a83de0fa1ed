"""The pooling kernels (lazyarray/ops/pool.py) write the planned ``out`` buffer they are given,
with the values they return without one (which tests/blocks/test_conv_ops.py checks against NumPy)."""
from __future__ import annotations

import numpy as np
import pytest

from lazyarray.ops import pool


@pytest.mark.parametrize("kernel,params", [
    (pool._max_pool2d, {"kernel": (2, 2)}),
    (pool._max_pool2d, {"kernel": (3, 3), "stride": (2, 2), "padding": (1, 1), "ceil_mode": True}),
    (pool._max_pool2d, {"kernel": (1, 1)}),  # one tap: a copy
    (pool._avg_pool2d, {"kernel": (2, 2)}),
    (pool._avg_pool2d, {"kernel": (3, 3), "stride": (2, 2), "padding": (1, 1), "count_include_pad": False}),
], ids=["max2", "max3-s2-p1-ceil", "max1", "avg2", "avg3-exclude-pad"])
def test_pooling_writes_into_out(kernel, params):
    x = np.random.default_rng(0).standard_normal((2, 3, 7, 6)).astype("float32")
    expected = kernel(np, x, **params)
    out = np.full(expected.shape, np.nan, np.float32)
    assert kernel(np, x, out=out, **params) is out
    np.testing.assert_array_equal(out, expected)
    assert np.array_equal(kernel(np, x, **params), expected)  # x untouched, the result not shared
