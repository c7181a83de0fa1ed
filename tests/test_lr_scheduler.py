"""la.lr_scheduler against MXNet's schedules written out in the test (stateful reference loops),
and their use by Trainer (one rate per update, counted from 1)."""
from __future__ import annotations

import math

import numpy as np
import pytest

import lazyarray as la
from lazyarray import blocks as B

S = la.lr_scheduler


def _mxnet_factor(step, factor, base_lr, stop, warmup_steps, warmup_begin_lr, n):
    """MXNet's FactorScheduler, stateful as there (called with num_update = 1..n)."""
    out, count, lr = [], 0, base_lr
    for t in range(1, n + 1):
        if t < warmup_steps:
            out.append(warmup_begin_lr + (base_lr - warmup_begin_lr) * t / warmup_steps)
            continue
        while t > count + step:
            count += step
            lr = max(lr * factor, stop)
        out.append(lr)
    return out


@pytest.mark.parametrize("warmup", [0, 3])
def test_factor_scheduler_matches_mxnet(warmup):
    s = S.FactorScheduler(step=4, factor=0.5, base_lr=0.8, stop_factor_lr=0.02, warmup_steps=warmup,
                          warmup_begin_lr=0.1)
    np.testing.assert_allclose([s(t) for t in range(1, 40)],
                               _mxnet_factor(4, 0.5, 0.8, 0.02, warmup, 0.1, 39), rtol=1e-12)


def test_multi_factor_scheduler_matches_mxnet():
    steps, factor, base = [3, 7, 8], 0.1, 1.0
    s = S.MultiFactorScheduler(step=steps, factor=factor, base_lr=base)
    ref, ind, lr = [], 0, base
    for t in range(1, 15):
        while ind < len(steps) and t > steps[ind]:
            ind += 1
            lr *= factor
        ref.append(lr)
    np.testing.assert_allclose([s(t) for t in range(1, 15)], ref, rtol=1e-12)


def test_cosine_scheduler_with_warmup():
    s = S.CosineScheduler(max_update=20, base_lr=1.0, final_lr=0.1, warmup_steps=5, warmup_begin_lr=0.0)
    ref = [t / 5 if t < 5 else 0.1 + 0.9 * (1 + math.cos(math.pi * (min(t, 20) - 5) / 15)) / 2
           for t in range(30)]
    np.testing.assert_allclose([s(t) for t in range(30)], ref, rtol=1e-12)
    assert s(20) == pytest.approx(0.1) and s(100) == pytest.approx(0.1)


def test_constant_warmup_and_poly():
    s = S.PolyScheduler(max_update=10, base_lr=2.0, pwr=2, warmup_steps=2, warmup_begin_lr=0.5,
                        warmup_mode="constant")
    assert s(0) == s(1) == 0.5
    np.testing.assert_allclose([s(t) for t in range(2, 12)],
                               [2.0 * (1 - (min(t, 10) - 2) / 8) ** 2 for t in range(2, 12)])


@pytest.mark.parametrize("make", [
    lambda: S.FactorScheduler(step=0),
    lambda: S.FactorScheduler(step=2, factor=1.5),
    lambda: S.MultiFactorScheduler(step=[3, 2]),
    lambda: S.CosineScheduler(max_update=0),
    lambda: S.CosineScheduler(max_update=5, warmup_steps=5),
    lambda: S.LRScheduler(warmup_mode="exp"),
])
def test_bad_settings_raise(make):
    with pytest.raises(la.LazyArrayError):
        make()


def test_trainer_uses_the_schedule_per_update():
    la.random.seed(0)
    net = B.Dense(1, in_units=2, use_bias=False)
    net.initialize()
    sched = S.FactorScheduler(step=1, factor=0.5)
    trainer = B.Trainer(net.collect_params(), "sgd", {"learning_rate": 1.0, "lr_scheduler": sched})
    assert sched.base_lr == 1.0  # the optimizer's explicit rate becomes the schedule's base
    x = np.array([[1.0, 2.0]], np.float32)
    w = net.weight.data().asnumpy().copy()
    for t in range(1, 4):
        with la.autograd.record():
            y = net(la.array(x)).sum()
        y.backward()
        trainer.step(1)
        w = w - sched(t) * x  # d(x @ w.T)/dw = x
        np.testing.assert_allclose(net.weight.data().asnumpy(), w, rtol=1e-6)
        assert trainer.learning_rate == sched(t)
    with pytest.raises(la.LazyArrayError, match="lr_scheduler"):
        trainer.set_learning_rate(0.1)
