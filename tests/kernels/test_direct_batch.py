"""conv2d ``direct`` at a batch (``kernels/direct_batch.py``): a batch of small C-ordered images without
groups takes ``direct``'s loop, noted ``conv2d[direct, batch]``. Its values equal the reference within
float rounding (rtol 1e-5 float32, 1e-12 float64) and each image's equal ``direct``'s on that image
alone bit for bit; the chooser takes it within ``conv_direct_max_macs`` an image (``WIDE_MACS`` times
that for the wide planes of a stem or of few filters), not for 1x1 kernels, batch-last or strided inputs, nor where
``conv_direct_batch`` is off (the products then run, as before); eager and compiled steps agree."""
from __future__ import annotations

import numpy as np
import pytest

import lazyarray as la
from lazyarray import kernels
from lazyarray.kernels import conv2d as kconv
from lazyarray.kernels import conv_direct, direct_batch
from lazyarray.ops import registry

pytest.importorskip("numba")

CONV = registry.get("conv2d")
RNG = np.random.default_rng(11)
TOL = {np.dtype(np.float32): {"rtol": 1e-5, "atol": 1e-5}, np.dtype(np.float64): {"rtol": 1e-12, "atol": 1e-12}}

CASES = [  # x shape, weight shape, stride, padding: each taken by direct at its batch
    ((8, 4, 7, 7), (8, 4, 3, 3), (1, 1), (1, 1)),  # SqueezeNet's expand 3x3
    ((8, 8, 3, 3), (16, 8, 3, 3), (1, 1), (1, 1)),  # ... under PLANE_MIN_PIXELS: the row loop
    ((8, 3, 32, 32), (16, 3, 3, 3), (2, 2), (0, 0)),  # SqueezeNet's stem (97K an image: a stem's wide bound)
    ((2, 8, 16, 16), (4, 8, 3, 3), (1, 1), (1, 1)),  # few filters (74K an image): the wide bound
    ((3, 2, 9, 10), (5, 2, 3, 2), (2, 3), (1, 2)),  # odd sizes, strides and padding
    ((2, 5, 2, 2), (6, 5, 3, 3), (1, 1), (4, 4)),  # rows and columns wholly in the padding
    ((2, 4, 6, 6), (0, 4, 3, 3), (1, 1), (1, 1)),  # no output channels
    ((2, 4, 2, 2), (3, 4, 3, 3), (1, 1), (0, 0)),  # an empty output plane
]


@pytest.fixture(autouse=True)
def _blocked_off():
    """These layers are direct's at a batch; ``conv2d[blocked]`` would take the few-filter ones first."""
    with la.tuning(conv_blocked=False):
        yield


def _ids(cases):
    return [f"{c[0]}x{c[1]}s{c[2][0]}" for c in cases]


def _arrays(xs, ws, dtype, bias=True):
    x, w = RNG.standard_normal(xs).astype(dtype), RNG.standard_normal(ws).astype(dtype)
    return x, w, (RNG.standard_normal(ws[0]).astype(dtype) if bias else None)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("case", CASES, ids=_ids(CASES))
@pytest.mark.parametrize("bias", [True, False])
def test_a_batch_takes_direct_and_equals_the_reference(dtype, case, bias):
    xs, ws, stride, padding = case
    x, w, b = _arrays(xs, ws, dtype, bias)
    choice = kernels.choose(CONV, np, x, w, b, stride=stride, padding=padding)
    assert choice.impl is kconv.DIRECT and choice.notes == (direct_batch.BATCH_NOTE,)
    assert repr(choice) == "conv2d[direct, batch]"
    want = CONV.kernel(np, x, w, b, stride=stride, padding=padding)
    got = kconv.run_conv2d(np, x, w, b, stride, padding)
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_allclose(got, want, **TOL[want.dtype])
    out = np.full(want.shape, np.nan, dtype)  # (a planned buffer: written whole)
    assert kconv.run_conv2d(np, x, w, b, stride, padding, out=out) is out
    np.testing.assert_array_equal(out, got)
    for i in range(xs[0]):  # each image: direct's loop on it alone, bit for bit
        alone = conv_direct.conv2d_direct(np, x[i:i + 1], w, b, stride, padding, (1, 1), 1, None)
        np.testing.assert_array_equal(got[i:i + 1], alone)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_views_are_right_and_only_c_ordered_ones_take_direct(dtype):
    x, w, b = _arrays((6, 4, 7, 9), (8, 4, 3, 3), dtype)
    part = x[2:5]  # (a C-ordered view: taken)
    assert kernels.choose(CONV, np, part, w, b, padding=(1, 1)).impl is kconv.DIRECT
    np.testing.assert_allclose(kconv.run_conv2d(np, part, w, b, padding=(1, 1)),
                               CONV.kernel(np, part, w, b, padding=(1, 1)), **TOL[x.dtype])
    for view in (x[:, :, :, ::2], x.transpose(0, 1, 3, 2), x[::2]):  # strided: the products
        choice = kernels.choose(CONV, np, view, w, b, padding=(1, 1))
        assert choice.notes != (direct_batch.BATCH_NOTE,)
        np.testing.assert_allclose(kconv.run_conv2d(np, view, w, b, padding=(1, 1)),
                                   CONV.kernel(np, view, w, b, padding=(1, 1)), **TOL[x.dtype])
    last = np.ascontiguousarray(x.transpose(1, 2, 3, 0)).transpose(3, 0, 1, 2)  # stored batch last
    assert kernels.choose(CONV, np, last, w, b, padding=(1, 1)).impl is not kconv.DIRECT


def test_the_chooser_keeps_the_products_elsewhere():
    x, w, b = _arrays((8, 8, 16, 16), (16, 8, 1, 1), "float32")
    assert kernels.choose(CONV, np, x, w, b, stride=(2, 2)).impl is not kconv.DIRECT  # 1x1
    x, w, b = _arrays((8, 8, 16, 16), (16, 8, 3, 3), "float32")  # 74K an image, 8 channels: not a stem
    assert kernels.choose(CONV, np, x, w, b, stride=(2, 2), padding=(1, 1)).impl is not kconv.DIRECT
    x, w, b = _arrays((8, 4, 7, 7), (8, 4, 3, 3), "float32")
    with la.tuning(conv_direct_batch=False):
        assert kernels.choose(CONV, np, x, w, b, padding=(1, 1)).impl is kconv.BATCH_LAST
    with la.tuning(conv_direct_max_macs=1000):  # past the bound: the products
        assert kernels.choose(CONV, np, x, w, b, padding=(1, 1)).impl is kconv.BATCH_LAST
    assert kernels.choose(CONV, np, x, w.astype(np.float64), b, padding=(1, 1)).impl is not kconv.DIRECT
    assert not direct_batch.applies(np, x, w, np.empty((8, 8, 7, 7), np.float64), 49, la.config)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_a_compiled_step_with_its_activation_equals_eager(dtype):
    """A program's conv2d and relu (an ``nn.conv2d_act`` step: the activation in direct's loop) and a
    plain conv2d after it, at batch 8: explain() names ``direct, batch``; eager's values bit for bit."""
    class Net(la.blocks.HybridBlock):
        def forward(self, x, w1, b1, w2, b2):
            y = la.relu(la.nn.conv2d(x, w1, b1, padding=(1, 1)))
            return la.nn.conv2d(y, w2, b2, padding=(1, 1))

    x, w1, b1 = _arrays((8, 4, 7, 7), (8, 4, 3, 3), dtype)
    w2, b2 = RNG.standard_normal((6, 8, 3, 3)).astype(dtype), RNG.standard_normal(6).astype(dtype)
    args = [la.array(a) for a in (x, w1, b1, w2, b2)]
    net = Net()
    eager = net(*args).asnumpy()
    net.hybridize()
    for _ in range(3):  # (the first run leaves tiered kernels out; later ones run the bound choices)
        got = net(*args).asnumpy()
    np.testing.assert_array_equal(got, eager)
    ref = CONV.kernel(np, np.maximum(CONV.kernel(np, x, w1, b1, padding=(1, 1)), 0), w2, b2, padding=(1, 1))
    tol = TOL[np.dtype(dtype)]  # (two layers: the first's rounding scaled by the second's sums)
    np.testing.assert_allclose(got, ref, rtol=tol["rtol"], atol=tol["atol"] * np.abs(ref).max())
    assert str(net.explain(*args)).count("direct, batch]") == 2


def test_a_layer_blocked_takes_runs_there_before_direct_at_a_batch():
    x = np.ones((8, 8, 16, 16), np.float32)
    w = np.ones((8, 8, 3, 3), np.float32)
    geo = ((1, 1), (1, 1), (1, 1), 1)
    assert direct_batch.applies(np, x, w, None, 256, la.tuning_table.current())
    with la.tuning(conv_blocked=True, conv_blocked_region=False):  # (on threads: blocked_region, its own tests)
        assert kconv.choose_conv2d(np, x, w, None, *geo).impl is kconv.BLOCKED
        small = np.ones((8, 8, 3, 3), np.float32)  # a plane under blocked's 16 pixels: direct at a batch
        assert str(kconv.choose_conv2d(np, small, w, None, *geo)) == "conv2d[direct, batch]"
