"""Smoke run of ``benchmarks/onnx.py --quick``: every model exports, runs in onnxruntime and in
lazyarray with equal outputs (the script checks before timing), and the tables come out.
No timing is asserted (the machine is shared)."""
from __future__ import annotations

import re

import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from benchmarks import onnx as bench  # noqa: E402
from lazyarray.threads import num_threads  # noqa: E402


def test_quick_mode_exports_checks_and_compares_every_model(capsys):
    before = num_threads()
    assert bench.main(["--quick"]) == 0
    out = capsys.readouterr().out
    assert num_threads() == before  # the thread setting is given back
    export, inference = out.split("inference, ms per call")
    names = [name for name, *_ in bench.models(quick=True, full=False)]
    for name in names:
        assert re.search(rf"{re.escape(name)}\s+\d+\s+\d+\.\d\d\b", export), (name, export)  # ms, MiB
    rows = [ln for ln in inference.splitlines() if any(ln.strip().startswith(n) for n in names)]
    expected = sum(len(batches) for *_, batches in bench.models(quick=True, full=False))
    assert len(rows) == expected, inference
    for row in rows:  # per thread count: la ms, ort ms, la/ort ratio
        ratios = re.findall(r"(\d+\.\d+)x", row)
        assert len(ratios) == 2 and all(float(r) > 0 for r in ratios), row


def test_the_script_does_not_shadow_the_onnx_package_or_change_the_path():
    import sys
    from pathlib import Path

    import onnx
    assert hasattr(onnx, "ModelProto") and onnx is not bench
    here = Path(bench.__file__).resolve().parent  # benchmarks/ holds sparse.py, fusion.py, ...
    assert all(Path(p or ".").resolve() != here for p in sys.path)


@pytest.mark.parametrize("script", ["onnx_conformance", "onnx_conv3d"])
def test_sibling_scripts_that_import_onnx_survive_their_folder_on_the_path(script):
    """Run as a script, a benchmark has benchmarks/ first on its path, where onnx.py (this benchmark)
    would shadow the onnx package: the scripts that import onnx take their folder off the path."""
    import subprocess
    import sys
    from pathlib import Path

    here = str(Path(bench.__file__).resolve().parent)
    code = f"import sys; sys.path.insert(0, {here!r}); import {script}; import onnx; assert hasattr(onnx, 'ModelProto')"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
