"""Registry-driven checks of the transformer ops (``layer_norm``, ``gelu``, ``masked_softmax`` and their
gradient ops), and the behaviours the table cannot state."""
from __future__ import annotations

import math

import numpy as np
import pytest

import lazyarray as la
from lazyarray.kernels import gelu as kgelu
from lazyarray.ops import norm as norm_ops
from lazyarray.ops.norm import erf, erf_fn

from .cases import gelu_ref
from .checks import family_tests

FAMILY = ("norm",)

test_forward_matches_numpy, test_deferred_matches_eager, test_gradient_matches_finite_differences = \
    family_tests(FAMILY)


# -- gelu ---------------------------------------------------------------------------------------------
def test_erf_matches_math_erf_to_float64_precision():
    x = np.linspace(-6.0, 6.0, 241)
    want = np.array([math.erf(v) for v in x])
    np.testing.assert_allclose(erf_fn(np)(x), want, rtol=1e-14, atol=1e-16)


@pytest.mark.parametrize("approximation", ["none", "tanh"])
def test_gelu_float32_over_a_wide_range(approximation):
    x = np.linspace(-12.0, 12.0, 1001).astype(np.float32)
    got = la.nn.gelu(la.array(x), approximation=approximation).asnumpy()
    assert got.dtype == np.float32
    # float32 exact GELU: the rational erf's error (< 5e-7) times |x| / 2 bounds the absolute error
    np.testing.assert_allclose(got, gelu_ref(x.astype(np.float64), approximation), rtol=2e-6, atol=1.5e-6)
    assert got[0] == 0.0 and got[-1] == pytest.approx(12.0)


def test_gelu_tanh_is_close_to_exact():
    x = la.array(np.linspace(-5, 5, 101))
    diff = np.abs(la.nn.gelu(x, approximation="tanh").asnumpy() - la.nn.gelu(x).asnumpy())
    assert 0 < diff.max() < 1e-3


def test_gelu_rejects_integers_and_unknown_approximations():
    with pytest.raises(la.LazyArrayError, match="gelu.*floating"):
        la.nn.gelu(la.array([1, 2]))
    with pytest.raises(la.LazyArrayError, match="gelu.*floating"), la.deferred():
        la.nn.gelu(la.array([1, 2]))
    with pytest.raises(la.LazyArrayError, match="approximation.*tanh"):
        la.nn.gelu(la.ones(2), approximation="sigmoid")


@pytest.mark.parametrize("approximation", ["none", "tanh"])
def test_gelu_runs_inside_a_fused_group_forward_and_backward(approximation):
    rng = np.random.default_rng(0)
    xv = rng.standard_normal((64, 33)).astype(np.float32)
    x = la.sym.var("x", shape=xv.shape, dtype="float32")
    sym = la.sym.gelu(x * 2.0 + 1.0, approximation=approximation) * 3.0
    op = la.CachedOp(sym, fuse=True)
    got = op(la.array(xv)).asnumpy()
    np.testing.assert_allclose(got, 3.0 * gelu_ref(2 * xv + 1, approximation), rtol=1e-5, atol=5e-6)
    # the backward through the compiled graph equals the eager tape's
    a, b = la.array(xv), la.array(xv)
    a.attach_grad()
    b.attach_grad()
    with la.autograd.record():
        (op(a) ** 2).sum().backward()
        (la.nn.gelu(b * 2.0 + 1.0, approximation=approximation) * 3.0).square().sum().backward()
    np.testing.assert_allclose(a.grad.asnumpy(), b.grad.asnumpy(), rtol=1e-5, atol=1e-5)


# -- masked softmax -----------------------------------------------------------------------------------------
def test_a_fully_masked_row_gives_zeros_and_zero_gradients():
    x = la.array(np.random.default_rng(1).standard_normal((2, 4)))
    mask = la.array(np.array([[True, False, True, True], [False] * 4]))
    x.attach_grad()
    with la.autograd.record():
        y = la.nn.masked_softmax(x, mask)
        (y * la.array(np.arange(8.0).reshape(2, 4))).sum().backward()
    yv, gv = y.asnumpy(), x.grad.asnumpy()
    assert np.isfinite(yv).all() and np.isfinite(gv).all()
    np.testing.assert_array_equal(yv[1], 0.0)
    np.testing.assert_array_equal(gv[1], 0.0)
    assert yv[0, 1] == 0.0 and gv[0, 1] == 0.0
    assert yv[0].sum() == pytest.approx(1.0)


def test_masked_softmax_with_every_position_kept_is_softmax():
    x = la.array(np.random.default_rng(2).standard_normal((3, 5)))
    got = la.nn.masked_softmax(x, la.ones((5,), dtype="bool")).asnumpy()
    np.testing.assert_allclose(got, la.nn.softmax(x).asnumpy(), rtol=1e-14)


def test_masked_softmax_errors_name_the_op_and_the_fix():
    x = la.ones((2, 3))
    with pytest.raises(la.LazyArrayError, match="masked_softmax.*mask must be bool"):
        la.nn.masked_softmax(x, la.ones((2, 3)))
    with pytest.raises(la.LazyArrayError, match="masked_softmax.*broadcast to the shape of x"):
        la.nn.masked_softmax(x, la.ones((4, 2, 3), dtype="bool"))


# -- layer norm ---------------------------------------------------------------------------------------------
def test_layer_norm_rows_have_zero_mean_and_unit_variance():
    x = la.array(np.random.default_rng(3).standard_normal((4, 7)) * 5 + 2)
    y = la.nn.layer_norm(x, la.ones(7, dtype="float64"), la.zeros(7, dtype="float64"), eps=1e-12).asnumpy()
    np.testing.assert_allclose(y.mean(-1), 0.0, atol=1e-12)
    np.testing.assert_allclose(y.var(-1), 1.0, rtol=1e-9)


def test_layer_norm_errors_name_the_op_and_the_shapes():
    with pytest.raises(la.LazyArrayError, match=r"layer_norm.*gamma \[5\].*\(7,\)"):
        la.nn.layer_norm(la.ones((2, 7)), la.ones(5), la.zeros(7))
    with pytest.raises(la.LazyArrayError, match="layer_norm.*eps must be > 0"):
        la.nn.layer_norm(la.ones((2, 7)), la.ones(7), la.zeros(7), eps=0.0)


def test_the_float32_erf_is_within_5e_7_of_math_erf():
    x = np.linspace(-7.0, 7.0, 140001)
    want = np.array([math.erf(v) for v in x])
    got = erf(np, x.astype(np.float32))
    assert got.dtype == np.float32
    err = np.abs(got.astype(np.float64) - want)
    assert err.max() < 5e-7, err.max()


@pytest.mark.parametrize("approximation", ["none", "tanh"])
def test_large_gelu_kernels_run_by_chunks_with_the_same_values(approximation, monkeypatch):
    """Above 4 * CHUNK_ELEMENTS the NumPy kernels go chunk by chunk (also over threads): same values,
    also into a given out= buffer that is one of the inputs (as in a fused group)."""
    x = np.random.default_rng(4).standard_normal((300, 1000)).astype(np.float32) * 3
    g = np.random.default_rng(5).standard_normal((300, 1000)).astype(np.float32)
    assert x.size > 4 * kgelu.CHUNK_ELEMENTS
    y = kgelu.run_gelu(np, x, approximation=approximation)
    np.testing.assert_allclose(y, gelu_ref(x.astype(np.float64), approximation), rtol=2e-6, atol=3e-6)
    d = kgelu.run_gelu_grad(np, g, x, approximation=approximation)
    both = kgelu.run_with_grad(np, x, approximation=approximation)
    # the value and slope from one pass are those of gelu and gelu_grad (the same operations)
    np.testing.assert_array_equal(both[0], y)
    np.testing.assert_array_equal(both[1] * g, d)
    monkeypatch.setattr(kgelu, "CHUNK_ELEMENTS", 10 ** 9)  # the whole-array path, for reference
    np.testing.assert_allclose(d, kgelu.run_gelu_grad(np, g, x, approximation=approximation), rtol=1e-6, atol=1e-7)
    whole = kgelu.run_with_grad(np, x, approximation=approximation)
    np.testing.assert_allclose(both[0], whole[0], rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(both[1], whole[1], rtol=1e-6, atol=1e-7)
    monkeypatch.undo()
    x2 = x.copy()
    kgelu.run_gelu(np, x2, approximation=approximation, out=x2)
    np.testing.assert_array_equal(x2, y)


def test_batch_norm_writes_into_out():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 3, 4, 5)).astype("float32")
    gamma, beta, mean = (rng.standard_normal(3).astype("float32") for _ in range(3))
    var = rng.uniform(0.5, 2.0, 3).astype("float32")
    c = (slice(None), None, None)
    expected = (x - mean[c]) / np.sqrt(var[c] + 1e-5) * gamma[c] + beta[c]
    out = np.full(x.shape, np.nan, np.float32)
    assert norm_ops.batch_norm_kernel(np, x, gamma, beta, mean, var, out=out) is out
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(norm_ops.batch_norm_kernel(np, x, gamma, beta, mean, var), expected, rtol=1e-5, atol=1e-6)
