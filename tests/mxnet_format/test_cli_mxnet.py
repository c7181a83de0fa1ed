"""`lazyarray inspect` and `lazyarray convert` on MXNet 1.x files."""
import numpy as np

import lazyarray as la
from lazyarray.cli import main

from .mxnet_fixtures import model_files, model_io


def test_inspect_mxnet_model(capsys):
    sym_file, par_file = model_files("resnet18_v1")
    assert main(["inspect", sym_file, "--params", par_file, "--shape", "data=1,3,64,64"]) == 0
    out = capsys.readouterr().out
    assert "(MXNet 1.x files, converted)" in out
    assert "data                     float32[1,3,64,64]" in out
    assert "resnetv10_conv0_weight" in out and "178,562" in out  # every parameter counted
    assert "float32[1,10]" in out and "planned peak memory" in out


def test_inspect_mxnet_needs_params(capsys):
    assert main(["inspect", model_files("mlp")[0]]) == 2
    assert "pass its parameter file with --params" in capsys.readouterr().err


def test_convert_mxnet_to_lazyarray_and_back(tmp_path, capsys):
    x, want = model_io("text_cnn")
    sym_file, par_file = model_files("text_cnn")
    out = str(tmp_path / "ours")
    assert main(["convert", sym_file, "--params", par_file, "--out", out]) == 0
    assert '"format": "lazyarray.symbol"' in open(out + "-symbol.json").read()
    ours = la.blocks.SymbolBlock.imports(out + "-symbol.json", ["data"], out + "-0000.params")
    np.testing.assert_allclose(ours(la.array(x)).asnumpy(), want, rtol=1e-4, atol=1e-5)
    back = str(tmp_path / "mx")
    assert main(["convert", out + "-symbol.json", "--params", out + "-0000.params", "--out", back,
                 "--to", "mxnet"]) == 0
    assert '"mxnet_version"' in open(back + "-symbol.json").read()
    theirs = la.blocks.SymbolBlock.imports(back + "-symbol.json", ["data"], back + "-0000.params")
    np.testing.assert_allclose(theirs(la.array(x)).asnumpy(), want, rtol=1e-4, atol=1e-5)
    assert "wrote" in capsys.readouterr().out


def test_convert_reports_malformed_files_in_one_line(tmp_path, capsys):
    bad = tmp_path / "bad-0000.params"
    bad.write_bytes(open(model_files("mlp")[1], "rb").read()[:100])
    assert main(["convert", model_files("mlp")[0], "--params", str(bad), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("lazyarray: error: MXNet params file 'bad-0000.params': truncated") and "byte offset" in err
    assert err.count("\n") == 1
