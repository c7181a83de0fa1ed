"""lazyarray/jit.py: compiled kernels where numba is installed, switched off by LAZYARRAY_JIT=0."""
from __future__ import annotations

import numpy as np
import pytest

import lazyarray as la
from lazyarray import jit, tuning_table


def _cumulative(a, out):
    s = a[0] * 0
    for i in range(a.shape[0]):
        s += a[i]
        out[i] = s


@pytest.mark.parametrize("value", ["0", "off", "False", " no "])
def test_the_environment_switches_compiled_kernels_off(value):
    assert tuning_table.from_environment({"LAZYARRAY_JIT": value}).jit is False  # (read at import)
    with la.tuning(jit=False):
        assert not jit.enabled()
        assert jit.compiled(_cumulative) is None  # the caller runs its NumPy path


def test_a_compiled_kernel_computes_what_its_python_does():
    pytest.importorskip("numba")
    with la.tuning(jit=True):
        assert jit.enabled()
        k = jit.compiled(_cumulative)
    assert k is not None and k is not _cumulative
    with la.tuning(jit=True):
        assert jit.compiled(_cumulative) is k  # compiled once per function
    a = np.arange(1.0, 6.0, dtype=np.float32)
    got, want = np.empty_like(a), np.empty_like(a)
    k(a, got)
    _cumulative(a, want)
    np.testing.assert_array_equal(got, want)
    assert got.dtype == np.float32


def test_without_numba_nothing_is_compiled(monkeypatch):
    monkeypatch.setattr(jit, "_numba", lambda: None)  # as if numba were not installed
    monkeypatch.setattr(la.config, "jit", True)
    assert not jit.enabled()
    assert jit.compiled(_cumulative) is None
    jit.set_enabled(True)  # asking cannot turn on what is not installed
    assert jit.compiled(_cumulative) is None


def test_set_enabled_switches_at_run_time_and_none_rereads_the_environment(monkeypatch):
    pytest.importorskip("numba")
    monkeypatch.setattr(la.config, "jit", la.config.jit)  # (restored after the test)
    monkeypatch.setenv("LAZYARRAY_JIT", "0")
    jit.set_enabled(None)
    assert not jit.enabled() and la.config.jit is False
    monkeypatch.setenv("LAZYARRAY_JIT", "1")
    assert not jit.enabled()  # read once (by the tuning table), not at each call
    jit.set_enabled(True)
    assert jit.enabled() and jit.compiled(_cumulative) is not None
    jit.set_enabled(False)
    assert jit.compiled(_cumulative) is None
    with la.tuning(jit=True):  # a block of code overrides the process-wide choice
        assert jit.enabled()
    jit.set_enabled(None)
    assert jit.enabled()  # the environment again: 1


def test_a_numba_that_cannot_load_turns_compiled_kernels_off_with_a_warning(monkeypatch):
    import builtins

    real_import = builtins.__import__

    def broken(name, *args, **kwargs):
        if name == "numba":
            raise SystemError("numba built for another NumPy")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", broken)
    jit._numba.cache_clear()  # (the probe looks again, and again after the test)
    monkeypatch.setattr(la.config, "jit", True)
    try:
        with pytest.warns(RuntimeWarning, match="numba failed to import.*SystemError"):
            assert not jit.enabled()
        assert jit.compiled(_cumulative) is None
    finally:
        monkeypatch.undo()
        jit._numba.cache_clear()
