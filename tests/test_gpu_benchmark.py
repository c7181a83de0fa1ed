"""benchmarks/gpu.py runs (a smoke run on the CPU: the GPU run is tools/gpu_check.sh's); no timings asserted."""
import subprocess
import sys
from pathlib import Path

import pytest

import lazyarray as la

ROOT = Path(__file__).resolve().parents[1]


def test_the_gpu_benchmark_runs_on_a_cpu_and_prints_its_tables():
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "gpu.py"), "--device", "cpu", "--quick",
                          "--only", "bandwidth,memory", "--size", "4096"],
                         capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-2000:]
    for row in ("copy (xp.copyto)", "chain hybridized, fused", "GELU hybridized, fused", "planned MiB"):
        assert row in out.stdout, out.stdout


@pytest.mark.skipif(la.gpu_available(), reason="a GPU is usable here")
def test_without_a_gpu_the_default_run_says_so_and_exits_cleanly():
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "gpu.py")], capture_output=True, text=True,
                         timeout=120, cwd=ROOT)
    assert out.returncode == 0 and "no usable GPU" in out.stdout, out.stdout + out.stderr
