"""lazyarray/jit_signatures.py: a call with writable arrays takes a kernel's read-only signature."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import types

import numpy as np
import pytest

import lazyarray as la
from lazyarray import jit

pytest.importorskip("numba")


def _add(a, b, out):
    for i in range(a.shape[0]):
        out[i] = a[i] + b[i]


def _add_strided(a, b, out):
    for i in range(a.shape[0]):
        out[i] = a[i] + b[i]


def _add_returning(a, b, out):
    for i in range(a.shape[0]):
        out[i] = a[i] + b[i]
    return a


def _readonly(a):
    a = a.copy()
    a.flags.writeable = False
    return a


def _fresh(fn):
    """``fn`` compiled anew (a new function object of its code: a dispatcher of its own)."""
    return jit.compiled(types.FunctionType(fn.__code__, fn.__globals__, fn.__name__))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_writable_arrays_take_the_read_only_signature_the_kernel_has(dtype):
    with la.tuning(jit=True, jit_cache_dir=""):
        k = _fresh(_add)
        a, b = np.arange(5, dtype=dtype), np.linspace(-1, 1, 5, dtype=dtype)
        ro, out = np.zeros(5, dtype), np.zeros(5, dtype)
        k(_readonly(a), b, ro)
        k(a, b, out)  # (a writable: the read-only signature runs it)
        k(a, b, out)  # (and again, numba's C dispatcher now going straight to it)
        assert len(k.signatures) == 1 and not k.signatures[0][0].mutable
        np.testing.assert_array_equal(out, ro)
        np.testing.assert_array_equal(out, a + b)
        empty = np.zeros(0, dtype)
        k(empty, empty, empty)  # (an empty dim: the same signature)
        assert len(k.signatures) == 1


def test_read_only_arrays_do_not_take_a_writable_signature():
    with la.tuning(jit=True, jit_cache_dir=""):
        k = _fresh(_add)
        a, b, out = np.arange(4.0), np.ones(4), np.zeros(4)
        k(a, b, out)
        k(_readonly(a), b, out)  # (cannot convert: a second signature)
        assert len(k.signatures) == 2
        np.testing.assert_array_equal(out, a + b)


def test_another_layout_or_a_returned_array_is_not_taken():
    with la.tuning(jit=True, jit_cache_dir=""):
        k = _fresh(_add_strided)
        a, b, out = np.arange(8.0), np.ones(8), np.zeros(4)
        k(_readonly(a)[::2], b[::2], out)  # (layout 'A')
        k(a[:4], b[:4], out)  # (layout 'C', writable: numba's own signature)
        assert len(k.signatures) == 2
        np.testing.assert_array_equal(out, a[:4] + 1)
        r = _fresh(_add_returning)
        assert not r(_readonly(a), b, np.zeros(8)).flags.writeable
        assert r(a, b, np.zeros(8)).flags.writeable  # (its own signature: the view it returns is writable)
        assert len(r.signatures) == 2


def test_the_kernels_disk_cache_is_made_when_it_first_loads():
    with la.tuning(jit=True):
        k = _fresh(_add)
        if not jit.cache_dir():
            pytest.skip("no disk cache")
        assert isinstance(k._cache, jit.LazyDiskCache) and k._cache._made is None
        k(np.ones(2), np.ones(2), np.zeros(2))
        assert k._cache._made is not None


def test_a_kernel_without_a_source_file_runs_uncached():
    ns = {}
    exec("def made(a):\n    return a[0] * 2.0\n", ns)
    with la.tuning(jit=True):
        k = jit.compiled(ns["made"])
        assert float(k(np.arange(1.0, 3.0))) == 2.0
        assert k.stats.cache_path is None  # (numba's NullCache)


KERNEL = '''
def scaled(a, out):
    for i in range(a.shape[0]):
        out[i] = a[i] * 3.0
'''

RUN = '''
import json, sys
import numpy as np
import lazyarray as la
sys.path.insert(0, sys.argv[1])
la.config.jit_cache_dir = sys.argv[2]
import sig_kernel
from lazyarray import jit
k = jit.compiled(sig_kernel.scaled)
a, out = np.arange(4.0), np.zeros(4)
if sys.argv[3] == "readonly":
    a.flags.writeable = False
k(a, out)
print(json.dumps({"values": out.tolist(), "signatures": [[t.mutable for t in s] for s in k.signatures],
                  "hits": sum(k.stats.cache_hits.values()), "misses": sum(k.stats.cache_misses.values())}))
'''


def _process(tmp_path, how):
    src = tmp_path / "src"
    src.mkdir(exist_ok=True)
    (src / "sig_kernel.py").write_text(KERNEL)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # (this checkout's lazyarray)
    env = {**os.environ, "PYTHONPATH": root + os.pathsep + os.environ.get("PYTHONPATH", "")}
    p = subprocess.run([sys.executable, "-c", RUN, str(src), str(tmp_path / "cache"), how], env=env, cwd=root,
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    got = json.loads(p.stdout)
    assert got["values"] == [0.0, 3.0, 6.0, 9.0]
    return got


def test_a_writable_call_loads_the_read_only_signature_a_process_before_saved(tmp_path):
    first = _process(tmp_path, "readonly")
    assert first["misses"] == 1 and first["signatures"] == [[False, True]]
    second = _process(tmp_path, "writable")  # (a fresh process: the read-only one loads, none compiles)
    assert second["hits"] == 1 and second["misses"] == 0 and second["signatures"] == [[False, True]]
