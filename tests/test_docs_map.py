"""The docs stay a true map of the code.

* ``docs/internals.md`` places every module of the package exactly once: one bullet line
  ``- `path` ...`` (``ops/conv.py``; a package by its folder, ``ops/``; the package itself as
  ``__init__.py``) in the section of the floor ``tools/arch_report.py``'s ``LAYERS`` gives it.
  A new module fails here until someone writes its line.
* Every ``*.py`` file that ``docs/*.md`` names exists in the repository (a path is looked up
  from the repository root, from ``lazyarray/``, or as the tail of a path; a bare ``name.py``
  as any file of that name).
* ``docs/*.md`` hold no issue references (``issue #N``, ``(#N)``): history lives in
  ``CHANGELOG.md``.
"""
from __future__ import annotations

import importlib.util
import os
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "lazyarray"
DOCS = sorted((ROOT / "docs").glob("*.md"))
INTERNALS = ROOT / "docs" / "internals.md"
SKIP_DIRS = {".git", "__pycache__", ".venv", "venv", "build", "dist", ".mypy_cache", ".ruff_cache",
             ".pytest_cache", "node_modules"}


def _arch_report():
    spec = importlib.util.spec_from_file_location("arch_report", ROOT / "tools" / "arch_report.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("arch_report", mod)  # dataclasses look their module up by name
    spec.loader.exec_module(mod)
    return mod


def package_modules() -> dict:
    """Doc name -> dotted module name, for every module file of the package."""
    out = {}
    for path in sorted(PKG.rglob("*.py")):
        if any(part in SKIP_DIRS for part in path.parts):
            continue
        rel = path.relative_to(PKG).as_posix()
        parts = rel[:-3].split("/")
        if parts[-1] == "__init__":
            parts.pop()
            name = "__init__.py" if not parts else "/".join(parts) + "/"
        else:
            name = rel
        out[name] = ".".join(["lazyarray"] + parts)
    return out


BULLET = re.compile(r"^[-*] `([\w/]+(?:\.py|/))`")
FLOOR_HEADING = re.compile(r"^## Floor (\d+): ")


def placements() -> list[tuple[str, int | None, int]]:
    """(module doc name, floor of the section it is in or None, line number) per bullet line."""
    out = []
    floor = None
    for i, line in enumerate(INTERNALS.read_text(encoding="utf-8").splitlines(), 1):
        if line.startswith("## "):
            m = FLOOR_HEADING.match(line)
            floor = int(m.group(1)) if m else None
        m = BULLET.match(line)
        if m and floor is not None:
            out.append((m.group(1), floor, i))
    return out


def test_internals_places_every_module_exactly_once_on_its_floor():
    arch = _arch_report()
    modules = package_modules()
    seen: dict[str, list[int]] = {}
    wrong_floor = []
    for name, floor, line in placements():
        seen.setdefault(name, []).append(line)
        if name in modules:
            want = arch.floor_of(modules[name])
            if floor != want:
                wrong_floor.append(f"{name} (line {line}): in floor {floor}'s section, arch_report says "
                                   f"{want} ({arch.FLOOR_NAMES[want]})")
    missing = sorted(set(modules) - set(seen))
    twice = sorted(f"{n} (lines {v})" for n, v in seen.items() if len(v) > 1)
    unknown = sorted(f"{n} (line {v[0]})" for n, v in seen.items() if n not in modules)
    assert not missing, ("modules docs/internals.md does not place (add a '- `path` ...' line to the "
                         f"section of their floor): {missing}")
    assert not twice, f"modules placed more than once in docs/internals.md: {twice}"
    assert not unknown, f"docs/internals.md places modules that do not exist: {unknown}"
    assert not wrong_floor, "modules in the wrong floor's section:\n" + "\n".join(wrong_floor)


def test_internals_has_one_section_per_floor():
    arch = _arch_report()
    text = INTERNALS.read_text(encoding="utf-8")
    for i, name in enumerate(arch.FLOOR_NAMES):
        assert re.search(rf"^## Floor {i}: {name}\b", text, re.M), f"no '## Floor {i}: {name}' section"


def _repository_files() -> tuple[set, set]:
    paths, names = set(), set()
    for dirpath, dirnames, filenames in os.walk(ROOT):
        dirnames[:] = [d for d in dirnames if d not in SKIP_DIRS]
        for f in filenames:
            rel = (Path(dirpath) / f).relative_to(ROOT).as_posix()
            paths.add(rel)
            names.add(f)
    return paths, names


PY_MENTION = re.compile(r"(?<![\w./-])((?:\.\./)*[\w./-]*\w\.py)\b(?!\w)")


def _exists(mention: str, paths: set, names: set) -> bool:
    if "/" not in mention:
        return mention in names
    mention = mention.lstrip("./") if mention.startswith("./") else mention
    if mention.startswith("../"):
        return False  # outside the repository
    return (mention in paths or f"lazyarray/{mention}" in paths
            or any(p.endswith("/" + mention) for p in paths))


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_docs_name_only_files_that_exist(doc):
    paths, names = _repository_files()
    text = doc.read_text(encoding="utf-8")
    missing = sorted({m for m in PY_MENTION.findall(text) if not _exists(m, paths, names)})
    assert not missing, f"{doc.name} names files that are not in the repository: {missing}"


ISSUE_REF = re.compile(r"\bissues?\s*#?\s*\d+|\(#\d+|#\d+\s+items?\b", re.I)


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_docs_hold_no_issue_references(doc):
    hits = [f"line {i}: {line.strip()[:80]}" for i, line in enumerate(doc.read_text(encoding="utf-8").splitlines(), 1)
            if ISSUE_REF.search(line)]
    assert not hits, f"{doc.name} refers to issues (history belongs in CHANGELOG.md):\n" + "\n".join(hits)


def test_changelog_exists():
    assert (ROOT / "CHANGELOG.md").is_file()
