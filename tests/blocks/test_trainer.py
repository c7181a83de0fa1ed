"""Trainer: SGD (momentum, weight decay) and Adam against hand-written updates; rescaling."""
from __future__ import annotations

import numpy as np
import pytest

import lazyarray as la
from lazyarray import blocks as B


def _setup(optimizer, params):
    la.random.seed(0)
    net = B.Dense(2, in_units=3)
    net.initialize()
    trainer = B.Trainer(net.collect_params(), optimizer, params)
    x = la.array(np.arange(12.0).reshape(4, 3) / 10, dtype="float32")  # the layer's dtype (la.DTypeError otherwise)
    target = la.array(np.ones((4, 2)))
    return net, trainer, x, target


def _grads(net, x, target):
    with la.autograd.record():
        loss = B.L2Loss()(net(x), target)
    loss.backward()
    return {n: p.grad().asnumpy().copy() for n, p in net.collect_params().items()}


def test_sgd_with_momentum_and_weight_decay():
    net, trainer, x, target = _setup("sgd", {"learning_rate": 0.1, "momentum": 0.9, "wd": 0.01})
    w = {n: p.data().asnumpy().copy() for n, p in net.collect_params().items()}
    mom = {n: np.zeros_like(v) for n, v in w.items()}
    for _ in range(3):
        g = _grads(net, x, target)
        trainer.step(4)
        for n in list(w):
            mom[n] = 0.9 * mom[n] - 0.1 * (g[n] / 4 + 0.01 * w[n])
            w[n] = w[n] + mom[n]
            np.testing.assert_allclose(net.collect_params()[n].data().asnumpy(), w[n], rtol=1e-5, atol=1e-6)


def test_plain_sgd_rescales_by_batch_size():
    net, trainer, x, target = _setup("sgd", {"learning_rate": 1.0})
    before = net.weight.data().asnumpy().copy()
    g = _grads(net, x, target)["weight"]
    trainer.step(8)
    np.testing.assert_allclose(net.weight.data().asnumpy(), before - g / 8, rtol=1e-5, atol=1e-7)


def test_adam():
    net, trainer, x, target = _setup("adam", {"learning_rate": 0.01, "beta1": 0.8, "beta2": 0.9})
    w = {n: p.data().asnumpy().astype(np.float64) for n, p in net.collect_params().items()}
    m = {n: np.zeros_like(v) for n, v in w.items()}
    v = {n: np.zeros_like(x) for n, x in w.items()}
    for t in range(1, 4):
        g = _grads(net, x, target)
        trainer.step(4)
        for n in list(w):
            gn = g[n] / 4
            m[n] = 0.8 * m[n] + 0.2 * gn
            v[n] = 0.9 * v[n] + 0.1 * gn * gn
            lr = 0.01 * np.sqrt(1 - 0.9 ** t) / (1 - 0.8 ** t)
            w[n] = w[n] - lr * m[n] / (np.sqrt(v[n]) + 1e-8)
            np.testing.assert_allclose(net.collect_params()[n].data().asnumpy(), w[n], rtol=1e-4, atol=1e-6)


def test_frozen_parameters_are_not_updated():
    net = B.HybridSequential()
    net.add(B.Dense(3, in_units=2), B.BatchNorm(in_channels=3))
    net.initialize()
    net.hybridize()
    net[0].bias.grad_req = "null"
    trainer = B.Trainer(net.collect_params(), "sgd", {"learning_rate": 1.0, "wd": 0.5})
    with la.autograd.record():
        loss = (net(la.ones((4, 2))) * la.array(np.arange(12.0).reshape(4, 3))).sum()
    loss.backward()
    stats = net[1].running_var.data().asnumpy().copy()
    trainer.step(1)
    np.testing.assert_array_equal(net[0].bias.data().asnumpy(), np.zeros(3))
    np.testing.assert_array_equal(net[1].running_var.data().asnumpy(), stats)


def test_learning_rate_can_change():
    _, trainer, _, _ = _setup("sgd", {"learning_rate": 0.1})
    assert trainer.learning_rate == 0.1
    trainer.set_learning_rate(0.01)
    assert trainer.learning_rate == 0.01


def test_bad_optimizer_and_params_are_explained():
    net = B.Dense(2, in_units=2)
    with pytest.raises(la.ParamValueError, match="adam"):
        B.Trainer(net.collect_params(), "rmsprops")
    with pytest.raises(la.ParamValueError, match="momentum"):
        B.Trainer(net.collect_params(), "adam", {"momentum": 0.9})
    with pytest.raises(TypeError, match="Parameters"):
        B.Trainer([1, 2], "sgd")
