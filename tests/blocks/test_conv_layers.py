"""The vision layers (lazyarray/blocks/conv.py, residual.py) against NumPy references written here:
grouped / dilated convolution by explicit loops, the transposed convolution as the adjoint of
the convolution, average / max pooling with ceil_mode by clipped windows; hybridized equals
imperative (outputs and gradients); export -> SymbolBlock.imports gives the same outputs."""
from __future__ import annotations

import numpy as np
import pytest

import lazyarray as la
from lazyarray import blocks as B


def rng(seed=0):
    return np.random.default_rng(seed)


def conv_ref(x, w, b=None, stride=(1, 1), padding=(0, 0), dilation=(1, 1), groups=1):
    """Cross-correlation by loops over batch, output channel, output pixel and kernel tap."""
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    (sh, sw), (ph, pw), (dh, dw) = stride, padding, dilation
    xp_ = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (ph, ph), (pw, pw)))
    ho = (h + 2 * ph - (kh - 1) * dh - 1) // sh + 1
    wo = (wd + 2 * pw - (kw - 1) * dw - 1) // sw + 1
    og = o // groups
    out = np.zeros((n, o, ho, wo))
    for b_ in range(n):
        for oc in range(o):
            g = oc // og
            for i in range(ho):
                for j in range(wo):
                    acc = 0.0
                    for ic in range(cg):
                        for a in range(kh):
                            for e in range(kw):
                                acc += xp_[b_, g * cg + ic, i * sh + a * dh, j * sw + e * dw] * w[oc, ic, a, e]
                    out[b_, oc, i, j] = acc
    return out if b is None else out + b[None, :, None, None]


def conv_transpose_ref(x, w, out_hw, **geometry):
    """The transposed convolution as the adjoint of ``conv_ref``: J^T x, with J the Jacobian of
    conv_ref (weight w, read as a conv weight from out-channels to in-channels) built column by column."""
    n, cin = x.shape[:2]
    cout = w.shape[1] * geometry.get("groups", 1)
    shape = (1, cout) + tuple(out_hw)
    cols = []
    for k in range(int(np.prod(shape))):
        e = np.zeros(shape)
        e.reshape(-1)[k] = 1.0
        cols.append(conv_ref(e, w, **geometry).reshape(-1))
    jac = np.stack(cols, axis=1)  # (cin*h*w, cout*H*W)
    return np.stack([(x[b].reshape(-1) @ jac).reshape(shape[1:]) for b in range(n)])


def pool_ref(x, kind, kernel, stride, padding=(0, 0), ceil_mode=False, count_include_pad=True):
    """Windows over the padded input, clipped to it (ceil mode), by loops."""
    n, c, h, w = x.shape
    (kh, kw), (sh, sw), (ph, pw) = kernel, stride, padding
    fill = -np.inf if kind == "max" else 0.0
    xp_ = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (ph, ph), (pw, pw)), constant_values=fill)

    def size(d, k, s, p):
        return (-(-(d + 2 * p - k) // s) if ceil_mode else (d + 2 * p - k) // s) + 1
    ho, wo = size(h, kh, sh, ph), size(w, kw, sw, pw)
    out = np.zeros((n, c, ho, wo))
    for i in range(ho):
        for j in range(wo):
            r0, r1 = i * sh, min(i * sh + kh, h + 2 * ph)
            c0, c1 = j * sw, min(j * sw + kw, w + 2 * pw)
            win = xp_[:, :, r0:r1, c0:c1]
            if kind == "max":
                out[:, :, i, j] = win.max(axis=(2, 3))
            else:
                count = (r1 - r0) * (c1 - c0) if count_include_pad else \
                    (min(r1, ph + h) - max(r0, ph)) * (min(c1, pw + w) - max(c0, pw))
                out[:, :, i, j] = win.sum(axis=(2, 3)) / count
    return out


def _params(net):
    return {k: p.data().asnumpy() for k, p in net.collect_params().items()}


# -- values against the references -----------------------------------------------------------------
@pytest.mark.parametrize("kwargs", [
    {"groups": 2, "dilation": 2, "padding": 2},
    {"groups": 4, "strides": 2, "padding": 1},  # depthwise
    {"dilation": (1, 2), "strides": (2, 1)},
    {"groups": 2, "dilation": (2, 1), "padding": (1, 0), "use_bias": False},
    {"groups": 4, "padding": 1, "channels": 8},  # a channel multiplier: 2 filters per input channel
], ids=["groups2-dil2", "depthwise-s2", "dil12-s21", "groups2-nobias", "multiplier2"])
def test_conv2d_grouped_dilated_matches_loops(kwargs):
    r = rng(1)
    kwargs = dict(kwargs)
    channels = kwargs.pop("channels", 4)
    layer = B.Conv2D(channels, 3, **kwargs)
    layer.initialize()
    x = r.standard_normal((2, 4, 7, 6)).astype(np.float32)
    y = layer(la.array(x)).asnumpy()
    p = _params(layer)
    geometry = {k: (v, v) if isinstance(v, int) else v for k, v in kwargs.items() if k != "use_bias"}
    geometry = {{"strides": "stride"}.get(k, k): v for k, v in geometry.items()}
    geometry["groups"] = kwargs.get("groups", 1)
    want = conv_ref(x, p["weight"], p.get("bias"), **geometry)
    assert layer.weight.shape == (channels, 4 // geometry["groups"], 3, 3)
    np.testing.assert_allclose(y, want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("kwargs,hw", [
    ({}, (4, 5)),
    ({"strides": 2, "padding": 1, "output_padding": 1}, (4, 5)),
    ({"strides": (2, 1), "dilation": 2, "groups": 2}, (3, 4)),
    ({"groups": 4, "strides": 2, "padding": (1, 0), "output_padding": (0, 1)}, (3, 3)),
], ids=["plain", "s2-p1-op1", "s21-dil2-groups2", "depthwise"])
def test_conv2d_transpose_is_the_adjoint_of_conv2d(kwargs, hw):
    r = rng(2)
    layer = B.Conv2DTranspose(4, 3, use_bias=False, **kwargs)
    layer.initialize()
    x = r.standard_normal((2, 4) + hw).astype(np.float32)
    y = layer(la.array(x)).asnumpy()
    pair = {k: (v, v) if isinstance(v, int) else v for k, v in kwargs.items()}
    s, p, op, d = (pair.get(k, (k == "groups") or default) for k, default in
                   (("strides", (1, 1)), ("padding", (0, 0)), ("output_padding", (0, 0)), ("dilation", (1, 1))))
    out_hw = tuple((hw[a] - 1) * s[a] - 2 * p[a] + d[a] * 2 + op[a] + 1 for a in (0, 1))
    assert y.shape == (2, 4) + out_hw
    w = _params(layer)["weight"]
    want = conv_transpose_ref(x, w, out_hw, stride=s, padding=p, dilation=d, groups=kwargs.get("groups", 1))
    np.testing.assert_allclose(y, want, rtol=1e-4, atol=1e-5)
    # <conv_t(x), z> == <x, conv(z)> with the same weight and geometry
    z = r.standard_normal(y.shape)
    conv = la.nn.conv2d(la.array(z.astype(np.float32)), la.array(w), stride=s, padding=p, dilation=d,
                        groups=kwargs.get("groups", 1)).asnumpy()
    np.testing.assert_allclose(np.sum(y * z), np.sum(x * conv), rtol=1e-4)


@pytest.mark.parametrize("kind", ["max", "avg"])
@pytest.mark.parametrize("kwargs", [
    {"pool_size": 2},
    {"pool_size": 3, "strides": 2, "ceil_mode": True},
    {"pool_size": 3, "strides": 2, "padding": 1, "ceil_mode": True},
    {"pool_size": 3, "strides": 2, "padding": 1, "count_include_pad": False},
    {"pool_size": (3, 2), "strides": (2, 1), "padding": (1, 1), "ceil_mode": True, "count_include_pad": False},
], ids=["2x2", "3x3-s2-ceil", "3x3-s2-p1-ceil", "3x3-s2-p1-excl", "32-s21-p1-ceil-excl"])
def test_pooling_matches_clipped_windows(kind, kwargs):
    if kind == "max" and "count_include_pad" in kwargs:
        kwargs = {k: v for k, v in kwargs.items() if k != "count_include_pad"}
    layer = (B.MaxPool2D if kind == "max" else B.AvgPool2D)(**kwargs)
    x = rng(3).standard_normal((2, 3, 8, 6)).astype(np.float32)
    pair = {k: (v, v) if isinstance(v, int) else v for k, v in kwargs.items() if k in ("pool_size", "strides", "padding")}
    want = pool_ref(x, kind, pair["pool_size"], pair.get("strides", pair["pool_size"]), pair.get("padding", (0, 0)),
                    kwargs.get("ceil_mode", False), kwargs.get("count_include_pad", True))
    np.testing.assert_allclose(layer(la.array(x)).asnumpy(), want, rtol=1e-5, atol=1e-6)


def test_ceil_mode_gives_the_mxnet_full_size():
    x = la.ones((1, 1, 6, 6))
    assert B.MaxPool2D(3, 2)(x).shape == (1, 1, 2, 2)
    assert B.MaxPool2D(3, 2, ceil_mode=True)(x).shape == (1, 1, 3, 3)  # ceil((6 - 3) / 2) + 1
    assert B.AvgPool2D(3, 2, ceil_mode=True)(x).shape == (1, 1, 3, 3)


def test_global_pools_reduce_height_and_width_keeping_dims():
    x = rng(4).standard_normal((2, 3, 4, 5)).astype(np.float32)
    np.testing.assert_allclose(B.GlobalAvgPool2D()(la.array(x)).asnumpy(), x.mean(axis=(2, 3), keepdims=True),
                               rtol=1e-6)
    np.testing.assert_array_equal(B.GlobalMaxPool2D()(la.array(x)).asnumpy(), x.max(axis=(2, 3), keepdims=True))


def test_residual_adds_body_and_shortcut():
    x = rng(5).standard_normal((2, 4, 5, 5)).astype(np.float32)
    body = B.Conv2D(4, 3, padding=1, in_channels=4)
    shortcut = B.Conv2D(4, 1, in_channels=4)
    for block, extra in ((B.Residual(body), lambda v: v), (B.Residual(body, shortcut), shortcut)):
        block.initialize()
        got = block(la.array(x)).asnumpy()
        want = body(la.array(x)).asnumpy() + np.asarray(extra(la.array(x)))
        np.testing.assert_allclose(got, want, rtol=1e-6)
    assert sorted(B.Residual(body, shortcut).collect_params()) == \
        ["body.bias", "body.weight", "shortcut.bias", "shortcut.weight"]
    np.testing.assert_array_equal(B.Identity()(la.array(x)).asnumpy(), x)


def test_batch_norm_on_nchw_training_and_inference():
    x = (rng(6).standard_normal((4, 3, 5, 5)) * 2 + 1).astype(np.float32)
    for hybridize in (False, True):
        bn = B.BatchNorm(momentum=0.9)
        bn.initialize()
        bn.hybridize(hybridize)
        with la.autograd.record():
            y = bn(la.array(x)).asnumpy()
        mean, var = x.mean(axis=(0, 2, 3)), x.var(axis=(0, 2, 3))
        np.testing.assert_allclose(y, (x - mean[:, None, None]) / np.sqrt(var[:, None, None] + 1e-5),
                                   rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(bn.running_mean.data().asnumpy(), 0.1 * mean, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(bn.running_var.data().asnumpy(), 0.9 + 0.1 * var, rtol=1e-5)
        rm, rv = 0.1 * mean, 0.9 + 0.1 * var  # inference: the running statistics, left unchanged
        np.testing.assert_allclose(bn(la.array(x)).asnumpy(),
                                   (x - rm[:, None, None]) / np.sqrt(rv[:, None, None] + 1e-5), rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(bn.running_mean.data().asnumpy(), rm, rtol=1e-5, atol=1e-6)


# -- hybridized == imperative; export -> imports ------------------------------------------------------
def _layers():
    return {
        "conv-groups-dil": lambda: B.Conv2D(4, 3, padding=2, dilation=2, groups=2, activation="relu"),
        "conv-depthwise": lambda: B.Conv2D(4, 3, strides=2, padding=1, groups=4),
        "conv-transpose": lambda: B.Conv2DTranspose(6, 3, strides=2, padding=1, output_padding=1, groups=2),
        "avg-pool-ceil": lambda: B.AvgPool2D(3, 2, padding=1, ceil_mode=True, count_include_pad=False),
        "max-pool-ceil": lambda: B.MaxPool2D(3, 2, ceil_mode=True),
        "global-avg": lambda: B.GlobalAvgPool2D(),
        "global-max": lambda: B.GlobalMaxPool2D(),
        "residual": lambda: B.Residual(B.HybridSequential().add(B.Conv2D(4, 3, padding=1), B.BatchNorm()),
                                       B.Conv2D(4, 1)),
    }


def _forward_backward(net, x, og):
    xa = la.array(x)
    xa.attach_grad()
    with la.autograd.record():
        y = net(xa)
    y.backward(la.array(og))
    grads = {k: p.grad().asnumpy() for k, p in net.collect_params().items() if p.grad_req != "null"}
    return y.asnumpy(), xa.grad.asnumpy(), grads


@pytest.mark.parametrize("name", list(_layers()))
def test_hybridized_equals_imperative_and_export_round_trips(name, tmp_path):
    net = _layers()[name]()
    net.initialize()
    r = rng(7)
    x = r.standard_normal((2, 4, 7, 7)).astype(np.float32)
    y0 = net(la.array(x))
    og = r.standard_normal(y0.shape).astype(np.float32)
    want = _forward_backward(net, x, og)
    net.hybridize()
    got = _forward_backward(net, x, og)
    assert net.cached_op is not None
    for a, b in zip(got[:2], want[:2]):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
    assert sorted(got[2]) == sorted(want[2])
    for k in want[2]:
        np.testing.assert_allclose(got[2][k], want[2][k], rtol=1e-4, atol=1e-5, err_msg=k)
    infer = net(la.array(x)).asnumpy()
    files = net.export(str(tmp_path / name))
    back = B.SymbolBlock.imports(files[0], ["data"], files[1])
    np.testing.assert_allclose(back(la.array(x)).asnumpy(), infer, rtol=1e-5, atol=1e-6)


# -- errors ------------------------------------------------------------------------------------------
def _initialized(net):
    net.initialize()
    return net


@pytest.mark.parametrize("make,error,fragments", [
    (lambda: B.Conv2D(6, 3, groups=4), la.LazyArrayError, ["Conv2D", "channels=6", "groups=4"]),
    (lambda: B.Conv2D(4, 3, groups=0), la.LazyArrayError, ["Conv2D", "groups"]),
    (lambda: _initialized(B.Conv2D(4, 3, groups=2))(la.ones((1, 3, 5, 5))), la.LazyArrayError, ["3 channels", "groups=2"]),
    (lambda: la.nn.conv2d(la.ones((1, 4, 5, 5)), la.ones((4, 1, 3, 3)), groups=2), la.ShapeError,
     ["conv2d", "4 channels", "expects 2"]),
    (lambda: la.nn.conv2d(la.ones((1, 4, 3, 3)), la.ones((4, 4, 3, 3)), dilation=2), la.ShapeError,
     ["conv2d", "dilated", "does not fit"]),
    (lambda: la.nn.conv2d_transpose(la.ones((1, 4, 3, 3)), la.ones((4, 2, 3, 3)), output_padding=1), la.ShapeError,
     ["conv2d_transpose", "output_padding", "stride"]),
    (lambda: la.nn.conv2d_transpose(la.ones((1, 3, 3, 3)), la.ones((4, 2, 3, 3))), la.ShapeError,
     ["conv2d_transpose", "3 channels", "expects 4"]),
    (lambda: la.nn.avg_pool2d(la.ones((1, 1, 4, 4)), kernel=2, stride=3, padding=1, ceil_mode=True), la.ShapeError,
     ["avg_pool2d", "ceil_mode", "last window"]),
    (lambda: la.nn.avg_pool2d(la.ones((1, 1, 4, 4), dtype="int32")), la.DTypeError, ["avg_pool2d", "float"]),
], ids=["layer-groups", "groups-0", "input-groups", "op-groups", "dilated-too-big", "output-padding",
        "transpose-channels", "ceil-window-outside", "avg-int"])
def test_errors_name_the_op_and_the_fix(make, error, fragments):
    with pytest.raises(error) as info:
        make()
    for f in fragments:
        assert f in str(info.value), (f, str(info.value))
