"""conv2d's ``pointwise_strided`` (``kernels/pointwise_strided.py``): a 1x1 convolution with a stride
and no padding, in im2col's case, as one strided copy and one product. It equals ``im2col`` (the
reference kernel for groups == 1) bit for bit in float32 and float64, with and without bias, over
strides (2, 2), (3, 1), (1, 2) and odd sizes, views (a crop, channels strided, a transposed batch),
empty dims, into C-ordered and other outputs; the chooser names it where im2col would run, not with
``conv_pointwise_strided`` off, padding, stride 1, groups, or integer arrays; a compiled program runs
it (its bound step) with the same values, and ``explain()`` names it."""
from __future__ import annotations

import numpy as np
import pytest

import lazyarray as la
from lazyarray import kernels
from lazyarray.kernels import conv2d as kconv
from lazyarray.kernels import pointwise_strided
from lazyarray.kernels.conv_direct import images_c_ordered
from lazyarray.ops import conv
from lazyarray.tuning_table import current

DTYPES = ("float32", "float64")
SHAPES = [  # x shape, output channels, stride
    ((8, 8, 16, 16), 16, (2, 2)), ((1, 8, 16, 16), 16, (2, 2)), ((3, 5, 9, 7), 4, (2, 2)),
    ((2, 4, 7, 9), 6, (3, 1)), ((2, 4, 6, 5), 3, (1, 2)), ((2, 4, 17, 24), 6, (3, 1)), ((2, 4, 16, 15), 3, (1, 2)),
    ((0, 4, 6, 6), 3, (2, 2)), ((2, 0, 6, 6), 3, (2, 2)), ((2, 4, 0, 6), 3, (2, 2)), ((2, 4, 6, 6), 0, (2, 2)),
]
GEOM = ((0, 0), (1, 1), 1)  # padding, dilation, groups


def _arrays(xs, o, dtype, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(xs).astype(dtype)
    w = rng.standard_normal((o, xs[1], 1, 1)).astype(dtype)
    b = rng.standard_normal(o).astype(dtype)
    return x, w, b


def _same(x, w, b, stride, out=None):
    want = conv.conv2d_im2col(np, x, w, b, stride, *GEOM, None)
    assert pointwise_strided.applies(np, x, w, b, out, stride, GEOM[0], 1, current()) == \
        (out is None or images_c_ordered(out))
    got = pointwise_strided.conv2d_pointwise_strided(np, x, w, b, stride, *GEOM, out)
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)  # (bit for bit: the same product on the same arrays)
    assert out is None or got is out
    return got


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("bias", [True, False], ids=["bias", "no-bias"])
@pytest.mark.parametrize("xs,o,stride", SHAPES, ids=[f"{s[0]}-o{s[1]}-s{s[2]}" for s in SHAPES])
def test_equals_im2col_bit_for_bit(xs, o, stride, bias, dtype):
    x, w, b = _arrays(xs, o, dtype)
    _same(x, w, b if bias else None, stride)
    ho, wo = conv.out_size(x, w, stride, *GEOM[:2])
    _same(x, w, b if bias else None, stride, np.empty((xs[0], o, ho, wo), dtype))  # (written in place)
    _same(x, w, b if bias else None, stride, np.empty((ho, wo, xs[0], o), dtype).transpose(2, 3, 0, 1))


@pytest.mark.parametrize("dtype", DTYPES)
def test_views_equal_im2col_bit_for_bit(dtype):
    x, w, b = _arrays((4, 12, 18, 18), 8, dtype, seed=1)
    views = [x[:, :, 1:-1, 2:], x[:, ::2], x[::-1], x.transpose(0, 1, 3, 2), x[:, :, :, ::2]]
    for v in views:
        assert not v.flags.c_contiguous
        _same(v, w[:, :v.shape[1]], b, (2, 2))
    _same(x, w[:, :, :, :].transpose(0, 1, 3, 2)[:, :12], b, (2, 2))  # (a weight view)


def test_the_chooser_takes_it_in_im2cols_case_only():
    x, w, _ = _arrays((8, 8, 16, 16), 16, "float32")
    assert repr(kernels.choose("conv2d", np, x, w, stride=(2, 2))) == "conv2d[pointwise_strided]"
    with la.tuning(conv_pointwise_strided=False):
        assert kernels.choose("conv2d", np, x, w, stride=(2, 2)).impl.name == "im2col"
    assert kernels.choose("conv2d", np, x, w, stride=(2, 2), padding=(1, 1)).impl.name == "im2col"
    assert kernels.choose("conv2d", np, x, w).impl.name != "pointwise_strided"
    wg = w[:, :4]
    assert kernels.choose("conv2d", np, x, wg, stride=(2, 2), groups=2).impl.name != "pointwise_strided"
    xi, wi = x.astype(np.int64), w.astype(np.int64)
    assert not pointwise_strided.applies(np, xi, wi, None, None, (2, 2), (0, 0), 1, current())
    assert pointwise_strided.conv2d_pointwise_strided(np, xi, wi, None, (2, 2), *GEOM, None) is None
    assert kconv.POINTWISE_STRIDED.fallback is kconv.IM2COL


@pytest.mark.parametrize("dtype", DTYPES)
def test_a_compiled_program_runs_it_with_the_same_values(dtype):
    x, w, b = _arrays((8, 8, 16, 16), 16, dtype, seed=2)

    class Net(la.blocks.HybridBlock):
        def forward(self, a, k, c):
            return la.nn.conv2d(a, k, c, stride=(2, 2))

    net = Net()
    net.hybridize()
    xa, wa, ba = la.array(x), la.array(w), la.array(b)
    want = conv.conv2d_im2col(np, x, w, b, (2, 2), *GEOM, None)
    for _ in range(2):
        assert net(xa, wa, ba).asnumpy().tobytes() == want.tobytes()
    assert "nn.conv2d[pointwise_strided]" in str(net.explain(xa, wa, ba))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("bias", [True, False], ids=["bias", "no-bias"])
def test_a_bound_layer_is_im2col_bit_for_bit(bias, dtype):
    """``bind`` (a compiled step, ``pointwise_strided.bound_strided``): into the planned output, another
    C-ordered output, a new one and a channels-last output (the generic binding), im2col's values."""
    for xs, o, stride in SHAPES:
        x, w, b = _arrays(xs, o, dtype, seed=3)
        b = b if bias else None
        arrays = (x, w, b) if bias else (x, w)
        want = conv.conv2d_im2col(np, x, w, b, stride, *GEOM, None)
        out = np.full(want.shape, np.nan, dtype)
        bound = kernels.bind("conv2d", np, *arrays, stride=stride, out=out)
        if bound.choice.impl is not kconv.POINTWISE_STRIDED:  # (a small layer at batch 1: direct's loop)
            assert xs[0] <= 1 or want.shape[2] * want.shape[3] < current().per_image_min_pixels
            continue
        assert bound.fn(*arrays, out=out) is out and out.tobytes() == want.tobytes()
        other = np.full(want.shape, np.nan, dtype)
        assert bound.fn(x[:, :, :, :], *arrays[1:], out=other) is other and other.tobytes() == want.tobytes()
        assert bound.fn(*arrays).tobytes() == want.tobytes()
        last = np.full(want.shape[:1] + want.shape[2:] + want.shape[1:2], np.nan, dtype).transpose(0, 3, 1, 2)
        got = bound.fn(*arrays, out=last)
        assert got is last and np.ascontiguousarray(got).tobytes() == want.tobytes()
