"""Fuzzers of ``Trainer.load_states`` (lazyarray/blocks/trainer.py), issue #33.

The contract: a mutated state file loads (and then the trainer steps) or raises a
``la.LazyArrayError`` (``GraphFormatError`` naming the file and the field; ``ParamValueError`` for
another optimizer, ``ShapeError`` for other parameters) before the trainer changes; never a bare
Python exception, never a hang. The files are what ``save_states`` writes for SGD (with and
without momentum), Adam, AdamW with amsgrad and centered RMSProp with momentum after two steps;
they are mutated in their trainer record (structural
JSON mutations and well-typed ones: settings, the update count, state kinds and keys), in their
arrays (dropped, renamed, other dtypes and shapes) and byte by byte. A few hundred derandomized
examples per fuzzer by default (a few seconds); 20,000 with
``python -m pytest -m slow tests/blocks/test_trainer_states_fuzz.py``.
"""
from __future__ import annotations

import functools
import json

import numpy as np
import pytest
from fuzz_support import fuzz_settings, json_values, mutated_bytes, mutated_json, safetensors_file, split_safetensors
from hypothesis import given
from hypothesis import strategies as st

import lazyarray as la
from lazyarray import blocks as B
from lazyarray.blocks.param_file import load_arrays, write_arrays

SLOW = 20_000
COUNTS = [300, pytest.param(SLOW, marks=pytest.mark.slow)]  # default run, and -m slow
OPTIMIZERS = {"sgd": {"learning_rate": 0.1}, "sgd_momentum": {"learning_rate": 0.1, "momentum": 0.9},
              "adam": {"learning_rate": 0.01}, "adamw_amsgrad": {"learning_rate": 0.01, "amsgrad": True},
              "rmsprop_centered": {"learning_rate": 0.01, "centered": True, "momentum": 0.5}}


def _trainer(kind: str):
    la.random.seed(0)
    net = B.HybridSequential()
    net.add(B.Dense(3, in_units=4), B.Dense(2, in_units=3))
    net.initialize()
    return net, B.Trainer(net.collect_params(), kind.split("_")[0], dict(OPTIMIZERS[kind]))


def _step(net, trainer) -> None:
    x = la.array(np.linspace(-1, 1, 8, dtype=np.float32).reshape(2, 4))
    with la.autograd.record():
        loss = B.L2Loss()(net(x), la.zeros((2, 2)))
    loss.backward()
    trainer.step(2)


@functools.cache
def _setup(kind: str, folder: str):
    """A trainer after two steps, its state file's bytes, and the path of that good file."""
    net, trainer = _trainer(kind)
    _step(net, trainer)
    _step(net, trainer)
    path = f"{folder}/{kind}-good.states"
    trainer.save_states(path)
    with open(path, "rb") as f:
        return net, trainer, f.read(), path, [p.data().asnumpy().copy() for p in trainer._params]


@functools.lru_cache(maxsize=1)
def _folder() -> str:
    import tempfile
    return tempfile.mkdtemp(prefix="lazyarray-states-fuzz-")


def _snapshot(trainer):
    states = {k: [np.array(a) for a in (v if isinstance(v, tuple) else () if v is None else (v,))]
              for k, v in trainer._states.items()}
    settings = {k: v for k, v in vars(trainer.optimizer).items() if k in trainer.optimizer.hyper_params}
    return repr(settings), {k: [a.tobytes() for a in v] for k, v in states.items()}, trainer._steps


def _check(kind: str, raw: bytes, tmp_path) -> None:
    net, trainer, _, good, values = _setup(kind, _folder())
    trainer.load_states(good)  # a known state before each example
    before = _snapshot(trainer)
    path = str(tmp_path / "m.states")
    with open(path, "wb") as f:
        f.write(raw)
    try:
        trainer.load_states(path)
    except la.LazyArrayError:
        assert _snapshot(trainer) == before, "a refused file changed the trainer"
        return
    try:
        _step(net, trainer)  # the loaded state is usable
    finally:
        trainer.load_states(good)
        for p, v in zip(trainer._params, values):  # every example starts from the same parameters
            p.set_data(la.array(v))


# -- mutations ----------------------------------------------------------------------------------------
def _parts(kind: str):
    header, data = split_safetensors(_setup(kind, _folder())[2])
    arrays, meta = load_arrays(_setup(kind, _folder())[3])
    return arrays, json.loads(header["__metadata__"]["lazyarray.params"])


_SETTINGS = ["learning_rate", "momentum", "wd", "beta1", "beta2", "epsilon", "clip_gradient", "rescale_grad",
             "amsgrad", "centered", "nesterov", "multi_precision", "rho", "dampening",
             "lazy_update", "lr_scheduler", "__class__", "_rate", "create_state", "update", "x"]
_NUMBERS = [0, 1, -1, 0.5, 1.0, 0.999999, 1e-300, 1e300, -0.0, 2**63, 2**64, None, True, "0.1", [], {},
            float("nan"), float("inf")]


@st.composite
def typed_mutation(draw, kind: str) -> bytes:
    """The record and arrays changed with values of about the right type: settings, num_update,
    state kinds and keys, array names, dtypes and shapes."""
    arrays, record = _parts(kind)
    rec = record["trainer"]
    for _ in range(draw(st.integers(1, 3))):
        how = draw(st.sampled_from(["setting", "setting", "num_update", "kind", "key", "shapes", "optimizer",
                                    "drop_array", "rename_array", "dtype", "reshape", "extra_array", "version"]))
        names = sorted(arrays)
        if how == "setting":
            rec["settings"][draw(st.sampled_from(_SETTINGS))] = draw(st.sampled_from(_NUMBERS))
        elif how == "num_update":
            rec["num_update"] = draw(st.sampled_from(_NUMBERS + [2**63 - 1, 10**30]))
        elif how == "kind" and rec["states"]:
            rec["states"][draw(st.sampled_from(sorted(rec["states"])))] = draw(st.sampled_from(
                ["array", "tuple", "none", "weird", "", None, 1, ["array"]]))
        elif how == "key" and rec["states"]:
            old = draw(st.sampled_from(sorted(rec["states"])))
            rec["states"][draw(st.sampled_from(["0", "1", "3", "4", "00", "-1", "1e3", "9" * 20, "", " 1"]))] = \
                rec["states"].pop(old)
        elif how == "shapes":
            rec["shapes"] = draw(st.sampled_from([[], [[3, 4]], [[3, 4], [3], [2, 3], [2]][::-1], None, "x",
                                                  [[3, 4], [3], [2, 3], [2], [1]], [[-3, 4], [3], [2, 3], [2]]]))
        elif how == "optimizer":
            rec["optimizer"] = draw(st.sampled_from(["SGD", "Adam", "AdamW", "RMSProp", "Optimizer", "", None,
                                                     "__class__"]))
        elif how == "drop_array" and names:
            del arrays[draw(st.sampled_from(names))]
        elif how == "rename_array" and names:
            arrays[draw(st.sampled_from(["0.0", "0.1", "0.2", "1.0", "5.0", "0", "x", "0.00", "-1.0"]))] = \
                arrays.pop(draw(st.sampled_from(names)))
        elif how == "dtype" and names:
            name = draw(st.sampled_from(names))
            arrays[name] = arrays[name].astype(draw(st.sampled_from(["float64", "float16", "int32", "bool", "uint8"])))
        elif how == "reshape" and names:
            name = draw(st.sampled_from(names))
            arrays[name] = draw(st.sampled_from([arrays[name].reshape(-1), np.atleast_1d(arrays[name])[:1], np.zeros((0,), np.float32),
                                                 np.ones((), np.float32), np.ones((9, 9), np.float32)]))
        elif how == "extra_array":
            arrays[draw(st.sampled_from(["0.5", "9.0", "extra", "1.1"]))] = np.ones(3, np.float32)
        else:
            record["version"] = draw(st.sampled_from([0, 2, None, "1", 1.0]))
    path = f"{_folder()}/mutated.states"
    write_arrays(path, {k: np.ascontiguousarray(v) for k, v in arrays.items()}, record)
    with open(path, "rb") as f:
        return f.read()


@st.composite
def record_mutation(draw, kind: str) -> bytes:
    """Structural JSON mutations of the record (fuzz_support.mutated_json), the arrays as saved."""
    header, data = split_safetensors(_setup(kind, _folder())[2])
    meta = header["__metadata__"]
    meta["lazyarray.params"] = draw(mutated_json(meta["lazyarray.params"]) | json_values)
    return safetensors_file(header, data)


def _kinds():
    return st.sampled_from(sorted(OPTIMIZERS))


# -- the fuzzers ------------------------------------------------------------------------------------------
def test_the_good_files_resume(tmp_path):
    for kind in OPTIMIZERS:
        _check(kind, _setup(kind, _folder())[2], tmp_path)


@pytest.mark.parametrize("examples", COUNTS)
def test_fuzz_typed_mutations(examples, tmp_path):
    @fuzz_settings(examples)
    @given(case=_kinds().flatmap(lambda k: st.tuples(st.just(k), typed_mutation(k))))
    def run(case):
        _check(case[0], case[1], tmp_path)

    run()


@pytest.mark.parametrize("examples", COUNTS)
def test_fuzz_record_mutations(examples, tmp_path):
    @fuzz_settings(examples)
    @given(case=_kinds().flatmap(lambda k: st.tuples(st.just(k), record_mutation(k))))
    def run(case):
        _check(case[0], case[1], tmp_path)

    run()


@pytest.mark.parametrize("examples", COUNTS)
def test_fuzz_byte_mutations(examples, tmp_path):
    @fuzz_settings(examples // 2)
    @given(case=_kinds().flatmap(lambda k: st.tuples(st.just(k), mutated_bytes(_setup(k, _folder())[2]))))
    def run(case):
        _check(case[0], case[1], tmp_path)

    run()
