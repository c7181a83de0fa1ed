"""Smoke run of ``benchmarks/mixed_precision.py --quick``: the zoo ResNet-18 and Transformer encoder train
in float32, float16 and bfloat16 and the table prints every row with its ratios to float32. No timing
is asserted."""
from __future__ import annotations

import math
import re

from benchmarks import mixed_precision as bench


def test_quick_run_prints_every_model_and_dtype(capsys):
    assert bench.main(["--quick", "--steps", "3"]) == 0
    out = capsys.readouterr().out
    assert "quick sizes, 3 Adam steps" in out
    for model in bench.MODELS:
        for dtype in bench.DTYPES:
            row = re.search(rf"{model}\s+{dtype}\s+[\d.]+\s+([\d.]+)x\s+[\d.]+\s+[\d.]+\s+[\d.]+x\s+([\d.]+)\s+"
                            r"[+-][\d.]+%\s+\d+", out)
            assert row, (model, dtype, out)
            assert math.isfinite(float(row.group(2)))
            if dtype == "float32":
                assert row.group(1) == "1.00"
