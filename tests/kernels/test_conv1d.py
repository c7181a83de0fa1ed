"""``conv1d`` (``kernels/conv1d.py``): a 1-D (unit-height) convolution, its bias and its activation as
one compiled loop. It equals the reference kernel (and the reference activation after it) within float
rounding (rtol 1e-5 float32, 1e-12 float64) over stride, padding, dilation, groups (depthwise too),
with and without bias, every activation, strided views, empty dims and planned buffers; at batch 1
it equals ``conv2d[direct]`` and its activation pass bit for bit (the same sums in the same order);
the choosers take it where it applies and not where it does not (a 2-D layer, height padding, past
``conv1d_max_macs``, switched off), and a compiled program binds it."""
from __future__ import annotations

import numpy as np
import pytest

import lazyarray as la
from lazyarray import kernels
from lazyarray.kernels import conv1d
from lazyarray.kernels import conv2d as kconv
from lazyarray.kernels import conv_act as kact
from lazyarray.ops import registry
from lazyarray.ops.conv_act import activate

pytest.importorskip("numba")

CONV = registry.get("conv2d")
ACT = registry.get("conv2d_act")
RNG = np.random.default_rng(11)
TOL = {np.dtype(np.float32): {"rtol": 1e-5, "atol": 1e-5}, np.dtype(np.float64): {"rtol": 1e-12, "atol": 1e-12}}

CASES = [  # x shape, weight shape, stride, padding, dilation, groups
    ((1, 4, 1, 23), (16, 4, 1, 3), (1, 1), (0, 1), (1, 1), 1),  # conv1d_net's first layer
    ((8, 16, 1, 11), (16, 16, 1, 3), (1, 1), (0, 2), (1, 2), 1),  # its second, at batch 8
    ((2, 6, 1, 17), (8, 3, 1, 4), (1, 3), (0, 2), (1, 1), 2),  # grouped, stride 3
    ((3, 5, 1, 9), (5, 1, 1, 3), (1, 2), (0, 1), (1, 2), 5),  # depthwise
    ((2, 3, 1, 4), (4, 3, 1, 3), (1, 1), (0, 5), (1, 1), 1),  # taps wholly in the padding
    ((0, 4, 1, 8), (6, 4, 1, 3), (1, 1), (0, 1), (1, 1), 1),  # an empty batch
    ((2, 0, 1, 8), (6, 0, 1, 3), (1, 1), (0, 1), (1, 1), 1),  # no input channels: the bias alone
    ((2, 4, 1, 2), (6, 4, 1, 3), (1, 1), (0, 0), (1, 1), 1),  # no output positions
    ((1, 4, 1, 7), (0, 4, 1, 3), (1, 1), (0, 1), (1, 1), 1),  # no output channels
]
ACTS = [None, "relu", "hardsigmoid", "hardswish"]


def _arrays(case, dtype, bias=True):
    xs, ws = case[:2]
    x, w = RNG.standard_normal(xs).astype(dtype), RNG.standard_normal(ws).astype(dtype)
    return x, w, RNG.standard_normal(ws[0]).astype(dtype) if bias else None


def _want(x, w, b, stride, padding, dilation, groups, act):
    y = CONV.kernel(np, x, w, b, stride=stride, padding=padding, dilation=dilation, groups=groups)
    return y if act is None else activate(np, y, act, 0.2, 0.5)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("case", CASES, ids=[f"{c[0]}x{c[1]}g{c[5]}" for c in CASES])
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("act", ACTS)
def test_conv1d_equals_the_reference(dtype, case, bias, act):
    x, w, b = _arrays(case, dtype, bias)
    want = _want(x, w, b, *case[2:], act)
    got = conv1d.run_conv1d(np, x, w, b, *case[2:], None, act)
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_allclose(got, want, **TOL[want.dtype])


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_views_and_planned_buffers(dtype):
    base = RNG.standard_normal((3, 8, 2, 30)).astype(dtype)
    x = base[:, ::2, :1, ::2]  # a strided view: (3, 4, 1, 15)
    w = RNG.standard_normal((12, 4, 1, 6)).astype(dtype)[:, :, :, ::2]  # (12, 4, 1, 3), strided
    b = RNG.standard_normal(24).astype(dtype)[::2]
    want = _want(x, w, b, (1, 1), (0, 1), (1, 1), 1, "relu")
    out = np.full(want.shape, np.nan, dtype)
    assert conv1d.run_conv1d(np, x, w, b, (1, 1), (0, 1), (1, 1), 1, out, "relu") is out
    np.testing.assert_allclose(out, want, **TOL[want.dtype])
    other = np.full((12, 3, 1, 15), np.nan, dtype).transpose(1, 0, 2, 3)  # an output in another order
    assert conv1d.run_conv1d(np, x, w, b, (1, 1), (0, 1), (1, 1), 1, other, "relu") is other
    np.testing.assert_allclose(other, want, **TOL[want.dtype])


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_batch_one_equals_direct_and_its_activation_bit_for_bit(dtype):
    x, w, b = _arrays(CASES[0], dtype)
    with la.tuning(conv1d=False):
        assert kernels.choose(ACT, np, x, w, b, padding=(0, 1)).label() == "compiled, direct"
        want = kact.run_conv2d_act(np, x, w, b, padding=(0, 1))
    np.testing.assert_array_equal(kact.run_conv2d_act(np, x, w, b, padding=(0, 1)), want)


def test_the_choosers_take_it_where_it_applies_only():
    x, w, b = _arrays(CASES[1], np.float32)
    geo = {"padding": (0, 2), "dilation": (1, 2)}
    assert kernels.choose(CONV, np, x, w, **geo).impl is kconv.CONV1D
    assert kernels.choose(ACT, np, x, w, b, **geo) is conv1d.ACT_CHOICES[True]
    assert repr(conv1d.ACT_CHOICES[True]) == "conv2d_act[conv1d, rows]"  # (stride 1: the rows loop)
    with la.tuning(conv1d_rows=False):
        assert kernels.choose(ACT, np, x, w, b, **geo) is conv1d.ACT_CHOICE
        assert repr(conv1d.ACT_CHOICE) == "conv2d_act[conv1d]"
    with la.tuning(conv1d=False):  # switched off: the products
        assert kernels.choose(CONV, np, x, w, **geo).impl is not kconv.CONV1D
        assert kernels.choose(ACT, np, x, w, b, **geo).impl is not conv1d.CONV1D_ACT
    with la.tuning(conv1d_max_macs=1000):
        assert kernels.choose(CONV, np, x, w, **geo).impl is not kconv.CONV1D
    with la.tuning(jit=False):
        assert kernels.choose(CONV, np, x, w, **geo).impl is not kconv.CONV1D
    assert kernels.choose(CONV, np, x, w, padding=(1, 2)).impl is not kconv.CONV1D  # height padding
    x2 = RNG.standard_normal((1, 4, 3, 9)).astype(np.float32)  # a 2-D image
    assert kernels.choose(CONV, np, x2, RNG.standard_normal((6, 4, 1, 3)).astype(np.float32)).impl \
        is not kconv.CONV1D
    assert kernels.choose(CONV, np, x, w.astype(np.float64), **geo).impl is not kconv.CONV1D  # mixed dtypes


@pytest.mark.parametrize("act", [None, "hardswish"])
def test_a_bound_step_runs_it(act):
    x, w, b = _arrays(CASES[2], np.float32)
    geo = {"stride": (1, 3), "padding": (0, 2), "groups": 2}
    op, params = (CONV, geo) if act is None else (ACT, {**geo, "act": act})
    want = _want(x, w, b, (1, 3), (0, 2), (1, 1), 2, act)
    out = np.empty_like(want)
    bound = kernels.bind(op, np, x, w, b, out=out, **params)
    assert bound.choice == kernels.choose(op, np, x, w, b, out=out, **params)
    assert bound.choice.impl.name == "conv1d"
    assert bound.fn(x, w, b, out=out) is out
    np.testing.assert_allclose(out, want, **TOL[want.dtype])
    np.testing.assert_allclose(bound.fn(x, w, b), want, **TOL[want.dtype])


def test_an_eager_call_and_the_profile_name_it():
    x, w, b = _arrays(CASES[0], np.float32)
    with la.profile() as prof:
        y = la.nn.conv2d(la.array(x), la.array(w), la.array(b), padding=(0, 1))
    np.testing.assert_allclose(y.asnumpy(), _want(x, w, b, (1, 1), (0, 1), (1, 1), 1, None), **TOL[y.dtype])
    assert {e.impl for e in prof.events if e.name.endswith("conv2d")} == {"conv1d, rows"}
