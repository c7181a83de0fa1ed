"""``la.mxnet.export`` is atomic as a set: the symbol file records the digest of the parameter file
written with it, so a kill between the two commits leaves a pair that loading refuses by name
(never old weights silently under the new graph); a kill before the first commit leaves the old pair."""
from __future__ import annotations

import json
import os

import numpy as np
import pytest
from kill_support import kill_at_replace

import lazyarray as la


def _net(seed: int):
    la.random.seed(seed)
    net = la.blocks.Dense(2, in_units=3)
    net.initialize()
    return net


def _out(sym_file, param_file) -> np.ndarray:
    block = la.blocks.SymbolBlock.imports(sym_file, ["data"], param_file)
    return block(la.ones((1, 3))).asnumpy()


def test_a_kill_between_the_two_files_is_refused_by_name(tmp_path, monkeypatch):
    prefix = str(tmp_path / "m")
    sym_file, param_file = la.mxnet.export(_net(1), prefix, input_shapes=(1, 3))
    with monkeypatch.context() as m:
        kill_at_replace(m, 2)  # one file renamed into place, the other not
        with pytest.raises(KeyboardInterrupt):
            la.mxnet.export(_net(2), prefix, input_shapes=(1, 3))  # same graph, other weights
    for load in (la.mxnet.load, _out):
        with pytest.raises(la.GraphFormatError, match=r"m-symbol.json' was exported together with a parameter file "
                                                      r"'m-0000.params'.*export the model again"):
            load(sym_file, param_file)
    assert not [p for p in os.listdir(tmp_path) if ".tmp-" in p]


def test_a_kill_before_the_first_commit_leaves_the_old_pair(tmp_path, monkeypatch):
    prefix = str(tmp_path / "m")
    old = _net(1)
    files = la.mxnet.export(old, prefix, input_shapes=(1, 3))
    with monkeypatch.context() as m:
        kill_at_replace(m, 1)
        with pytest.raises(KeyboardInterrupt):
            la.mxnet.export(_net(2), prefix, input_shapes=(1, 3))
    np.testing.assert_allclose(_out(*files), old(la.ones((1, 3))).asnumpy(), rtol=1e-6)


def test_a_new_export_over_an_old_one_loads_the_new_model(tmp_path):
    prefix = str(tmp_path / "m")
    la.mxnet.export(_net(1), prefix, input_shapes=(1, 3))
    new = _net(2)
    files = la.mxnet.export(new, prefix, input_shapes=(1, 3))
    np.testing.assert_allclose(_out(*files), new(la.ones((1, 3))).asnumpy(), rtol=1e-6)


def test_the_record_is_a_string_attribute_mxnet_keeps(tmp_path):
    sym_file, param_file = la.mxnet.export(_net(1), str(tmp_path / "m"), input_shapes=(1, 3))
    attrs = json.load(open(sym_file))["attrs"]
    kind, text = attrs["lazyarray_params"]
    assert kind == "str" and text.split(" ")[0] == "m-0000.params" and len(text.split(" ")[1]) == 64
    assert attrs["mxnet_version"] == ["int", 10901]


def test_parameters_of_another_epoch_load_with_the_symbol(tmp_path):
    sym_file, param_file = la.mxnet.export(_net(1), str(tmp_path / "m"), input_shapes=(1, 3))
    arrays, aux = la.mxnet.load_params(param_file)
    la.mxnet.save_params(str(tmp_path / "m-0001.params"), {k: v + 1 for k, v in arrays.items()}, aux)
    _, params = la.mxnet.load(sym_file, str(tmp_path / "m-0001.params"))
    np.testing.assert_allclose(params["bias"].asnumpy(), arrays["bias"] + 1)


def test_a_malformed_record_is_a_named_error(tmp_path):
    sym_file, param_file = la.mxnet.export(_net(1), str(tmp_path / "m"), input_shapes=(1, 3))
    doc = json.load(open(sym_file))
    doc["attrs"]["lazyarray_params"] = ["str", "m-0000.params not-a-digest"]
    with open(sym_file, "w") as f:
        json.dump(doc, f)
    with pytest.raises(la.GraphFormatError, match="'m-symbol.json': graph attribute 'lazyarray_params' must be"):
        la.mxnet.load(sym_file, param_file)
