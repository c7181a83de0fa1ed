"""Smoke run of ``benchmarks/data_loader.py --quick``: every loop runs an epoch and the table of
images per second and ratios comes out. No timing is asserted (the machine may be shared)."""
from __future__ import annotations

import re

from benchmarks import data_loader as bench


def test_quick_run_prints_the_table(capsys):
    assert bench.main(["--quick", "--images", "300", "--rounds", "1"]) == 0
    out = capsys.readouterr().out
    for name in ("bare NumPy slicing", "DataLoader, 0 workers", "DataLoader shuffle, 2 threads"):
        assert re.search(rf"{re.escape(name)}\s+[\d,]+\s+\d+\.\d\s+\d+\.\d\dx", out), name
    assert re.search(r"overhead of the 0-worker DataLoader at batch 64: [+-]\d+\.\d%", out)
