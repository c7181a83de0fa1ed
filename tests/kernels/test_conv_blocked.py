"""conv2d's ``blocked`` (``kernels/conv_blocked.py``): a convolution of few filters as one compiled loop per
image, four output channels by three taps a pass. It agrees with the reference kernel (``im2col``) within
float rounding (its sums in another order, multiply-adds contracted: rtol 1e-5 float32, 1e-12 float64, with
an absolute term scaled by the output's size) over the ResNet / DenseNet batch-8 layers and other geometries
(strides, padding, dilation, rectangular kernels, tap counts not a multiple of three, filters not a multiple
of four), float32 and float64, with and without bias, for views and planned outputs in other orders, and
empty batches, channels and filters; the chooser takes it for those layers and not where it is switched
off, past ``conv_blocked_max_filters``, for 1x1 kernels, groups, batch-last arrays or numba off; a compiled
program names it in ``explain()`` (its own and ``nn.conv2d_act``'s) and gives the reference's values."""
from __future__ import annotations

import numpy as np
import pytest

import lazyarray as la
from lazyarray.kernels import conv2d as kconv
from lazyarray.kernels import conv_blocked
from lazyarray.ops import conv

DTYPES = ("float32", "float64")
RTOL = {"float32": 1e-5, "float64": 1e-12}
GEOMETRY = [  # x shape, weight shape, stride, padding, dilation
    ((8, 3, 32, 32), (8, 3, 3, 3), (1, 1), (1, 1), (1, 1)),  # ResNet's stem
    ((8, 8, 16, 16), (8, 8, 3, 3), (1, 1), (1, 1), (1, 1)),
    ((8, 8, 16, 16), (16, 8, 3, 3), (2, 2), (1, 1), (1, 1)),
    ((8, 16, 8, 8), (16, 16, 3, 3), (1, 1), (1, 1), (1, 1)),
    ((8, 8, 16, 16), (4, 8, 3, 3), (1, 1), (1, 1), (1, 1)),  # DenseNet's growth layer
    ((3, 4, 32, 32), (16, 4, 4, 4), (4, 4), (0, 0), (1, 1)),  # a patchify stem: 16 taps
    ((2, 16, 8, 8), (30, 16, 2, 2), (2, 2), (0, 0), (1, 1)),  # ConvNeXt's downsample: 4 taps, a 16-value flat loop
    ((2, 3, 9, 11), (5, 3, 2, 4), (3, 2), (2, 1), (1, 1)),
    ((2, 3, 13, 12), (7, 3, 3, 3), (1, 2), (2, 3), (2, 3)),
    ((1, 2, 9, 9), (3, 2, 5, 5), (1, 1), (2, 2), (1, 1)),
    ((2, 4, 6, 23), (6, 4, 1, 3), (1, 1), (0, 1), (1, 1)),
    ((0, 3, 8, 8), (4, 3, 3, 3), (1, 1), (1, 1), (1, 1)),
    ((2, 0, 8, 8), (4, 0, 3, 3), (1, 1), (1, 1), (1, 1)),
    ((2, 3, 8, 8), (0, 3, 3, 3), (1, 1), (1, 1), (1, 1)),
]


def _arrays(rng, xs, ws, dtype, bias=True):
    x = rng.standard_normal(xs).astype(dtype)
    w = rng.standard_normal(ws).astype(dtype)
    return x, w, rng.standard_normal(ws[0]).astype(dtype) if bias else None


def _close(got, want, x, w):
    terms = x.shape[1] * w.shape[2] * w.shape[3] + 1  # (the sums' length: their rounding's scale)
    rtol = RTOL[str(want.dtype)]
    np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol * terms)


def _check(x, w, b, stride, padding, dilation, out=None):
    want = conv.conv2d_im2col(np, x, w, b, stride, padding, dilation, 1, None).copy()
    assert conv_blocked.applies(np, x, w, b, out, 1, 32)
    got = conv_blocked.conv2d_blocked(np, x, w, b, stride, padding, dilation, 1, out)
    assert got is not None and got.shape == want.shape and got.dtype == want.dtype
    _close(got, want, x, w)
    return got


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("bias", [True, False], ids=["bias", "no-bias"])
@pytest.mark.parametrize("geo", GEOMETRY, ids=[f"{g[0]}-{g[1]}-s{g[2]}-p{g[3]}-d{g[4]}" for g in GEOMETRY])
def test_equals_the_reference_within_rounding(geo, bias, dtype):
    xs, ws, stride, padding, dilation = geo
    x, w, b = _arrays(np.random.default_rng(0), xs, ws, dtype, bias)
    _check(x, w, b, stride, padding, dilation)


@pytest.mark.parametrize("dtype", DTYPES)
def test_views_and_planned_outputs(dtype):
    rng = np.random.default_rng(2)
    big = rng.standard_normal((3, 8, 20, 18)).astype(dtype)
    x = big[:, ::2, 1:19:2, ::-1]  # channels and rows strided, columns reversed
    wbig = rng.standard_normal((10, 8, 3, 3)).astype(dtype)
    w, b = wbig[::2, ::2], rng.standard_normal(10).astype(dtype)[::2]  # strided weight and bias views
    geo = ((1, 1), (1, 1), (1, 1))
    y = _check(x, w, b, *geo)
    assert y.flags.c_contiguous
    shape = y.shape
    out = np.full(shape, np.nan, dtype)
    assert _check(x, w, b, *geo, out) is out  # C-ordered: written into it
    last = np.full((shape[0], shape[2], shape[3], shape[1]), np.nan, dtype).transpose(0, 3, 1, 2)
    assert _check(x, w, b, *geo, last) is last  # channels last: computed, copied in


@pytest.fixture
def serial():
    """``blocked`` on the calling thread (on several threads the chooser takes ``blocked_region``:
    ``test_blocked_region.py``)."""
    with la.tuning(conv_blocked_region=False):
        yield


def test_the_chooser_takes_it_for_few_filters_only(serial):
    rng = np.random.default_rng(3)
    x, w, _ = _arrays(rng, (8, 8, 16, 16), (8, 8, 3, 3), "float32")
    geo = ((1, 1), (1, 1), (1, 1), 1)
    assert kconv.choose_conv2d(np, x, w, None, *geo).impl is kconv.BLOCKED
    assert kconv.choose_conv2d(np, x.astype(np.float64), w.astype(np.float64), None, *geo).impl is kconv.BLOCKED
    with la.tuning(conv_blocked=False, conv_direct_batch=False):
        assert kconv.choose_conv2d(np, x, w, None, *geo).impl is kconv.IM2COL_COMPILED
    with la.tuning(conv_blocked_max_filters=4, conv_direct_batch=False):
        assert kconv.choose_conv2d(np, x, w, None, *geo).impl is kconv.IM2COL_COMPILED
    one = np.ascontiguousarray(w[:, :, :1, :1])  # 1x1: pointwise's or im2col's
    assert kconv.choose_conv2d(np, x, one, None, (2, 2), (0, 0), (1, 1), 1).impl is not kconv.BLOCKED
    assert kconv.choose_conv2d(np, x.astype(np.float16), w.astype(np.float16), None, *geo).impl is kconv.IM2COL
    last = np.ascontiguousarray(x.transpose(1, 2, 3, 0)).transpose(3, 0, 1, 2)  # stored batch last
    assert kconv.choose_conv2d(np, last, w, None, *geo).impl is not kconv.BLOCKED
    assert not conv_blocked.applies(np, x, w, None, None, 2, 32)  # groups: not its case
    assert not conv_blocked.applies(np, x, w.astype(np.float64), None, None, 1, 32)  # mixed dtypes
    with la.tuning(jit=False):
        assert kconv.choose_conv2d(np, x, w, None, *geo).impl is kconv.IM2COL
        assert conv_blocked.conv2d_blocked(np, x, w, None, *geo[:3], 1, None) is None  # (its fallback runs)


@pytest.mark.parametrize("dtype", DTYPES)
def test_a_compiled_program_runs_it_with_the_references_values(dtype, serial):
    rng = np.random.default_rng(4)
    x, w, b = _arrays(rng, (8, 8, 16, 16), (16, 8, 3, 3), dtype)
    w2 = rng.standard_normal((16, 16, 3, 3)).astype(dtype)

    class Net(la.blocks.HybridBlock):
        def forward(self, a, k, c, k2):
            h = la.relu(la.nn.conv2d(a, k, c, stride=2, padding=1))
            return la.nn.conv2d(h, k2, padding=1)

    net = Net()
    net.hybridize()
    args = [la.array(a) for a in (x, w, b, w2)]
    h = np.maximum(conv.conv2d_im2col(np, x, w, b, (2, 2), (1, 1), (1, 1), 1, None), 0)
    want = conv.conv2d_im2col(np, h, w2, None, (1, 1), (1, 1), (1, 1), 1, None).copy()
    for _ in range(3):
        _close(net(*args).asnumpy(), want, h, w2)
    text = str(net.explain(*args))
    assert "nn.conv2d_act[write_out, blocked]" in text and "nn.conv2d[blocked]" in text
    with la.profile() as prof:
        _close(net(*args).asnumpy(), want, h, w2)
    assert [e.impl for e in prof.events if "conv2d" in e.name] == ["write_out, blocked", "blocked"]
