"""lazyarray/jit_load.py: a kernel loaded from the disk cache without parsing its linking bitcode."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

KERNELS = '''
import numpy as np
from lazyarray import jit


def total(a):
    s = a[0] * 0
    for v in a:
        s += v
    return s


def make_thrice():
    inner = jit.compiled(total)

    def thrice(a):  # (calls ``total`` without inlining it: numba links total's module into this one)
        return inner(a) * 3
    return thrice
'''

RUN = '''
import json, sys
import numpy as np
import lazyarray as la
sys.path.insert(0, sys.argv[1])
la.config.jit_cache_dir = sys.argv[2]
import cache_load_kernels as ck
from lazyarray import jit
with la.tuning(jit=True):
    k = jit.compiled(ck.total)
    a = np.arange(1.0, 5.0)
    got = {"total": float(k(a))}
    lib = next(iter(k.overloads.values())).library
    got["hits"] = sum(k.stats.cache_hits.values())
    got["library"] = type(lib).__name__
    got["parsed_before_link"] = getattr(lib, "_lazy_bitcode", None) is None
    if sys.argv[3] == "link":
        fn = ck.make_thrice()
        import numba
        thrice = numba.njit(fn)  # (not cached: compiled here, linking ``total``'s module)
        got["thrice"] = float(thrice(a))
        got["parsed_after_link"] = getattr(lib, "_lazy_bitcode", None) is None
print(json.dumps(got))
'''


def _run(tmp_path, cache, mode):
    src = tmp_path / "src"
    src.mkdir(exist_ok=True)
    (src / "cache_load_kernels.py").write_text(KERNELS)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # (this checkout's lazyarray)
    env = {**os.environ, "PYTHONPATH": root + os.pathsep + os.environ.get("PYTHONPATH", "")}
    out = subprocess.run([sys.executable, "-c", RUN, str(src), str(cache), mode], env=env, cwd=root,
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_a_loaded_kernel_parses_its_linking_bitcode_only_when_another_kernel_links_it(tmp_path):
    pytest.importorskip("numba")
    cache = tmp_path / "cache"
    first = _run(tmp_path, cache, "-")
    assert first["hits"] == 0 and first["total"] == 10.0 and not first["library"].startswith("LazilyLinked")
    loaded = _run(tmp_path, cache, "link")
    assert loaded["hits"] == 1 and loaded["total"] == 10.0
    assert loaded["library"].startswith("LazilyLinked") and not loaded["parsed_before_link"]
    assert loaded["thrice"] == 30.0 and loaded["parsed_after_link"]  # (linked: parsed then, and right)


def test_an_entry_without_symbol_names_loads_by_numbas_own_path(tmp_path):
    """An entry written without ``jit_load``'s names (an older lazyarray) loads as numba loads it."""
    pytest.importorskip("numba")
    from lazyarray import jit_load

    class Base:
        def reduce(self, cres):
            return cres

        def rebuild(self, target_context, payload):
            return ("numba's", payload)

    impl = jit_load.impl_class(Base, None, None)()
    old = (("name", "object", (b"", b"")), "fndesc")
    assert impl.rebuild(None, old) == ("numba's", old)


def test_defined_symbols_are_the_definitions_not_the_declarations():
    pytest.importorskip("numba")
    ll = pytest.importorskip("llvmlite.binding")
    from lazyarray import jit_load
    mod = ll.parse_assembly('''
        @g = global i32 1
        @h = external global i32
        declare double @f(double)
        define double @k(double %x) {
          %y = call double @f(double %x)
          ret double %y
        }
    ''')
    assert jit_load.defined_symbols(mod) == ("g", "k")
