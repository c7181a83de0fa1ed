"""conv2d's ``direct`` (``kernels/conv_direct.py``): a small convolution as one compiled loop. It
equals the reference kernel within float rounding (rtol 1e-5 float32, 1e-12 float64) over 1-D
(unit height) and 2-D layers, stride, padding, dilation, groups (1 and grouped, not depthwise),
with and without bias, strided views, an empty batch and planned buffers; the chooser takes it for
layers of at most ``conv_direct_max_macs`` multiply-adds (``WIDE_MACS`` times that for output planes of
``WIDE_PIXELS`` pixels and up) and keeps the others' implementations."""
from __future__ import annotations

import numpy as np
import pytest

import lazyarray as la
from lazyarray import kernels
from lazyarray.kernels import conv2d as kconv
from lazyarray.kernels import conv_direct
from lazyarray.ops import registry

pytest.importorskip("numba")


@pytest.fixture(autouse=True)
def _direct_cases():
    """``direct``'s own cases (from ``conv_blocked_min_filters`` filters ``blocked`` takes a plane it fits:
    ``test_conv_blocked.py``)."""
    with la.tuning(conv_blocked_min_filters=1 << 30):
        yield

CONV = registry.get("conv2d")
RNG = np.random.default_rng(5)
TOL = {np.dtype(np.float32): {"rtol": 1e-5, "atol": 1e-5}, np.dtype(np.float64): {"rtol": 1e-12, "atol": 1e-12}}

CASES = [  # x shape, weight shape, stride, padding, dilation, groups
    ((1, 4, 1, 23), (16, 4, 1, 3), (1, 1), (0, 1), (1, 1), 1),  # conv1d_net's first layer
    ((2, 16, 1, 11), (16, 16, 1, 3), (1, 1), (0, 1), (1, 1), 1),
    ((2, 3, 7, 9), (5, 3, 3, 3), (2, 1), (1, 2), (1, 1), 1),
    ((1, 4, 9, 8), (6, 4, 3, 2), (1, 3), (2, 0), (2, 2), 1),
    ((2, 8, 5, 5), (6, 4, 3, 3), (1, 1), (1, 1), (1, 1), 2),  # grouped
    ((1, 12, 6, 7), (8, 3, 1, 3), (1, 2), (0, 1), (1, 1), 4),
    ((0, 4, 5, 5), (6, 4, 3, 3), (1, 1), (1, 1), (1, 1), 1),  # an empty batch
    ((1, 3, 32, 32), (8, 3, 3, 3), (2, 2), (1, 1), (1, 1), 1),  # a stem at stride 2: phase planes
    ((2, 6, 13, 11), (6, 2, 3, 5), (3, 2), (1, 2), (2, 1), 3),  # grouped, strides 3x2, dilated rows
    ((1, 4, 7, 7), (8, 4, 3, 3), (1, 1), (1, 1), (1, 1), 1),  # SqueezeNet's expand 3x3
    ((1, 8, 3, 3), (16, 8, 3, 3), (1, 1), (1, 1), (1, 1), 1),  # under PLANE_MIN_PIXELS: the row loop
    ((1, 5, 2, 2), (6, 5, 3, 3), (1, 1), (4, 4), (1, 1), 1),  # rows and columns wholly in the padding
    ((1, 0, 6, 6), (3, 0, 3, 3), (1, 1), (1, 1), (1, 1), 1),  # no input channels: the bias alone
    ((1, 3, 32, 32), (8, 3, 3, 3), (1, 1), (1, 1), (1, 1), 1),  # ResNet's stem (221K: a wide plane's bound)
    ((1, 16, 8, 8), (16, 16, 3, 3), (1, 1), (1, 1), (1, 1), 1),  # ResNet's 16-channel 3x3 (147K)
]


def _check(x, w, b, stride, padding, dilation, groups, out=None):
    want = CONV.kernel(np, x, w, b, stride=stride, padding=padding, dilation=dilation, groups=groups)
    got = conv_direct.conv2d_direct(np, x, w, b, stride, padding, dilation, groups, out)
    assert got is not None and got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_allclose(got, want, **TOL[want.dtype])
    return got


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("case", CASES, ids=[f"{c[0]}x{c[1]}g{c[5]}" for c in CASES])
@pytest.mark.parametrize("bias", [True, False])
def test_direct_equals_the_reference(dtype, case, bias):
    xs, ws, stride, padding, dilation, groups = case
    x, w = RNG.standard_normal(xs).astype(dtype), RNG.standard_normal(ws).astype(dtype)
    b = RNG.standard_normal(ws[0]).astype(dtype) if bias else None
    _check(x, w, b, stride, padding, dilation, groups)


def test_views_and_planned_buffers():
    x = RNG.standard_normal((2, 8, 6, 14)).astype(np.float32)[:, ::2, :, ::2]  # a strided view
    w, b = RNG.standard_normal((5, 4, 3, 3)).astype(np.float32), RNG.standard_normal(5).astype(np.float32)
    out = np.full((2, 5, 6, 7), np.nan, np.float32)
    assert _check(x, w, b, (1, 1), (1, 1), (1, 1), 1, out) is out  # C-ordered: written into
    other = np.full((5, 2, 6, 7), np.nan, np.float32).transpose(1, 0, 2, 3)  # not C-ordered: copied in
    assert _check(x, w, b, (1, 1), (1, 1), (1, 1), 1, other) is other


def test_the_chooser_takes_it_for_small_layers_only():
    x, w = np.ones((1, 4, 2, 23), np.float32), np.ones((16, 4, 1, 3), np.float32)
    assert kernels.choose(CONV, np, x, w, padding=(0, 1)).impl is kconv.DIRECT
    with la.tuning(conv_direct_max_macs=1000, conv_blocked=False):  # past the bound: the products
        assert kernels.choose(CONV, np, x, w, padding=(0, 1)).impl is kconv.IM2COL_COMPILED
    with la.tuning(jit=False):
        assert kernels.choose(CONV, np, x, w, padding=(0, 1)).impl is kconv.IM2COL
    dw = np.ones((4, 1, 3, 3), np.float32)  # depthwise keeps its own pass
    assert kernels.choose(CONV, np, np.ones((1, 4, 5, 5), np.float32), dw, groups=4).impl is kconv.DEPTHWISE
    assert conv_direct.conv2d_direct(np, np.ones((1, 4, 5, 5), np.float32), dw, None, (1, 1), (0, 0), (1, 1), 4,
                                     None) is None
    big = np.ones((8, 64, 16, 16), np.float32), np.ones((64, 64, 3, 3), np.float32)
    assert kernels.choose(CONV, np, *big, padding=(1, 1)).impl is not kconv.DIRECT


def test_an_eager_call_runs_it():
    x, w = RNG.standard_normal((1, 4, 2, 23)).astype(np.float32), RNG.standard_normal((16, 4, 1, 3)).astype(np.float32)
    with la.profile() as prof:
        y = la.nn.conv2d(la.array(x), la.array(w), padding=(0, 1))
    np.testing.assert_allclose(y.asnumpy(), CONV.kernel(np, x, w, padding=(0, 1)), rtol=1e-5, atol=1e-5)
    assert {e.impl for e in prof.events if e.name.endswith("conv2d")} == {"direct"}


def test_wide_output_planes_take_it_up_to_wide_macs_times_the_bound():
    """Planes of ``WIDE_PIXELS`` pixels and up: ``direct`` up to ``WIDE_MACS`` times ``conv_direct_max_macs``
    (issue #35: the CNN stems and ResNet's 3x3 layers at batch 1); smaller planes keep the bound."""
    bound = la.tuning_table.current().conv_direct_max_macs
    stem = np.ones((1, 3, 32, 32), np.float32), np.ones((8, 3, 3, 3), np.float32)  # 221K, 1024 pixels
    assert 221184 > bound and kernels.choose(CONV, np, *stem, padding=(1, 1)).impl is kconv.DIRECT
    small = np.ones((1, 32, 4, 4), np.float32), np.ones((32, 32, 3, 3), np.float32)  # 147K, 16 pixels
    assert kernels.choose(CONV, np, *small, padding=(1, 1)).impl is not kconv.DIRECT
    wide = np.ones((1, 16, 8, 8), np.float32), np.ones((32, 16, 3, 3), np.float32)  # 295K: past 8 x 32K
    assert kernels.choose(CONV, np, *wide, padding=(1, 1)).impl is not kconv.DIRECT
    with la.tuning(conv_direct_max_macs=0):  # (off: no plane takes it)
        assert kernels.choose(CONV, np, *stem, padding=(1, 1)).impl is not kconv.DIRECT


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("bias", [True, False])
def test_a_bound_direct_layer_is_its_loop_bit_for_bit(dtype, bias):
    """``bind`` (a compiled step) of a ``direct`` layer: the flat loop with its tables made once, into
    the planned buffer, every bit as ``conv2d_direct``; views and no planned output go to the generic
    binding, an empty batch returns at once; the row loop's planes are bound too (its weight's copy
    made in the loop)."""
    for xs, ws, stride, padding, groups in [((1, 3, 32, 32), (8, 3, 3, 3), (2, 2), (1, 1), 1),
                                            ((1, 4, 7, 7), (8, 4, 3, 3), (1, 1), (1, 1), 1),
                                            ((2, 6, 9, 8), (4, 3, 3, 3), (1, 1), (1, 1), 2)]:
        x, w = RNG.standard_normal(xs).astype(dtype), RNG.standard_normal(ws).astype(dtype)
        b = RNG.standard_normal(ws[0]).astype(dtype) if bias else None
        want = conv_direct.conv2d_direct(np, x, w, b, stride, padding, (1, 1), groups, None)
        out = np.full(want.shape, np.nan, dtype)
        arrays = (x, w, b) if bias else (x, w)
        bound = kernels.bind(CONV, np, *arrays, out=out, stride=stride, padding=padding, groups=groups)
        assert bound.choice.impl is kconv.DIRECT
        assert bound.fn(*arrays, out=out) is out and out.tobytes() == want.tobytes()
        assert bound.fn(*arrays).tobytes() == want.tobytes()  # (no planned output: the generic binding)
        view = np.repeat(x, 2, axis=3)[..., ::2]  # (not C-ordered: the generic binding)
        got = bound.fn(view, *arrays[1:], out=np.full(want.shape, np.nan, dtype))
        assert got.tobytes() == want.tobytes()
    x, w, out = np.ones((0, 4, 7, 7), dtype), np.ones((8, 4, 3, 3), dtype), np.empty((0, 8, 7, 7), dtype)  # empty
    assert conv_direct.bound_direct(x, w, None, (1, 1), (1, 1), (1, 1), 1, out, None)(x, w, out=out) is out
    x, w = RNG.standard_normal((1, 8, 3, 3)).astype(dtype), RNG.standard_normal((16, 8, 3, 3)).astype(dtype)
    b = RNG.standard_normal(16).astype(dtype) if bias else None  # (under PLANE_MIN_PIXELS: the row loop, bound too)
    want = conv_direct.conv2d_direct(np, x, w, b, (1, 1), (1, 1), (1, 1), 1, None)
    np.testing.assert_allclose(want, CONV.kernel(np, x, w, b, padding=(1, 1)), **TOL[np.dtype(dtype)])
    out = np.full(want.shape, np.nan, dtype)
    fn = conv_direct.bound_direct(x, w, b, (1, 1), (1, 1), (1, 1), 1, out, None)
    assert fn(x, w, b, out=out) is out and out.tobytes() == want.tobytes()


def _in_order(x, w, b, stride, padding, dilation, groups):
    """The flat loop's sums in NumPy: per output channel from zero, its group's input channels, each
    one's taps row by row (each tap one rounded multiply and add over the plane), the bias last."""
    (sh, sw), (ph, pw), (dh, dw) = stride, padding, dilation
    n, o, (cg, kh, kw) = x.shape[0], w.shape[0], w.shape[1:]
    xp = np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)))
    ho = (xp.shape[2] - dh * (kh - 1) - 1) // sh + 1
    wo = (xp.shape[3] - dw * (kw - 1) - 1) // sw + 1
    y = np.zeros((n, o, ho, wo), x.dtype)
    og = o // groups
    for img in range(n):
        for oc in range(o):
            acc = np.zeros((ho, wo), x.dtype)
            for ci in range(cg):
                plane = xp[img, (oc // og) * cg + ci]
                for i in range(kh):
                    for j in range(kw):
                        acc = acc + plane[i * dh:i * dh + sh * (ho - 1) + 1:sh, j * dw:j * dw + sw * (wo - 1) + 1:sw] \
                            * w[oc, ci, i, j]
            y[img, oc] = acc if b is None else acc + b[oc]
    return y


LENGTHS = [  # flat loop lengths (Ho - 1) * Wq + Wo that are not multiples of 32 (and one that is), views
    ((1, 4, 7, 7), (8, 4, 3, 3), (1, 1), (1, 1), (1, 1), 1),  # 61: 29 past the last 32
    ((1, 3, 5, 6), (4, 3, 2, 2), (1, 1), (0, 0), (1, 1), 1),  # 4 x 5 plane: 23, under one 32-value step
    ((2, 6, 13, 11), (6, 2, 3, 5), (3, 2), (1, 2), (2, 1), 3),  # grouped, phase planes, dilated rows
    ((1, 8, 16, 16), (16, 8, 1, 1), (2, 2), (0, 0), (1, 1), 1),  # 64: a multiple of 32
    ((1, 2, 9, 9), (3, 2, 5, 5), (1, 1), (2, 2), (1, 1), 1),  # 5 x 5: 113
    ((0, 4, 7, 7), (8, 4, 3, 3), (1, 1), (1, 1), (1, 1), 1),  # an empty batch
    ((1, 0, 6, 6), (3, 0, 3, 3), (1, 1), (1, 1), (1, 1), 1),  # no input channels
]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("case", LENGTHS, ids=[f"{c[0]}x{c[1]}s{c[2][0]}" for c in LENGTHS])
def test_the_flat_loop_is_its_sums_in_order_bit_for_bit(dtype, case):
    """The flat loop's passes run over the plane's length rounded up to a multiple of ``depthwise.LANES``
    (zeros past the phase planes): the values written out are the sums in the loop's order, bit for bit,
    at lengths that are not multiples of 32, over views and empty dims."""
    xs, ws, stride, padding, dilation, groups = case
    x, w = RNG.standard_normal(xs).astype(dtype), RNG.standard_normal(ws).astype(dtype)
    b = RNG.standard_normal(ws[0]).astype(dtype)
    flat, _, _ = conv_direct._args(*xs[2:], ws, stride, padding, dilation, np.dtype(dtype), None, 0.2, 0.5)
    assert flat or 0 in xs
    view = np.repeat(x, 2, axis=3)[..., ::2]  # (a non-contiguous input with x's values)
    for arr, bias in ((x, b), (view, None)):
        got = conv_direct.conv2d_direct(np, arr, w, bias, stride, padding, dilation, groups, None)
        want = _in_order(x, w, bias, stride, padding, dilation, groups)
        assert got.shape == want.shape and got.tobytes() == want.tobytes()
