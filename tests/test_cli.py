"""The ``lazyarray`` command: a tiny demo run, inspect, and one-line errors with exit status 2."""
from __future__ import annotations

import importlib.metadata
import os
import subprocess
import sys
import time
import xml.etree.ElementTree as ET

import numpy as np
import pytest

import lazyarray as la
from lazyarray import blocks as B
from lazyarray.blocks import models
from lazyarray.cli import color_patterns, counting_sequences, line_images, main, spirals, token_classes


def test_demo_trains_exports_and_reimports(tmp_path, capsys):
    status = main(["demo", "--epochs", "3", "--samples", "1500", "--quiet", "--out", str(tmp_path)])
    out = capsys.readouterr().out
    assert status == 0, out
    assert "test accuracy:" in out and "(chance: 25.0%)" in out
    acc = float(out.split("test accuracy: ")[1].split("%")[0])
    assert acc > 50.0
    assert "re-imported: outputs match" in out
    assert "peak_bytes" in out and "lower_bound_bytes" in out
    assert sorted(os.listdir(tmp_path)) == ["demo-0000.params", "demo-symbol.json"]


def test_demo_mlp_with_progress_bars(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)  # bars are drawn on a terminal only
    status = main(["demo", "--model", "mlp", "--epochs", "3", "--samples", "900", "--out", str(tmp_path)])
    out = capsys.readouterr().out
    assert status == 0, out
    assert "epoch 3/3" in out and "loss=" in out and "acc=" in out  # the tqdm bar's postfix


def test_demo_data_sets_are_learnable_shapes():
    rng = np.random.default_rng(0)
    x, y = line_images(20, rng)
    assert x.shape == (20, 1, 12, 12) and x.dtype == np.float32 and set(y) <= {0, 1, 2, 3}
    x, y = spirals(30, rng)
    assert x.shape == (30, 2) and set(y) <= {0, 1, 2}
    x, y = color_patterns(40, rng)
    assert x.shape == (40, 3, 32, 32) and x.dtype == np.float32 and set(y) <= set(range(10))
    x, y = token_classes(50, rng)
    assert x.shape == (50, 16) and x.dtype == np.int64 and x.min() >= 0 and x.max() < 64 and set(y) <= {0, 1, 2, 3}
    # most tokens of a sequence lie in its class's quarter of the vocabulary
    assert np.mean(x // 16 == y[:, None]) > 0.6
    x, y = counting_sequences(8, rng)
    assert x.shape == y.shape == (8, 16) and x.max() < 32
    np.testing.assert_array_equal(x[:, 1:], y[:, :-1])  # targets are the inputs shifted by one


def test_default_demo_is_quick_keeps_its_files_and_exports_a_dynamic_batch(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the demo writes ./lazyarray-demo/ (never into the repository)
    cpu = time.process_time()
    status = main(["demo"])
    cpu = time.process_time() - cpu
    out = capsys.readouterr().out
    assert status == 0, out
    epochs = [ln for ln in out.splitlines() if ln.startswith("epoch ")]
    assert [ln.split(":")[0] for ln in epochs] == ["epoch 1/3", "epoch 2/3", "epoch 3/3"]  # not a tty: no bars
    assert "\r" not in out and "re-imported: outputs match" in out
    sym_file = os.path.join("lazyarray-demo", "demo-symbol.json")
    assert f"exported: {sym_file}, " in out and f"lazyarray inspect {sym_file}" in out  # it says where
    assert sorted(os.listdir(tmp_path / "lazyarray-demo")) == ["demo-0000.params", "demo-symbol.json"]
    assert cpu < 10.0, f"the default demo took {cpu:.1f} s of CPU"
    # the README's next step: the exported graph serves every batch size
    assert main(["inspect", sym_file]) == 0
    shown = capsys.readouterr().out
    assert "  data                     float32[batch,1,12,12]" in shown and "float32[batch,4]" in shown
    assert main(["inspect", sym_file, "--params", os.path.join("lazyarray-demo", "demo-0000.params"),
                 "--shape", "data=300,1,12,12"]) == 0
    assert "float32[300,4]" in capsys.readouterr().out


def test_demo_errors_are_one_line(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)

    def broken(*args, **kwargs):
        raise la.GraphFormatError("cannot read the exported file")

    monkeypatch.setattr(B.SymbolBlock, "imports", broken)
    assert main(["demo", "--model", "mlp", "--epochs", "1", "--samples", "100"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "cannot read the exported file" in err


def test_version(capsys):
    assert main(["--version"]) == 0
    assert capsys.readouterr().out == f"lazyarray {la.__version__}\n"
    res = subprocess.run([sys.executable, "-m", "lazyarray.cli", "--version"], check=False, capture_output=True,
                         text=True)
    assert res.returncode == 0 and res.stdout.strip() == f"lazyarray {la.__version__}"
    try:
        installed = importlib.metadata.version("lazyarray")
    except importlib.metadata.PackageNotFoundError:
        return
    assert installed == la.__version__  # pyproject.toml and the package agree


def test_zoo_model_missing_is_a_one_line_error(monkeypatch, capsys):
    monkeypatch.delattr(models, "lstm_lm", raising=False)
    assert main(["demo", "--model", "lstm"]) == 2
    assert "la.blocks.models.lstm_lm is not available" in capsys.readouterr().err


ZOO = [("transformer", "transformer_encoder"), ("lstm", "lstm_lm"), ("resnet18", "resnet18")]


@pytest.mark.parametrize("model,name", ZOO)
def test_demo_zoo_models_train_export_and_reimport(model, name, tmp_path, capsys, monkeypatch):
    if not hasattr(models, name):  # the model zoo lands in another change of issue #14
        pytest.skip(f"la.blocks.models.{name} is not in this build")
    monkeypatch.chdir(tmp_path)
    status = main(["demo", "--model", model])
    out = capsys.readouterr().out
    assert status == 0, out
    assert "re-imported: outputs match" in out and "memory plan" in out
    losses = [float(ln.split("loss ")[1].split(",")[0]) for ln in out.splitlines() if ln.startswith("epoch ")]
    assert len(losses) == 3 and losses[-1] < losses[0]  # it learns something in a brief run
    assert sorted(os.listdir(tmp_path / "lazyarray-demo")) == ["demo-0000.params", "demo-symbol.json"]


@pytest.fixture
def mlp_files(tmp_path):
    la.random.seed(0)
    net = B.HybridSequential()
    net.add(B.Dense(512, activation="relu"), B.Dense(512, activation="relu"), B.Dense(10))
    net.initialize()
    net.hybridize()
    net(la.ones((1, 784)))
    return net.export(str(tmp_path / "mlp"))


def test_inspect_summarizes_the_graph(mlp_files, capsys):
    sym_file, param_file = mlp_files
    assert main(["inspect", sym_file, "--params", param_file, "--shape", "data=64,784"]) == 0
    out = capsys.readouterr().out
    assert "data" in out and "float32[64,784]" in out
    assert "0.weight" in out and "float32[512,784]" in out and "401,408" in out
    assert "669,706" in out  # 784*512+512 + 512*512+512 + 512*10+10 parameters
    assert "nn.dense x3" in out and "relu x2" in out
    assert "float32[64,10]" in out
    assert "planned peak memory:" in out


def test_inspect_without_params_file(mlp_files, capsys):
    sym_file, _ = mlp_files
    assert main(["inspect", sym_file]) == 0
    out = capsys.readouterr().out
    # the exported graph serves every batch (a symbolic trace): the batch prints as its symbol
    assert "float32[batch,784]" in out and "float32[batch,10]" in out
    assert "memory plan: not available" in out and "--shape data=64,784" in out


def test_inspect_draws_the_graph_to_svg(mlp_files, tmp_path, capsys):
    sym_file, param_file = mlp_files
    out_svg = tmp_path / "mlp.svg"
    assert main(["inspect", sym_file, "--params", param_file, "--svg", str(out_svg)]) == 0
    assert f"drawing: {out_svg}" in capsys.readouterr().out
    root = ET.parse(out_svg).getroot()  # well-formed, with the XML declaration
    assert root.tag == "{http://www.w3.org/2000/svg}svg" and "la-g" in root.get("class")
    text = " ".join(root.itertext())
    assert "nn.dense" in text and "relu" in text and "data" in text and "0.weight" in text
    assert not list(tmp_path.glob(".*"))  # the temporary file was renamed over the target


def test_inspect_svg_collapses_long_chains_unless_all_nodes(tmp_path, capsys):
    la.random.seed(0)
    net = B.HybridSequential()
    net.add(*[B.Dense(4, activation="relu") for _ in range(80)])
    net.initialize()
    net.hybridize()
    net(la.ones((1, 4)))
    sym_file, _ = net.export(str(tmp_path / "deep"))
    small, full = tmp_path / "small.svg", tmp_path / "full.svg"
    assert main(["inspect", sym_file, "--svg", str(small)]) == 0
    assert main(["inspect", sym_file, "--svg", str(full), "--all-nodes"]) == 0
    assert "collapsed" in small.read_text() and "collapsed" not in full.read_text()
    assert small.stat().st_size < full.stat().st_size


@pytest.mark.parametrize("argv,fragment", [
    (["inspect", "no/such-symbol.json"], "cannot read symbol file"),
    (["inspect", "{bad}"], "not valid JSON"),
    (["inspect", "{sym}", "--params", "no/such.params"], "cannot read parameter file"),
    (["inspect", "{sym}", "--params", "{bad}"], "not a safetensors"),
    (["inspect", "{sym}", "--shape", "data=1;784"], "--shape"),
    (["inspect", "{sym}", "--shape", "image=1,784"], "not inputs of the graph"),
    (["inspect", "{sym}", "--shape", "data=1,785"], "dense"),
    (["inspect", "{sym}", "--svg", "{tmp}/graph.png"], "name the file *.svg"),
    (["inspect", "{sym}", "--svg", "{tmp}/no/such/dir/graph.svg"], "cannot write"),
])
def test_errors_are_one_line_with_status_2(mlp_files, tmp_path, capsys, argv, fragment):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    argv = [a.format(sym=mlp_files[0], bad=str(bad), tmp=str(tmp_path)) for a in argv]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("lazyarray: error:") and fragment in err, err
    assert "Traceback" not in err


def test_console_script_runs_as_a_process():
    res = subprocess.run([sys.executable, "-m", "lazyarray.cli", "inspect", "missing-symbol.json"],
                         check=False, capture_output=True, text=True)
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert res.stderr.strip().startswith("lazyarray: error: cannot read symbol file")


@pytest.mark.parametrize("special", ["/dev/zero", "fifo", "dir"])
@pytest.mark.parametrize("command", ["inspect", "convert"])
def test_files_that_are_not_regular_files_are_refused_before_reading(mlp_files, tmp_path, capsys, special, command):
    # /dev/zero never ends (read until MemoryError), a FIFO blocks the open until someone writes
    if special == "fifo":
        if not hasattr(os, "mkfifo"):
            pytest.skip("no FIFOs here")
        os.mkfifo(tmp_path / "pipe")
        special = str(tmp_path / "pipe")
    elif special == "dir":
        special = str(tmp_path)
    elif not os.path.exists(special):
        pytest.skip("no /dev/zero here")
    extra = ["--out", str(tmp_path / "x")] if command == "convert" else []
    for argv in ([command, special, *extra], [command, mlp_files[0], "--params", special, *extra]):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith("lazyarray: error: cannot read"), err
        assert "not a regular file" in err and repr(special) in err and "Traceback" not in err


def test_dev_zero_is_refused_by_the_console_script_in_a_process():
    if not os.path.exists("/dev/zero"):
        pytest.skip("no /dev/zero here")
    res = subprocess.run([sys.executable, "-m", "lazyarray.cli", "inspect", "/dev/zero"],
                         check=False, capture_output=True, text=True, timeout=120)
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert res.stderr.strip() == ("lazyarray: error: cannot read symbol file '/dev/zero': it is a character device, "
                                  "not a regular file; give the path of the file itself")


# -- every format, recognised by content ---------------------------------------------------------
X = np.random.default_rng(3).standard_normal((4, 5)).astype(np.float32)  # batch 4: not the traced batch 2


@pytest.fixture
def small_model(tmp_path):
    """A hybridized MLP (75 parameters, 300 bytes) exported in every format: name -> (model, params)."""
    pytest.importorskip("onnx")
    la.random.seed(0)
    net = B.HybridSequential()
    net.add(B.Dense(8, activation="relu"), B.Dense(3))
    net.initialize()
    net.hybridize()
    net(la.ones((2, 5)))
    files = {"lazyarray": net.export(str(tmp_path / "net")),
             "onnx": (net.export_onnx(str(tmp_path / "net.onnx")), None),
             "mxnet": la.mxnet.export(net, str(tmp_path / "mx"))}
    return files, net(la.array(X)).asnumpy()


def _argv(files: tuple) -> list[str]:
    model, params = files
    return [model] + (["--params", params] if params else [])


@pytest.mark.parametrize("fmt,converted,data", [
    ("lazyarray", "", "float32[batch,5]"),
    ("onnx", " (ONNX model, converted)", "float32[batch,5]"),
    ("mxnet", " (MXNet 1.x files, converted)", "float32[?]"),  # MXNet files record no input shapes
])
def test_inspect_reads_each_model_format(small_model, capsys, fmt, converted, data):
    files, _ = small_model
    assert main(["inspect", *_argv(files[fmt])]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].endswith(converted) and f"  data                     {data}\n" in out
    for name, shape in (("0.weight", "[8,5]"), ("0.bias", "[8]"), ("1.weight", "[3,8]"), ("1.bias", "[3]")):
        assert f"  {name:<24} float32{shape}" in out
    assert "  total" in out and " 75  (300 bytes)" in out
    assert "ops: " in out and "relu x1" in out
    if fmt != "mxnet":
        assert "float32[batch,3]" in out  # the symbolic batch prints by name
    assert main(["inspect", *_argv(files[fmt]), "--shape", "data=4,5"]) == 0
    out = capsys.readouterr().out
    assert "float32[4,5]" in out and "float32[4,3]" in out and "planned peak memory" in out


@pytest.mark.parametrize("fmt,kind", [("lazyarray", "safetensors parameters"), ("mxnet", "MXNet .params")])
def test_inspect_lists_the_arrays_of_a_parameter_file(small_model, tmp_path, capsys, fmt, kind):
    files, _ = small_model
    renamed = tmp_path / "weights.bin"  # recognised by content, not by name
    renamed.write_bytes(open(files[fmt][1], "rb").read())
    assert main(["inspect", str(renamed)]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0] == f"parameters: {renamed} ({kind}, 4 arrays)"
    assert "  0.weight                 float32[8,5]                     40" in out
    assert out.splitlines()[-1].split() == ["total", "75", "(300", "bytes)"]
    assert main(["inspect", str(renamed), "--shape", "data=1,5"]) == 2
    assert "--shape" in capsys.readouterr().err


@pytest.mark.parametrize("dst", ["lazyarray", "onnx", "mxnet"])
@pytest.mark.parametrize("src", ["lazyarray", "onnx", "mxnet"])
def test_convert_between_every_pair_of_model_formats(small_model, tmp_path, capsys, src, dst):
    files, want = small_model
    model, params = files[src]
    renamed = tmp_path / "model.bin"  # the source recognised by content, whatever its name
    renamed.write_bytes(open(model, "rb").read())
    out = str(tmp_path / "out")
    extra = ["--shape", "data=1,5"] if src == "mxnet" and dst == "onnx" else []  # MXNet records no shapes
    argv = ["convert", str(renamed), *(["--params", params] if params else []), "--to", dst, "--out", out, *extra]
    assert main(argv) == 0, capsys.readouterr().err
    assert "wrote" in capsys.readouterr().out
    if dst == "onnx":
        back = B.SymbolBlock.imports(out + ".onnx", ["data"])
    else:
        back = B.SymbolBlock.imports(out + "-symbol.json", ["data"], out + "-0000.params")
    np.testing.assert_allclose(back(la.array(X)).asnumpy(), want, rtol=1e-5, atol=1e-6)  # batch 4, traced at 2
    if dst != "mxnet":
        inspected = _argv((out + ".onnx", None) if dst == "onnx" else (out + "-symbol.json", out + "-0000.params"))
        assert main(["inspect", *inspected]) == 0
        assert "  data                     float32[" + ("?" if src == "mxnet" and dst == "lazyarray" else
                                                     "batch,5") in capsys.readouterr().out


@pytest.mark.parametrize("argv,fragments", [
    # parameter files of the other kind: one line naming both formats
    (["inspect", "{lazyarray}", "--params", "{mxnet_params}"], ["MXNet .params", "lazyarray symbol JSON"]),
    (["convert", "{lazyarray}", "--params", "{mxnet_params}", "--out", "{tmp}/o"],
     ["MXNet .params", "lazyarray symbol JSON"]),
    (["convert", "{mxnet}", "--params", "{lazyarray_params}", "--out", "{tmp}/o"],
     ["safetensors parameters", "MXNet symbol JSON"]),
    (["inspect", "{onnx}", "--params", "{lazyarray_params}"], ["ONNX model", "carries its own weights"]),
    # what is missing, named
    (["convert", "{lazyarray}", "--out", "{tmp}/o"], ["--params", "lazyarray symbol JSON", "0.weight"]),
    (["convert", "{mxnet}", "--out", "{tmp}/o"], ["MXNet 1.x symbol file", "--params"]),
    (["convert", "{mxnet}", "--params", "{mxnet_params}", "--to", "onnx", "--out", "{tmp}/o.onnx"],
     ["--shape", "'data'"]),
    (["convert", "{onnx}", "--to", "onnx"], ["--out FILE.onnx"]),
    (["convert", "{onnx}"], ["--out PREFIX"]),
    (["convert", "{lazyarray_params}", "--out", "{tmp}/o"], ["safetensors parameters", "no graph"]),
    (["convert", "{tmp}/garbage", "--out", "{tmp}/o"], ["none of the formats lazyarray reads"]),
])
def test_wrong_or_missing_files_are_one_line_errors(small_model, tmp_path, capsys, argv, fragments):
    files, _ = small_model
    (tmp_path / "garbage").write_bytes(b"\x01\x02 not a model")
    names = {"lazyarray": files["lazyarray"][0], "lazyarray_params": files["lazyarray"][1],
             "onnx": files["onnx"][0], "mxnet": files["mxnet"][0], "mxnet_params": files["mxnet"][1],
             "tmp": str(tmp_path)}
    assert main([a.format(**names) for a in argv]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("lazyarray: error:") and "Traceback" not in err, err
    assert all(f in err for f in fragments), err
