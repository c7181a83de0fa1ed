"""benchmarks/small_graphs.py runs (a quick round): every row checks its values against NumPy first."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path


def test_small_graphs_benchmark_quick_run(capsys, monkeypatch):
    # the script puts benchmarks/ first on sys.path (for _util), where benchmarks/onnx.py would shadow
    # the onnx package for every later test: the path is restored after this one
    monkeypatch.setattr(sys, "path", list(sys.path))
    path = Path(__file__).resolve().parents[1] / "benchmarks" / "small_graphs.py"
    spec = importlib.util.spec_from_file_location("small_graphs_bench", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    bench.main(["--quick"])
    out = capsys.readouterr().out
    for row in ("chain of 1000 ops", "MLP 784-512-512-10", "LSTM cell", "CachedOp build + first call",
                "symbol.to_json()"):
        assert row in out
