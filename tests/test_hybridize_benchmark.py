"""Smoke run of ``benchmarks/hybridize.py --first-call``: a first hybridized call in a fresh process,
split by phase, the phases adding up to the call. No timing is asserted (the machine is shared)."""
from __future__ import annotations

import sys

import pytest

try:  # the onnx package first: importing the benchmark puts benchmarks/, which holds an onnx.py, on sys.path
    import onnx  # noqa: F401
except ImportError:
    pass

_PATH = list(sys.path)
from benchmarks import hybridize as bench  # noqa: E402

sys.path[:] = _PATH  # (the script puts its own folder first on the path, where onnx.py would shadow onnx)


def test_first_call_mode_prints_the_phases_of_a_fresh_process_first_call(capsys):
    bench.first_call_table(["transformer2 infer"], 1, None)
    out = capsys.readouterr().out
    row = next(ln.split() for ln in out.splitlines() if ln.strip().startswith("transformer2 infer"))
    assert len(row) == 2 + 10, row  # (the tree column is empty without --against)
    first, parse, onnx_import, trace, compiled, collected, numba, rest, _, wall = map(float, row[2:])
    assert parse == onnx_import == 0 and trace > 0 and compiled > 0 and wall > 0  # (not an ONNX file)
    assert parse + onnx_import + trace + compiled + collected + numba + rest == pytest.approx(first, abs=0.5)


def test_an_onnx_first_calls_parse_and_import_are_phases_of_their_own(capsys):
    pytest.importorskip("onnx")
    bench.first_call_table(["onnx convnext_mini"], 1, None)
    out = capsys.readouterr().out
    row = next(ln.split() for ln in out.splitlines() if ln.strip().startswith("onnx convnext_mini"))
    first, parse, onnx_import, trace, compiled, collected, numba, rest, _, _ = map(float, row[2:])
    assert parse > 0 and onnx_import > 0 and compiled > 0
    assert trace == 0  # (an imported graph is compiled as it is, not traced again: blocks/symbol_block.py)
    assert parse + onnx_import + trace + compiled + collected + numba + rest == pytest.approx(first, abs=0.5)
