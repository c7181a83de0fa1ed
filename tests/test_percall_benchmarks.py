"""benchmarks/executor_overhead.py and benchmarks/import_cost.py --onnx run (short rounds): each row
checks its values first (against NumPy, or the fixture's stored outputs)."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"


def _load(name, monkeypatch):
    # (the scripts put benchmarks/ first on sys.path, where benchmarks/onnx.py would shadow the onnx
    # package for later tests: the path is restored after each test)
    monkeypatch.setattr(sys, "path", list(sys.path))
    spec = importlib.util.spec_from_file_location(f"{name}_bench", BENCH / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_executor_overhead_unfusible_rows(monkeypatch):
    bench = _load("executor_overhead", monkeypatch)
    rows = bench.unfusible_rows(rounds=1)
    assert [r[0] for r in rows] == ["elementwise chain, fuse=False", "products and views"]
    assert rows[1][1].endswith("(+60)")  # the views of the products' buffers: made once per buffer set


def test_executor_overhead_models_row(monkeypatch):
    pytest.importorskip("onnx")
    bench = _load("executor_overhead", monkeypatch)
    row, = bench.model_rows(["hf_bert"], None, rounds=1)
    assert row[0] == "hf_bert" and float(row[2]) > 0


def test_import_cost_onnx_row(monkeypatch):
    pytest.importorskip("onnx")
    bench = _load("import_cost", monkeypatch)
    row, = bench.onnx_rows(["arange_gather"], None, rounds=1)
    assert row[0] == "arange_gather" and float(row[1]) > 0 and float(row[2]) > 0
