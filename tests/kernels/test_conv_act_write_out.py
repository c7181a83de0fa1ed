"""nn.conv2d_act's ``write_out`` (``kernels/conv_act.py``: the relu taken in conv2d[blocked]'s write-out):
blocked's convolution, then ``compiled``'s relu pass, bit for bit (NaN, +-inf, -0.0; a last block of
fewer than four channels; no bias; strides; an output given; views; empty dims), eager and bound; the
other activations, the switch and inputs blocked does not take run the convolution, then the pass; the
op's reference kernel over the case table."""
from __future__ import annotations

import numpy as np
import pytest
from ops.cases import CASES

import lazyarray as la
from lazyarray import jit, kernels
from lazyarray.kernels import conv_act, conv_blocked
from lazyarray.kernels.conv2d import run_conv2d
from lazyarray.ops import registry

OP = registry.get("conv2d_act")
DTYPES = ("float32", "float64")
TOL = {"float32": {"rtol": 1e-4, "atol": 1e-5}, "float64": {"rtol": 1e-12, "atol": 1e-12}}
needs_numba = pytest.mark.skipif(not jit.enabled(), reason="compiled kernels off (numba missing or LAZYARRAY_JIT=0)")
# (x shape, weight shape, conv params): blocked's layers (a partial last block of channels, no bias, stride 2)
LAYERS = [((3, 8, 16, 16), (8, 8, 3, 3), {"padding": (1, 1)}), ((2, 5, 9, 7), (6, 5, 3, 3), {"padding": (1, 1)}),
          ((2, 4, 12, 10), (5, 4, 3, 2), {"stride": (2, 1), "padding": (1, 0)}),
          ((1, 8, 16, 16), (16, 8, 3, 3), {"stride": (2, 2), "padding": (1, 1)})]


def _special(rng, shape, dtype):
    v = (rng.standard_normal(shape) * 3).astype(dtype)
    flat = v.reshape(-1)
    if flat.size >= 5:
        flat[:5] = [np.nan, np.inf, -np.inf, -0.0, 0.0]
    return v


def _relu(y):
    """``conv_act``'s compiled relu pass on a copy (the values the unfused steps give)."""
    y = y.copy()
    assert conv_act._compiled(np, y, "relu", 0.2, 0.5) is y
    return y


def _unfused(x, w, b, **conv):
    """blocked's convolution, then the relu pass."""
    geo = la.ops.conv.geometry(conv.get("stride", (1, 1)), conv.get("padding", (0, 0)), (1, 1))
    return _relu(conv_blocked.conv2d_blocked(np, x, w, b, *geo, 1, None))


def _same(got, want):
    np.testing.assert_array_equal(got, want)
    keep = ~np.isnan(want)
    assert np.array_equal(np.signbit(got[keep]), np.signbit(want[keep]))


@needs_numba
@pytest.mark.parametrize("bias", [True, False], ids=["bias", "no-bias"])
@pytest.mark.parametrize("layer", range(len(LAYERS)))
@pytest.mark.parametrize("dtype", DTYPES)
def test_write_out_is_blockeds_conv_then_the_relu_pass_bit_for_bit(dtype, layer, bias):
    rng = np.random.default_rng(layer)
    xs, ws, conv = LAYERS[layer]
    x, w = _special(rng, xs, dtype), rng.standard_normal(ws).astype(dtype)
    w.reshape(-1)[0] = -0.0
    b = rng.standard_normal(ws[0]).astype(dtype) if bias else None
    choice = conv_act.choose_conv2d_act(np, x, w, b, act="relu", **conv)
    assert choice.impl is conv_act.WRITE_OUT and choice.label() == "write_out, blocked"
    want = _unfused(x, w, b, **conv)
    assert (want == 0).any() and np.isnan(want).any()  # (zeros and NaNs both written by the relu)
    _same(conv_act.run_conv2d_act(np, x, w, b, act="relu", **conv), want)
    out = np.full(want.shape, 7, dtype)
    assert conv_act.run_conv2d_act(np, x, w, b, act="relu", out=out, **conv) is out
    _same(out, want)
    view = np.concatenate([x, x], axis=3)[..., :xs[3]]  # (a non-contiguous input: conv2d's choice for it, the relu)
    assert not view.flags.c_contiguous
    _same(conv_act.run_conv2d_act(np, view, w, b, act="relu", **conv), _relu(run_conv2d(np, view, w, b, **conv)))
    big = np.full((want.shape[0], want.shape[1] + 2) + want.shape[2:], 7, dtype)
    part = big[:, 1:-1]  # (an output view whose images are C-ordered blocks: written in place)
    assert conv_act.run_conv2d_act(np, x, w, b, act="relu", out=part, **conv) is part
    _same(part, want)
    assert (big[:, 0] == 7).all() and (big[:, -1] == 7).all()


@needs_numba
@pytest.mark.parametrize("dtype", DTYPES)
def test_other_activations_and_the_switch_take_the_compiled_pass_with_its_values(dtype):
    rng = np.random.default_rng(5)
    xs, ws, conv = LAYERS[1]
    x, w, b = _special(rng, xs, dtype), rng.standard_normal(ws).astype(dtype), rng.standard_normal(ws[0]).astype(dtype)
    want = _unfused(x, w, b, **conv)
    with la.tuning(conv_act_write_out=False):
        assert conv_act.choose_conv2d_act(np, x, w, b, act="relu", **conv).label() == "compiled, blocked"
        _same(conv_act.run_conv2d_act(np, x, w, b, act="relu", **conv), want)
    y = run_conv2d(np, x, w, b, **conv)
    for act in ("hardsigmoid", "hardswish"):
        assert conv_act.choose_conv2d_act(np, x, w, b, act=act, **conv).label() == "compiled, blocked"
        h = y.copy()
        conv_act._compiled(np, h, act, 0.2, 0.5)
        _same(conv_act.run_conv2d_act(np, x, w, b, act=act, **conv), h)
    with la.tuning(conv_blocked=False):  # (another convolution: its values, then the same pass)
        c = conv_act.choose_conv2d_act(np, x, w, b, act="relu", **conv)
        assert c.impl is conv_act.COMPILED and c.label() != "compiled, blocked"
        np.testing.assert_allclose(conv_act.run_conv2d_act(np, x, w, b, act="relu", **conv), want, **TOL[dtype])


@pytest.mark.parametrize("dtype", DTYPES)
def test_the_runner_equals_the_reference_over_the_case_table(dtype):
    rng = np.random.default_rng(0)
    for s in CASES["conv2d_act"].samples(rng, dtype, False):
        want = OP.kernel(np, *s.args, **s.params)
        got = conv_act.run_conv2d_act(np, *s.args, **s.params)
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_allclose(got, want, **TOL[dtype], err_msg=s.name)


@pytest.mark.parametrize("dtype", DTYPES)
def test_empty_dims(dtype):
    rng = np.random.default_rng(7)
    for xs, ws in (((0, 8, 16, 16), (8, 8, 3, 3)), ((2, 0, 16, 16), (8, 0, 3, 3)), ((2, 8, 16, 16), (0, 8, 3, 3))):
        x, w = rng.standard_normal(xs).astype(dtype), rng.standard_normal(ws).astype(dtype)
        want = OP.kernel(np, x, w, padding=(1, 1), act="relu")
        got = conv_act.run_conv2d_act(np, x, w, padding=(1, 1), act="relu")
        assert got.shape == want.shape == (xs[0], ws[0], 16, 16)
        np.testing.assert_array_equal(got, want)


@needs_numba
@pytest.mark.parametrize("dtype", DTYPES)
def test_the_bound_step_runs_the_write_out_into_its_output_and_other_calls_elsewhere(dtype):
    rng = np.random.default_rng(8)
    xs, ws, conv = LAYERS[1]
    x, w, b = _special(rng, xs, dtype), rng.standard_normal(ws).astype(dtype), rng.standard_normal(ws[0]).astype(dtype)
    want = _unfused(x, w, b, **conv)
    out = np.empty(want.shape, dtype)
    bound = kernels.bind("conv2d_act", np, x, w, b, out=out, act="relu", **conv)
    assert bound.choice.impl is conv_act.WRITE_OUT and not bound.scratch
    assert bound.fn(x, w, b, out=out) is out
    _same(out, want)
    xf = np.asfortranarray(x)  # (an input of another order: conv2d's binding for it, then the pass)
    _same(bound.fn(xf, w, b, out=out), _relu(run_conv2d(np, xf, w, b, **conv)))
    _same(bound.fn(x, w, b, out=None), want)  # (no output)
    plain = kernels.bind("conv2d_act", np, x, w, out=out, act="relu", **conv)  # (no bias)
    assert plain.choice.impl is conv_act.WRITE_OUT
    _same(plain.fn(x, w, out=out), _unfused(x, w, None, **conv))


@needs_numba
def test_a_hybridized_net_names_write_out_and_equals_the_unfused_graph():
    rng = np.random.default_rng(9)
    x, w = rng.standard_normal((2, 8, 16, 16)).astype(np.float32), rng.standard_normal((8, 8, 3, 3)).astype(np.float32)
    b = rng.standard_normal(8).astype(np.float32)

    class Net(la.blocks.HybridBlock):
        def forward(self, a, k, c):
            return la.relu(la.nn.conv2d(a, k, c, padding=1))

    net = Net()
    net.hybridize()
    args = [la.array(a) for a in (x, w, b)]
    want = _unfused(x, w, b, padding=(1, 1))
    for _ in range(3):
        _same(net(*args).asnumpy(), want)
    assert "nn.conv2d_act[write_out, blocked]" in str(net.explain(*args))
    with la.tuning(conv_act_write_out=False):
        _same(net(*args).asnumpy(), want)


def test_the_impl_is_listed_with_its_fallback():
    assert conv_act.WRITE_OUT in kernels.IMPLS["conv2d_act"]
    assert conv_act.WRITE_OUT.fallback is conv_act.COMPILED
