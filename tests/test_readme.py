"""The README stays true: each of its Python examples runs as written, on its own (in a fresh
namespace, as a reader would paste it into a new interpreter)."""
import os
import re

README = os.path.join(os.path.dirname(__file__), os.pardir, "README.md")


def python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", open(README, encoding="utf-8").read(), re.S)


def test_readme_python_examples_run_each_on_its_own(tmp_path, monkeypatch):
    blocks = python_blocks()
    assert len(blocks) >= 8
    monkeypatch.chdir(tmp_path)  # the examples write files
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
    for i, block in enumerate(blocks):
        if ("dask" in block and not has_dask) or ("onnx" in block and not has_onnx):
            skipped += 1
            continue
        ns: dict = {"__name__": f"readme_block_{i}"}
        exec(compile(block, f"README.md block {i}", "exec"), ns)  # a NameError here: the block is not standalone
        ran += 1
    assert ran == len(blocks) - skipped and skipped <= 3
    for name in ("z-symbol.json", "model-0000.params", "net.svg", "net-all.svg"):
        assert (tmp_path / name).exists(), name


def test_readme_inspecting_graphs_example_prints_block_headers(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    block = next(b for b in python_blocks() if "block_path" in b)
    exec(compile(block, "README.md", "exec"), {})
    out = capsys.readouterr().out
    assert "# 1.body.0 · Conv2D  (in 1 · Residual › 1.body · HybridSequential)" in out
    assert out.splitlines()[-1] == "4"
