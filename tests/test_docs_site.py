"""The documentation site (mkdocs.yml, docs/) builds with warnings as errors, and every Python
example of its user guide (and of its home page) runs.

The build needs MkDocs and mkdocstrings (the ``docs`` extra; the ``test`` extra has them, without the
Material theme, so the build then uses MkDocs' own theme) and skips cleanly without them. The
examples need only lazyarray and its test extra (a page using onnx or dask skips without them): the
examples of one page run in order in one namespace (a reader follows a page from the top), in a
subprocess (some set process-wide state, such as ``la.amp.init``), in a temporary folder (they write
files).
"""
from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
GUIDE = sorted((DOCS / "guide").glob("*.md"))
PAGES_WITH_EXAMPLES = [DOCS / "index.md", *GUIDE]
ISSUE_NUMBER = re.compile(r"(?<![\w&/])#\d+\b")  # "#38" (an issue), not "&#9656;" or a URL fragment


def python_blocks(page: Path) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", page.read_text(encoding="utf-8"), re.S | re.M)


_RUN_PAGES = """
import json, sys, traceback
pages = json.loads(sys.stdin.read())
for name, blocks in pages.items():
    ns = {"__name__": "docs_example"}
    for i, block in enumerate(blocks):
        try:
            exec(compile(block, f"{name} block {i}", "exec"), ns)
        except Exception:
            print(f"FAILED: {name} block {i}", file=sys.stderr)
            traceback.print_exc()
            sys.exit(1)
print("ran", sum(len(b) for b in pages.values()), "blocks")
"""


def _needs_missing_extra(blocks: list[str]) -> str | None:
    for module in ("onnx", "onnxruntime", "dask"):
        if any(re.search(rf"^\s*(import|from) {module}\b", b, re.M) for b in blocks):
            if importlib.util.find_spec(module) is None:
                return module
    return None


@pytest.mark.parametrize("page", PAGES_WITH_EXAMPLES, ids=lambda p: p.stem)
def test_every_python_example_of_the_guide_runs(page, tmp_path):
    blocks = python_blocks(page)
    missing = _needs_missing_extra(blocks)
    if missing:
        pytest.skip(f"{page.name} uses {missing}, which is not installed (its extra)")
    run = subprocess.run([sys.executable, "-c", _RUN_PAGES], input=json.dumps({page.name: blocks}),
                         cwd=tmp_path, capture_output=True, text=True, timeout=300,
                         env=_env_with_checkout_first())
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-6000:]
    assert f"ran {len(blocks)} blocks" in run.stdout


def _env_with_checkout_first() -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    env["NO_MKDOCS_2_WARNING"] = "1"  # Material's banner about its successor, not a warning of this site
    return env


def test_the_guide_pages_have_examples_and_the_nav_lists_every_page():
    assert len(GUIDE) >= 10
    assert all(python_blocks(p) for p in GUIDE), [p.name for p in GUIDE if not python_blocks(p)]
    nav = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    pages = [p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md")]
    assert not [p for p in pages if p not in nav], "every page of docs/ is in mkdocs.yml's nav"


def test_no_docs_page_cites_an_issue_number():
    cited = {p.relative_to(DOCS).as_posix(): ISSUE_NUMBER.findall(p.read_text(encoding="utf-8"))
             for p in DOCS.rglob("*.md")}
    assert not {k: v for k, v in cited.items() if v}


def test_the_site_builds_with_warnings_as_errors(tmp_path):
    pytest.importorskip("mkdocs", reason='the docs site needs the docs extra: pip install -e ".[docs]"')
    pytest.importorskip("mkdocstrings_handlers.python", reason="the docs extra: mkdocstrings[python]")
    # The test extra leaves out the Material theme (18 s of install): MkDocs' own theme checks the same
    # pages, docstrings and links
    theme = [] if importlib.util.find_spec("material") else ["--theme", "mkdocs"]
    site = tmp_path / "site"
    run = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site), *theme],
                         cwd=ROOT, capture_output=True, text=True, timeout=600, env=_env_with_checkout_first())
    assert run.returncode == 0, run.stderr[-6000:]
    assert "WARNING" not in run.stderr, run.stderr[-6000:]
    api = (site / "reference" / "ops" / "index.html").read_text(encoding="utf-8")
    assert "la.relu" in api and "max(x, 0)" in api  # a generated op, rendered from its docstring
    arrays = (site / "reference" / "arrays" / "index.html").read_text(encoding="utf-8")
    assert "asnumpy" in arrays and "NDArray" in arrays
    config = (site / "guide" / "configuration" / "index.html").read_text(encoding="utf-8")
    assert "tuning_table" in config  # the tuning table's own docstring, not a copy
    for page in ("internals", "graph-format", "blocks", "mxnet", "distributed"):
        assert (site / page / "index.html").exists(), page
