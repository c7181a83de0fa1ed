"""MkDocs hook: the API reference of lazyarray's generated functions.

Most public names are classes and functions written in the source, and mkdocstrings renders them
from their docstrings (``::: lazyarray.NDArray``). The op functions (``la.relu``, ``la.nn.dense``,
``la.sym.add``) are generated from the op registry when lazyarray is imported, so static analysis
cannot find them. For those, a ``::: lazyarray.NAME`` line is replaced here by the function's
signature and docstring, read from the imported function (the same text ``help(la.relu)`` shows).

Docstrings show examples as doctest lines (``>>> la.ones(2)``) in their prose; ``DoctestFences``, a
griffe extension mkdocstrings loads (``extensions:`` in mkdocs.yml), fences each run of them as a
Python console block, so Markdown does not read their output as text (``[1.0, 2.0]`` as a link).

mkdocs.yml names this file under ``hooks:`` and leaves it out of the site (``exclude_docs``).
"""
from __future__ import annotations

import importlib
import inspect
import re
import sys

from griffe import Extension

_DIRECTIVE = re.compile(r"^::: (lazyarray(?:\.\w+)+)[ \t]*$", re.M)
_SECTION = re.compile(r"^(Args|Arguments|Parameters|Returns|Raises|Yields):\s*$")


def _resolve(path: str):
    parts = path.split(".")
    obj = importlib.import_module(parts[0])
    for part in parts[1:]:
        obj = getattr(obj, part)
    return obj


def _generated(obj) -> bool:
    """A function that is not an attribute of the module it names: made at import time."""
    if not inspect.isfunction(obj):
        return False
    module = sys.modules.get(obj.__module__)
    return getattr(module, obj.__name__, None) is not obj


def fence_doctests(doc: str) -> str:
    """``doc`` with each run of doctest lines (``>>>`` to the next blank line) fenced as ``pycon``.
    A docstring's own fences are left as they are."""
    out, in_doctest, in_fence = [], False, False
    for line in doc.splitlines():
        stripped = line.strip()
        if stripped.startswith("```") and not in_doctest:
            in_fence = not in_fence
        starts = stripped.startswith(">>>") and not in_fence
        if starts and not in_doctest:
            indent = line[: len(line) - len(line.lstrip())]
            out += ["", f"{indent}```pycon"]
            in_doctest = True
        elif in_doctest and not stripped:
            out += [f"{indent}```", ""]
            in_doctest = False
            continue
        out.append(line)
    if in_doctest:
        out.append(f"{indent}```")
    return "\n".join(out)


class DoctestFences(Extension):
    """Fences the doctest lines of every docstring mkdocstrings renders (see the module's doc)."""

    def on_object(self, *, obj, **kwargs) -> None:
        if obj.docstring is not None and ">>>" in obj.docstring.value:
            obj.docstring.value = fence_doctests(obj.docstring.value)


def _docstring_markdown(doc: str) -> str:
    """A Google-style docstring as Markdown: sections in bold, their entries as a list, doctest
    lines fenced as Python console sessions."""
    out, in_section = [], False
    for line in fence_doctests(inspect.cleandoc(doc)).splitlines():
        stripped = line.strip()
        if _SECTION.match(stripped):
            in_section = True
            out += ["", f"**{stripped[:-1]}**", ""]
        elif in_section and line.startswith("    ") and stripped:
            name, _, text = stripped.partition(": ")
            out.append(f"- `{name}`: {text}")
        else:
            in_section = in_section and bool(stripped) and line.startswith(" ")
            out.append(line)
    return "\n".join(out)


class _Annotation(str):
    """An annotation written as text (``from __future__ import annotations``), shown without quotes."""

    def __repr__(self) -> str:
        return str(self)


def _signature(obj) -> inspect.Signature:
    sig = inspect.signature(obj)
    params = [p.replace(annotation=_Annotation(p.annotation)) if isinstance(p.annotation, str) else p
              for p in sig.parameters.values()]
    ret = sig.return_annotation
    return sig.replace(parameters=params, return_annotation=_Annotation(ret) if isinstance(ret, str) else ret)


def _render(path: str, obj) -> str:
    short = path.replace("lazyarray.", "la.", 1)
    signature = f"{short}{_signature(obj)}"
    return (f"### `{short}` {{ #{path} }}\n\n```python\n{signature}\n```\n\n"
            f"{_docstring_markdown(obj.__doc__ or '')}\n")


def on_page_markdown(markdown: str, **kwargs) -> str:
    def replace(match: re.Match) -> str:
        obj = _resolve(match.group(1))
        return _render(match.group(1), obj) if _generated(obj) else match.group(0)

    return _DIRECTIVE.sub(replace, markdown)
