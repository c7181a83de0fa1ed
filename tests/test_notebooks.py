"""The notebooks in ``notebooks/`` run without errors under a real Jupyter kernel, render to HTML
with our drawings in it, are committed without outputs, and match ``notebooks/build.py``.

Select them with ``pytest -m notebooks``, leave them out with ``-m "not notebooks"``.
"""
from __future__ import annotations

import importlib.util
import json
import os
import sys
import time
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat", reason='notebook tests need the test extra: pip install -e ".[test]"')
nbclient = pytest.importorskip("nbclient")
ipykernel_spec = pytest.importorskip("ipykernel.kernelspec")
nbconvert = pytest.importorskip("nbconvert")

pytestmark = pytest.mark.notebooks

ROOT = Path(__file__).resolve().parent.parent
FOLDER = ROOT / "notebooks"
NOTEBOOKS = sorted(p.name for p in FOLDER.glob("*.ipynb"))
KERNEL = "lazyarray-tests"
MAX_OUTPUT_BYTES = 120_000  # per executed notebook: outputs stay small


@pytest.fixture(scope="module")
def kernel_env(tmp_path_factory):
    """A kernelspec for *this* interpreter in a temporary folder, found through JUPYTER_PATH.

    A clean ``pip install`` registers ``python3`` in ``sys.prefix``, but its ``python`` may be
    another interpreter on PATH; this one runs ``sys.executable``, where lazyarray is installed.
    """
    prefix = tmp_path_factory.mktemp("jupyter")
    ipykernel_spec.install(kernel_name=KERNEL, prefix=str(prefix), display_name="lazyarray tests")
    old = os.environ.get("JUPYTER_PATH")
    os.environ["JUPYTER_PATH"] = os.pathsep.join(filter(None, [str(prefix / "share" / "jupyter"), old]))
    yield prefix
    if old is None:
        del os.environ["JUPYTER_PATH"]
    else:
        os.environ["JUPYTER_PATH"] = old


@pytest.fixture(scope="module")
def executed(kernel_env, tmp_path_factory):
    """Each notebook executed once (in a scratch working folder), with its run time."""
    cache: dict[str, tuple] = {}

    def run(name: str):
        if name not in cache:
            nb = nbformat.read(FOLDER / name, as_version=4)
            work = tmp_path_factory.mktemp(name.split(".")[0])
            t0 = time.perf_counter()
            nbclient.NotebookClient(nb, kernel_name=KERNEL, timeout=120, startup_timeout=60,
                                    resources={"metadata": {"path": str(work)}}).execute()
            cache[name] = (nb, time.perf_counter() - t0)
        return cache[name]

    return run


def load_builder():
    spec = importlib.util.spec_from_file_location("notebooks_build", FOLDER / "build.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_there_are_notebooks():
    assert NOTEBOOKS == ["01_lazy_arrays.ipynb", "02_hybridize_and_export.ipynb", "03_devices.ipynb"]


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_notebook_runs_without_errors(executed, name):
    nb, seconds = executed(name)
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    streams = "".join(o.get("text", "") for o in outputs if o.output_type == "stream" and o.name == "stderr")
    assert "Traceback" not in streams
    assert len(json.dumps([dict(o) for o in outputs])) < MAX_OUTPUT_BYTES
    assert seconds < 60, f"{name} took {seconds:.1f} s"


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_notebook_renders_to_html_with_our_drawings(executed, name):
    nb, _ = executed(name)
    body, _ = nbconvert.HTMLExporter().from_notebook_node(nb)
    assert 'class="la-g"' in body and "<svg" in body  # a graph drawing
    if name != "01_lazy_arrays.ipynb":
        assert 'class="la-p"' in body  # a memory-plan timeline
    if name == "03_devices.ipynb":
        assert "copy_to" in body and "cpu(1)" in body


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_notebook_is_stored_without_outputs_and_matches_build_script(name):
    stored = nbformat.read(FOLDER / name, as_version=4)
    nbformat.validate(stored)
    for cell in stored.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None, f"{name}: clear the outputs"
    built = load_builder().build(name)
    assert [(c.cell_type, c.source) for c in stored.cells] == [(c.cell_type, c.source) for c in built.cells], \
        f"{name} differs from notebooks/build.py; run: {sys.executable} notebooks/build.py"
