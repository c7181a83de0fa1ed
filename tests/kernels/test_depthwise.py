"""The compiled depthwise conv2d (``kernels/depthwise.py``): equal to the reference kernel over the
conv case table's depthwise samples and a table of its own (strides, padding, dilation, bias,
NCHW and channels-last inputs, views, an empty batch), in float32 and float64; chosen where numba
runs and named by ``explain()`` and ``la.profile()``; the per-tap path where it cannot run."""
from __future__ import annotations

import numpy as np
import pytest
from ops.cases import CASES, _conv2d_ref

import lazyarray as la
from lazyarray import jit, kernels
from lazyarray.kernels import conv2d as kconv
from lazyarray.kernels import depthwise
from lazyarray.ops import registry

REFERENCE = registry.get("conv2d").kernel  # ops/conv.py's reference kernel (its depthwise path: per tap)
DTYPES = ("float32", "float64")
needs_numba = pytest.mark.skipif(not jit.enabled(), reason="compiled kernels off (numba missing or LAZYARRAY_JIT=0)")

# (x shape, channel multiplier... here always 1, kernel (kh, kw), params)
GEOMETRY = [
    ((2, 6, 9, 9), (3, 3), {"padding": (1, 1)}),
    ((2, 6, 9, 9), (3, 3), {"stride": (2, 2), "padding": (1, 1)}),
    ((1, 5, 10, 7), (5, 5), {"stride": (2, 1), "padding": (2, 0)}),
    ((2, 4, 11, 12), (3, 3), {"dilation": (2, 3), "padding": (2, 3)}),
    ((1, 8, 14, 14), (7, 7), {"padding": (3, 3)}),
    ((3, 3, 6, 5), (1, 1), {}),
    ((1, 4, 4, 4), (3, 3), {"padding": (4, 1), "stride": (1, 2)}),  # rows wholly in the padding
    ((2, 3, 13, 11), (3, 5), {"stride": (3, 2), "padding": (1, 2), "dilation": (2, 1)}),  # phases of rows and columns
    ((1, 4, 10, 9), (5, 5), {"stride": (2, 2), "padding": (2, 2)}),  # MobileNetV3's 5x5 at stride 2, odd width
    ((1, 2, 7, 8), (3, 3), {"stride": (4, 3), "padding": (0, 1)}),  # a stride past the kernel: phases never read
    ((2, 3, 16, 16), (3, 3), {"stride": (2, 2), "padding": (1, 1)}),  # MobileNetV3's / ShuffleNet's stride 2
    ((1, 3, 7, 6), (3, 3), {"stride": (2, 2)}),  # stride 2, no padding, even width
    ((2, 3, 16, 16), (3, 3), {"padding": (1, 1)}),  # MobileNetV3's stride 1: nine taps a pass, 286 values -> 288
    ((1, 3, 8, 8), (5, 5), {"padding": (2, 2)}),  # MobileNetV3's 5x5: 92 values -> 96 (zeros past the planes)
    ((1, 2, 5, 12), (1, 9), {"padding": (0, 4)}),  # nine taps not 3 x 3: the same one pass
    ((1, 2, 4, 4), (2, 2), {"padding": (0, 0)}),  # a 3 x 3 output plane: 11 values -> 32
]
IDS = [f"{xs}-k{k}-{'-'.join(f'{a}{v}' for a, v in p.items())}" for xs, k, p in GEOMETRY]


def _arrays(rng, xs, k, dtype, bias=True):
    c = xs[1]
    x = rng.standard_normal(xs).astype(dtype)
    w = rng.standard_normal((c, 1, *k)).astype(dtype)
    b = rng.standard_normal(c).astype(dtype) if bias else None
    return x, w, b


def _params(p, c):
    return {"stride": (1, 1), "padding": (0, 0), "dilation": (1, 1), **p, "groups": c}


def _check(x, w, b, params, dtype, out=None):
    want = REFERENCE(np, x, w, b, **params)
    got = depthwise.conv2d_depthwise_compiled(np, x, w, b, params["stride"], params["padding"],
                                              params["dilation"], params["groups"], out)
    assert got is not None and got.dtype == want.dtype and got.shape == want.shape
    tol = {"rtol": 1e-5, "atol": 1e-5} if dtype == "float32" else {"rtol": 1e-12, "atol": 1e-12}
    np.testing.assert_allclose(got, want, **tol)
    loops = _conv2d_ref(x.astype(np.float64), w.astype(np.float64), None if b is None else b.astype(np.float64),
                        **params)
    np.testing.assert_allclose(got, loops, rtol=1e-4 if dtype == "float32" else 1e-10, atol=1e-4)
    return got


@needs_numba
@pytest.mark.parametrize("dtype", DTYPES)
def test_equals_the_reference_over_the_conv_case_tables_depthwise_samples(dtype):
    rng = np.random.default_rng(0)
    samples = [s for s in CASES["conv2d"].samples(rng, dtype, False)
               if s.params.get("groups", 1) == s.args[0].shape[1] == s.args[1].shape[0]]
    assert samples  # the table has depthwise rows
    for s in samples:
        x, w, *b = s.args
        _check(x, w, b[0] if b else None, _params(s.params, x.shape[1]), dtype)


@needs_numba
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("bias", [True, False], ids=["bias", "no-bias"])
@pytest.mark.parametrize("xs,k,p", GEOMETRY, ids=IDS)
def test_nchw_and_channels_last_equal_the_reference(xs, k, p, bias, dtype):
    rng = np.random.default_rng(1)
    x, w, b = _arrays(rng, xs, k, dtype, bias)
    params = _params(p, xs[1])
    y = _check(x, w, b, params, dtype)
    assert y.flags.c_contiguous
    x_last = np.ascontiguousarray(x.transpose(0, 2, 3, 1)).transpose(0, 3, 1, 2)  # NHWC memory, NCHW shape
    assert depthwise._channels_last(x_last)
    y_last = _check(x_last, w, b, params, dtype)
    assert y_last.transpose(0, 2, 3, 1).flags.c_contiguous  # written in the input's order


@needs_numba
@pytest.mark.parametrize("dtype", DTYPES)
def test_views_empty_batches_and_planned_outputs(dtype):
    rng = np.random.default_rng(2)
    big, w, b = _arrays(rng, (3, 12, 13, 11), (3, 3), dtype)
    x = big[::2, ::2, 1:, ::-1]  # a strided, reversed view: neither order
    w6, b6 = w[:6], b[:6]
    params = _params({"stride": (2, 2), "padding": (1, 1)}, 6)
    _check(x, w6, b6, params, dtype)
    _check(np.ones((0, 6, 8, 8), dtype), w6, b6, params, dtype)  # an empty batch
    _check(big[:, :6, :0], w6, b6, _params({"padding": (1, 1)}, 6), dtype)  # no rows at all
    want = REFERENCE(np, x, w6, b6, **params)
    for out in (np.full(want.shape, np.nan, dtype),  # a planned NCHW buffer: written in place
                np.full(want.shape[:1] + want.shape[2:] + want.shape[1:2], np.nan, dtype).transpose(0, 3, 1, 2),
                np.full(want.shape[::-1], np.nan, dtype).T):  # an order the kernel does not write: copied in
        got = _check(x, w6, b6, params, dtype, out=out)
        assert got is out
    x_last = np.ascontiguousarray(x.transpose(0, 2, 3, 1)).transpose(0, 3, 1, 2)
    out = np.full(want.shape[:1] + want.shape[2:] + want.shape[1:2], np.nan, dtype).transpose(0, 3, 1, 2)
    assert _check(x_last, w6, b6, params, dtype, out=out) is out


@needs_numba
def test_mixed_dtypes_keep_the_references_result_dtype():
    rng = np.random.default_rng(3)
    x, w, _ = _arrays(rng, (1, 4, 6, 6), (3, 3), "float32")
    b64 = rng.standard_normal(4)  # float64 bias: added in place, the result stays float32 as in the reference
    _check(x, w.astype(np.float64), None, _params({}, 4), "float64")
    _check(x, w, b64, _params({"padding": (1, 1)}, 4), "float32")


@needs_numba
def test_the_chooser_takes_it_and_explain_and_profile_name_it():
    x = np.random.default_rng(4).standard_normal((2, 8, 10, 10)).astype(np.float32)
    w = np.random.default_rng(5).standard_normal((8, 1, 3, 3)).astype(np.float32)
    assert kernels.choose("conv2d", np, x, w, padding=(1, 1), groups=8).impl is depthwise.DEPTHWISE
    assert depthwise.DEPTHWISE in kconv.IMPLS and depthwise.TAPS in kconv.IMPLS

    class Net(la.blocks.HybridBlock):
        def forward(self, a, k):
            return la.nn.conv2d(a, k, padding=(1, 1), groups=8)

    net = Net()
    net.hybridize()
    xa, wa = la.array(x), la.array(w)
    np.testing.assert_allclose(net(xa, wa).asnumpy(), REFERENCE(np, x, w, padding=(1, 1), groups=8), rtol=1e-5, atol=1e-5)
    assert "conv2d[depthwise]" in str(net.explain(xa, wa))
    with la.profile() as prof:
        net(xa, wa)
    assert [e.impl for e in prof.events if e.name.endswith("conv2d")] == ["depthwise"]


def test_without_compiled_kernels_the_per_tap_path_runs_and_is_named():
    x = np.random.default_rng(6).standard_normal((2, 4, 7, 7))
    w = np.random.default_rng(7).standard_normal((4, 1, 3, 3))
    before = jit.enabled()
    jit.set_enabled(False)
    try:
        assert kernels.choose("conv2d", np, x, w, groups=4).impl is depthwise.TAPS
        assert depthwise.conv2d_depthwise_compiled(np, x, w, None, (1, 1), (0, 0), (1, 1), 4, None) is None
        y = kconv.run_conv2d(np, x, w, groups=4)
    finally:
        jit.set_enabled(before)
    np.testing.assert_allclose(y, _conv2d_ref(x, w, groups=4), rtol=1e-12)
    assert kernels.choose("conv2d", np, x.astype(np.int64), w.astype(np.int64), groups=4).impl is depthwise.TAPS


@needs_numba
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("xs,k,p", GEOMETRY, ids=IDS)
def test_nchw_values_are_the_references_bit_for_bit(xs, k, p, dtype):
    """The NCHW loop (one flat pass per tap over a zero-padded phase plane, any stride) adds the taps in
    the reference's order, zero-padded values included, and the bias last."""
    rng = np.random.default_rng(8)
    x, w, b = _arrays(rng, xs, k, dtype)
    params = _params(p, xs[1])
    got = depthwise.conv2d_depthwise_compiled(np, x, w, b, params["stride"], params["padding"],
                                              params["dilation"], params["groups"], None)
    np.testing.assert_array_equal(got, REFERENCE(np, x, w, b, **params))


@needs_numba
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("xs,k,p", GEOMETRY, ids=IDS)
def test_a_compiled_steps_binding_is_the_references_bit_for_bit(xs, k, p, dtype):
    """``bind_conv2d``'s depthwise step (``bound_nchw``: the loop with its tables made once) into the
    planned output, with and without a bias, and calls it did not bind for (a view, no output) taken
    to the full path."""
    rng = np.random.default_rng(9)
    params = _params(p, xs[1])
    for bias in (True, False):
        x, w, b = _arrays(rng, xs, k, dtype, bias)
        want = REFERENCE(np, x, w, b, **params)
        out = np.full(want.shape, np.nan, dtype)
        arrays = (x, w) if b is None else (x, w, b)
        bound = kernels.bind("conv2d", np, *arrays, out=out, **params)
        assert bound.choice.impl is depthwise.DEPTHWISE and "bound_nchw" in bound.fn.__qualname__
        assert bound.fn(*arrays, out=out) is out
        np.testing.assert_array_equal(out, want)
        np.testing.assert_array_equal(bound.fn(*arrays), want)
        view = np.repeat(x, 2, axis=3)[..., ::2]
        np.testing.assert_array_equal(bound.fn(view, *arrays[1:], out=np.empty_like(out)), want)
    empty = np.ones((0,) + xs[1:], dtype)
    e_out = np.empty((0,) + want.shape[1:], dtype)
    np.testing.assert_array_equal(kernels.bind("conv2d", np, empty, w, out=e_out, **params).fn(empty, w, out=e_out),
                                  REFERENCE(np, empty, w, **params))


@pytest.mark.parametrize("dtype", DTYPES)
def test_a_binding_follows_other_weights_and_biases_than_the_last_calls(dtype):
    """``bound_nchw`` keeps the flat views of the last call's weight and bias: other arrays (new values, a
    strided weight, no bias after a bias) give their own values, the reference's bit for bit."""
    rng = np.random.default_rng(10)
    xs, k, p = GEOMETRY[0]
    params = _params(p, xs[1])
    x, w, b = _arrays(rng, xs, k, dtype, True)
    out = np.empty(REFERENCE(np, x, w, b, **params).shape, dtype)
    bound = kernels.bind("conv2d", np, x, w, b, out=out, **params)
    assert "bound_nchw" in bound.fn.__qualname__
    for _ in range(2):
        w2, b2 = rng.standard_normal(w.shape).astype(dtype), rng.standard_normal(b.shape).astype(dtype)
        for weight, bias in ((w, b), (w2, b), (w2, b2), (np.repeat(w2, 2, axis=3)[..., ::2], b2), (w, b)):
            np.testing.assert_array_equal(bound.fn(x, weight, bias, out=out), REFERENCE(np, x, weight, bias, **params))
        x, w = x[:, :, ::-1].copy(), w2
    bound = kernels.bind("conv2d", np, x, w, out=out, **params)
    np.testing.assert_array_equal(bound.fn(x, w, out=out), REFERENCE(np, x, w, **params))
    np.testing.assert_array_equal(bound.fn(x, w2 * 2, out=out), REFERENCE(np, x, w2 * 2, **params))
