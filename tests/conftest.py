"""Shared fixtures. ``kernel_calls`` counts kernel calls, to prove what runs (and what does not) and when."""
import pytest

import lazyarray as la
from lazyarray.ops import registry
from lazyarray.ops.registry import OpDef

# Vendored third-party suites run in their own process (tests/test_array_api_conformance.py), not here.
collect_ignore = ["third_party"]


@pytest.fixture
def kernel_calls(monkeypatch):
    """A list that receives the op name of every kernel call made while the test runs."""
    calls: list[str] = []
    original = OpDef.bind

    def bind(self, xp):
        f = original(self, xp)

        def counted(*args, **kwargs):
            calls.append(self.name)
            return f(*args, **kwargs)

        return counted

    monkeypatch.setattr(OpDef, "bind", bind)
    return calls


@pytest.fixture
def fresh_fallback_warnings(monkeypatch):
    """Storage-fallback warnings enabled and not yet given (they are warned once per op and stypes)."""
    monkeypatch.setattr(la.config, "storage_fallback_warn", True)  # (LAZYARRAY_STORAGE_FALLBACK_WARN=0 at import)
    registry.STORAGE_FALLBACK_WARNED.clear()
    yield
    registry.STORAGE_FALLBACK_WARNED.clear()

# Scripts run by hand in a side environment with real MXNet (tests/data/mxnet/*.py): not test modules.
collect_ignore_glob = ["data/*/*.py"]


@pytest.fixture(params=["numpy", "compiled"])
def kernel_path(request, monkeypatch):
    """Runs the test twice: with the NumPy kernels and with the compiled ones (``lazyarray/jit.py``;
    skipped where numba is not installed: there is nothing to compare)."""
    if request.param == "compiled":
        pytest.importorskip("numba")
    monkeypatch.setattr(la.config, "jit", request.param == "compiled")  # (process-wide: pool threads too)
    return request.param


@pytest.fixture
def both_paths(monkeypatch):
    """``both_paths(fn)``: ``(fn() with the compiled kernels, fn() with the NumPy ones)``, to compare."""

    def run(fn):
        monkeypatch.setattr(la.config, "jit", False)  # (process-wide: pool threads too)
        want = fn()
        monkeypatch.setattr(la.config, "jit", True)
        return fn(), want

    return run
