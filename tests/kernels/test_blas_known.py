"""kernels/blas_known.py: the small-product answer known without timing: the library's rule (only ever
a no, only for the OpenBLAS cores and versions it names), and a probe's answer kept per machine, keyed
by every library's API, version, core, file and thread count and by the CPU, so that another of any
of them is probed again. Driven by made-up library descriptions: nothing here times anything."""
from __future__ import annotations

import json
import os

import pytest

import lazyarray as la
from lazyarray import jit
from lazyarray.caches import NamedCache
from lazyarray.kernels import blas_known, blas_threads

HASWELL = {"user_api": "blas", "internal_api": "openblas", "prefix": "libscipy_openblas", "version": "0.3.31.188.0",
           "architecture": "Haswell", "filepath": "/x/libscipy_openblas64_.so", "threading_layer": "pthreads",
           "num_threads": 2}


def lib(**changes) -> dict:
    return {**HASWELL, **changes}


@pytest.fixture
def store(tmp_path, monkeypatch):
    """An empty kernel-cache directory of the test's own, nothing read from it yet."""
    monkeypatch.setattr(la.config, "jit_cache_dir", str(tmp_path))
    monkeypatch.setattr(blas_known, "STORED", NamedCache("test kept answers", 4))
    return tmp_path


@pytest.mark.parametrize("libs, known", [
    ([lib()], False),
    ([lib(architecture="Zen"), lib(filepath="/y/libopenblas.so", version="0.3.21")], False),
    ([lib(architecture="SkylakeX")], None),  # (small-matrix kernels: the probe tells)
    ([lib(architecture="SapphireRapids")], None),
    ([lib(version="0.3.32")], None),  # (newer than the rule was checked against)
    ([lib(version="0.3.dev")], None),
    ([lib(version=None)], None),
    ([lib(internal_api="mkl", architecture=None)], None),
    ([lib(), lib(internal_api="blis", architecture=None)], None),  # (every library must be known)
    ([], None),
])
def test_the_library_rule_only_says_no_and_only_where_it_knows(libs, known):
    assert blas_known.by_library(libs) is known


@pytest.mark.parametrize("change", [
    {"version": "0.3.30"}, {"architecture": "SkylakeX"}, {"filepath": "/z/libopenblas.so"}, {"num_threads": 4},
    {"internal_api": "mkl"}, {"threading_layer": "openmp"}, {"prefix": "libopenblas"}, {"user_api": "other"}])
def test_the_key_changes_with_everything_the_answer_depends_on(change):
    assert blas_known.machine_key([lib(**change)]) != blas_known.machine_key([lib()])
    assert blas_known.machine_key([lib(), lib(**change)]) != blas_known.machine_key([lib()])


def test_the_key_names_the_cpu_and_not_the_libraries_order(monkeypatch):
    other = lib(filepath="/y/libopenblas.so")
    assert blas_known.machine_key([lib(), other]) == blas_known.machine_key([other, lib()])
    here = blas_known.machine_key([lib()])
    model, flags, count, machine = blas_known.cpu_identity()
    for cpu in ((model + " v2", flags, count, machine), (model, flags + " avx512f", count, machine),
                (model, flags, (count or 1) + 1, machine), (model, flags, count, machine + "-other")):
        monkeypatch.setattr(blas_known, "cpu_identity", lambda cpu=cpu: cpu)
        assert blas_known.machine_key([lib()]) != here
    assert blas_known.machine_key([]) is None


def test_the_key_names_the_probes_version(monkeypatch):
    """Answers an earlier probe kept (one that could say yes beside a busy core) are not read."""
    here = blas_known.machine_key([lib()])
    monkeypatch.setattr(blas_known, "PROBE_VERSION", blas_known.PROBE_VERSION - 1)
    assert blas_known.machine_key([lib()]) != here


def test_a_kept_answer_is_found_by_its_key_only(store):
    key, other = blas_known.machine_key([lib()]), blas_known.machine_key([lib(num_threads=4)])
    assert blas_known.kept(key) is None
    blas_known.keep(True, key)
    assert blas_known.kept(key) is True and blas_known.kept(other) is None and blas_known.kept(None) is None
    blas_known.STORED.clear()  # (a new process: read from the file)
    assert blas_known.kept(key) is True and blas_known.kept(other) is None
    blas_known.keep(False, other)
    assert (blas_known.kept(key), blas_known.kept(other)) == (True, False)
    assert json.loads((store / blas_known.FILE).read_text()) == {key: True, other: False}
    assert [p.name for p in store.iterdir()] == [blas_known.FILE]  # (written by replacing: no partial file left)


def test_the_file_keeps_the_newest_answers_and_survives_a_bad_one(store):
    keys = [blas_known.machine_key([lib(num_threads=n)]) for n in range(2, 2 + blas_known.KEPT + 3)]
    for k in keys:
        blas_known.keep(True, k)
    assert len(json.loads((store / blas_known.FILE).read_text())) == blas_known.KEPT
    assert blas_known.kept(keys[0]) is None and blas_known.kept(keys[-1]) is True
    (store / blas_known.FILE).write_text("{not json")
    blas_known.STORED.clear()
    assert blas_known.kept(keys[-1]) is None
    blas_known.keep(False, keys[0])
    assert json.loads((store / blas_known.FILE).read_text()) == {keys[0]: False}
    blas_known.forget()
    assert not (store / blas_known.FILE).exists() and blas_known.kept(keys[0]) is None


def test_nothing_is_kept_without_a_kernel_cache(monkeypatch, tmp_path):
    monkeypatch.setattr(la.config, "jit_cache_dir", "")
    monkeypatch.setattr(blas_known, "STORED", NamedCache("test kept answers", 4))
    key = blas_known.machine_key([lib()])
    blas_known.keep(True, key)
    assert blas_known.kept(key) is None and not blas_known.STORED.values()


@pytest.fixture
def unprobed(monkeypatch):
    """Two threads as far as the probe's rules look, nothing probed; the probe's calls counted."""
    monkeypatch.setattr(blas_threads, "PROBE", NamedCache("test probe", 1))
    monkeypatch.setattr(blas_threads, "num_threads", lambda: 2)
    monkeypatch.setattr(blas_threads, "blas_thread_counts", lambda: [2])
    calls = []
    monkeypatch.setattr(blas_threads, "_measure", lambda: calls.append(1) or True)
    return calls


def test_a_known_answer_needs_no_probe_even_in_a_first_run(unprobed, monkeypatch):
    monkeypatch.setattr(blas_threads, "known_answer", lambda: False)
    with jit.first_run():
        assert blas_threads.small_calls_serial() is False
    assert unprobed == [] and blas_threads.probed()  # (remembered: plans may keep it)


def test_a_probe_is_kept_for_the_next_process_under_this_machines_key(unprobed, store, monkeypatch):
    libs = [lib(architecture="SkylakeX")]  # (the rule does not know: the probe runs)
    monkeypatch.setattr(blas_known, "blas_libraries", lambda: libs)
    assert blas_threads.small_calls_serial() is True and unprobed == [1]
    monkeypatch.setattr(blas_threads, "PROBE", NamedCache("test probe", 1))  # (the next process)
    monkeypatch.setattr(blas_known, "STORED", NamedCache("test kept answers", 4))
    with jit.first_run():
        assert blas_threads.small_calls_serial() is True
    assert unprobed == [1]
    libs[:] = [lib(architecture="SkylakeX", version="0.3.30")]  # (another library: probed again)
    monkeypatch.setattr(blas_threads, "PROBE", NamedCache("test probe", 1))
    assert blas_threads.small_calls_serial() is True and unprobed == [1, 1]
    assert len(json.loads((store / blas_known.FILE).read_text())) == 2


def test_a_library_on_one_thread_is_not_asked_about(unprobed, monkeypatch):
    """A kept or known answer is for BLAS on several threads: with one library on one thread the rule
    stays the probe's (False, unremembered)."""
    asked = []
    monkeypatch.setattr(blas_threads, "known_answer", lambda: asked.append(1) or True)
    monkeypatch.setattr(blas_threads, "blas_thread_counts", lambda: [2, 1])
    assert blas_threads.small_calls_serial() is False
    assert asked == [] and not blas_threads.probed() and unprobed == []


def test_this_machines_answer_is_the_probes_where_the_rule_knows_one():
    """Where the library rule answers, the probe agrees (run here only where it answers: the rule says
    no for OpenBLAS on cores without small-matrix kernels, which share such products)."""
    pytest.importorskip("threadpoolctl")
    la.set_num_threads(2)
    try:
        libs = blas_known.blas_libraries()
        if blas_known.by_library(libs) is None or min((x.get("num_threads") or 1) for x in libs) < 2:
            pytest.skip("the library rule does not answer here (or BLAS cannot run 2 threads)")
        assert blas_threads._measure() is blas_known.by_library(libs)
    finally:
        la.set_num_threads(os.cpu_count() or 1)
