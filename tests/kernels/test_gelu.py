"""kernels/gelu.py's gelu[compiled]: the float32 erf GELU in one compiled loop, bit for bit the
reference kernel (ops/norm.py's gelu_values) on every value, and where it does not apply (float64,
the tanh form, views, numba off) the other paths, with the reference's values."""
from __future__ import annotations

import numpy as np
import pytest

import lazyarray as la
from lazyarray import jit
from lazyarray.kernels import gelu as G
from lazyarray.ops import norm

pytestmark = pytest.mark.skipif(not jit.enabled(), reason="numba is not installed")
RNG = np.random.default_rng(11)


def _values(n, dtype=np.float32):
    special = np.array([np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-45, -1e-45, 1e-38, -1e-38, 3e38, -3e38,
                        4 * 2 ** 0.5, -4 * 2 ** 0.5, 5.6568546, -5.6568546, 1.0, -1.0], dtype)
    return np.concatenate([special, (RNG.standard_normal(n) * 4).astype(dtype)])


def _bits_equal(a, b):
    assert a.dtype == b.dtype and a.shape == b.shape
    np.testing.assert_array_equal(a.view(np.uint32), b.view(np.uint32))


def test_the_coefficients_are_the_references():
    assert tuple(G.COEFFS64[4:]) == norm.ERF32_P + norm.ERF32_Q and G.COEFFS64[1] == norm.ERF32_CLAMP
    np.testing.assert_array_equal(G.COEFFS32, G.COEFFS64.astype(np.float32))


@pytest.fixture(params=[False, True], ids=["float32", "float64"])
def erf_dtype(request):
    """Each test below in both of the tuning table's ``gelu_erf_float64`` settings."""
    with la.tuning(gelu_erf_float64=request.param):
        yield request.param


@pytest.mark.parametrize("shape", [(3000,), (7, 5, 64), (1,), (0, 4), (4 * G.CHUNK_ELEMENTS + 3,)])
def test_bit_for_bit_the_reference(shape, erf_dtype):
    size = int(np.prod(shape))
    x = _values(size)[:size].reshape(shape) if size else np.empty(shape, np.float32)
    assert G.choose_gelu_compiled(np, x).impl is G.COMPILED
    with np.errstate(all="ignore"):
        want = norm.gelu_values(np, x)
        _bits_equal(G.run_gelu_compiled(np, x), want)
        out = np.empty(shape, np.float32)
        assert G.run_gelu_compiled(np, x, out=out) is out
    _bits_equal(out, want)


def test_every_float32_between_minus_8_and_8_every_97th(erf_dtype):
    x = np.arange(0, np.float32(8).view(np.int32), 97, dtype=np.int32).view(np.float32)  # (subnormals too)
    x = np.concatenate([x, -x])
    _bits_equal(G._compiled(np, x), norm.gelu_values(np, x))


@pytest.mark.parametrize("case", ["float64", "tanh", "view", "jit_off"])
def test_where_it_does_not_apply_the_other_paths_run(case, erf_dtype):
    x = (RNG.standard_normal((6, 8)) * 3).astype(np.float64 if case == "float64" else np.float32)
    approximation = "tanh" if case == "tanh" else "none"
    if case == "view":
        x = x[:, ::2]
    with la.tuning(jit=case != "jit_off", gelu_tanh_compiled=False):  # (compiled_tanh: test_gelu_tanh.py)
        choice = G.choose_gelu_compiled(np, x, approximation=approximation)
        got = G.run_gelu_compiled(np, x, approximation=approximation)
    assert choice is None or choice.impl is not G.COMPILED
    np.testing.assert_array_equal(got, norm.gelu_values(np, x, approximation))


def test_a_program_names_it_and_its_later_runs_equal_its_first():
    x = la.array((RNG.standard_normal((4, 64)) * 3).astype(np.float32))
    net = la.blocks.HybridLambda(lambda v: la.nn.gelu(v))
    net.hybridize()
    first = net(x).asnumpy()
    assert "nn.gelu[compiled]" in str(net.explain(x))
    _bits_equal(net(x).asnumpy(), first)


def test_in_place_out_is_x(erf_dtype):
    """A fused group may hand the same register as input and output: each value is read before it is written."""
    x = _values(5000)
    want = norm.gelu_values(np, x)
    with np.errstate(all="ignore"):
        assert G.run_gelu_compiled(np, x, out=x) is x
    _bits_equal(x, want)


def test_the_error_against_the_exact_gelu(erf_dtype):
    """Over [-8, 8] (every 61st float32): within 1.15e-6 of the exact GELU computed in float32, 3e-7 in float64
    (onnxruntime's: 4.5e-7); 0 (or -0) from the clamp on for large negative x, x for large positive x."""
    special = pytest.importorskip("scipy.special")
    x = np.arange(0, np.float32(8).view(np.int32), 61, dtype=np.int32).view(np.float32)
    x = np.concatenate([x, -x])
    exact = 0.5 * x.astype(np.float64) * (1 + special.erf(x.astype(np.float64) * 2 ** -0.5))
    err = np.abs(G._compiled(np, x).astype(np.float64) - exact).max()
    assert err < (3e-7 if erf_dtype else 1.15e-6), err
    big = np.array([-1e30, -1e6, -12.0, 12.0, 1e6], np.float32)
    np.testing.assert_array_equal(G._compiled(np, big), [0.0, 0.0, 0.0, 12.0, 1e6])


def test_with_grad_gives_gelus_values(erf_dtype):
    """``gelu_with_grad`` (reference and chunks) computes its gelu as ``gelu_values`` does, in the same dtype."""
    x = (RNG.standard_normal((300, 1000)) * 4).astype(np.float32)
    want = norm.gelu_values(np, x)
    y, d = norm._gelu_with_grad(np, x)
    _bits_equal(y, want)
    y2, d2 = G.with_grad_in_chunks(np, x)
    _bits_equal(y2, want)
    _bits_equal(d2, d)
    assert d.dtype == np.float32 and np.all(np.abs(d - 0.5) <= 0.65)
