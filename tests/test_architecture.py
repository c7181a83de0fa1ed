"""Layering of the package (issue #34), from its source: ``tools/arch_report.py``'s analysis.

* no import cycle among the imports that run when a module is imported;
* no upward import (a lower floor of ``arch_report.LAYERS`` importing a higher one) and no
  import inside a function beyond the baselines below;
* no more ``_private`` names imported across modules than ``PRIVATE_IMPORTS``.

The baselines are a ratchet: they may only shrink. A pair that no longer occurs must be removed
from its list (the test says which), and ``PRIVATE_IMPORTS`` lowered when the count drops, so
the lists always say what is left to fix. ``python tools/arch_report.py`` shows the details.
"""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _load_report_module():
    path = ROOT / "tools" / "arch_report.py"
    spec = importlib.util.spec_from_file_location("arch_report", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("arch_report", mod)  # dataclasses look their module up by name
    spec.loader.exec_module(mod)
    return mod


arch_report = _load_report_module()

# (importing module, imported module), relative to lazyarray. Upward imports left today: none
UPWARD_BASELINE: set = set()

# (module, package module it imports inside a function), each with its reason: none left
FUNCTION_BASELINE: set = set()

# Module-level mutable state outside the registries, the tuning table, the named caches and the
# reasoned exceptions (``arch_report.STATE_ALLOWED``; a ``caches.NamedCache`` is never counted):
# (module, name) left today.
# A new one fails: make it a NamedCache, a tuning field, a ContextVar, or a constant (tuple,
# frozenset, MappingProxyType).
STATE_BASELINE: set = set()

# cross-module imports of _private names: distributed.run (1), onnx import_ops._softplus, mxnet operators._erf
PRIVATE_IMPORTS = 3


@pytest.fixture(scope="module")
def report():
    return arch_report.analyze(str(ROOT / "lazyarray"))


def test_the_package_was_read(report):
    assert not report.errors
    assert "lazyarray.ndarray" in report.paths and len(report.imports) > 100


def test_no_import_cycle_at_module_level(report):
    cycles = [[report.short(m) for m in c] for c in report.cycles()]
    assert not cycles, f"import cycles (module-level imports): {cycles}"


def test_no_import_cycle_with_type_checking_imports(report):
    cycles = [[report.short(m) for m in c] for c in report.cycles(type_checking=True)]
    assert not cycles, f"import cycles (counting `if TYPE_CHECKING:` imports): {cycles}"


def test_every_module_has_a_floor():
    # a new top-level module or package gets a floor in LAYERS, not the default by accident
    pkg = ROOT / "lazyarray"
    names = {p.stem for p in pkg.glob("*.py") if p.stem != "__init__"} | {
        p.name for p in pkg.iterdir() if (p / "__init__.py").exists()}
    missing = sorted(n for n in names if n not in arch_report.LAYERS)
    assert not missing, f"give these a floor in tools/arch_report.py LAYERS: {missing}"


def test_no_new_upward_import(report):
    now = {(m, t) for m, t, _, _ in report.upward()}
    new = sorted(now - UPWARD_BASELINE)
    assert not new, (f"imports pointing up a floor (tools/arch_report.py LAYERS): {new}; move the shared piece "
                     "down instead")
    gone = sorted(UPWARD_BASELINE - now)
    assert not gone, f"fixed, well done: remove them from UPWARD_BASELINE: {gone}"


def test_no_new_import_inside_a_function(report):
    now = set(report.function_import_pairs())
    new = sorted(now - FUNCTION_BASELINE)
    assert not new, f"imports inside functions: {new}; import at module level (fix the cycle that prevents it)"
    gone = sorted(FUNCTION_BASELINE - now)
    assert not gone, f"fixed, well done: remove them from FUNCTION_BASELINE: {gone}"


def test_private_imports_do_not_grow(report):
    n = len(report.private_imports())
    assert n <= PRIVATE_IMPORTS, (
        f"{n} _private names imported across modules (baseline {PRIVATE_IMPORTS}): make a helper public "
        "(rename it) when another module uses it")
    assert n == PRIVATE_IMPORTS, f"down to {n}: lower PRIVATE_IMPORTS to {n}"


def test_the_report_runs(capsys):
    assert arch_report.main(["--table", "--function", "lazyarray/ndarray.py:NDArray.__init__"]) == 0
    out = capsys.readouterr().out
    assert "import cycles (module level)" in out and "length of lazyarray/ndarray.py:NDArray.__init__" in out


def test_cycles_and_layers_are_found_in_a_toy_package(tmp_path):
    pkg = tmp_path / "lazyarray"
    (pkg / "ops").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "ops" / "__init__.py").write_text("")
    (pkg / "errors.py").write_text("from . import device\n")
    (pkg / "device.py").write_text("from .errors import X\n")
    (pkg / "ops" / "a.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..ndarray import N\n"
        "def f():\n    from .. import dispatch  # dispatch sits above ops/\n")
    (pkg / "ndarray.py").write_text("from .ops import a\nfrom .errors import _private\n")
    (pkg / "dispatch.py").write_text("import os\nos.environ.get('X')\n")
    rep = arch_report.analyze(str(pkg))
    assert [[rep.short(m) for m in c] for c in rep.cycles()] == [["device", "errors"]]
    assert len(rep.cycles(type_checking=True)) == 2
    assert {(m, t) for m, t, _, _ in rep.upward()} == {("ops.a", "ndarray"), ("ops.a", "dispatch")}
    assert rep.function_import_pairs() == [("ops.a", "dispatch")]
    assert rep.function_imports()[0].reason == "dispatch sits above ops/"
    assert rep.private_imports() == [("ndarray", "errors", "_private", 2)]
    assert [rep.short(m) for m in rep.env_modules] == ["dispatch"]


def test_environment_is_read_in_one_module(report):
    assert [report.short(m) for m in report.env_modules] == ["tuning_table"]


def test_no_new_module_level_mutable_state(report):
    now = {(m, n) for m, n, _, _ in report.stray_state()}
    new = sorted(now - STATE_BASELINE)
    assert not new, (f"module-level mutable state: {new}; make it a caches.NamedCache (bounded, with clear()), "
                     "a tuning_table field, a ContextVar, or a constant (tuple, frozenset, MappingProxyType)")
    gone = sorted(STATE_BASELINE - now)
    assert not gone, f"fixed, well done: remove them from STATE_BASELINE: {gone}"


def test_allowed_state_is_the_registry_the_tuning_table_or_a_cache_with_clear(report):
    found = {(report.short(m), n) for m, n, _, _ in report.state}
    for (mod, name), what in arch_report.STATE_ALLOWED.items():
        assert (mod, name) in found, f"STATE_ALLOWED names {mod}.{name}, which is no longer state: remove it"
        kind = what.split(":")[0]
        assert kind in arch_report.STATE_KINDS, what
        if kind == "cache":
            src = (ROOT / "lazyarray" / (mod.replace(".", "/") + ".py")).read_text()
            assert "\ndef clear(" in src, f"{mod} holds the cache {name}: it needs a module-level clear()"


def test_module_level_state_is_found_in_a_toy_package(tmp_path):
    pkg = tmp_path / "lazyarray"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text(
        "import functools\nimport threading\nfrom collections import OrderedDict\n"
        "__all__ = []\nTABLE = {'x': 1}\nFILLED = {}\nFILLED['y'] = 2\n_SWITCH = [True]\n_CACHE = OrderedDict()\n"
        "_LOCK = threading.Lock()\n_MEMO = None\n_SEEN = NamedCache('seen', 8)\n"
        "def f(k):\n    global _MEMO\n    _MEMO = k\n    _SWITCH[0] = False\n    c = _CACHE\n    c.pop(k)\n"
        "    return TABLE[k]\n"
        "@functools.cache\ndef g(k):\n    return k\n"
        "@functools.lru_cache(maxsize=8)\ndef h(k):\n    return k\n")
    (pkg / "b.py").write_text("from .a import FILLED\nfrom . import a as other\n"
                              "def f():\n    FILLED.clear()\n    other.TABLE.update(z=3)\n")
    rep = arch_report.analyze(str(pkg))
    assert {(m, n) for m, n, _, _ in rep.stray_state()} == {
        ("a", "FILLED"), ("a", "_SWITCH"), ("a", "_CACHE"), ("a", "_LOCK"), ("a", "_MEMO"), ("a", "g"), ("a", "TABLE")}
