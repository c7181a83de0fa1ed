"""Issue #37 item 4: the 1-D / 3-D convolutions and pools, NHWC 2-D layers, GroupNorm, InstanceNorm,
PReLU, ELU, SELU, SiLU, Swish, HybridLambda -- each against a NumPy reference written here, in float64:

* forward, eager;
* gradients of the input and of every parameter against central finite differences of the NumPy
  reference (directional: <grad, v> for random directions v);
* hybridized equals eager (outputs and gradients);
* exported to ONNX and run in onnxruntime (float32) where it is installed;
* written as MXNet 1.x files (la.mxnet.export) and read back.
"""
from __future__ import annotations

import itertools

import numpy as np
import pytest

import lazyarray as la
from lazyarray import blocks as B


# -- NumPy references -------------------------------------------------------------------------------
def _out_len(size, k, s, p, d=1, ceil=False):
    span = size + 2 * p - (k - 1) * d - 1
    return (-(-span // s) if ceil else span // s) + 1


def conv_ref(x, w, b=None, stride=1, padding=0, dilation=1, groups=1):
    """N-D cross-correlation: a sum over the kernel taps of strided slices times the tap's
    (out, in / groups) matrix, per group."""
    n, c, *size = x.shape
    o, cg, *kernel = w.shape
    nd = len(size)
    s, p, d = ((v,) * nd if isinstance(v, int) else tuple(v) for v in (stride, padding, dilation))
    xp_ = np.pad(x, ((0, 0), (0, 0)) + tuple((q, q) for q in p))
    out = [_out_len(*a) for a in zip(size, kernel, s, p, d)]
    y = np.zeros((n, groups, o // groups) + tuple(out))
    wg = w.reshape((groups, o // groups, cg) + tuple(kernel))
    for tap in itertools.product(*(range(k) for k in kernel)):
        key = (slice(None), slice(None)) + tuple(slice(t * dd, t * dd + (m - 1) * ss + 1, ss)
                                                 for t, dd, m, ss in zip(tap, d, out, s))
        sl = xp_[key].reshape((n, groups, cg) + tuple(out))
        y += np.einsum("ngc...,goc->ngo...", sl, wg[(Ellipsis,) + tap])
    y = y.reshape((n, o) + tuple(out))
    return y if b is None else y + b.reshape((1, -1) + (1,) * nd)


def conv_transpose_ref(x, w, b=None, stride=1, padding=0, output_padding=0, dilation=1, groups=1):
    """N-D transposed convolution by scattering: input position i and tap t add to output
    position i * stride + t * dilation of the full output, which the padding then crops."""
    n, c, *size = x.shape
    _, og, *kernel = w.shape
    nd = len(size)
    s, p, op, d = ((v,) * nd if isinstance(v, int) else tuple(v) for v in (stride, padding, output_padding, dilation))
    full = [(i - 1) * ss + (k - 1) * dd + 1 + o for i, ss, k, dd, o in zip(size, s, kernel, d, op)]
    cg = c // groups
    y = np.zeros((n, groups, og) + tuple(full))
    xg = x.reshape((n, groups, cg) + tuple(size))
    wg = w.reshape((groups, cg, og) + tuple(kernel))
    for tap in itertools.product(*(range(k) for k in kernel)):
        key = (slice(None),) * 3 + tuple(slice(t * dd, t * dd + (i - 1) * ss + 1, ss)
                                         for t, dd, i, ss in zip(tap, d, size, s))
        y[key] += np.einsum("ngc...,gco->ngo...", xg, wg[(Ellipsis,) + tap])
    y = y.reshape((n, groups * og) + tuple(full))
    y = y[(slice(None), slice(None)) + tuple(slice(q, f - q) for q, f in zip(p, full))]
    return y if b is None else y + b.reshape((1, -1) + (1,) * nd)


def pool_ref(x, kind, kernel, stride=None, padding=0, ceil_mode=False, count_include_pad=True):
    """N-D max / mean pooling over windows of the padded input clipped to it, by loops."""
    n, c, *size = x.shape
    nd = len(size)
    k, p = ((v,) * nd if isinstance(v, int) else tuple(v) for v in (kernel, padding))
    s = k if stride is None else (stride,) * nd if isinstance(stride, int) else tuple(stride)
    fill = -np.inf if kind == "max" else 0.0
    xp_ = np.pad(x, ((0, 0), (0, 0)) + tuple((q, q) for q in p), constant_values=fill)
    out = [_out_len(i, kk, ss, q, ceil=ceil_mode) for i, kk, ss, q in zip(size, k, s, p)]
    y = np.zeros((n, c) + tuple(out))
    for pos in itertools.product(*(range(m) for m in out)):
        lo = [i * ss for i, ss in zip(pos, s)]
        hi = [min(a + kk, i + 2 * q) for a, kk, i, q in zip(lo, k, size, p)]
        win = xp_[(slice(None), slice(None)) + tuple(slice(a, b_) for a, b_ in zip(lo, hi))]
        axes = tuple(range(2, 2 + nd))
        if kind == "max":
            y[(Ellipsis,) + pos] = win.max(axis=axes)
        else:
            count = np.prod([b_ - a if count_include_pad else min(b_, q + i) - max(a, q)
                             for a, b_, q, i in zip(lo, hi, p, size)])
            y[(Ellipsis,) + pos] = win.sum(axis=axes) / count
    return y


def _normalize(x, axes, eps=1e-5):
    m = x.mean(axis=axes, keepdims=True)
    return (x - m) / np.sqrt(((x - m) ** 2).mean(axis=axes, keepdims=True) + eps)


def group_norm_ref(x, p, groups):
    n, c = x.shape[:2]
    y = _normalize(x.reshape(n, groups, -1), (2,)).reshape(x.shape)
    view = (1, c) + (1,) * (x.ndim - 2)
    return y * p["gamma"].reshape(view) + p["beta"].reshape(view)


def instance_norm_ref(x, p):
    view = (1, x.shape[1]) + (1,) * (x.ndim - 2)
    return _normalize(x, tuple(range(2, x.ndim))) * p["gamma"].reshape(view) + p["beta"].reshape(view)


def elu_ref(x, alpha):
    return np.where(x > 0, x, alpha * np.expm1(np.minimum(x, 0)))


def _nhwc(ref):
    """A reference on NCHW data as one on NHWC data."""
    return lambda x, p: ref(x.transpose(0, 3, 1, 2), p).transpose(0, 2, 3, 1)


SELU_A, SELU_S = 1.6732632423543772, 1.0507009873554805

# id -> (layer factory, input shape, reference(x, params))
CASES = {
    "conv1d": (lambda: B.Conv1D(4, 3, strides=2, padding=1, groups=2, in_channels=4), (2, 4, 9),
               lambda x, p: conv_ref(x, p["weight"], p["bias"], 2, 1, 1, 2)),
    "conv1d-dil-act": (lambda: B.Conv1D(3, 2, dilation=2, activation="tanh", in_channels=2), (2, 2, 7),
                       lambda x, p: np.tanh(conv_ref(x, p["weight"], p["bias"], 1, 0, 2))),
    "conv1d-transpose": (lambda: B.Conv1DTranspose(4, 3, strides=2, padding=1, output_padding=1, groups=2,
                                                   in_channels=4), (2, 4, 5),
                         lambda x, p: conv_transpose_ref(x, p["weight"], p["bias"], 2, 1, 1, 1, 2)),
    "conv3d": (lambda: B.Conv3D(4, (3, 2, 3), strides=(2, 1, 1), padding=(1, 1, 0), dilation=(2, 1, 1), groups=2,
                                in_channels=4), (2, 4, 6, 4, 5),
               lambda x, p: conv_ref(x, p["weight"], p["bias"], (2, 1, 1), (1, 1, 0), (2, 1, 1), 2)),
    "conv3d-hw-stride-nobias": (lambda: B.Conv3D(2, 2, strides=(1, 2, 2), use_bias=False, in_channels=3),
                                (1, 3, 3, 5, 5), lambda x, p: conv_ref(x, p["weight"], None, (1, 2, 2))),
    "conv3d-transpose": (lambda: B.Conv3DTranspose(4, (3, 2, 2), strides=(2, 1, 2), padding=(1, 0, 1),
                                                   output_padding=(1, 0, 1), groups=2, in_channels=4),
                         (2, 4, 3, 3, 3),
                         lambda x, p: conv_transpose_ref(x, p["weight"], p["bias"], (2, 1, 2), (1, 0, 1), (1, 0, 1),
                                                         1, 2)),
    "conv3d-transpose-dil": (lambda: B.Conv3DTranspose(3, 2, strides=(3, 1, 1), dilation=(2, 1, 2), in_channels=2),
                             (1, 2, 2, 3, 3),
                             lambda x, p: conv_transpose_ref(x, p["weight"], p["bias"], (3, 1, 1), 0, 0, (2, 1, 2))),
    "conv2d-nhwc": (lambda: B.Conv2D(4, 3, strides=2, padding=1, groups=2, layout="NHWC", in_channels=4),
                    (2, 6, 5, 4),
                    _nhwc(lambda x, p: conv_ref(x, p["weight"].transpose(0, 3, 1, 2), p["bias"], 2, 1, 1, 2))),
    "maxpool1d": (lambda: B.MaxPool1D(3, 2, 1, ceil_mode=True), (2, 3, 8),
                  lambda x, p: pool_ref(x, "max", 3, 2, 1, True)),
    "avgpool1d": (lambda: B.AvgPool1D(3, 2, 1, count_include_pad=False), (2, 3, 9),
                  lambda x, p: pool_ref(x, "avg", 3, 2, 1, False, False)),
    "maxpool3d": (lambda: B.MaxPool3D(3, 2, 1, ceil_mode=True), (2, 2, 5, 6, 7),
                  lambda x, p: pool_ref(x, "max", 3, 2, 1, True)),
    "avgpool3d-ceil": (lambda: B.AvgPool3D((3, 2, 2), (2, 1, 2), (1, 0, 1), ceil_mode=True), (2, 2, 5, 4, 6),
                       lambda x, p: pool_ref(x, "avg", (3, 2, 2), (2, 1, 2), (1, 0, 1), True, True)),
    "avgpool3d-excl": (lambda: B.AvgPool3D(2, 2, 1, count_include_pad=False), (1, 2, 4, 5, 3),
                       lambda x, p: pool_ref(x, "avg", 2, 2, 1, False, False)),
    "global-max1d": (lambda: B.GlobalMaxPool1D(), (2, 3, 5), lambda x, p: x.max(axis=2, keepdims=True)),
    "global-avg1d": (lambda: B.GlobalAvgPool1D(), (2, 3, 5), lambda x, p: x.mean(axis=2, keepdims=True)),
    "global-max3d": (lambda: B.GlobalMaxPool3D(), (2, 3, 2, 3, 4), lambda x, p: x.max(axis=(2, 3, 4), keepdims=True)),
    "global-avg3d": (lambda: B.GlobalAvgPool3D(), (2, 3, 2, 3, 4),
                     lambda x, p: x.mean(axis=(2, 3, 4), keepdims=True)),
    "maxpool2d-nhwc": (lambda: B.MaxPool2D(3, 2, padding=1, layout="NHWC"), (2, 7, 6, 3),
                       _nhwc(lambda x, p: pool_ref(x, "max", 3, 2, 1))),
    "avgpool2d-nhwc": (lambda: B.AvgPool2D(2, layout="NHWC"), (2, 6, 4, 3), _nhwc(lambda x, p: pool_ref(x, "avg", 2))),
    "global-avg2d-nhwc": (lambda: B.GlobalAvgPool2D(layout="NHWC"), (2, 4, 5, 3),
                          lambda x, p: x.mean(axis=(1, 2), keepdims=True)),
    "global-max2d-nhwc": (lambda: B.GlobalMaxPool2D(layout="NHWC"), (2, 4, 5, 3),
                          lambda x, p: x.max(axis=(1, 2), keepdims=True)),
    "group-norm": (lambda: B.GroupNorm(2, in_channels=4), (2, 4, 3, 3), lambda x, p: group_norm_ref(x, p, 2)),
    "group-norm-1d": (lambda: B.GroupNorm(3, in_channels=6), (3, 6, 4), lambda x, p: group_norm_ref(x, p, 3)),
    "instance-norm": (lambda: B.InstanceNorm(scale=True, in_channels=3), (2, 3, 5, 4),
                      lambda x, p: instance_norm_ref(x, p)),
    "prelu-channels": (lambda: B.PReLU(in_channels=3), (2, 3, 4),
                       lambda x, p: np.where(x > 0, x, x * p["alpha"].reshape(1, 3, 1))),
    "prelu": (lambda: B.PReLU(), (3, 4), lambda x, p: np.where(x > 0, x, x * p["alpha"])),
    "elu": (lambda: B.ELU(0.7), (3, 4), lambda x, p: elu_ref(x, 0.7)),
    "selu": (lambda: B.SELU(), (3, 4), lambda x, p: SELU_S * elu_ref(x, SELU_A)),
    "silu": (lambda: B.SiLU(), (3, 4), lambda x, p: x / (1 + np.exp(-x))),
    "swish": (lambda: B.Swish(1.5), (3, 4), lambda x, p: x / (1 + np.exp(-1.5 * x))),
    "hybrid-lambda": (lambda: B.HybridLambda(lambda x: la.tanh(x) * x + 1.0), (3, 4), lambda x, p: np.tanh(x) * x + 1),
    "hybrid-lambda-name": (lambda: B.HybridLambda("sigmoid"), (3, 4), lambda x, p: 1 / (1 + np.exp(-x))),
}


def _built(name, dtype="float64", seed=0):
    """The case's layer, initialized, its parameters random (not the initializers' ones / zeros), and
    an input away from the kinks (|x| > 0.05: relu-like layers are differentiable there)."""
    make, shape, ref = CASES[name]
    net = make()
    net.initialize()
    r = np.random.default_rng(seed)
    x = r.standard_normal(shape)
    x = np.where(np.abs(x) < 0.05, 0.05 * np.sign(x) + 0.05 * (x == 0), x).astype(dtype)
    net(la.array(x.astype("float32")))  # (deferred shapes, if any)
    net.cast(dtype)
    for k, p in net.collect_params().items():
        p.set_data(la.array((r.standard_normal(p.shape) * 0.5 + (1.0 if k.endswith("gamma") else 0.0)).astype(dtype)))
    return net, x, ref


def _params(net):
    return {k.rsplit(".", 1)[-1]: p.data().asnumpy() for k, p in net.collect_params().items()}


def _forward_backward(net, x, og):
    xa = la.array(x)
    xa.attach_grad()
    with la.autograd.record():
        y = net(xa)
    y.backward(la.array(og))
    return y.asnumpy(), xa.grad.asnumpy(), {k.rsplit(".", 1)[-1]: p.grad().asnumpy()
                                            for k, p in net.collect_params().items() if p.grad_req != "null"}


def _directional_fd(f, value, v, eps=1e-6):
    return (f(value + eps * v) - f(value - eps * v)) / (2 * eps)


@pytest.mark.parametrize("name", list(CASES))
def test_forward_and_gradients_match_numpy_eager_and_hybridized(name):
    net, x, ref = _built(name)
    p = _params(net)
    want = ref(x, p)
    r = np.random.default_rng(1)
    og = r.standard_normal(want.shape)
    eager = _forward_backward(net, x, og)
    np.testing.assert_allclose(eager[0], want, rtol=1e-10, atol=1e-10)
    # gradients: <grad, v> against central differences of the NumPy reference's <y, og>
    checks = [("x", eager[1], x, lambda v: float(np.sum(ref(v, p) * og)))]
    for k, g in eager[2].items():
        checks.append((k, g, p[k], lambda v, k=k: float(np.sum(ref(x, {**p, k: v}) * og))))
    for what, grad, value, loss in checks:
        for _ in range(2):
            v = r.standard_normal(value.shape)
            np.testing.assert_allclose(np.sum(grad * v), _directional_fd(loss, value, v), rtol=1e-5, atol=1e-7,
                                       err_msg=f"{name}: gradient of {what}")
    net.hybridize()
    hybrid = _forward_backward(net, x, og)
    assert net.cached_op is not None
    for a, b, what in ((hybrid[0], eager[0], "output"), (hybrid[1], eager[1], "input gradient")):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12, err_msg=f"{name} hybridized: {what}")
    assert sorted(hybrid[2]) == sorted(eager[2])
    for k in eager[2]:
        np.testing.assert_allclose(hybrid[2][k], eager[2][k], rtol=1e-10, atol=1e-12, err_msg=f"{name}: {k}")


# AvgPool with ceil_mode=True and count_include_pad=True: refused by the ONNX exporter (the divisor of
# a clipped window differs between runtimes; lazyarray/onnx/export_nn.py says why)
ONNX_REFUSED = {"avgpool3d-ceil": "count_include_pad=True"}


@pytest.mark.parametrize("name", list(CASES))
def test_exports_to_onnx_and_runs_in_onnxruntime(name, tmp_path):
    onnx = pytest.importorskip("onnx")
    ort = pytest.importorskip("onnxruntime")
    net, x, _ = _built(name, dtype="float32")
    net.hybridize()
    want = net(la.array(x)).asnumpy()
    path = tmp_path / f"{name}.onnx"
    if name in ONNX_REFUSED:
        with pytest.raises(la.LazyArrayError, match=ONNX_REFUSED[name]):
            la.onnx.export(net, str(path))
        return
    la.onnx.export(net, str(path))
    onnx.checker.check_model(onnx.load(str(path)), full_check=True)
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    got, = sess.run(None, {sess.get_inputs()[0].name: x})
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)



@pytest.mark.parametrize("name", list(CASES))
def test_exports_to_mxnet_files_and_loads_back(name, tmp_path):
    """la.mxnet.export writes every new layer as MXNet 1.x operators (MXNet itself is not installed
    here: the files are read back by la.mxnet.load, whose operator readers follow MXNet's semantics)."""
    net, x, _ = _built(name, dtype="float32")
    net.hybridize()
    want = net(la.array(x)).asnumpy()
    files = la.mxnet.export(net, str(tmp_path / name))
    sym, params = la.mxnet.load(*files, input_shapes={"data": x.shape})
    got = la.CachedOp(sym)(data=la.array(x), **params)
    np.testing.assert_allclose(got.asnumpy(), want, rtol=1e-5, atol=1e-6)

# -- shapes, names, a second batch, errors ----------------------------------------------------------
def test_weight_shapes_follow_gluon():
    shapes = {
        B.Conv1D(4, 3, groups=2, in_channels=6): (4, 3, 3),
        B.Conv1DTranspose(4, 3, groups=2, in_channels=6): (6, 2, 3),
        B.Conv3D(4, (1, 2, 3), in_channels=2): (4, 2, 1, 2, 3),
        B.Conv3DTranspose(4, 2, groups=2, in_channels=2): (2, 2, 2, 2, 2),
        B.Conv2D(4, (2, 3), groups=2, layout="NHWC", in_channels=6): (4, 2, 3, 3),
    }
    for layer, shape in shapes.items():
        assert layer.weight.shape == shape, (layer, shape)
    assert B.PReLU(in_channels=3).alpha.shape == (3,)
    act = B.PReLU()
    act.initialize()
    np.testing.assert_array_equal(act.alpha.data().asnumpy(), [0.25])  # Gluon's Constant(0.25)
    norm = B.InstanceNorm(in_channels=2)
    assert norm.gamma.grad_req == "null" and norm.beta.grad_req == "write"  # Gluon: scale=False, center=True
    x = la.array(np.random.default_rng(0).standard_normal((2, 3)).astype(np.float32))
    np.testing.assert_array_equal(B.SiLU()(x).asnumpy(), B.Swish()(x).asnumpy())


@pytest.mark.parametrize("name", ["conv3d", "conv3d-transpose", "conv1d", "avgpool3d-excl", "group-norm"])
def test_hybridized_graph_serves_another_batch(name):
    net, x, ref = _built(name)
    net.hybridize()
    net(la.array(x))
    x3 = np.concatenate([x, x[:1] * 0.5])
    np.testing.assert_allclose(net(la.array(x3)).asnumpy(), ref(x3, _params(net)), rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("make,error,fragments", [
    (lambda: B.Conv1D(4, (3, 3)), la.ParamValueError, ["Conv1D", "kernel_size", "1-tuple"]),
    (lambda: B.Conv3D(4, 3, layout="NCHW"), la.ParamValueError, ["Conv3D", "layout", "NCDHW"]),
    (lambda: B.Conv3D(4, 3, strides=0), la.ParamValueError, ["Conv3D", "strides"]),
    (lambda: B.Conv1D("4", 3), la.ParamError, ["Conv1D", "channels"]),
    (lambda: B.Conv1DTranspose(4, 3, output_padding=1), la.ParamValueError, ["output_padding", "stride"]),
    (lambda: B.Conv2DTranspose(4, 3, layout="NHWC"), la.ParamValueError, ["Conv2DTranspose", "layout"]),
    (lambda: B.MaxPool3D((2, 2)), la.ParamValueError, ["MaxPool3D", "pool_size", "triple"]),
    (lambda: B.AvgPool1D(count_include_pad="yes"), la.ParamError, ["AvgPool1D", "count_include_pad"]),
    (lambda: B.GlobalAvgPool3D(layout="NDHWC"), la.ParamValueError, ["GlobalAvgPool3D", "layout"]),
    (lambda: B.GroupNorm(0), la.ParamValueError, ["GroupNorm", "num_groups"]),
    (lambda: B.GroupNorm(3, in_channels=4), la.ShapeError, ["GroupNorm", "num_groups=3"]),
    (lambda: B.InstanceNorm(epsilon=0), la.ParamValueError, ["InstanceNorm", "epsilon"]),
    (lambda: B.PReLU(in_channels=0), la.ParamValueError, ["PReLU", "in_channels"]),
    (lambda: B.ELU(alpha="x"), la.ParamError, ["ELU", "alpha"]),
    (lambda: B.Swish(beta=float("nan")), la.ParamValueError, ["Swish", "beta"]),
    (lambda: B.HybridLambda(3), la.ParamError, ["HybridLambda", "function"]),
    (lambda: B.HybridLambda("no_such_op"), la.ParamValueError, ["HybridLambda", "no_such_op"]),
    (lambda: _initialized(B.Conv3D(2, 3))(la.ones((1, 2, 5, 5))), la.ShapeError, ["Conv3D", "5-D", "NCDHW"]),
    (lambda: _initialized(B.Conv3D(2, (4, 1, 1)))(la.ones((1, 2, 3, 5, 5))), la.ShapeError, ["Conv3D", "depth"]),
    (lambda: B.MaxPool1D()(la.ones((1, 2, 3, 4))), la.ShapeError, ["MaxPool1D", "3-D"]),
    (lambda: _initialized(B.GroupNorm(2))(la.ones((1, 3, 4))), la.ShapeError, ["GroupNorm", "num_groups=2"]),
    (lambda: _initialized(B.InstanceNorm())(la.ones((2, 3))), la.ShapeError, ["InstanceNorm"]),
], ids=["conv1d-kernel", "conv3d-layout", "conv3d-stride0", "conv1d-channels", "output-padding",
        "transpose-nhwc", "pool3d-size", "count-include-pad", "global-layout", "groups-0", "groups-divide",
        "eps-0", "prelu-channels", "elu-alpha", "swish-nan", "lambda-not-callable", "lambda-unknown-op",
        "conv3d-rank", "conv3d-depth", "pool1d-rank", "groupnorm-input", "instancenorm-rank"])
def test_errors_name_the_layer_and_the_fix(make, error, fragments):
    with pytest.raises(error) as info:
        make()
    for f in fragments:
        assert f in str(info.value), (f, str(info.value))


def _initialized(net):
    net.initialize()
    return net
