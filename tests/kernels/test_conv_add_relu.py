"""nn.conv2d_add_relu's implementations (``kernels/conv_add_relu.py``): the runner equals the op's reference
kernel over the op's case table (float32, float64; within conv2d's implementations' rounding); ``write_out``
(the residual and the relu in conv2d[blocked]'s write-out) equals blocked's convolution, then NumPy's add
and maximum, bit for bit (NaN, +-inf, -0.0; a last block of fewer than four channels; no bias; strides;
views; empty dims), eager and bound; ``compiled`` and ``ufuncs`` where blocked does not take the layer or the
switches are off; the label names the convolution's implementation too."""
from __future__ import annotations

import numpy as np
import pytest
from ops.cases import CASES

import lazyarray as la
from lazyarray import jit, kernels
from lazyarray.kernels import conv_add_relu as car
from lazyarray.kernels import conv_blocked
from lazyarray.kernels.conv2d import run_conv2d
from lazyarray.ops import registry

OP = registry.get("conv2d_add_relu")
DTYPES = ("float32", "float64")
TOL = {"float32": {"rtol": 1e-4, "atol": 1e-5}, "float64": {"rtol": 1e-12, "atol": 1e-12}}
needs_numba = pytest.mark.skipif(not jit.enabled(), reason="compiled kernels off (numba missing or LAZYARRAY_JIT=0)")
# (x shape, weight shape, conv params): blocked's layers (a partial last block of channels, no bias, stride 2)
LAYERS = [((3, 8, 16, 16), (8, 8, 3, 3), {"padding": (1, 1)}), ((2, 5, 9, 7), (6, 5, 3, 3), {"padding": (1, 1)}),
          ((2, 4, 12, 10), (5, 4, 3, 2), {"stride": (2, 1), "padding": (1, 0)})]


def _special(rng, shape, dtype):
    v = (rng.standard_normal(shape) * 3).astype(dtype)
    flat = v.reshape(-1)
    if flat.size >= 5:
        flat[:5] = [np.nan, np.inf, -np.inf, -0.0, 0.0]
    return v


def _unfused(x, w, r, b, **conv):
    """blocked's convolution, then the recorded add and relu (NumPy's calls)."""
    y = conv_blocked.conv2d_blocked(np, x, w, b, *la.ops.conv.geometry(conv.get("stride", (1, 1)),
                                    conv.get("padding", (0, 0)), (1, 1)), 1, None)
    return np.maximum(y + r, 0)


def _same(got, want):
    np.testing.assert_array_equal(got, want)
    assert np.array_equal(np.signbit(got), np.signbit(want))


@pytest.mark.parametrize("dtype", DTYPES)
def test_the_runner_equals_the_reference_over_the_case_table(dtype):
    rng = np.random.default_rng(0)
    for s in CASES["conv2d_add_relu"].samples(rng, dtype, False):
        want = OP.kernel(np, *s.args, **s.params)
        got = car.run_conv2d_add_relu(np, *s.args, **s.params)
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_allclose(got, want, **TOL[dtype], err_msg=s.name)


@needs_numba
@pytest.mark.parametrize("bias", [True, False], ids=["bias", "no-bias"])
@pytest.mark.parametrize("layer", range(len(LAYERS)))
@pytest.mark.parametrize("dtype", DTYPES)
def test_write_out_is_blockeds_conv_then_add_and_relu_bit_for_bit(dtype, layer, bias):
    rng = np.random.default_rng(layer)
    xs, ws, conv = LAYERS[layer]
    x, w = _special(rng, xs, dtype), rng.standard_normal(ws).astype(dtype)
    b = rng.standard_normal(ws[0]).astype(dtype) if bias else None
    want_shape = _unfused(x, w, np.zeros(1, dtype), b, **conv).shape
    r = _special(rng, want_shape, dtype)
    choice = car.choose_conv2d_add_relu(np, x, w, r, b, **conv)
    assert choice.impl is car.WRITE_OUT and choice.label() == "write_out, blocked"
    want = _unfused(x, w, r, b, **conv)
    _same(car.run_conv2d_add_relu(np, x, w, r, b, **conv), want)
    out = np.full(want_shape, 7, dtype)
    assert car.run_conv2d_add_relu(np, x, w, r, b, out=out, **conv) is out
    _same(out, want)
    view = np.concatenate([x, x], axis=1)[:, ::2]  # (a non-contiguous input: conv2d's choice for it, then the pass)
    _same(car.run_conv2d_add_relu(np, view, w, r, b, **conv), np.maximum(run_conv2d(np, view, w, b, **conv) + r, 0))


@needs_numba
@pytest.mark.parametrize("dtype", DTYPES)
def test_a_residual_view_and_the_switches_take_the_compiled_pass_with_the_same_values(dtype):
    rng = np.random.default_rng(5)
    xs, ws, conv = LAYERS[0]
    x, w, b = _special(rng, xs, dtype), rng.standard_normal(ws).astype(dtype), rng.standard_normal(ws[0]).astype(dtype)
    r = _special(rng, xs[:3] + (2 * xs[3],), dtype)[..., ::2]  # (a residual view: not the write-out's)
    want = _unfused(x, w, r, b, **conv)
    assert car.choose_conv2d_add_relu(np, x, w, r, b, **conv).impl is car.COMPILED
    _same(car.run_conv2d_add_relu(np, x, w, r, b, **conv), want)
    rc = np.ascontiguousarray(r)
    with la.tuning(conv_residual_write_out=False):
        assert car.choose_conv2d_add_relu(np, x, w, rc, b, **conv).label() == "compiled, blocked"
        _same(car.run_conv2d_add_relu(np, x, w, rc, b, **conv), want)
    with la.tuning(conv_blocked=False):  # (another convolution: its values, then the same pass)
        c = car.choose_conv2d_add_relu(np, x, w, rc, b, **conv)
        assert c.impl is car.COMPILED and c.label() != "compiled, blocked"
        np.testing.assert_allclose(car.run_conv2d_add_relu(np, x, w, rc, b, **conv), want, **TOL[dtype])


@pytest.mark.parametrize("dtype", DTYPES)
def test_the_compiled_pass_and_ufuncs_equal_numpys_add_and_maximum_bit_for_bit(dtype):
    rng = np.random.default_rng(6)
    y, r = _special(rng, (2, 3, 4, 5), dtype), _special(rng, (2, 3, 4, 5), dtype)[::-1].copy()
    want = np.maximum(y + r, 0)
    got = y.copy()
    assert car._after(np, got, r) is (car.COMPILED if jit.enabled() else car.UFUNCS)
    _same(got, want)
    got = y.copy()
    car._ufuncs(np, got, r)
    _same(got, want)
    t = y.transpose(0, 2, 3, 1).copy().transpose(0, 3, 1, 2)  # (channels last: no flat pass, ufuncs)
    assert car._after(np, t, r) is car.UFUNCS
    _same(t, want)


@pytest.mark.parametrize("dtype", DTYPES)
def test_empty_dims(dtype):
    rng = np.random.default_rng(7)
    for xs, ws in (((0, 8, 16, 16), (8, 8, 3, 3)), ((2, 0, 16, 16), (8, 0, 3, 3)), ((2, 8, 16, 16), (0, 8, 3, 3))):
        x, w = rng.standard_normal(xs).astype(dtype), rng.standard_normal(ws).astype(dtype)
        shape = (xs[0], ws[0], 16, 16)
        r = rng.standard_normal(shape).astype(dtype)
        want = OP.kernel(np, x, w, r, padding=(1, 1))
        got = car.run_conv2d_add_relu(np, x, w, r, padding=(1, 1))
        assert got.shape == want.shape == shape
        np.testing.assert_array_equal(got, want)


@needs_numba
@pytest.mark.parametrize("dtype", DTYPES)
def test_the_bound_step_runs_the_write_out_into_its_output_and_other_calls_elsewhere(dtype):
    rng = np.random.default_rng(8)
    xs, ws, conv = LAYERS[1]
    x, w, b = _special(rng, xs, dtype), rng.standard_normal(ws).astype(dtype), rng.standard_normal(ws[0]).astype(dtype)
    r = _special(rng, (2, 6, 9, 7), dtype)
    want = _unfused(x, w, r, b, **conv)
    out = np.empty(want.shape, dtype)
    bound = kernels.bind("conv2d_add_relu", np, x, w, r, b, out=out, **conv)
    assert bound.choice.impl is car.WRITE_OUT and not bound.scratch
    assert bound.fn(x, w, r, b, out=out) is out
    _same(out, want)
    _same(bound.fn(x, w, np.asfortranarray(r), b, out=out), want)  # (a residual of another order: the pass)
    _same(bound.fn(x, w, r, b, out=None), want)  # (no output)
    plain = kernels.bind("conv2d_add_relu", np, x, w, r, out=out, **conv)  # (no bias)
    _same(plain.fn(x, w, r, out=out), _unfused(x, w, r, None, **conv))


def test_the_impls_are_listed_and_named():
    names = [i.name for i in kernels.IMPLS["conv2d_add_relu"]]
    assert names == ["write_out_region", "write_out", "compiled", "ufuncs"]
    assert car.WRITE_OUT.fallback is car.COMPILED and car.COMPILED.fallback is car.UFUNCS
