"""``la.onnx.export`` with external data is atomic as a set: a kill before the first commit leaves the
old model, a kill between the data file and the model leaves a pair that loading refuses by name
(never new weights under the old graph), and the next export removes a killed writer's staging folder."""
from __future__ import annotations

import importlib
import os
import subprocess
import sys

import numpy as np
import pytest
from kill_support import kill_at_replace

import lazyarray as la

onnx = pytest.importorskip("onnx")
export_module = importlib.import_module("lazyarray.onnx.export")


def _net(seed: int, units: int = 4):
    la.random.seed(seed)
    net = la.blocks.Dense(units, in_units=3)
    net.initialize()
    return net


def _out(path: str) -> np.ndarray:
    block = la.blocks.SymbolBlock.imports(path, ["data"])
    return block(la.ones((2, 3))).asnumpy()


def _want(net) -> np.ndarray:
    return net(la.ones((2, 3))).asnumpy()


@pytest.fixture
def external(monkeypatch):
    monkeypatch.setattr(export_module, "EXTERNAL_DATA_THRESHOLD", 16)


def test_a_kill_between_the_data_file_and_the_model_is_refused_by_name(tmp_path, monkeypatch, external):
    path = str(tmp_path / "big.onnx")
    la.onnx.export(_net(1), path, input_shapes=(2, 3))
    with monkeypatch.context() as m:
        kill_at_replace(m, 2)  # the data file is renamed into place, the model is not
        with pytest.raises(KeyboardInterrupt):
            la.onnx.export(_net(2), path, input_shapes=(2, 3))  # same graph, other weights
    with pytest.raises(la.GraphFormatError, match=r"ONNX file 'big.onnx' and its external data file 'big.onnx.data' "
                                                  r"were not written together.*export the model again"):
        _out(path)
    assert sorted(os.listdir(tmp_path)) == ["big.onnx", "big.onnx.data"]  # no staging folder left


def test_a_kill_before_the_first_commit_leaves_the_old_model(tmp_path, monkeypatch, external):
    path = str(tmp_path / "big.onnx")
    old = _net(1)
    la.onnx.export(old, path, input_shapes=(2, 3))
    with monkeypatch.context() as m:
        kill_at_replace(m, 1)
        with pytest.raises(KeyboardInterrupt):
            la.onnx.export(_net(2), path, input_shapes=(2, 3))
    np.testing.assert_allclose(_out(path), _want(old), rtol=1e-6)


def test_the_pair_an_export_wrote_loads_and_runs_in_onnxruntime(tmp_path, external):
    path = str(tmp_path / "big.onnx")
    la.onnx.export(_net(1), path, input_shapes=(2, 3))
    new = _net(2)
    la.onnx.export(new, path, input_shapes=(2, 3))  # over the old pair
    np.testing.assert_allclose(_out(path), _want(new), rtol=1e-6)
    onnx.checker.check_model(path, full_check=True)
    ort = pytest.importorskip("onnxruntime")
    got = ort.InferenceSession(path).run(None, {"data": np.ones((2, 3), np.float32)})[0]
    np.testing.assert_allclose(got, _want(new), rtol=1e-6)


def test_a_data_file_written_by_another_tool_is_not_compared(tmp_path, external):
    path = str(tmp_path / "big.onnx")
    net = _net(1)
    la.onnx.export(net, path, input_shapes=(2, 3))
    model = onnx.load(path)  # (reads the data; the metadata stays)
    os.remove(path + ".data")
    onnx.save_model(model, path, save_as_external_data=True, location="big.onnx.data", size_threshold=0)
    np.testing.assert_allclose(_out(path), _want(net), rtol=1e-6)


def test_the_next_export_removes_a_killed_writers_staging_folder(tmp_path, external):
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    stale = tmp_path / f".big.onnx.tmp-{dead.stdout.strip()}-abc123"
    stale.mkdir()
    (stale / "big.onnx.data").write_bytes(b"x" * 64)
    (stale / "big.onnx").write_bytes(b"y")
    la.onnx.export(_net(1), str(tmp_path / "big.onnx"), input_shapes=(2, 3))
    assert sorted(os.listdir(tmp_path)) == ["big.onnx", "big.onnx.data"]
