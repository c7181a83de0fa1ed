"""Smoke run of ``benchmarks/conv_threads.py``: every ResNet-18 conv shape runs on one thread, two
threads with BLAS only and two threads split, each checked equal to the one-thread result before it
is timed, and the table comes out; the thread settings are given back. No timing is asserted."""
from __future__ import annotations

import re

import lazyarray as la
from benchmarks import conv_threads as bench
from lazyarray import threads


def test_quick_run_checks_every_layer_and_restores_the_settings(capsys):
    before, split_at = threads.num_threads(), la.config.min_split_macs
    assert bench.main(["--quick", "--batch", "4", "--rounds", "1"]) == 0
    out = capsys.readouterr().out
    assert threads.num_threads() == before and la.config.min_split_macs == split_at
    assert re.search(r"core check: .* (\d+\.\d\d)x", out)
    for name, *_ in bench.LAYERS:
        assert re.search(rf"{re.escape(name)}\s+\d+\.\d\d\s+\d+\.\d\d\s+\d+\.\d\d\s+\d+\.\d\dx\s+\d+\.\d\dx", out), name
    assert "sum of one call per shape" in out
