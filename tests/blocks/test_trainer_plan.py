"""Trainer's step plan (``trainer._Plan``): steps after the first reuse what the last step looked
up, and every change a step must see (a replaced value, a dtype, a ``grad_req``, the learning rate,
loaded optimizer state, a stale gradient) is seen: a trainer with the plan ends bit for bit where a
trainer that takes the general path every step ends."""
from __future__ import annotations

import numpy as np
import pytest

import lazyarray as la
from lazyarray import blocks as B
from lazyarray.blocks.trainer import StaleGradientError


def _net():
    la.random.seed(3)
    net = B.HybridSequential()
    net.add(B.Dense(6, activation="relu", in_units=5), B.Dense(3, in_units=6))
    net.initialize()
    return net


def _backward(net, x, y):
    with la.autograd.record():
        loss = B.SoftmaxCrossEntropyLoss()(net(x), y)
    loss.backward()


def _set_lr(net, trainer):
    trainer.set_learning_rate(0.05)


def _replace_value(net, trainer):  # a new array: the plan's value no longer is the parameter's
    p = net[0].weight
    p._data._value = p._data._value.copy()


def _set_data(net, trainer):
    net[1].bias.set_data(la.array(np.full(3, 0.25, "float32")))


def _freeze(net, trainer):
    net[0].bias.grad_req = "null"


def _freeze_and_thaw(net, trainer):
    net[0].bias.grad_req = "null"
    net[0].bias.grad_req = "write"


def _cast(net, trainer):
    for p in net.collect_params().values():
        p.cast("float64")


def _load_states(net, trainer, tmp_path):
    path = str(tmp_path / "t.states")
    B.Trainer(net.collect_params(), type(trainer.optimizer)(learning_rate=0.1, momentum=0.9)).save_states(path)
    trainer.load_states(path)  # no momentum yet: the steps after it start over


CHANGES = {"learning_rate": _set_lr, "replaced_value": _replace_value, "set_data": _set_data,
           "grad_req_null": _freeze, "grad_req_toggled": _freeze_and_thaw, "cast": _cast,
           "load_states": _load_states}


class _PerParamSGD(B.SGD):
    def update(self, *args, **kwargs):  # (overridden: the trainer updates parameter by parameter)
        return super().update(*args, **kwargs)


class _PerParamAdam(B.Adam):
    def update(self, *args, **kwargs):
        return super().update(*args, **kwargs)


OPTIMIZERS = {"sgd_momentum": lambda cls: cls(learning_rate=0.1, momentum=0.9),
              "sgd_folded": lambda cls: cls(learning_rate=0.1),  # the rate folded into the 1/batch factor
              "adam": lambda cls: cls(learning_rate=0.01)}


def _run(change, planned, tmp_path, optimizer="sgd_momentum"):
    """``planned``: True (the plan serves what it can), False (the general path every step: flat
    groups), "per_param" (an optimizer overriding ``update``: one parameter at a time, the reference)."""
    net = _net()
    cls = {"sgd": (B.SGD, _PerParamSGD), "adam": (B.Adam, _PerParamAdam)}[optimizer.split("_")[0]]
    opt = OPTIMIZERS[optimizer](cls[planned == "per_param"])
    trainer = B.Trainer(net.collect_params(), opt)
    rng = np.random.default_rng(1)
    x = la.array(rng.standard_normal((4, 5)).astype("float32"))
    y = la.array(rng.integers(0, 3, 4))
    plans = []
    for k in range(6):
        if k == 3:
            fn = CHANGES[change]
            fn(net, trainer, tmp_path) if fn is _load_states else fn(net, trainer)
            if fn is _cast:
                x = la.array(x.asnumpy().astype("float64"))
        if not planned:
            trainer._plan = None
        _backward(net, x, y)
        plans.append(trainer._plan)
        trainer.step(4)
    return [p.data().asnumpy() for p in net.collect_params().values()], plans


@pytest.mark.parametrize(("change", "optimizer"), [
    (c, o) for c in sorted(CHANGES) for o in sorted(OPTIMIZERS)
    if c != "load_states" or o == "sgd_momentum"])  # (the state file is an SGD-with-momentum trainer's)
def test_planned_steps_see_every_change(change, optimizer, tmp_path):
    want, _ = _run(change, "per_param", tmp_path, optimizer)
    general, _ = _run(change, False, tmp_path, optimizer)
    got, plans = _run(change, True, tmp_path, optimizer)
    assert plans[1] is not None and plans[2] is plans[1]  # the plan serves the steps before the change
    for w, a, g in zip(want, general, got):
        assert w.dtype == a.dtype == g.dtype
        if change != "cast":  # (one by one, a cast keeps the float32 state; a new flat group makes it float64)
            np.testing.assert_array_equal(a, w)
        np.testing.assert_array_equal(g, a)


def _planned_sgd():
    """A net and an SGD trainer after two steps (the second step runs from the plan)."""
    net = _net()
    trainer = B.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1})
    x = la.array(np.ones((2, 5), "float32"))
    y = la.array(np.array([0, 1]))
    for _ in range(2):
        _backward(net, x, y)
        trainer.step(2)
    return net, trainer, x, y


def test_plan_is_dropped_when_a_change_invalidates_it():
    net, trainer, x, y = _planned_sgd()
    plan = trainer._plan
    assert plan is not None
    net[0].bias.grad_req = "null"
    assert plan.gather(trainer._params) is None
    _backward(net, x, y)
    trainer.step(2)
    assert trainer._plan is not plan


def test_stale_gradient_still_raises_with_a_plan():
    net, trainer, x, y = _planned_sgd()
    assert trainer._plan is not None
    before = [p.data().asnumpy().copy() for p in net.collect_params().values()]
    with pytest.raises(StaleGradientError):
        trainer.step(2)  # no backward since the last step
    for b, p in zip(before, net.collect_params().values()):
        np.testing.assert_array_equal(p.data().asnumpy(), b)


def test_plan_over_two_dtype_groups_equals_the_general_path():
    """float16 and float32 parameters: two flat groups in one plan, bit for bit the general path."""
    def run(planned):
        la.random.seed(5)
        params = []
        for k, dtype in enumerate(("float32", "float16", "float32")):
            p = B.Parameter(f"p{k}", shape=(3, 4), dtype=dtype)
            p.initialize()
            params.append(p)
        trainer = B.Trainer(params, B.SGD(learning_rate=0.1, momentum=0.5))
        for step in range(4):
            for k, p in enumerate(params):
                g = np.full((3, 4), 0.25 * (k + 1) + step, p.dtype)
                p._leaf().grad = la.array(g)
                p._leaf().fresh = True
            if not planned:
                trainer._plan = None
            trainer.step(8)
        assert (trainer._plan is not None and len(trainer._plan.groups) == 2) or not planned
        return [p.data().asnumpy() for p in params]

    for w, g in zip(run(False), run(True)):
        assert w.dtype == g.dtype
        np.testing.assert_array_equal(g, w)
