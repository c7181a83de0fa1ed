"""benchmarks/winograd.py's accuracy table runs: F(4, 3) with the usual points swaps winograd4's
matrices for one call and leaves the kernel's own ones (and their cached casts) as they were."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np


def test_usual_points_f43_runs_and_restores_the_kernel(monkeypatch):
    monkeypatch.setattr(sys, "path", list(sys.path))  # (the script puts benchmarks/ first on sys.path)
    path = Path(__file__).resolve().parents[1] / "benchmarks" / "winograd.py"
    spec = importlib.util.spec_from_file_location("winograd_bench", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    x, w = bench.layer_inputs(np.random.default_rng(0), 2, 16, 8)
    ref = bench.direct64(x, w)
    before = bench.f43(x, w, None)
    usual = bench.usual_points_f43(x, w)
    assert np.abs(usual - ref).max() <= 1e-4 * np.abs(ref).max()
    # (the kernel's own points are back; a fresh weight: a kernel transformed with the usual points is kept for w)
    np.testing.assert_array_equal(bench.f43(x, w.copy(), None), before)
