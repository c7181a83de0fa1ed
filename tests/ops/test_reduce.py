"""Registry-driven checks of the reduce ops: NumPy values and dtypes, deferred recording,
finite-difference gradients."""
from __future__ import annotations

import numpy as np
import pytest

import lazyarray as la

from .checks import family_tests

FAMILY = ("reduce",)


test_forward_matches_numpy, test_deferred_matches_eager, test_gradient_matches_finite_differences = \
    family_tests(FAMILY)


# -- tailored checks ------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["sum", "mean", "max", "min", "argmax"])
@pytest.mark.parametrize("axis", [2, -3, (0, 5)])
def test_illegal_axis_names_op_axis_and_valid_range(name, axis):
    with pytest.raises(la.AxisError) as info:
        getattr(la, name)(la.ones((2, 3)), axis=axis)
    msg = str(info.value)
    assert msg.startswith(name + ":") and "[2,3]" in msg
    assert isinstance(info.value, ValueError)
    if name != "argmax" or isinstance(axis, int):
        assert "out of range" in msg and "-2..1" in msg


def test_repeated_axis_is_rejected():
    with pytest.raises(la.AxisError, match=r"sum: repeated axis in \(1, -1\); list each axis once"):
        la.sum(la.ones((2, 3)), axis=(1, -1))


def test_max_gradient_splits_ties_evenly():
    x = la.array([[1.0, 3.0, 3.0], [2.0, 0.0, 1.0]])
    x.attach_grad()
    with la.autograd.record():
        y = x.max(axis=1)
    y.backward()
    np.testing.assert_array_equal(x.grad.asnumpy(), [[0, 0.5, 0.5], [1, 0, 0]])


@pytest.mark.parametrize("src,shape", [((64, 10), (10,)), ((3, 4, 5), (4, 1)), ((3, 4), (3, 4)), ((2, 3), ()),
                                       ((5, 1, 6), (1, 6)), ((4, 6), (1, 6))])
def test_sum_to_writes_into_out_the_values_it_returns_without(src, shape):
    """``sum_to`` in a compiled graph writes into its planned buffer (the bias gradient): bit for bit
    what the allocating kernel returns, including nothing to sum (a copy) and kept 1-dims."""
    from lazyarray.ops import registry
    f = registry.get("sum_to").bind(np)
    x = np.random.default_rng(1).standard_normal(src).astype(np.float32)
    want = f(x, shape=shape)
    out = np.full(shape, np.nan, np.float32)
    got = f(x, shape=shape, out=out)
    assert got is out and got.dtype == np.float32
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("order", ["C", "F"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32])
def test_bias_gradient_column_sums_match_a_float64_sum(order, dtype):
    """The bias gradient's column sums (``sum_to`` (rows, n) -> (n,)) go through BLAS for floats
    (``ones @ x``), C- or F-ordered (a units-major buffer): as close to the exact sum as NumPy's
    reduce, and the same whether written into a planned buffer or allocated; integers stay exact."""
    from lazyarray.ops import registry
    f = registry.get("sum_to").bind(np)
    rng = np.random.default_rng(3)
    x = np.asarray(rng.standard_normal((1024, 40)) * 10, dtype=dtype, order=order)
    exact = x.astype(np.float64).sum(axis=0)
    got = f(x, shape=(40,))
    out = np.full((40,), -1, dtype)
    assert f(x, shape=(40,), out=out) is out and got.dtype == dtype
    np.testing.assert_array_equal(out, got)
    if dtype is np.int32:
        np.testing.assert_array_equal(got, x.sum(axis=0))
    else:
        err = np.abs(got - exact).max()
        assert err <= 2 * np.abs(x.sum(axis=0) - exact).max() + np.finfo(dtype).eps * np.abs(x).sum(axis=0).max()
