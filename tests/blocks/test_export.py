"""Export / import: symbol JSON + safetensors parameters, SymbolBlock, identical re-export."""
from __future__ import annotations

import filecmp
import json
import os

import numpy as np
import pytest
from safetensors.numpy import load_file, save_file

import lazyarray as la
from lazyarray import blocks as B


def cnn():
    la.random.seed(0)
    net = B.HybridSequential()
    net.add(B.Conv2D(4, 3, padding=1, activation="relu"), B.BatchNorm(), B.MaxPool2D(), B.Flatten(),
            B.Dense(16, activation="tanh"), B.Dropout(0.3), B.Dense(3))
    net.initialize()
    net.hybridize()
    return net


@pytest.fixture
def exported(tmp_path):
    net = cnn()
    x = la.array(np.random.default_rng(0).standard_normal((5, 2, 6, 6)).astype(np.float32))
    with la.autograd.record():  # train a step's worth of running statistics first
        net(x)
    y = net(x).asnumpy()
    sym_file, param_file = net.export(str(tmp_path / "model"))
    return net, x, y, sym_file, param_file, tmp_path


def test_export_writes_the_two_files(exported):
    net, _, _, sym_file, param_file, tmp_path = exported
    assert sorted(os.listdir(tmp_path)) == ["model-0000.params", "model-symbol.json"]  # nothing temporary
    assert sym_file.endswith("model-symbol.json") and param_file.endswith("model-0000.params")
    with open(sym_file) as f:
        doc = json.load(f)
    assert doc["format"] == "lazyarray.symbol"
    ops = [n["op"] for n in doc["nodes"] if n["op"]]
    assert "dropout_mask" not in ops and "nn.batch_norm" not in ops and "batch_norm" in ops  # inference graph
    arrays = load_file(param_file)
    assert set(arrays) == set(net.collect_params())
    np.testing.assert_array_equal(arrays["1.running_mean"], net[1].running_mean.data().asnumpy())
    assert np.abs(arrays["1.running_mean"]).sum() > 0


def test_export_epoch_number(tmp_path):
    net = cnn()
    net(la.ones((1, 2, 6, 6)))
    _, param_file = net.export(str(tmp_path / "m"), epoch=12)
    assert param_file.endswith("m-0012.params")


def test_imports_gives_the_same_outputs(exported):
    _net, x, y, sym_file, param_file, _ = exported
    back = B.SymbolBlock.imports(sym_file, ["data"], param_file)
    np.testing.assert_array_equal(back(x).asnumpy(), y)
    assert back(la.ones((2, 2, 6, 6))).shape == (2, 3)  # other batch sizes work too
    assert back.collect_params()["1.running_var"].grad_req == "null"
    assert back.collect_params()["0.weight"].grad_req == "write"
    back.hybridize()
    np.testing.assert_array_equal(back(x).asnumpy(), y)


def test_imports_on_a_device(exported):
    _, _x, _y, sym_file, param_file, _ = exported
    back = B.SymbolBlock.imports(sym_file, "data", param_file, device=la.cpu(0))
    assert back.collect_params()["0.weight"].data().device == la.cpu(0)


def test_reexport_gives_identical_files(exported, tmp_path):
    _, x, _, sym_file, param_file, _ = exported
    back = B.SymbolBlock.imports(sym_file, ["data"], param_file)
    back(x)
    s2, p2 = back.export(str(tmp_path / "again"))
    assert filecmp.cmp(sym_file, s2, shallow=False)
    assert filecmp.cmp(param_file, p2, shallow=False)


def test_imported_block_fine_tunes(exported):
    _, x, _, sym_file, param_file, _ = exported
    back = B.SymbolBlock.imports(sym_file, ["data"], param_file)
    before = back.collect_params()["4.weight"].data().asnumpy().copy()
    trainer = B.Trainer(back.collect_params(), "sgd", {"learning_rate": 0.5})
    with la.autograd.record():
        loss = B.SoftmaxCrossEntropyLoss()(back(x), la.array(np.array([0, 1, 2, 0, 1])))
    loss.backward()
    trainer.step(5)
    assert np.abs(back.collect_params()["4.weight"].data().asnumpy() - before).max() > 0
    np.testing.assert_array_equal(back.collect_params()["1.running_mean"].data().asnumpy(),
                                  load_file(param_file)["1.running_mean"])  # frozen: untouched


def test_imported_block_is_inlined_into_an_enclosing_trace(exported):
    _, x, y, sym_file, param_file, _ = exported
    outer = B.HybridSequential()
    outer.add(B.SymbolBlock.imports(sym_file, ["data"], param_file), B.Activation("relu"))
    outer.hybridize()
    np.testing.assert_allclose(outer(x).asnumpy(), np.maximum(y, 0), rtol=1e-6)
    sym = next(iter(outer._by_sig.values())).symbol
    assert "conv2d" in [n.op.name for n in sym.topo() if n.op is not None]


def test_missing_extra_and_misshaped_parameters_are_named(exported, tmp_path):
    _, _, _, sym_file, param_file, _ = exported
    arrays = load_file(param_file)
    del arrays["0.bias"]
    arrays["surplus"] = np.zeros(2, np.float32)
    arrays["4.weight"] = np.zeros((16, 5), np.float32)
    bad = str(tmp_path / "bad.params")
    save_file(arrays, bad)
    with pytest.raises(la.ShapeError) as info:
        B.SymbolBlock.imports(sym_file, ["data"], bad)
    msg = str(info.value)
    assert "missing parameters ['0.bias']" in msg
    assert "['surplus']" in msg
    assert "'4.weight': file (16, 5), graph (16, 36)" in msg


def test_wrong_input_name_is_explained(exported):
    _, _, _, sym_file, param_file, _ = exported
    with pytest.raises(la.LazyArrayError, match="'input' are not inputs|\\['input'\\]"):
        B.SymbolBlock.imports(sym_file, ["input"], param_file)


def test_malformed_files_give_format_errors(tmp_path, exported):
    _, _, _, sym_file, param_file, _ = exported
    bad = tmp_path / "bad-symbol.json"
    bad.write_text("{not json")
    with pytest.raises(la.GraphFormatError):
        B.SymbolBlock.imports(str(bad), ["data"], param_file)
    bad_params = tmp_path / "bad.params"
    bad_params.write_bytes(b"garbage")
    with pytest.raises(la.GraphFormatError):
        B.SymbolBlock.imports(sym_file, ["data"], str(bad_params))


def test_export_before_any_call_is_explained(tmp_path):
    net = cnn()
    with pytest.raises(la.LazyArrayError, match="call the hybridized block"):
        net.export(str(tmp_path / "m"))


def test_export_after_training_only_traces_the_inference_graph(tmp_path):
    net = cnn()
    x = la.ones((2, 2, 6, 6))
    with la.autograd.record():
        net(x)
    sym_file, param_file = net.export(str(tmp_path / "m"))
    back = B.SymbolBlock.imports(sym_file, ["data"], param_file)
    np.testing.assert_allclose(back(x).asnumpy(), net(x).asnumpy(), rtol=1e-6)


def test_multi_input_multi_output_export(tmp_path):
    class Two(B.HybridBlock):
        def __init__(self):
            super().__init__()
            self.a = B.Dense(3)
            self.b = B.Dense(3)

        def forward(self, x, y):
            return self.a(x) + self.b(y), self.a(x)

    net = Two()
    net.initialize()
    net.hybridize()
    x, y = la.ones((2, 4)), la.ones((2, 5))
    want = [o.asnumpy() for o in net(x, y)]
    sym_file, param_file = net.export(str(tmp_path / "two"))
    back = B.SymbolBlock.imports(sym_file, ["data0", "data1"], param_file)
    got = back(x, y)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g.asnumpy(), w, rtol=1e-6)
