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
    assert len(row) == 2 + 8, row  # (the tree column is empty without --against)
    first, onnx_import, trace, compiled, collected, numba, rest, _ = map(float, row[2:])
    assert onnx_import == 0 and trace > 0 and compiled > 0  # (not an ONNX file)
    assert onnx_import + trace + compiled + collected + numba + rest == pytest.approx(first, abs=0.5)
