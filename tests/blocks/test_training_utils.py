"""clip_global_norm against NumPy; Trainer.save_states / load_states resume a run exactly."""
from __future__ import annotations

import os

import numpy as np
import pytest

import lazyarray as la
from lazyarray import blocks as B


@pytest.mark.parametrize("max_norm", [0.5, 100.0])
def test_clip_global_norm(max_norm):
    rng = np.random.default_rng(0)
    raw = [rng.standard_normal(s).astype(np.float32) for s in [(3, 4), (5,)]]
    arrays = [la.array(a) for a in raw]
    total = la.blocks.clip_global_norm(arrays, max_norm)
    ref = np.sqrt(sum((a.astype(np.float64) ** 2).sum() for a in raw))
    assert isinstance(total, float) and total == pytest.approx(ref, rel=1e-6)
    scale = min(1.0, max_norm / (ref + 1e-8))
    for a, r in zip(arrays, raw):
        np.testing.assert_allclose(a.asnumpy(), r * scale, rtol=1e-6)


def test_clip_global_norm_on_gradients_and_nan_warns():
    net = B.Dense(2, in_units=3)
    net.initialize()
    with la.autograd.record():
        y = (net(la.ones((4, 3))) * 100).sum()
    y.backward()
    grads = [p.grad() for p in net.collect_params().values()]
    la.blocks.clip_global_norm(grads, 1.0)
    after = np.sqrt(sum((p.grad().asnumpy() ** 2).sum() for p in net.collect_params().values()))
    assert after == pytest.approx(1.0, rel=1e-5)
    with pytest.warns(UserWarning, match="nan or inf"):
        la.blocks.clip_global_norm([la.array([np.nan, 1.0])], 1.0)
    with pytest.raises(la.LazyArrayError, match="max_norm"):
        la.blocks.clip_global_norm([la.array([1.0])], 0)


def _run(net, trainer, steps, seed):
    rng = np.random.default_rng(seed)
    for _ in range(steps):
        x = la.array(rng.standard_normal((4, 3)).astype(np.float32))
        with la.autograd.record():
            loss = B.L2Loss()(net(x), la.zeros((4, 2)))
        loss.backward()
        trainer.step(4)


def _fresh(opt, params, init_from=None):
    la.random.seed(0)
    net = B.Dense(2, in_units=3)
    net.initialize()
    if init_from is not None:
        net.load_parameters(init_from)
    return net, B.Trainer(net.collect_params(), opt, dict(params))


@pytest.mark.parametrize("opt,params", [
    ("adam", {"learning_rate": 0.05}),
    ("sgd", {"learning_rate": 0.1, "momentum": 0.9,
             "lr_scheduler": la.lr_scheduler.FactorScheduler(step=3, factor=0.5)}),
])
def test_save_and_load_states_resume_identically(tmp_path, opt, params):
    net, trainer = _fresh(opt, params)
    _run(net, trainer, 5, seed=1)
    net.save_parameters(str(tmp_path / "p.params"))
    trainer.save_states(str(tmp_path / "t.states"))
    _run(net, trainer, 5, seed=2)
    straight = {n: p.data().asnumpy() for n, p in net.collect_params().items()}

    net2, trainer2 = _fresh(opt, params, init_from=str(tmp_path / "p.params"))
    trainer2.load_states(str(tmp_path / "t.states"))
    _run(net2, trainer2, 5, seed=2)
    for n, p in net2.collect_params().items():
        np.testing.assert_array_equal(p.data().asnumpy(), straight[n])
    assert not [f for f in os.listdir(tmp_path) if ".tmp-" in f]  # written atomically, no leftovers


def test_load_states_checks_the_trainer(tmp_path):
    net, trainer = _fresh("adam", {"learning_rate": 0.05})
    _run(net, trainer, 1, seed=1)
    path = str(tmp_path / "t.states")
    trainer.save_states(path)
    with pytest.raises(la.LazyArrayError, match="Adam state but this trainer uses SGD"):
        _fresh("sgd", {})[1].load_states(path)
    other = B.Trainer(B.Dense(5, in_units=3).collect_params(), "adam")
    with pytest.raises(la.LazyArrayError, match="shapes"):
        other.load_states(path)
    net.save_parameters(str(tmp_path / "p.params"))
    with pytest.raises(la.LazyArrayError, match="not a trainer state file"):
        trainer.load_states(str(tmp_path / "p.params"))
