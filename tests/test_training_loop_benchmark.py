"""benchmarks/training_loop.py --profile runs: the per-kernel table of the MLP's Gluon-style step
names what runs (the dense + relu layers' units_major, matmul's implementations)."""
from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path


def test_training_loop_profile_names_the_step_kernels(capsys, monkeypatch):
    monkeypatch.setattr(sys, "path", list(sys.path))  # (the script puts benchmarks/ first on sys.path)
    path = Path(__file__).resolve().parents[1] / "benchmarks" / "training_loop.py"
    spec = importlib.util.spec_from_file_location("training_loop_bench", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    bench.profile_rows(64)
    out = capsys.readouterr().out
    assert "la.profile() of 20 Gluon-style steps at batch 64" in out
    assert re.search(r"nn\.dense\+relu\[units_major\] +40 ", out)  # (two layers, 20 steps)
    assert "matmul[" in out and "units major" in out
