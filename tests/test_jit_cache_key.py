"""lazyarray/jit.py's disk cache keys: a kernel over compiled helpers has the same key in every process."""
from __future__ import annotations

import json
import marshal
import os
import subprocess
import sys

import numpy as np
import pytest

from lazyarray import jit


def _helper(v):
    return v + 0.25 if v > 0.0 else -0.0


def test_a_code_digest_does_not_hang_on_reference_counts():
    """marshal flags a constant referenced elsewhere (its bytes change with the constant's reference count);
    ``code_digest`` does not: holding the constants changes nothing."""
    before = jit.code_digest(_helper.__code__)
    dumped = marshal.dumps(_helper.__code__)
    held = list(_helper.__code__.co_consts) * 2
    assert held and jit.code_digest(_helper.__code__) == before
    assert isinstance(dumped, bytes)


def test_a_code_digest_tells_different_code_and_constants_apart():
    def plus(v):
        return v + 0.25

    def plus_more(v):
        return v + 0.5

    def minus_zero(v):
        return v + -0.0

    def zero(v):
        return v + 0.0

    digests = {jit.code_digest(f.__code__) for f in (plus, plus_more, minus_zero, zero, _helper)}
    assert len(digests) == 5
    assert jit.code_digest(plus.__code__) == jit.code_digest(plus.__code__)



def test_a_code_digest_is_worked_out_once_per_code_and_is_the_same_as_fresh(monkeypatch):
    """``code_digest`` keeps each code object's digest (``DIGESTS``): asked again it is the kept one, the
    same as a fresh digest, and code objects that differ only in a constant's sign or type keep apart."""
    from lazyarray.caches import NamedCache
    monkeypatch.setattr(jit, "DIGESTS", NamedCache("test digests", 8))
    made = [compile(f"def f(v):\n    return v + {c}\n", "<k>", "exec").co_consts[0] for c in ("0.0", "-0.0", "0", "0.0")]
    assert made[0] == made[3] and made[0] != made[1] and made[0] != made[2]
    digests = [jit.code_digest(c) for c in made]
    assert digests == [jit._digest(c) for c in made]
    assert len(set(digests)) == 3 and digests[0] == digests[3]
    assert len(jit.DIGESTS) == 3 and jit.DIGESTS.peek(made[1]) == digests[1]
    assert jit.code_digest(made[2]) == digests[2]

LOAD = '''
import json, sys
import numpy as np
import lazyarray as la
from lazyarray import jit
from lazyarray.kernels import extrema_rows
la.config.jit_cache_dir = sys.argv[1]
# (the second process holds the helpers' constants: their reference counts differ from the first's)
held = [c for f in (extrema_rows._mixed_zeros, extrema_rows._larger) for c in f.__code__.co_consts] * (
    sys.argv[2] == "hold")
with la.tuning(jit=True):
    before = jit.cache_stats()
    x = np.array([[1.0, -2.0, 0.5], [3.0, 2.0, 5.0]], np.float32)
    y = np.empty(2, np.float32)
    mixed = extrema_rows.kernel("max")(x, y)
    after = jit.cache_stats()
print(json.dumps({"compiled": after[0] - before[0], "loaded": after[1] - before[1], "y": y.tolist(),
                  "mixed": int(mixed)}))
'''


def _load(cache, hold: bool) -> dict:
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # (this checkout's lazyarray)
    env = {**os.environ, "PYTHONPATH": root + os.pathsep + os.environ.get("PYTHONPATH", "")}
    out = subprocess.run([sys.executable, "-c", LOAD, str(cache), "hold" if hold else "-"], env=env, cwd=root,
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["y"] == [1.0, 5.0] and got["mixed"] == 0
    return got


def test_a_second_process_loads_a_kernel_over_compiled_helpers(tmp_path):
    """``extrema_rows``' kernel closes over two compiled helpers (one with a constant 0): the process
    after the one that compiled it loads it from the disk cache, whatever its reference counts."""
    pytest.importorskip("numba")
    first = _load(tmp_path, hold=False)
    assert first["compiled"] >= 1
    for hold in (True, False):
        again = _load(tmp_path, hold=hold)
        assert again["compiled"] == 0 and again["loaded"] >= 1
        assert np.array_equal(again["y"], first["y"])
