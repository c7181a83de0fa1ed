"""lazyarray/jit.py: compiled kernels where numba is installed, switched off by LAZYARRAY_JIT=0."""
from __future__ import annotations

import json
import os
import subprocess
import sys

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
    monkeypatch.setattr(jit, "_findable", lambda: False)
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
        # (enabled() may answer from the package being found; the first kernel tries the import)
        with pytest.warns(RuntimeWarning, match="numba failed to import.*SystemError"):
            assert jit.compiled(_cumulative) is None
        assert not jit.enabled() and not jit.parallel_ready()
    finally:
        monkeypatch.undo()
        jit._numba.cache_clear()


# -- the disk cache: a kernel compiled in one process is loaded by the next ---------------------------------
KERNELS = '''
import numpy as np
from lazyarray import jit


def total(a):
    s = a[0] * 0
    for v in a:
        s += v
    return s


def make_twice():
    inner = jit.compiled(total)

    def twice(a):  # a closure over a compiled function (as kernels/fused_jit.py's loop)
        return inner(a) * 2
    return jit.compiled(twice)
'''

RUN = '''
import json, sys, warnings
import numpy as np
import lazyarray as la
sys.path.insert(0, sys.argv[1])
la.config.jit_cache_dir = sys.argv[2]
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    import cache_kernels
    from lazyarray import jit
    before = jit.cache_stats()
    k, c = jit.compiled(cache_kernels.total), cache_kernels.make_twice()
    a = np.arange(1.0, 5.0)
    got = [float(k(a)), float(c(a))]
    compiled, loaded = jit.cache_stats()
    assert (compiled - before[0]) + (loaded - before[1]) == 2, (before, compiled, loaded)
    assert loaded - before[1] == sum(sum(s.cache_hits.values()) for s in (k.stats, c.stats))
stats = [sum(s.cache_hits.values()) for s in (k.stats, c.stats)], [sum(s.cache_misses.values()) for s in (k.stats, c.stats)]
print(json.dumps({"values": got, "hits": stats[0], "misses": stats[1], "dir": jit.cache_dir(),
                  "warnings": [str(w.message) for w in caught if "cache" in str(w.message)]}))
'''


def _run_kernels(tmp_path, cache, n=1):
    """``n`` fresh processes at once compiling (or loading) two kernels with ``cache`` as the cache."""
    src = tmp_path / "src"
    src.mkdir(exist_ok=True)
    (src / "cache_kernels.py").write_text(KERNELS)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # (this checkout's lazyarray)
    env = {**os.environ, "PYTHONPATH": root + os.pathsep + os.environ.get("PYTHONPATH", "")}
    procs = [subprocess.Popen([sys.executable, "-c", RUN, str(src), str(cache)], env=env, cwd=root,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(n)]
    outs = []
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
        outs.append(json.loads(out))
        assert outs[-1]["values"] == [10.0, 20.0]  # (sum of 1..4, and twice that)
    return outs


def _cache_files(cache):
    return sorted(p.name for p in cache.rglob("*") if p.suffix in (".nbi", ".nbc"))


def test_a_second_process_loads_the_kernels_the_first_compiled(tmp_path):
    pytest.importorskip("numba")
    cache = tmp_path / "cache"
    first, = _run_kernels(tmp_path, cache)
    assert first["misses"] == [1, 1] and first["hits"] == [0, 0] and first["dir"] == str(cache)
    files = _cache_files(cache)
    assert any(f.startswith("cache_kernels.total-") and f.endswith(".nbc") for f in files), files
    assert any(".make_twice.locals.twice-" in f for f in files), files
    second, = _run_kernels(tmp_path, cache)
    assert second["hits"] == [1, 1] and second["misses"] == [0, 0]  # nothing compiled: loaded from the cache
    assert _cache_files(cache) == files  # (and nothing added: a closure's key is the same in every process)


def test_two_processes_compiling_at_once_share_the_cache(tmp_path):
    pytest.importorskip("numba")
    cache = tmp_path / "cache"
    _run_kernels(tmp_path, cache, n=2)
    after, = _run_kernels(tmp_path, cache)
    assert after["hits"] == [1, 1] and after["misses"] == [0, 0]


def test_a_corrupt_cache_compiles_again(tmp_path):
    pytest.importorskip("numba")
    cache = tmp_path / "cache"
    _run_kernels(tmp_path, cache)
    for path in cache.rglob("*.nbc"):
        path.write_bytes(b"not a pickle")
    again, = _run_kernels(tmp_path, cache)
    assert again["misses"] == [1, 1] and again["hits"] == [0, 0]
    for path in cache.rglob("*.nbi"):
        path.write_bytes(b"\x80\x04garbage")
    again, = _run_kernels(tmp_path, cache)
    assert again["misses"] == [1, 1]
    healed, = _run_kernels(tmp_path, cache)  # (the compiled kernels were written back)
    assert healed["hits"] == [1, 1]


def test_an_unwritable_directory_means_no_disk_cache_and_one_warning(tmp_path):
    pytest.importorskip("numba")
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    out, = _run_kernels(tmp_path, blocker / "cache")  # (a directory under a file cannot be made)
    assert out["misses"] == [1, 1] and len(out["warnings"]) == 1
    assert "not writable" in out["warnings"][0] and "LAZYARRAY_JIT_CACHE_DIR" in out["warnings"][0]


def test_the_cache_is_off_with_an_empty_directory(monkeypatch):
    pytest.importorskip("numba")
    jit.clear()
    try:
        with la.tuning(jit=True, jit_cache_dir=""):
            k = jit.compiled(_cumulative)
            assert jit.cache_dir() == "" and k.stats.cache_path is None
    finally:
        jit.clear()


def test_the_cache_is_capped_and_cleared(tmp_path):
    sub = tmp_path / "kernels_x"
    sub.mkdir()
    for i in range(8):  # 8 files of 1000 bytes, file 0 the oldest
        path = sub / f"k.f-{i}.py311.1.nbc"
        path.write_bytes(b"x" * 1000)
        os.utime(path, (1000 + i, 1000 + i))
    (sub / "notes.txt").write_text("not ours")
    assert jit.prune_disk_cache(10_000, str(tmp_path)) == 0  # under the cap: nothing goes
    assert jit.prune_disk_cache(6000, str(tmp_path)) == 4  # past it: the oldest, down to 3/4 of the cap
    assert _cache_files(tmp_path) == [f"k.f-{i}.py311.1.nbc" for i in range(4, 8)]
    assert jit.clear_disk_cache(str(tmp_path)) == 4 and _cache_files(tmp_path) == []
    assert (sub / "notes.txt").exists()  # (only the cache's own files are deleted)


def test_relative_cache_directories_are_refused():
    with pytest.raises(la.ParamValueError, match="absolute path"):
        with la.tuning(jit_cache_dir="cache/here"):
            pass


def test_compile_time_is_its_own_row_in_a_profile_not_the_kernels_run_time():
    pytest.importorskip("numba")
    x = la.array(np.random.default_rng(0).standard_normal((8, 4, 12, 12)).astype(np.float32))
    jit.clear()  # (every kernel compiles again on its next use; no disk cache: it compiles, not loads)
    try:
        with la.tuning(jit=True, jit_cache_dir=""):
            with la.profile() as prof:
                y = la.nn.max_pool2d(x).asnumpy()
            with la.profile() as again:
                la.nn.max_pool2d(x).asnumpy()
    finally:
        jit.clear()
    compiles = [e for e in prof.events if e.impl == "numba compile"]
    assert compiles and all(e.name == "nn.max_pool2d" for e in compiles), [e.key for e in prof.events]
    run = next(e for e in prof.events if e.name == "nn.max_pool2d" and e.impl != "numba compile")
    assert run.start_ns == compiles[0].start_ns + compiles[0].dur_ns  # the run follows its compile
    assert compiles[0].dur_ns > run.dur_ns  # (a compilation takes far longer than the pool it compiled for)
    assert not any(e.impl == "numba compile" for e in again.events)  # compiled once
    assert "nn.max_pool2d[numba compile]" in prof.table()
    want = x.asnumpy().reshape(8, 4, 6, 2, 6, 2).max(axis=(3, 5))
    np.testing.assert_array_equal(y, want)


# -- a compiled program's first run (jit.first_run, jit.tiered) ----------------------------------------
def _plus_one(a):
    return a + 1.0


_tiered_plus_one = jit.tiered(lambda a: a + 1.0)


def test_a_first_run_leaves_out_tiered_kernels_only():
    pytest.importorskip("numba")
    with la.tuning(jit=True):
        with jit.first_run():
            assert jit.in_first_run()
            assert jit.compiled(_tiered_plus_one) is None  # (its caller's NumPy path gives the same values)
            assert jit.compiled(_plus_one) is not None  # (not marked: compiled as ever)
            assert jit.compiled(_tiered_plus_one, always=True) is not None  # (built into another kernel)
            assert jit.enabled()  # (choosers still see numba: a tiered kernel's caller declines at run time)
        assert not jit.in_first_run() and jit.compiled(_tiered_plus_one) is not None


@jit.inlined
def _one_more(v):  # (a helper compiled into the kernels that call it)
    return v + 1.0


def _loop_with(one_more):
    def loop(x, out):
        for i in range(x.shape[0]):
            out[i] = one_more(x[i])

    return loop


def test_made_with_compiles_a_maker_once_with_its_inlined_helpers_and_declines_where_tiered():
    pytest.importorskip("numba")
    plain, tiered = (lambda h: _loop_with(h)), jit.tiered(lambda h: _loop_with(h))  # (makers of their own)
    with la.tuning(jit=True):
        with jit.first_run():
            assert jit.made_with(tiered, _one_more) is None and jit.MADE.peek(tiered) is None  # (not even made)
            k = jit.made_with(plain, _one_more)
        assert k is not None and jit.made_with(plain, _one_more) is k  # (made and compiled once)
        out = np.empty(4)
        k(np.arange(4.0), out)
        np.testing.assert_array_equal(out, [1.0, 2.0, 3.0, 4.0])
        kt = jit.made_with(tiered, _one_more)
        assert kt is not None and jit.COMPILED.peek(jit.MADE.peek(tiered)) is kt
        with jit.first_run():  # (made now, and still declined there)
            assert jit.made_with(tiered, _one_more) is None and jit.made_with(plain, _one_more) is k
    with la.tuning(jit=False):
        assert jit.made_with(plain, _one_more) is None


def test_jit_first_run_and_a_profile_keep_the_kernels_in_a_first_run():
    with la.tuning(jit_first_run=True), jit.first_run():
        assert not jit.in_first_run()
    with la.profile(), jit.first_run():  # (explain() shows what later calls run)
        assert not jit.in_first_run()


def _pool_op():
    x = la.sym.var("x", shape=(2, 3, 8, 8), dtype="float32")
    return la.CachedOp(la.sym.nn.max_pool2d(la.sym.relu(x), kernel=(2, 2)))


def test_a_compiled_programs_first_call_loads_no_tiered_kernel_and_its_second_does():
    """The first call per signature runs max_pool2d and relu on NumPy (no load, no compile: the
    kernels are not even asked for); the second loads or compiles them; the values are the same bits."""
    pytest.importorskip("numba")
    from lazyarray.kernels import elementwise_jit, pool_jit
    x = la.array(np.random.default_rng(0).standard_normal((2, 3, 8, 8)).astype(np.float32))
    op = _pool_op()
    jit.clear()
    try:
        with la.tuning(jit=True):
            first = op(x).asnumpy()
            assert jit.COMPILED.peek(pool_jit._pool_tiles_rows) is None
            assert jit.COMPILED.peek(elementwise_jit.relu_flat) is None
            second = op(x).asnumpy()
            assert jit.COMPILED.peek(pool_jit._pool_tiles_rows) is not None
            with la.tuning(jit_first_run=True):
                jit.clear()
                _pool_op()(x).asnumpy()  # (a new program: its first run takes them with the switch on)
                assert jit.COMPILED.peek(pool_jit._pool_tiles_rows) is not None
    finally:
        jit.clear()
    np.testing.assert_array_equal(first, second)
    np.testing.assert_array_equal(first, np.maximum(x.asnumpy(), 0).reshape(2, 3, 4, 2, 4, 2).max(axis=(3, 5)))


def test_a_cached_backwards_first_run_loads_no_tiered_kernel():
    pytest.importorskip("numba")
    from lazyarray.kernels import pool_jit
    x = la.array(np.random.default_rng(1).standard_normal((2, 3, 8, 8)).astype(np.float32))
    grads = []
    jit.clear()
    try:
        with la.tuning(jit=True):
            for k in range(2):
                x.attach_grad()
                with la.autograd.record():
                    y = la.nn.max_pool2d(x * 2, kernel=(2, 2)).sum()
                y.backward()
                grads.append(x.grad.asnumpy())
                loaded = jit.COMPILED.peek(pool_jit._max_pool_grad_tiles) is not None
                assert loaded == (k == 1)  # (the second backward of that tape structure loads it)
    finally:
        jit.clear()
    np.testing.assert_array_equal(grads[0], grads[1])


# -- the kernels marked tiered whose callers run NumPy in a first run: the same bits either way ----------
def _loaded(kernel) -> bool:
    """Whether ``kernel`` (a kernel function, or a maker of kernels ``pairwise_sum.with_row_sum`` or
    ``jit.made_with`` compiles) is compiled or loaded."""
    from lazyarray.kernels import pairwise_sum
    made = pairwise_sum.MADE.peek(kernel) or jit.MADE.peek(kernel)
    return jit.COMPILED.peek(kernel if made is None else made) is not None


def _first_and_later(run, kernel, loads: bool = True):
    """``run()``'s result inside a program's first run (``kernel`` neither loaded nor compiled there) and
    outside it (``kernel`` compiled, where ``loads``: an empty input needs no kernel)."""
    jit.clear()
    try:
        with la.tuning(jit=True):
            with jit.first_run():
                first = np.array(run(), copy=True)
            assert not _loaded(kernel)  # (the first run did not even ask for it)
            later = run()
            assert _loaded(kernel) == loads
    finally:
        jit.clear()
    return first, later


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n", [1, 7, 8, 9, 64, 128])
def test_attention_softmax_in_a_first_run_is_its_compiled_softmax_bit_for_bit(dtype, n):
    pytest.importorskip("numba")
    from lazyarray.kernels import attention, softmax
    s = np.random.default_rng(n).standard_normal((2, 3, 5, n)).astype(dtype) * 4
    s[0, 0, 0, 0] = np.nan if n > 1 else s[0, 0, 0, 0]

    def run():
        t = s.copy()
        attention._softmax_in_place(t)
        return t
    for kernel in (softmax._max_subtract, softmax._divide_by_sums_with):
        first, later = _first_and_later(run, kernel)
        np.testing.assert_array_equal(first, later)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(1, 7, 32), (3, 1), (2, 5, 128), (0, 16)])
def test_layer_norm_in_a_first_run_is_its_compiled_rows_bit_for_bit(dtype, shape):
    pytest.importorskip("numba")
    from lazyarray.kernels import layer_norm
    rng = np.random.default_rng(len(shape))
    x = rng.standard_normal(shape).astype(dtype)
    gamma, beta = rng.standard_normal(shape[-1]).astype(dtype), rng.standard_normal(shape[-1]).astype(dtype)
    first, later = _first_and_later(lambda: layer_norm.run_layer_norm(np, x, gamma, beta), layer_norm._rows_with,
                                    loads=x.size > 0)
    np.testing.assert_array_equal(first, later)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("act", ["relu", "hardsigmoid", "hardswish"])
def test_conv2d_act_in_a_first_run_is_its_compiled_activation_bit_for_bit(dtype, act):
    pytest.importorskip("numba")
    from lazyarray.kernels import conv_act
    rng = np.random.default_rng(3)
    x, w = rng.standard_normal((1, 4, 9, 9)).astype(dtype), rng.standard_normal((6, 4, 3, 3)).astype(dtype)
    b = rng.standard_normal(6).astype(dtype)

    def run():
        # (not conv2d's direct, nor blocked's write-out: their loops apply the activation themselves)
        with la.tuning(conv_direct_max_macs=0, conv_act_write_out=False):
            return conv_act.run_conv2d_act(np, x, w, b, (1, 1), (1, 1), act=act, alpha=0.2, beta=0.5)

    first, later = _first_and_later(run, conv_act._act_in_place)
    np.testing.assert_array_equal(first, later)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("stride", [(2, 2), (2, 1)])
def test_a_strided_depthwise_conv_in_a_first_run_is_its_compiled_loop_bit_for_bit(dtype, stride):
    pytest.importorskip("numba")
    from lazyarray.kernels import depthwise
    from lazyarray.kernels.conv2d import run_conv2d
    rng = np.random.default_rng(4)
    x, w = rng.standard_normal((2, 5, 11, 10)).astype(dtype), rng.standard_normal((5, 1, 3, 3)).astype(dtype)
    b = rng.standard_normal(5).astype(dtype)
    first, later = _first_and_later(lambda: run_conv2d(np, x, w, b, stride, (1, 1), (1, 1), 5),
                                    depthwise._dw_nchw)
    np.testing.assert_array_equal(first, later)


def _listed(y) -> list:
    return list(y) if isinstance(y, (list, tuple)) else [y]


def test_a_transformer_fixtures_first_call_loads_no_kernel_and_equals_its_second():
    """torch_encoder (tests/data/onnx_dynamic): its layer norms and attention softmaxes are tiered, so
    the first call runs NumPy only; the second loads them; the outputs are the same bits. (Its small
    heads' ``fused_attention[head_loop]``, tiered but within a bound of the NumPy path, not its bits, is off
    here.)"""
    pytest.importorskip("numba")
    pytest.importorskip("onnx")
    from lazyarray import blocks as B
    fixtures = os.path.join(os.path.dirname(__file__), "data", "onnx_dynamic")
    m = next(m for m in json.load(open(os.path.join(fixtures, "manifest.json"))) if m["name"] == "torch_encoder")
    data = np.load(os.path.join(fixtures, "torch_encoder.npz"))
    xs = [la.array(data[f"{m['cases'][0]}/in/{k}"]) for k in m["inputs"]]
    jit.clear()
    try:
        with la.tuning(jit=True, attention_head_loop_max_macs=0):
            net = B.SymbolBlock.imports(os.path.join(fixtures, "torch_encoder.onnx"), m["inputs"])
            net.hybridize()
            first = [y.asnumpy() for y in _listed(net(*xs))]
            loaded_first = len(jit.COMPILED.values())
            second = [y.asnumpy() for y in _listed(net(*xs))]
            loaded_second = len(jit.COMPILED.values())
    finally:
        jit.clear()
    assert loaded_first == 0 and loaded_second > 0
    for a, b in zip(first, second):
        np.testing.assert_array_equal(a, b)


FIRST_RUN_ONLY = '''
import sys
import numpy as np
import lazyarray as la
x = la.sym.var("x", shape=(2, 3, 8, 8), dtype="float32")
op = la.CachedOp(la.sym.nn.max_pool2d(la.sym.relu(x), kernel=(2, 2)))
a = la.array(np.random.default_rng(0).standard_normal((2, 3, 8, 8)).astype(np.float32))
with la.tuning(jit=True):
    first = op(a).asnumpy()
    print("numba" in sys.modules)
    second = op(a).asnumpy()
    print("numba" in sys.modules, np.array_equal(first, second))
'''


def test_a_fresh_processs_first_run_of_tiered_kernels_only_imports_no_numba(tmp_path):
    """relu and max_pool2d are tiered: the program's first call runs NumPy and does not even import numba
    (its choosers ask ``enabled()``, which finds the package without importing it); the second imports it."""
    pytest.importorskip("numba")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = {**os.environ, "PYTHONPATH": root + os.pathsep + os.environ.get("PYTHONPATH", ""),
           "LAZYARRAY_JIT_CACHE_DIR": str(tmp_path)}
    out = subprocess.run([sys.executable, "-c", FIRST_RUN_ONLY], env=env, cwd=root, capture_output=True,
                         text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["False", "True", "True"]
