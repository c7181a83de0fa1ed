"""Shared fixtures. ``kernel_calls`` counts kernel calls, to prove what runs (and what does not) and when."""
import pytest

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
    monkeypatch.delenv("LAZYARRAY_STORAGE_FALLBACK_WARN", raising=False)
    registry._FALLBACK_WARNED.clear()
    yield
    registry._FALLBACK_WARNED.clear()

# Scripts run by hand in a side environment with real MXNet (tests/data/mxnet/*.py): not test modules.
collect_ignore_glob = ["data/*/*.py"]


@pytest.fixture(params=["numpy", "compiled"])
def kernel_path(request, monkeypatch):
    """Runs the test twice: with the NumPy kernels and with the compiled ones (``lazyarray/jit.py``;
    skipped where numba is not installed: there is nothing to compare)."""
    from lazyarray import jit
    if request.param == "compiled":
        pytest.importorskip("numba")
    monkeypatch.setattr(jit, "_ON", [request.param == "compiled"])
    return request.param


@pytest.fixture
def both_paths(monkeypatch):
    """``both_paths(fn)``: ``(fn() with the compiled kernels, fn() with the NumPy ones)``, to compare."""
    from lazyarray import jit

    def run(fn):
        monkeypatch.setattr(jit, "_ON", [False])
        want = fn()
        monkeypatch.setattr(jit, "_ON", [True])
        return fn(), want

    return run
