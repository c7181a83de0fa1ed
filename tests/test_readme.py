"""The README stays true: its Python examples run as written."""
import os
import re

import numpy as np

import lazyarray as la

README = os.path.join(os.path.dirname(__file__), os.pardir, "README.md")


def test_readme_python_examples_run(tmp_path, monkeypatch):
    blocks = re.findall(r"```python\n(.*?)```", open(README, encoding="utf-8").read(), re.S)
    assert len(blocks) >= 2
    monkeypatch.chdir(tmp_path)  # the examples write files
    ns = {
        "data": la.array(np.random.default_rng(0).standard_normal((8, 20)).astype(np.float32)),
        "labels": la.array(np.random.default_rng(1).integers(0, 10, 8)),
    }
    try:
        import dask.distributed  # noqa: F401
        has_dask = True
    except ImportError:  # the distributed extra is not installed: its example cannot run here
        has_dask = False
    try:
        import onnx  # noqa: F401
        import onnxruntime  # noqa: F401
        has_onnx = True
    except ImportError:  # the onnx extra is not installed: its example cannot run here
        has_onnx = False
    ran = skipped = 0
    for block in blocks:
        if ("dask" in block and not has_dask) or ("onnx" in block and not has_onnx):
            skipped += 1
            continue
        exec(compile(block, "README.md", "exec"), ns)
        ran += 1
    assert ran == len(blocks) - skipped and skipped <= 2
    assert (tmp_path / "z-symbol.json").exists() and (tmp_path / "model-0000.params").exists()
    np.testing.assert_allclose(ns["again"](ns["data"]).asnumpy(), ns["net"](ns["data"]).asnumpy(), rtol=1e-6)
