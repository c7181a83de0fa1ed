"""``conv1d``'s ``rows`` loop (``kernels/conv1d_rows.py``): a stride-1 1-D convolution as passes over one
zero-padded row per input channel. It equals ``conv1d``'s first loop bit for bit (the same sums in the
same order) and the reference within float rounding, over batch, padding, dilation, groups (depthwise
and a last block of fewer than four output channels too), taps longer than three, with and without
bias, every activation, strided views and an output in another memory order, empty dims; the chooser
notes it (``conv2d[conv1d, rows]``) where the stride is 1 and ``conv1d_rows`` is on, and a compiled
step binds the loop its choice names, reading no scratch (no workspace planned)."""
from __future__ import annotations

import numpy as np
import pytest

import lazyarray as la
from lazyarray import kernels
from lazyarray.kernels import conv1d
from lazyarray.kernels.scratch_free import reads_no_scratch
from lazyarray.ops import registry
from lazyarray.ops.conv_act import activate

pytest.importorskip("numba")

CONV = registry.get("conv2d")
ACT = registry.get("conv2d_act")
RNG = np.random.default_rng(5)
TOL = {np.dtype(np.float32): {"rtol": 1e-5, "atol": 1e-5}, np.dtype(np.float64): {"rtol": 1e-12, "atol": 1e-12}}

CASES = [  # x shape, weight shape, padding, dilation, groups (stride 1)
    ((1, 4, 1, 23), (16, 4, 1, 3), (0, 1), (1, 1), 1),  # conv1d_net's first layer
    ((8, 16, 1, 11), (16, 16, 1, 3), (0, 2), (1, 2), 1),  # its second, at batch 8
    ((3, 6, 1, 17), (10, 3, 1, 5), (0, 2), (1, 1), 2),  # grouped, five taps, 5 channels a group
    ((2, 5, 1, 9), (5, 1, 1, 4), (0, 3), (1, 2), 5),  # depthwise, four taps
    ((2, 3, 1, 4), (7, 3, 1, 3), (0, 5), (1, 1), 1),  # taps wholly in the padding
    ((5, 2, 1, 40), (3, 2, 1, 1), (0, 0), (1, 1), 1),  # one tap, fewer than four output channels
    ((0, 4, 1, 8), (6, 4, 1, 3), (0, 1), (1, 1), 1),  # an empty batch
    ((2, 0, 1, 8), (6, 0, 1, 3), (0, 1), (1, 1), 1),  # no input channels: the bias alone
    ((2, 4, 1, 2), (6, 4, 1, 3), (0, 0), (1, 1), 1),  # no output positions
    ((1, 4, 1, 7), (0, 4, 1, 3), (0, 1), (1, 1), 1),  # no output channels
]
ACTS = [None, "relu", "hardsigmoid", "hardswish"]


def _arrays(case, dtype, bias=True):
    xs, ws = case[:2]
    x, w = RNG.standard_normal(xs).astype(dtype), RNG.standard_normal(ws).astype(dtype)
    return x, w, RNG.standard_normal(ws[0]).astype(dtype) if bias else None


def _want(x, w, b, padding, dilation, groups, act):
    y = CONV.kernel(np, x, w, b, stride=(1, 1), padding=padding, dilation=dilation, groups=groups)
    return y if act is None else activate(np, y, act, 0.2, 0.5)


def _both(x, w, b, padding, dilation, groups, act, out=None):
    """The rows loop's output and the first loop's."""
    geo = ((1, 1), padding, dilation, groups)
    got = conv1d.run_conv1d(np, x, w, b, *geo, out, act)
    with la.tuning(conv1d_rows=False):
        first = conv1d.run_conv1d(np, x, w, b, *geo, None, act)
    return got, first


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("case", CASES, ids=[f"{c[0]}x{c[1]}g{c[4]}" for c in CASES])
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("act", ACTS)
def test_rows_equals_the_first_loop_bit_for_bit_and_the_reference(dtype, case, bias, act):
    x, w, b = _arrays(case, dtype, bias)
    want = _want(x, w, b, *case[2:], act)
    got, first = _both(x, w, b, *case[2:], act)
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_array_equal(got, first)
    np.testing.assert_allclose(got, want, **TOL[want.dtype])


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_views_and_an_output_in_another_order(dtype):
    base = RNG.standard_normal((3, 8, 2, 30)).astype(dtype)
    x = base[:, ::2, :1, ::2]  # a strided view: (3, 4, 1, 15)
    w = RNG.standard_normal((6, 4, 1, 6)).astype(dtype)[:, :, :, ::2]  # (6, 4, 1, 3), strided
    b = RNG.standard_normal(12).astype(dtype)[::2]
    want = _want(x, w, b, (0, 1), (1, 1), 1, "relu")
    other = np.full((6, 3, 1, 15), np.nan, dtype).transpose(1, 0, 2, 3)
    got, first = _both(x, w, b, (0, 1), (1, 1), 1, "relu", out=other)
    assert got is other
    np.testing.assert_array_equal(got, first)
    np.testing.assert_allclose(got, want, **TOL[want.dtype])


def test_the_chooser_notes_it_where_the_stride_is_one_and_it_is_on():
    x, w, b = _arrays(CASES[1], np.float32)
    geo = {"padding": (0, 2), "dilation": (1, 2)}
    assert repr(kernels.choose(CONV, np, x, w, **geo)) == "conv2d[conv1d, rows]"
    assert repr(kernels.choose(ACT, np, x, w, b, **geo)) == "conv2d_act[conv1d, rows]"
    assert repr(kernels.choose(CONV, np, x, w, stride=(1, 2), **geo)) == "conv2d[conv1d]"
    with la.tuning(conv1d_rows=False):
        assert repr(kernels.choose(CONV, np, x, w, **geo)) == "conv2d[conv1d]"
        assert repr(kernels.choose(ACT, np, x, w, b, **geo)) == "conv2d_act[conv1d]"


@pytest.mark.parametrize("rows", [True, False])
def test_a_bound_step_binds_the_loop_its_choice_names(rows):
    x, w, b = _arrays(CASES[2], np.float64)
    params = {"padding": (0, 2), "groups": 2, "act": "hardswish"}
    want = _want(x, w, b, (0, 2), (1, 1), 2, "hardswish")
    with la.tuning(conv1d_rows=rows):
        bound = kernels.bind(ACT, np, x, w, b, **params)
        assert bound.choice == kernels.choose(ACT, np, x, w, b, **params)
    assert (conv1d.ROWS in bound.choice.notes) is rows
    assert not bound.scratch  # (both loops allocate their own: the plan lends the step no workspace)
    with la.tuning(conv1d_rows=rows):
        assert reads_no_scratch(ACT, np, x, w, b, **params)
    out = np.empty_like(want)
    assert bound.fn(x, w, b, out=out) is out
    np.testing.assert_allclose(out, want, **TOL[want.dtype])


def test_a_compiled_1d_net_names_it_in_explain():
    net = la.blocks.HybridSequential()
    net.add(la.blocks.Conv1D(8, 3, padding=1, in_channels=4, activation="relu"))
    net.initialize()
    net.hybridize()
    x = la.array(RNG.standard_normal((2, 4, 12)).astype(np.float32))
    y = net(x)
    with la.tuning(conv1d_rows=False):
        want = net(x)
    np.testing.assert_array_equal(y.asnumpy(), want.asnumpy())
    assert "conv1d, rows" in str(net.explain(x))
