"""benchmarks/jit_kernels.py runs (a quick round): its rows check values equal before timing."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest


def test_jit_kernels_benchmark_quick_run(capsys):
    pytest.importorskip("numba")
    path = Path(__file__).resolve().parents[1] / "benchmarks" / "jit_kernels.py"
    spec = importlib.util.spec_from_file_location("jit_kernels_bench", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    try:
        bench.main(["--quick"])
    finally:
        bench.jit.set_enabled(None)
    out = capsys.readouterr().out
    assert "max_pool2d_grad" in out and "demo CNN training step" in out and "speedup" in out
