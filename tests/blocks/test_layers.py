"""Layers and losses against NumPy, with Gluon semantics."""
from __future__ import annotations

import numpy as np
import pytest

import lazyarray as la
from lazyarray import blocks as B

RNG = np.random.default_rng(0)


def arr(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def build(layer, *inputs):
    layer.initialize()
    out = layer(*[la.array(x) for x in inputs])
    return layer, out.asnumpy()


def test_dense_flattens_nd_input_and_learns_in_units():
    x = arr(2, 3, 4)
    layer, y = build(B.Dense(5), x)
    w, b = layer.weight.data().asnumpy(), layer.bias.data().asnumpy()
    assert w.shape == (5, 12)
    np.testing.assert_allclose(y, x.reshape(2, -1) @ w.T + b, rtol=1e-5, atol=1e-6)


def test_dense_without_flatten_applies_to_the_last_axis():
    x = arr(2, 3, 4)
    layer, y = build(B.Dense(5, flatten=False, use_bias=False, activation="tanh"), x)
    assert layer.bias is None and y.shape == (2, 3, 5)
    np.testing.assert_allclose(y, np.tanh(x @ layer.weight.data().asnumpy().T), rtol=1e-5, atol=1e-6)


def test_dense_with_in_units_initializes_at_once():
    layer = B.Dense(3, in_units=4)
    layer.initialize()
    assert layer.weight.data().shape == (3, 4)
    np.testing.assert_array_equal(layer.bias.data().asnumpy(), np.zeros(3))


@pytest.mark.parametrize("name,ref", [
    ("relu", lambda x: np.maximum(x, 0)),
    ("sigmoid", lambda x: 1 / (1 + np.exp(-x))),
    ("tanh", np.tanh),
    ("softrelu", lambda x: np.log1p(np.exp(x))),
    ("softsign", lambda x: x / (1 + np.abs(x))),
])
def test_activation(name, ref):
    x = arr(3, 4)
    np.testing.assert_allclose(B.Activation(name)(la.array(x)).asnumpy(), ref(x), rtol=1e-5, atol=1e-6)


def test_unknown_activation_lists_the_known_ones():
    with pytest.raises(la.ParamValueError, match="relu"):
        B.Activation("swishy")


def test_dropout_drops_only_in_training_mode():
    x = la.ones((200, 50))
    layer = B.Dropout(0.5)
    np.testing.assert_array_equal(layer(x).asnumpy(), np.ones((200, 50)))
    with la.autograd.record():
        y = layer(x).asnumpy()
    assert set(np.unique(y)) <= {0.0, 2.0}
    assert 0.4 < (y == 0).mean() < 0.6
    with pytest.raises(la.ParamValueError):
        B.Dropout(1.0)


def test_batchnorm_training_uses_batch_statistics_and_updates_running_ones():
    x = arr(6, 3, 2, 2) * 3 + 1
    layer = B.BatchNorm(momentum=0.8)
    layer.initialize()
    with la.autograd.record():
        y = layer(la.array(x)).asnumpy()
    mean, var = x.mean(axis=(0, 2, 3)), x.var(axis=(0, 2, 3))
    want = (x - mean[None, :, None, None]) / np.sqrt(var[None, :, None, None] + 1e-5)
    np.testing.assert_allclose(y, want, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(layer.running_mean.data().asnumpy(), 0.2 * mean, rtol=1e-5)
    np.testing.assert_allclose(layer.running_var.data().asnumpy(), 0.8 + 0.2 * var, rtol=1e-5)


def test_batchnorm_inference_uses_running_statistics():
    x = arr(4, 3)
    layer = B.BatchNorm(in_channels=3)
    layer.initialize()
    layer.running_mean.set_data(np.array([1.0, 2.0, 3.0]))
    layer.running_var.set_data(np.array([4.0, 1.0, 0.25]))
    layer.gamma.set_data(np.array([2.0, 1.0, 1.0]))
    y = layer(la.array(x)).asnumpy()
    want = (x - [1, 2, 3]) / np.sqrt(np.array([4.0, 1.0, 0.25]) + 1e-5) * [2, 1, 1]
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-5)
    assert layer.running_mean.grad_req == "null" and layer.gamma.grad_req == "write"


def test_batchnorm_without_center_and_scale_freezes_them():
    layer = B.BatchNorm(center=False, scale=False)
    assert layer.beta.grad_req == "null" and layer.gamma.grad_req == "null"


def test_embedding_takes_rows():
    layer = B.Embedding(10, 4)
    layer.initialize()
    idx = np.array([[1, 3], [9, 1]])
    table = layer.weight.data().asnumpy()
    np.testing.assert_array_equal(layer(la.array(idx)).asnumpy(), table[idx])
    np.testing.assert_array_equal(layer(la.array(idx.astype(np.float32))).asnumpy(), table[idx])


def _conv_ref(x, w, b, stride, pad):
    xp_ = np.pad(x, ((0, 0), (0, 0), (pad[0], pad[0]), (pad[1], pad[1])))
    kh, kw = w.shape[2:]
    ho, wo = (xp_.shape[2] - kh) // stride[0] + 1, (xp_.shape[3] - kw) // stride[1] + 1
    out = np.zeros((x.shape[0], w.shape[0], ho, wo), np.float64)
    for i in range(ho):
        for j in range(wo):
            patch = xp_[:, :, i * stride[0]:i * stride[0] + kh, j * stride[1]:j * stride[1] + kw]
            out[:, :, i, j] = np.einsum("ncij,ocij->no", patch, w)
    return out + b[None, :, None, None]


@pytest.mark.parametrize("kernel,strides,padding", [(3, 1, 0), (3, 2, 1), ((3, 2), (1, 2), (1, 0))])
def test_conv2d(kernel, strides, padding):
    x = arr(2, 3, 7, 6)
    layer, y = build(B.Conv2D(4, kernel, strides=strides, padding=padding), x)
    w, b = layer.weight.data().asnumpy(), layer.bias.data().asnumpy()
    def pair(v):
        return (v, v) if isinstance(v, int) else v

    np.testing.assert_allclose(y, _conv_ref(x, w, b, pair(strides), pair(padding)), rtol=1e-4, atol=1e-5)
    assert layer.weight.shape[1] == 3


def test_conv2d_rejects_other_layouts():
    # NCHW and NHWC (issue #37; NHWC is checked in test_layers_more.py); others are refused by name
    with pytest.raises(la.ParamValueError, match="NCHW"):
        B.Conv2D(4, 3, layout="CHWN")


def test_maxpool_and_flatten():
    x = arr(2, 3, 4, 6)
    y = B.MaxPool2D()(la.array(x)).asnumpy()
    np.testing.assert_array_equal(y, x.reshape(2, 3, 2, 2, 3, 2).max(axis=(3, 5)))
    y = B.MaxPool2D(pool_size=3, strides=1, padding=1)(la.array(x)).asnumpy()
    assert y.shape == (2, 3, 4, 6)
    np.testing.assert_array_equal(B.Flatten()(la.array(x)).asnumpy(), x.reshape(2, -1))


def _log_softmax(x):
    s = x - x.max(axis=-1, keepdims=True)
    return s - np.log(np.exp(s).sum(axis=-1, keepdims=True))


def test_softmax_cross_entropy_is_per_sample():
    pred, label = arr(5, 4), np.array([0, 3, 1, 1, 2])
    got = B.SoftmaxCrossEntropyLoss()(la.array(pred), la.array(label)).asnumpy()
    np.testing.assert_allclose(got, -_log_softmax(pred)[np.arange(5), label], rtol=1e-5)
    got = B.SoftmaxCrossEntropyLoss()(la.array(pred), la.array(label.astype(np.float32))).asnumpy()
    np.testing.assert_allclose(got, -_log_softmax(pred)[np.arange(5), label], rtol=1e-5)


def test_softmax_cross_entropy_dense_labels_and_class_axis():
    pred = arr(3, 4)
    dist = np.abs(arr(3, 4))
    dist /= dist.sum(axis=1, keepdims=True)
    got = B.SoftmaxCrossEntropyLoss(sparse_label=False)(la.array(pred), la.array(dist)).asnumpy()
    np.testing.assert_allclose(got, -(_log_softmax(pred) * dist).sum(axis=1), rtol=1e-5)
    pred_t = np.ascontiguousarray(pred.T)[None]  # (1, classes, 3): class axis 1
    label = np.array([[0, 3, 2]])
    got = B.SoftmaxCrossEntropyLoss(axis=1)(la.array(pred_t), la.array(label)).asnumpy()
    np.testing.assert_allclose(got, [-_log_softmax(pred)[np.arange(3), [0, 3, 2]].mean()], rtol=1e-5)


def test_l2_and_l1_losses():
    pred, label = arr(4, 3), arr(4, 3)
    np.testing.assert_allclose(B.L2Loss()(la.array(pred), la.array(label)).asnumpy(),
                               0.5 * ((pred - label) ** 2).mean(axis=1), rtol=1e-5)
    np.testing.assert_allclose(B.L1Loss(weight=2.0)(la.array(pred), la.array(label)).asnumpy(),
                               2 * np.abs(pred - label).mean(axis=1), rtol=1e-5)
    # (N,) labels for (N, 1) predictions are reshaped like Gluon does
    np.testing.assert_allclose(B.L2Loss()(la.array(pred[:, :1]), la.array(label[:, 0])).asnumpy(),
                               0.5 * (pred[:, 0] - label[:, 0]) ** 2, rtol=1e-5)


def test_layer_gradients_match_finite_differences():
    """A float64 model of every differentiable layer against central differences."""
    la.random.seed(0)
    net = B.HybridSequential()
    net.add(B.Conv2D(2, 3, padding=1, dtype="float64"), B.MaxPool2D(), B.Flatten(),
            B.Dense(3, activation="tanh", dtype="float64"))
    emb = B.Embedding(5, 4, dtype="float64")
    net.initialize()
    emb.initialize()
    x = RNG.standard_normal((2, 1, 4, 4))
    idx = la.array(np.array([1, 4]))
    label = la.array(np.array([2, 0]))
    loss_fn = B.SoftmaxCrossEntropyLoss()

    def loss_of(xv):
        h = net(la.array(xv)) + emb(idx)[:, :3]
        return loss_fn(h, label).sum()

    xa = la.array(x)
    xa.attach_grad()
    with la.autograd.record():
        total = loss_fn(net(xa) + emb(idx)[:, :3], label).sum()
    total.backward()
    num = np.zeros_like(x)
    for k in range(x.size):
        for sign in (1, -1):
            xp_ = x.copy()
            xp_.reshape(-1)[k] += sign * 1e-6
            num.reshape(-1)[k] += sign * loss_of(xp_).item() / 2e-6
    np.testing.assert_allclose(xa.grad.asnumpy(), num, rtol=1e-5, atol=1e-7)
    g = emb.weight.grad().asnumpy()
    assert np.abs(g[[1, 4]]).sum() > 0 and np.abs(g[[0, 2, 3]]).sum() == 0
