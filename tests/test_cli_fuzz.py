"""``lazyarray`` never shows a traceback for a bad file or argument: one line
``lazyarray: error: ...`` on stderr and exit status 2 (or a normal run, status 0).

Regression tests, then fuzzers that run ``lazyarray inspect`` in-process (``cli.main``) on mutated
symbol and parameter files and on random arguments, plus a few real subprocess runs. Default runs
are short; for a long run: ``LAZYARRAY_FUZZ_EXAMPLES=20000 python -m pytest tests/test_cli_fuzz.py``.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest
from fuzz_support import (
    exported_model,
    fuzz_settings,
    mutated_bytes,
    mutated_json,
    mutated_param_file,
    safetensors_file,
    split_safetensors,
)
from hypothesis import given
from hypothesis import strategies as st
from safetensors.numpy import save

from lazyarray.blocks.param_file import load_arrays
from lazyarray.cli import main


def _run(argv, capsys) -> tuple[int, str, str]:
    capsys.readouterr()
    status = main(argv)
    out, err = capsys.readouterr()
    return status, out, err


def _assert_clean(status: int, err: str) -> None:
    assert status in (0, 2), (status, err)
    assert "Traceback" not in err, err
    if status == 2:
        assert err.count("\n") == 1 and err.startswith("lazyarray: error: "), err


def _files(tmp_path, symbol: str | bytes | None = None, params: bytes | None = None) -> tuple[str, str]:
    sym_file, param_file = exported_model()
    if symbol is not None:
        sym_file = str(tmp_path / "m-symbol.json")
        with open(sym_file, "wb") as f:
            f.write(symbol if isinstance(symbol, bytes) else symbol.encode("utf-8", "surrogatepass"))
    if params is not None:
        param_file = str(tmp_path / "m-0000.params")
        with open(param_file, "wb") as f:
            f.write(params)
    return sym_file, param_file


def _symbol_text() -> str:
    with open(exported_model()[0]) as f:
        return f.read()


def _params_bytes() -> bytes:
    with open(exported_model()[1], "rb") as f:
        return f.read()


# -- regressions ---------------------------------------------------------------------------------
def test_int32_parameters_for_a_float32_graph_exit_2_like_imports(tmp_path, capsys):
    """inspect checks parameters exactly as SymbolBlock.imports does (it used to exit 0 here)."""
    arrays, _ = load_arrays(exported_model()[1])
    sym_file, bad = _files(tmp_path, params=save({k: v.astype(np.int32) for k, v in arrays.items()}))
    status, _, err = _run(["inspect", sym_file, "--params", bad], capsys)
    assert status == 2, err
    assert "mis-shaped parameters '0.weight': file dtype int32, graph float32" in err
    _assert_clean(status, err)


def test_parameters_of_another_graph_exit_2(tmp_path, capsys):
    doc = json.loads(_symbol_text())
    doc["nodes"][-1]["name"] += "_renamed"
    sym_file, param_file = _files(tmp_path, symbol=json.dumps(doc))
    status, _, err = _run(["inspect", sym_file, "--params", param_file], capsys)
    assert status == 2 and "exported with a different graph" in err
    _assert_clean(status, err)


@pytest.mark.parametrize("symbol,fragment", [
    ("[" * 100_000 + "]" * 100_000, "nested deeper than 64 levels"),
    ('{"format": "lazyarray.symbol", "version": ' + "9" * 5000 + "}", "(5000 characters)"),
    ('{"format": "lazyarray.symbol", "version": 1, "nodes": [{"id": 0, "name": "\\ud800"}]}', "lone surrogate"),
    (b'{"format": "\xed\xa0\x80"}', "invalid utf-8 text at byte offset 12"),
])
def test_hostile_symbol_files_exit_2(tmp_path, capsys, symbol, fragment):
    sym_file, _ = _files(tmp_path, symbol=symbol)
    status, _, err = _run(["inspect", sym_file], capsys)
    assert status == 2 and fragment in err, err
    _assert_clean(status, err)


@pytest.mark.parametrize("dtype", ["BF16", "F8_E5M2"])
def test_parameter_files_in_unsupported_dtypes_exit_2(tmp_path, capsys, dtype):
    header, data = split_safetensors(_params_bytes())
    header["0.bias"]["dtype"] = dtype
    header["0.bias"]["data_offsets"][1] -= 4  # two 2-byte values instead of two 4-byte ones
    sym_file, bad = _files(tmp_path, params=safetensors_file(header, data))
    status, _, err = _run(["inspect", sym_file, "--params", bad], capsys)
    assert status == 2 and f"has dtype '{dtype}', which lazyarray does not load; supported:" in err, err


@pytest.mark.parametrize("argv,fragment", [
    ([], "the following arguments are required: command"),
    (["nope"], "invalid choice: 'nope'"),
    (["inspect"], "the following arguments are required: FILE"),
    (["inspect", "x.json", "--bogus"], "unrecognized arguments: --bogus"),
    (["inspect", "{sym}", "--shape", "data=" + "9" * 5000], "--shape"),
    (["inspect", "{sym}", "--shape", "data=1,-2"], "--shape"),
    (["inspect", "{sym}", "--shape", "data=99999999999999999999,1,4,4"], ">= 2**63"),
    (["inspect", "{sym}", "--shape", "data=4611686018427387904,4,1,1"], "more than any array can hold"),
    (["inspect", "{sym}", "--svg", "a\x00b.svg"], "NUL"),
    (["inspect", "no\x00such.json"], "cannot read symbol file"),
    (["inspect", "{sym}", "--params", "no\x00such.params"], "cannot read parameter file"),
    (["inspect", "{tmp}"], "cannot read symbol file"),
    (["demo", "--samples", "5"], "argument --samples: 5 is not in [10, 1,000,000]"),
    (["demo", "--samples", "9" * 30], "is not in [10, 1,000,000]"),
    (["demo", "--seed", "-1"], "argument --seed: -1 is not in"),
    (["demo", "--lr", "nan"], "must be a positive, finite number"),
    (["demo", "--epochs", "x"], "'x' is not an integer"),
    (["demo", "--batch-size", "0"], "argument --batch-size"),
])
def test_bad_arguments_are_one_line_with_status_2(tmp_path, capsys, argv, fragment):
    sym_file, _ = exported_model()
    argv = [a.format(sym=sym_file, tmp=str(tmp_path)) if "{" in a else a for a in argv]
    status, _, err = _run(argv, capsys)
    assert status == 2 and fragment in err, err
    _assert_clean(status, err)


def test_help_is_status_0(capsys):
    status, out, _ = _run(["inspect", "--help"], capsys)
    assert status == 0 and "--params" in out


def _subprocess(args, **env):
    return subprocess.run([sys.executable, "-m", "lazyarray.cli", *args], check=False, capture_output=True,
                          env={**os.environ, **env}, timeout=120)


def test_subprocess_runs_never_show_a_traceback(tmp_path):
    sym_file, param_file = exported_model()
    deep = tmp_path / "deep-symbol.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    arrays, _ = load_arrays(param_file)
    int32 = tmp_path / "int32.params"
    int32.write_bytes(save({k: v.astype(np.int32) for k, v in arrays.items()}))
    undecodable = os.fsencode(str(tmp_path)) + b"/\xff\xfe-symbol.json"  # a name that is not UTF-8
    with open(undecodable, "w") as f:
        f.write("{}")
    for args in (["inspect", str(deep)], ["inspect", sym_file, "--params", str(int32)],
                 ["inspect", os.fsdecode(undecodable)], ["demo", "--samples", "1"]):
        res = _subprocess(args)
        err = res.stderr.decode("utf-8", "replace")
        assert res.returncode == 2 and b"Traceback" not in res.stderr, err
        assert err.count("\n") == 1 and err.startswith("lazyarray: error: "), err


def test_names_the_terminal_cannot_show_are_escaped(tmp_path):
    """A graph input named in Unicode, printed to an ASCII stdout."""
    doc = json.loads(_symbol_text())
    for n in doc["nodes"]:
        if n["name"] == "data":
            n["name"] = "données\U0001F600"
    sym_file, _ = _files(tmp_path, symbol=json.dumps(doc))
    res = _subprocess(["inspect", sym_file], PYTHONIOENCODING="ascii")
    assert res.returncode == 0 and b"Traceback" not in res.stderr, res.stderr
    assert b"donn\\xe9es\\U0001f600" in res.stdout


# -- fuzzers -------------------------------------------------------------------------------------
_SHAPES = st.one_of(
    st.text(max_size=12),
    st.builds(lambda name, dims: f"{name}={','.join(map(str, dims))}",
              st.sampled_from(["data", "0.weight", "x", "", "data0"]),
              st.lists(st.integers(-2, 2**64), max_size=5) | st.lists(st.integers(0, 8), max_size=5)),
)


@fuzz_settings(200)
@given(data=st.data())
def test_fuzz_inspect_mutated_symbol_files(data, tmp_path, capsys):
    if data.draw(st.booleans()):
        symbol = data.draw(mutated_json(_symbol_text()))
    else:
        symbol = data.draw(mutated_bytes(_symbol_text().encode()))
    sym_file, param_file = _files(tmp_path, symbol=symbol)
    argv = ["inspect", sym_file] + (["--params", param_file] if data.draw(st.booleans()) else [])
    argv += [a for s in data.draw(st.lists(_SHAPES, max_size=2)) for a in ("--shape", s)]
    _assert_clean(*_run(argv, capsys)[::2])


@fuzz_settings(200)
@given(data=st.data())
def test_fuzz_inspect_mutated_parameter_files(data, tmp_path, capsys):
    raw = data.draw(mutated_param_file() | mutated_bytes(_params_bytes()))
    sym_file, param_file = _files(tmp_path, params=raw)
    _assert_clean(*_run(["inspect", sym_file, "--params", param_file], capsys)[::2])


_WORDS = ["inspect", "demo", "--params", "--shape", "--svg", "--all-nodes", "--help", "--model", "--epochs",
          "--samples", "--batch-size", "--lr", "--seed", "--out", "--quiet", "cnn", "mlp", "{sym}", "{params}",
          "{tmp}/x.svg", "{tmp}", "data=1,1,4,4", "data=", "=", "-1", "0", "1e999", "nan", "\ud800", "-", "--"]


@fuzz_settings(200)
@given(words=st.lists(st.sampled_from(_WORDS) | st.text(max_size=6), max_size=6))
def test_fuzz_arguments(words, tmp_path, capsys):
    if "demo" in words and not any(w.startswith("-h") or w == "--help" for w in words):
        words = [w for w in words if w != "demo"]  # (a real demo run trains a model: not fuzzed here)
    sym_file, param_file = exported_model()
    argv = [w.format(sym=sym_file, params=param_file, tmp=str(tmp_path)) if w in _WORDS else w for w in words]
    _assert_clean(*_run(argv, capsys)[::2])
