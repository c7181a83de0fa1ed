"""The notebooks in ``notebooks/`` run without errors under a real Jupyter kernel, render to HTML
with our drawings in it, are committed without outputs, and match ``notebooks/build.py``.

Select them with ``pytest -m notebooks``, leave them out with ``-m "not notebooks"``.
"""
from __future__ import annotations

import html
import importlib.util
import json
import os
import re
import shutil
import subprocess
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


# -- what a reader sees: ResNet-18's cards in a browser --------------------------------------------
_MEASURE = """<script>
window.addEventListener("load", () => {
  const r = (e) => e.getBoundingClientRect();
  const plan = document.querySelector("svg.la-p"), graph = document.querySelector(".la-graph svg");
  const names = document.querySelector("details.la-inputs");
  document.body.setAttribute("data-la", JSON.stringify({
    page: document.documentElement.clientWidth,
    plan_drawn: r(plan).width, plan_width: +plan.getAttribute("width"),
    plan_frame: r(plan.parentElement).width, plan_scroll: plan.parentElement.scrollWidth,
    graph_drawn: r(graph).width, graph_width: +graph.getAttribute("width"),
    names_open: names.open, names_height: r(names).height,
    graph_below_summary: r(graph).top - r(document.querySelector(".la-sum")).bottom,
  }));
});
</script>"""


def _chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome", "chrome"):
        if found := shutil.which(name):
            return found
    pytest.skip("no headless browser (Debian: apt-get install chromium); the structure of the same HTML "
                "is checked in tests/test_display.py")


def test_resnet_cards_render_readably_in_a_browser(tmp_path):
    """ResNet-18's symbol card and memory plan as nbconvert renders them (JupyterLab's stylesheet,
    which shrinks SVGs to the cell: ``svg {max-width: 100%}``), loaded in headless Chromium: the
    plan keeps its width and its frame scrolls, the parameter names stay collapsed above the
    drawing, and a screenshot shows something."""
    browser = _chromium()
    import lazyarray as la

    net = la.blocks.models.resnet18(classes=10, thumbnail=True)
    net.initialize()
    net.hybridize()
    net(la.ones((1, 3, 32, 32)))
    sym, _ = net.export_graph()
    plan = net.cached_op.memory_plan(data=(1, 3, 32, 32))
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("sym", outputs=[
        nbformat.v4.new_output("display_data", {"text/html": sym._repr_html_()}),
        nbformat.v4.new_output("display_data", {"text/html": plan._repr_html_()})])])
    body, _ = nbconvert.HTMLExporter(template_name="lab").from_notebook_node(nb)
    page = tmp_path / "cards.html"
    page.write_text(body.replace("</body>", _MEASURE + "</body>"), encoding="utf-8")
    common = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--window-size=1200,1600"]
    dom = subprocess.run([*common, "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=120)
    found = re.search(r'data-la="([^"]*)"', dom.stdout)
    assert found, dom.stderr[-2000:]
    m = json.loads(html.unescape(found.group(1)))
    assert abs(m["plan_drawn"] - m["plan_width"]) < 1 and m["plan_width"] > m["page"]  # not shrunk ...
    assert m["plan_frame"] <= m["page"] and m["plan_scroll"] > m["plan_frame"]  # ... its frame scrolls
    assert abs(m["graph_drawn"] - m["graph_width"]) < 1
    assert not m["names_open"] and m["names_height"] < 40  # ~100 names, one closed line
    assert 0 <= m["graph_below_summary"] < 60  # the drawing right under the summary
    shot = tmp_path / "cards.png"
    subprocess.run([*common, f"--screenshot={shot}", page.as_uri()], capture_output=True, timeout=120)
    Image = pytest.importorskip("PIL.Image")
    colours = Image.open(shot).convert("RGB").getcolors(maxcolors=1 << 16)
    assert colours is None or len(colours) > 20  # drawn, not a blank page
