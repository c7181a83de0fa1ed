"""kernels/gelu.py's gelu[compiled_tanh]: the float32 tanh GELU as x / (1 + e^(-2u)) in float64 in one
compiled loop, rounded once: within 0.51 ulp of the exact tanh GELU (the reference's float32 operations
are up to 4.8e-7 away: 1 + tanh cancels for negative x), the reference's special values, and where it
does not apply (float64, views, the switch off, numba off) the reference's values bit for bit."""
from __future__ import annotations

import numpy as np
import pytest

import lazyarray as la
from lazyarray import jit
from lazyarray.kernels import gelu as G
from lazyarray.ops import norm

pytestmark = pytest.mark.skipif(not jit.enabled(), reason="numba is not installed")
RNG = np.random.default_rng(12)


def _exact(x):
    """The tanh GELU in float64, as x * sigmoid(2u) (no cancellation)."""
    xd = x.astype(np.float64)
    with np.errstate(over="ignore"):
        return xd / (1 + np.exp(-2 * np.sqrt(2 / np.pi) * (xd + 0.044715 * xd ** 3)))


def _ulps(got, x):
    exact = _exact(x)
    ulp = np.spacing(np.maximum(np.abs(exact), np.finfo(np.float32).tiny).astype(np.float32)).astype(np.float64)
    return np.abs(got.astype(np.float64) - exact) / ulp


@pytest.mark.parametrize("shape", [(3000,), (7, 5, 64), (1,), (0, 4), (4 * G.CHUNK_ELEMENTS + 3,)])
def test_within_half_an_ulp_of_the_exact_and_close_to_the_reference(shape):
    x = (RNG.standard_normal(shape) * 4).astype(np.float32)
    assert G.choose_gelu_compiled(np, x, approximation="tanh").impl is G.COMPILED_TANH
    got = G.run_gelu_compiled(np, x, approximation="tanh")
    out = np.empty(shape, np.float32)
    assert G.run_gelu_compiled(np, x, approximation="tanh", out=out) is out
    np.testing.assert_array_equal(out, got)
    assert got.shape == shape and got.dtype == np.float32
    if x.size:
        assert _ulps(got, x).max() <= 0.51
    with np.errstate(all="ignore"):
        np.testing.assert_allclose(got, norm.gelu_values(np, x, "tanh"), rtol=2e-6, atol=5e-7)


def test_every_float32_between_minus_12_and_12_every_89th():
    x = np.arange(0, np.float32(12).view(np.int32), 89, dtype=np.int32).view(np.float32)  # (subnormals too)
    x = np.concatenate([x, -x])
    got = G._compiled_tanh(np, x)
    assert _ulps(got, x).max() <= 0.51
    with np.errstate(all="ignore"):
        assert np.abs(got - norm.gelu_values(np, x, "tanh")).max() <= 4.8e-7


def test_special_values_as_the_reference():
    x = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-45, -1e-45, 3e38, -3e38, -1e6, 1e6, -20.0], np.float32)
    got = G._compiled_tanh(np, x)
    want = np.array([np.nan, np.inf, np.nan, 0.0, -0.0, 0.0, -0.0, 3e38, -0.0, -0.0, 1e6, -0.0], np.float32)
    np.testing.assert_array_equal(got, want)
    assert np.signbit(got[4]) and np.signbit(got[8])


def test_in_place_out_is_x():
    x = (RNG.standard_normal(5000) * 4).astype(np.float32)
    want = G._compiled_tanh(np, x.copy())
    assert G.run_gelu_compiled(np, x, approximation="tanh", out=x) is x
    np.testing.assert_array_equal(x, want)


@pytest.mark.parametrize("case", ["float64", "view", "switched_off", "jit_off"])
def test_where_it_does_not_apply_the_reference_runs(case):
    x = (RNG.standard_normal((6, 8)) * 3).astype(np.float64 if case == "float64" else np.float32)
    if case == "view":
        x = x[:, ::2]
    with la.tuning(jit=case != "jit_off", gelu_tanh_compiled=case != "switched_off"):
        choice = G.choose_gelu_compiled(np, x, approximation="tanh")
        got = G.run_gelu_compiled(np, x, approximation="tanh")
    assert choice is None or choice.impl is not G.COMPILED_TANH
    np.testing.assert_array_equal(got, norm.gelu_values(np, x, "tanh"))


def test_a_program_names_it_and_its_later_runs_equal_its_first():
    x = la.array((RNG.standard_normal((4, 64)) * 3).astype(np.float32))
    net = la.blocks.HybridLambda(lambda v: la.nn.gelu(v, approximation="tanh"))
    net.hybridize()
    first = net(x).asnumpy()
    assert "nn.gelu[compiled_tanh]" in str(net.explain(x))
    np.testing.assert_array_equal(net(x).asnumpy(), first)
    assert _ulps(first, x.asnumpy()).max() <= 0.51
