"""``import lazyarray`` stays light: heavy dependencies are imported on first use only.

Each check runs in a fresh interpreter (this test process has imported everything already).
What is in ``sys.modules`` is checked rather than an RSS figure, which varies by machine;
``benchmarks/import_cost.py`` prints the memory numbers.
"""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import lazyarray

# The fresh interpreters import the lazyarray under test, not whichever one is installed.
ROOT = Path(lazyarray.__file__).resolve().parents[1]

# Heavy modules that ``import lazyarray`` must not import (xml.sax.saxutils pulls in
# urllib.request, http.client, email and ssl).
HEAVY = ["scipy", "safetensors", "networkx", "tqdm", "xml.sax.saxutils", "urllib.request", "ssl", "dask",
         "distributed", "onnx", "onnxruntime", "google.protobuf", "numba", "llvmlite"]


def loaded_after(code: str) -> dict[str, bool]:
    """Which of ``HEAVY`` are in ``sys.modules`` after running ``code`` in a fresh interpreter."""
    script = textwrap.dedent(code) + textwrap.dedent(f"""
        import json as _json, sys as _sys
        print(_json.dumps({{m: m in _sys.modules for m in {HEAVY!r}}}))
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True,
                         cwd=ROOT)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_import_lazyarray_imports_none_of_the_heavy_dependencies():
    loaded = loaded_after("import lazyarray")
    assert not any(loaded.values()), f"imported by `import lazyarray`: {[m for m, v in loaded.items() if v]}"


def test_dense_work_imports_none_of_them():
    loaded = loaded_after("""
        import lazyarray as la
        x = la.array([[1.0, 2.0], [3.0, 4.0]])
        with la.deferred():
            y = la.nn.softmax(x * 2)
        y.asnumpy()
        la.get_symbol(y).to_json()
    """)
    assert not any(loaded.values()), f"imported by dense work: {[m for m, v in loaded.items() if v]}"


@pytest.mark.parametrize("code", [
    "la.sparse.csr_matrix(([1.0], [0], [0, 1]), shape=(1, 2))",
    "la.sparse.csr_matrix([[0.0, 1.0]])",
    "la.array([[0.0, 1.0]]).tostype('csr').asscipy()",
    "la.dot(la.array([[0.0, 1.0]]).tostype('csr'), la.ones((2, 3)))",
], ids=["csr_matrix-triple", "csr_matrix-dense", "asscipy", "dot-csr"])
def test_sparse_work_imports_scipy(code):
    loaded = loaded_after(f"import lazyarray as la\n{code}\n")
    assert loaded["scipy"]


def test_block_export_and_load_import_safetensors(tmp_path):
    loaded = loaded_after(f"""
        import lazyarray as la
        from lazyarray import blocks as B
        net = B.HybridSequential()
        net.add(B.Dense(3))
        net.initialize()
        net.hybridize()
        net(la.ones((2, 4)))
        net.export({str(tmp_path / "model")!r})
    """)
    assert loaded["safetensors"]
    loaded = loaded_after(f"""
        import lazyarray as la
        from lazyarray import blocks as B
        open({str(tmp_path / "bad.params")!r}, "wb").write(b"not a safetensors file")
        net = B.Dense(3, in_units=4)
        net.initialize()
        try:
            net.load_parameters({str(tmp_path / "bad.params")!r})
        except la.GraphFormatError as exc:
            assert "not a safetensors" in str(exc)
        else:
            raise AssertionError("no GraphFormatError")
    """)
    assert loaded["safetensors"]


def test_networkx_view_imports_networkx():
    loaded = loaded_after("""
        import lazyarray as la
        x = la.array([1.0, 2.0])
        with la.deferred():
            y = x * 2
        la.get_symbol(y).to_networkx()
    """)
    assert loaded["networkx"]


def test_drawing_imports_no_xml_package():
    loaded = loaded_after("""
        import lazyarray as la
        x = la.array([1.0, 2.0])
        with la.deferred():
            y = x * 2
        la.get_symbol(y)._repr_svg_()
    """)
    assert not any(loaded.values()), f"imported by drawing: {[m for m, v in loaded.items() if v]}"


def test_cli_imports_tqdm_only_to_draw_a_bar():
    assert not loaded_after("import lazyarray.cli")["tqdm"]
    assert loaded_after("import lazyarray.cli; lazyarray.cli.progress_bar(range(2), 'x').close()")["tqdm"]
