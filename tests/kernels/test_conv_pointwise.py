"""conv2d's ``pointwise`` (``kernels/conv_direct.py``): a 1x1 convolution (stride 1, no padding, no
groups) as one product per call. It equals the reference kernel within float rounding over the conv
case table's inputs with 1x1 weights, the real models' 1x1 layers, with and without bias, float32 and
float64, an empty batch, empty channels and pixels, C-ordered and other planned outputs (copied into); it
declines (the chooser goes on) for planned outputs not C-ordered, views, strides, padding, groups, other dtypes, and with ``conv_pointwise`` off;
``explain()`` and ``la.profile()`` name it. Inputs whose images are C-ordered blocks at any batch stride
(a split's half after ``channel_shuffle``) run it too, giving a C-ordered copy's values bit for bit
(batch 1, an empty batch, a reversed batch); views whose images are not C-ordered (channels or columns
strided, images transposed, channels last, rows cropped) are still declined."""
from __future__ import annotations

import numpy as np
import pytest
from ops.cases import CASES

import lazyarray as la
from lazyarray import kernels
from lazyarray.kernels import conv2d as kconv
from lazyarray.kernels import conv_direct
from lazyarray.ops import registry

CONV = registry.get("conv2d")
DTYPES = ("float32", "float64")
TOL = {np.dtype(np.float32): {"rtol": 1e-5, "atol": 1e-5}, np.dtype(np.float64): {"rtol": 1e-12, "atol": 1e-12}}
ONE = ((1, 1), (0, 0), (1, 1), 1)  # stride, padding, dilation, groups

SHAPES = [  # x shape, output channels: the real models' 1x1 layers (batch 1 and 8), squeeze-excitation's, empties
    ((1, 8, 16, 16), 16), ((1, 16, 1, 1), 4), ((1, 4, 1, 1), 16), ((8, 16, 8, 8), 32), ((1, 64, 8, 8), 16),
    ((0, 4, 5, 5), 6), ((2, 0, 3, 3), 5), ((2, 3, 0, 4), 2), ((2, 3, 4, 4), 0),
]


@pytest.fixture(autouse=True)
def _no_loop():
    """``pointwise`` itself: its small layers with a bias would take conv2d[loop] (tests/kernels/test_conv2d_loop.py)."""
    with la.tuning(conv2d_pointwise_loop=False):
        yield


def _check(x, w, b, out=None):
    want = CONV.kernel(np, x, w, b)
    assert conv_direct.pointwise_applies(np, x, w, b, out, *ONE[:2], 1) == (out is None or out.flags.c_contiguous)
    got = conv_direct.conv2d_pointwise(np, x, w, b, *ONE, out)
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_allclose(got, want, **TOL[want.dtype])
    return got


@pytest.mark.parametrize("dtype", DTYPES)
def test_equals_the_reference_over_the_conv_case_tables_inputs(dtype):
    rng = np.random.default_rng(0)
    samples = [s for s in CASES["conv2d"].samples(rng, dtype, False) if s.params.get("groups", 1) == 1]
    assert samples
    for s in samples:
        x, w, *b = s.args
        _check(np.ascontiguousarray(x), np.ascontiguousarray(w[:, :, :1, :1]), b[0] if b else None)
        if any(s.params.get(k, d) != d for k, d in (("stride", (1, 1)), ("padding", (0, 0)))):
            p = {"stride": (1, 1), "padding": (0, 0), **s.params}
            assert not conv_direct.pointwise_applies(np, x, w[:, :, :1, :1], None, None, tuple(p["stride"]),
                                                     tuple(p["padding"]), 1)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("bias", [True, False], ids=["bias", "no-bias"])
@pytest.mark.parametrize("xs,o", SHAPES, ids=[f"{xs}-o{o}" for xs, o in SHAPES])
def test_equals_the_reference(xs, o, bias, dtype):
    rng = np.random.default_rng(1)
    x = rng.standard_normal(xs).astype(dtype)
    w = rng.standard_normal((o, xs[1], 1, 1)).astype(dtype)
    b = rng.standard_normal(o).astype(dtype) if bias else None
    y = _check(x, w, b)
    assert y.flags.c_contiguous


@pytest.mark.parametrize("dtype", DTYPES)
def test_planned_outputs_and_weight_views(dtype):
    rng = np.random.default_rng(2)
    x = rng.standard_normal((2, 6, 5, 7)).astype(dtype)
    big = rng.standard_normal((8, 12, 1, 1)).astype(dtype)
    w, b = big[::2, ::2], rng.standard_normal(4).astype(dtype)  # a strided weight view
    shape = (2, 4, 5, 7)
    out = np.full(shape, np.nan, dtype)
    assert _check(x, w, b, out) is out  # C-ordered: written in place
    last = np.full((2, 5, 7, 4), np.nan, dtype).transpose(0, 3, 1, 2)  # channels last: computed, copied in
    assert _check(x, w, b, last) is last
    batch_last = np.full(shape[::-1], np.nan, dtype).T
    assert _check(x, w, b, batch_last) is batch_last


def test_declines_what_it_does_not_take():
    x, w = np.ones((1, 4, 5, 5), np.float32), np.ones((6, 4, 1, 1), np.float32)
    assert conv_direct.pointwise_applies(np, x, w, None, None, (1, 1), (0, 0), 1)
    view = np.ones((1, 8, 5, 5), np.float32)[:, ::2]
    assert not conv_direct.pointwise_applies(np, view, w, None, None, (1, 1), (0, 0), 1)  # not C-ordered
    assert not conv_direct.pointwise_applies(np, x, w, None, None, (2, 2), (0, 0), 1)
    assert not conv_direct.pointwise_applies(np, x, w, None, None, (1, 1), (1, 0), 1)
    assert not conv_direct.pointwise_applies(np, x, np.ones((6, 2, 1, 1), np.float32), None, None, (1, 1), (0, 0), 2)
    assert not conv_direct.pointwise_applies(np, x, np.ones((6, 4, 3, 3), np.float32), None, None, (1, 1), (0, 0), 1)
    assert not conv_direct.pointwise_applies(np, x.astype(np.float16), w.astype(np.float16), None, None, (1, 1),
                                             (0, 0), 1)
    assert not conv_direct.pointwise_applies(np, x, w.astype(np.float64), None, None, (1, 1), (0, 0), 1)
    assert not conv_direct.pointwise_applies(np, x, w, np.ones(6, np.float64), None, (1, 1), (0, 0), 1)


def test_the_chooser_takes_it_and_explain_and_profile_name_it():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((1, 8, 6, 6)).astype(np.float32)
    w = rng.standard_normal((16, 8, 1, 1)).astype(np.float32)
    assert kernels.choose(CONV, np, x, w).impl is kconv.POINTWISE
    assert kconv.POINTWISE in kconv.IMPLS
    with la.tuning(conv_pointwise=False):
        assert kernels.choose(CONV, np, x, w).impl is not kconv.POINTWISE
    assert kernels.choose(CONV, np, x, w, padding=(1, 1)).impl is not kconv.POINTWISE

    class Net(la.blocks.HybridBlock):
        def forward(self, a, k):
            return la.nn.conv2d(a, k)

    class ActNet(la.blocks.HybridBlock):
        def forward(self, a, k):
            return la.relu(la.nn.conv2d(a, k))

    net, act = Net(), ActNet()
    net.hybridize()
    act.hybridize()
    xa, wa = la.array(x), la.array(w)
    want = CONV.kernel(np, x, w)
    np.testing.assert_allclose(net(xa, wa).asnumpy(), want, rtol=1e-5, atol=1e-5)
    assert "nn.conv2d[pointwise]" in str(net.explain(xa, wa))
    np.testing.assert_allclose(act(xa, wa).asnumpy(), np.maximum(want, 0), rtol=1e-5, atol=1e-5)
    assert "nn.conv2d_act[compiled, pointwise]" in str(act.explain(xa, wa))  # (the relu in the step)
    with la.profile() as prof:
        y = net(xa, wa)
    np.testing.assert_allclose(y.asnumpy(), want, rtol=1e-5, atol=1e-5)
    assert [e.impl for e in prof.events if e.name.endswith("conv2d")] == ["pointwise"]
    with la.tuning(conv_pointwise=False):  # (chosen per call: the same program runs another implementation)
        np.testing.assert_allclose(net(xa, wa).asnumpy(), want, rtol=1e-5, atol=1e-5)


def _spaced(rng, shape, dtype, skip=2):
    """A batch of C-ordered (C, H, W) images ``skip`` times as far apart as a C-ordered batch's: the
    second half of a split along the channels."""
    n, c, h, w = shape
    return rng.standard_normal((n, skip * c, h, w)).astype(dtype)[:, c:2 * c]


SPACED = [((8, 8, 8, 8), 8), ((8, 16, 4, 4), 16), ((1, 8, 5, 5), 6), ((3, 5, 1, 7), 4), ((0, 4, 5, 5), 6),
          ((2, 0, 3, 3), 5), ((2, 3, 0, 4), 2)]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("bias", [True, False], ids=["bias", "no-bias"])
@pytest.mark.parametrize("xs,o", SPACED, ids=[f"{xs}-o{o}" for xs, o in SPACED])
def test_images_apart_by_any_batch_stride_run_it_bit_for_bit(xs, o, bias, dtype):
    """Images that are C-ordered blocks at a wider (or reversed) batch stride: ``pointwise`` takes them,
    reading them in place, and gives what the C-ordered copy gives bit for bit (the same BLAS calls)."""
    rng = np.random.default_rng(4)
    spaced = _spaced(rng, xs, dtype)
    w = rng.standard_normal((o, xs[1], 1, 1)).astype(dtype)
    b = rng.standard_normal(o).astype(dtype) if bias else None
    for x in (spaced, np.ascontiguousarray(spaced)[::-1]):
        assert conv_direct.images_c_ordered(x)
        assert x.flags.c_contiguous == (x.shape[0] <= 1 or x.size == 0)
        if x.size:
            assert np.shares_memory(x.reshape(xs[0], xs[1], -1), x)  # (a view: no copy of the input)
        want = conv_direct.conv2d_pointwise(np, np.ascontiguousarray(x), w, b, *ONE, None)
        np.testing.assert_array_equal(_check(x, w, b), want)
        out = np.full(want.shape, np.nan, dtype)
        assert _check(x, w, b, out) is out
        np.testing.assert_array_equal(out, want)
        assert kernels.choose(CONV, np, x, w, b).impl is kconv.POINTWISE
        np.testing.assert_array_equal(kconv.run_conv2d(np, x, w, b), want)


@pytest.mark.parametrize("dtype", DTYPES)
def test_views_whose_images_are_not_c_ordered_are_declined(dtype):
    rng = np.random.default_rng(5)
    x = rng.standard_normal((4, 6, 5, 7)).astype(dtype)
    w, b = rng.standard_normal((3, 6, 1, 1)).astype(dtype), rng.standard_normal(3).astype(dtype)
    views = {
        "channels strided": np.repeat(x, 2, axis=1)[:, ::2],
        "columns strided": np.repeat(x, 2, axis=3)[..., ::2],
        "rows cropped": np.concatenate([x, x], axis=2)[:, :, 5:],
        "images transposed": np.ascontiguousarray(x.transpose(0, 1, 3, 2)).transpose(0, 1, 3, 2),
        "channels last": np.ascontiguousarray(x.transpose(0, 2, 3, 1)).transpose(0, 3, 1, 2),
        "batch last": np.ascontiguousarray(x.transpose(1, 2, 3, 0)).transpose(3, 0, 1, 2),
    }
    for name, v in views.items():
        assert not conv_direct.images_c_ordered(v), name
        assert not conv_direct.pointwise_applies(np, v, w, b, None, (1, 1), (0, 0), 1), name
        assert kernels.choose(CONV, np, v, w, b).impl is not kconv.POINTWISE, name
        np.testing.assert_allclose(kconv.run_conv2d(np, v, w, b), CONV.kernel(np, x, w, b), **TOL[np.dtype(dtype)],
                                   err_msg=name)


@pytest.mark.parametrize("dtype", DTYPES)
def test_a_binding_made_on_a_strided_batch_rebinds_for_channels_last_images(dtype):
    """A compiled step bound on a split's half (``pointwise``, images C-ordered, the whole not) and then
    handed channels-last images, which are not C-ordered either: the binding's facts tell the two apart
    (``images_c_ordered``), so it chooses again and gives the runner's values bit for bit."""
    rng = np.random.default_rng(6)
    spaced = _spaced(rng, (8, 8, 4, 4), dtype)
    w, b = rng.standard_normal((6, 8, 1, 1)).astype(dtype), rng.standard_normal(6).astype(dtype)
    out = np.empty((8, 6, 4, 4), dtype)
    bound = kernels.bind("conv2d", np, spaced, w, b, out=out)
    assert bound.choice.impl is kconv.POINTWISE
    last = np.ascontiguousarray(spaced.transpose(0, 2, 3, 1)).transpose(0, 3, 1, 2)
    assert not last.flags.c_contiguous and not conv_direct.images_c_ordered(last)
    assert kernels.choose(CONV, np, last, w, b).impl is not kconv.POINTWISE
    for x in (spaced, last, spaced):
        np.testing.assert_array_equal(bound.fn(x, w, b, out=np.empty_like(out)), kconv.run_conv2d(np, x, w, b))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("bias", [True, False])
def test_a_bound_pointwise_layer_is_conv2d_pointwise_bit_for_bit(bias, dtype):
    """``bind`` (a compiled step) of a ``pointwise`` layer (``conv_direct.bound_pointwise``): into the
    planned output, another C-ordered output and a new one, on a strided batch of C-ordered images, the
    values of ``conv2d_pointwise`` bit for bit; channels-last images go to the generic binding; empties."""
    rng = np.random.default_rng(12)
    for xs, o in SHAPES:
        base = rng.standard_normal((xs[0], 2 * xs[1]) + xs[2:]).astype(dtype)
        x, half = np.ascontiguousarray(base[:, xs[1]:]), base[:, xs[1]:]
        w = rng.standard_normal((o, xs[1], 1, 1)).astype(dtype)
        b = rng.standard_normal(o).astype(dtype) if bias else None
        arrays = (x, w, b) if bias else (x, w)
        want = conv_direct.conv2d_pointwise(np, x, w, b, *ONE, None)
        out = np.full(want.shape, np.nan, dtype)
        bound = kernels.bind("conv2d", np, *arrays, out=out)
        assert bound.choice.impl is kconv.POINTWISE
        assert bound.fn(*arrays, out=out) is out and out.tobytes() == want.tobytes()
        other = np.full(want.shape, np.nan, dtype)
        assert bound.fn(half, *arrays[1:], out=other) is other and other.tobytes() == want.tobytes()
        assert bound.fn(*arrays).tobytes() == want.tobytes()
        if x.size and xs[0] == 1:
            last = np.ascontiguousarray(x.transpose(0, 2, 3, 1)).transpose(0, 3, 1, 2)
            got = bound.fn(last, *arrays[1:], out=np.full(want.shape, np.nan, dtype))
            np.testing.assert_allclose(got, want, **TOL[want.dtype])
