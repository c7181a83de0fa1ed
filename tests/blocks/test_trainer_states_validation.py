"""``Trainer.load_states`` treats a state file as data: settings are checked against the optimizer's
declared ``hyper_params``, the update count and every state against what the optimizer makes, and a
bad file raises ``GraphFormatError`` (naming the file and the field) before the trainer changes."""
from __future__ import annotations

import copy

import numpy as np
import pytest

import lazyarray as la
from lazyarray import blocks as B
from lazyarray.blocks.param_file import load_arrays, write_arrays


def _trainer(opt: str, params: dict):
    la.random.seed(0)
    net = B.Dense(2, in_units=3)
    net.initialize()
    return net, B.Trainer(net.collect_params(), opt, dict(params))


def _run(net, trainer, steps: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    for _ in range(steps):
        x = la.array(rng.standard_normal((4, 3)).astype(np.float32))
        with la.autograd.record():
            loss = B.L2Loss()(net(x), la.zeros((4, 2)))
        loss.backward()
        trainer.step(4)


def _saved(tmp_path, opt="sgd", params=None):
    """A trainer after two steps, and the arrays and record of its state file."""
    net, trainer = _trainer(opt, params or {"learning_rate": 0.1, "momentum": 0.9})
    _run(net, trainer, 2, seed=1)
    path = str(tmp_path / "good.states")
    trainer.save_states(path)
    arrays, record = load_arrays(path)
    return net, trainer, arrays, record


def _snapshot(trainer):
    states = {k: [np.array(a) for a in (v if isinstance(v, tuple) else () if v is None else (v,))]
              for k, v in trainer._states.items()}
    return dict(vars(trainer.optimizer)), states, trainer._steps


def _bad_file(tmp_path, arrays, record, change) -> str:
    arrays, record = dict(arrays), copy.deepcopy(record)
    change(arrays, record["trainer"])
    path = str(tmp_path / "bad.states")
    write_arrays(path, arrays, record)
    return path


def _set(field, value):
    def change(arrays, rec):
        rec[field] = value
    return change


def _setting(name, value):
    def change(arrays, rec):
        rec["settings"][name] = value
    return change


def _kind(kind):
    def change(arrays, rec):
        rec["states"]["0"] = kind
    return change


def _drop_arrays(arrays, rec):
    for name in [n for n in arrays if n.startswith("0.")]:
        del arrays[name]


@pytest.mark.parametrize("change,field", [
    (_setting("__class__", 5), "'__class__'"),
    (_setting("_rate", 5), "'_rate'"),
    (_setting("create_state", 5), "'create_state'"),
    (_setting("lr_scheduler", None), "'lr_scheduler'"),
    (_setting("learning_rate", "x"), "'learning_rate' must be a finite number >= 0.0, got 'x'"),
    (_setting("learning_rate", True), "'learning_rate'"),
    (_setting("learning_rate", -1.0), "'learning_rate'"),
    (_setting("momentum", 1.5), r"'momentum' must be a finite number in \[0.0, 1.0\)"),
    (_setting("wd", [1]), "'wd'"),
    (_setting("clip_gradient", "none"), "'clip_gradient' must be None or"),
    (_set("num_update", -5), "'num_update' must be a non-negative int"),
    (_set("num_update", 2.5), "'num_update'"),
    (_set("num_update", True), "'num_update'"),
    (_set("extra", 1), r"unknown field\(s\) \['extra'\]"),
    (_kind("weird"), "entry '0' has kind 'weird'"),
    (_kind("none"), "entry '0' has kind 'none'.*kind 'array'"),
    (_kind("tuple"), "entry '0' has kind 'tuple'"),
    (_drop_arrays, r"entry '0' of kind 'array' needs the arrays \['0.0'\]"),
    (_set("states", {"00": "array"}), "entry '00'"),
    (_set("states", {"7": "array"}), "entry '7'"),
    (lambda arrays, rec: arrays.update({"0.1": arrays["0.0"]}), r"\['0.1'\] belong to no state"),
    (lambda arrays, rec: arrays.update({"0.0": arrays["0.0"].astype(np.int32)}), "'0.0' has dtype int32"),
])
def test_a_bad_state_file_is_refused_before_the_trainer_changes(tmp_path, change, field):
    net, trainer, arrays, record = _saved(tmp_path)
    path = _bad_file(tmp_path, arrays, record, change)
    before = _snapshot(trainer)
    with pytest.raises(la.GraphFormatError, match=field) as info:
        trainer.load_states(path)
    assert "Trainer.load_states(" in str(info.value) and "bad.states" in str(info.value)
    opt_vars, states, steps = _snapshot(trainer)
    assert opt_vars == before[0] and steps == before[2]
    assert states.keys() == before[1].keys()
    for k in states:
        for a, b in zip(states[k], before[1][k]):
            np.testing.assert_array_equal(a, b)
    _run(net, trainer, 1, seed=3)  # the trainer still works


def test_adam_states_are_checked_against_what_adam_keeps(tmp_path):
    net, trainer, arrays, record = _saved(tmp_path, "adam", {"learning_rate": 0.05})
    for change, field in [(_setting("beta1", 1.0), "'beta1'"), (_setting("epsilon", -1e-8), "'epsilon'"),
                          (_setting("momentum", 0.9), "'momentum'.* not a setting of Adam"),
                          (_kind("array"), "kind 'array'.*kind 'tuple'"),
                          (lambda arrays, rec: arrays.pop("0.1"), r"\['0.1'\] are missing")]:
        with pytest.raises(la.GraphFormatError, match=field):
            trainer.load_states(_bad_file(tmp_path, arrays, record, change))


def test_a_good_file_still_resumes_bit_exactly_after_a_refused_one(tmp_path):
    net, trainer = _trainer("adam", {"learning_rate": 0.05, "beta1": 0.8})
    _run(net, trainer, 3, seed=1)
    net.save_parameters(str(tmp_path / "p.params"))
    trainer.save_states(str(tmp_path / "t.states"))
    arrays, record = load_arrays(str(tmp_path / "t.states"))
    assert set(record["trainer"]["settings"]) == set(B.Adam.hyper_params)
    _run(net, trainer, 4, seed=2)
    straight = {n: p.data().asnumpy() for n, p in net.collect_params().items()}

    net2, trainer2 = _trainer("adam", {"learning_rate": 0.5})
    net2.load_parameters(str(tmp_path / "p.params"))
    with pytest.raises(la.GraphFormatError):
        trainer2.load_states(_bad_file(tmp_path, arrays, record, _setting("_rate", 5)))
    trainer2.load_states(str(tmp_path / "t.states"))
    assert trainer2.optimizer.beta1 == 0.8 and trainer2.optimizer.learning_rate == 0.05
    _run(net2, trainer2, 4, seed=2)
    for n, p in net2.collect_params().items():
        np.testing.assert_array_equal(p.data().asnumpy(), straight[n])


def test_hyper_params_are_declared_and_a_subclass_can_extend_them(tmp_path):
    assert set(B.SGD.hyper_params) == {"learning_rate", "wd", "clip_gradient", "momentum", "dampening", "nesterov",
                                       "multi_precision"}

    class Nesterov(B.SGD):
        hyper_params = {**B.SGD.hyper_params, "trust": B.optimizer.HyperParam(0.0, 1.0)}

        def __init__(self, dampening=0.0, trust=0.0, **kw):
            super().__init__(dampening=dampening, **kw)
            self.trust = trust

    la.random.seed(0)
    net = B.Dense(2, in_units=3)
    net.initialize()
    trainer = B.Trainer(net.collect_params(), Nesterov(dampening=0.25, trust=0.5, momentum=0.5))
    _run(net, trainer, 1, seed=1)
    trainer.save_states(str(tmp_path / "n.states"))
    other = B.Trainer(net.collect_params(), Nesterov(momentum=0.5))
    other.load_states(str(tmp_path / "n.states"))
    assert other.optimizer.dampening == 0.25 and other.optimizer.trust == 0.5
