"""lazyarray/threads.py: ``split`` runs every part once, over the pool's threads with BLAS on one
thread meanwhile (restored after, also when splits overlap or fail), inline when one thread is set
or when called from a pool thread; ``split_threads`` picks 1 below the tuning table's ``min_split_macs``."""
from __future__ import annotations

import os
import threading

import pytest

import lazyarray as la
from lazyarray import threads, tuning_table


@pytest.fixture
def two_threads():
    la.set_num_threads(2)
    yield
    la.set_num_threads(os.cpu_count() or 1)


def _blas_threads():
    threadpoolctl = pytest.importorskip("threadpoolctl")
    return [i["num_threads"] for i in threadpoolctl.threadpool_info() if i["user_api"] == "blas"]


@pytest.mark.parametrize("parts", [1, 2, 5, 16])
def test_every_part_runs_once_over_the_threads(two_threads, parts):
    seen, names = [], set()
    barrier = threading.Barrier(2, timeout=10) if parts >= 2 else None

    def work(p):
        if barrier is not None and p < 2:  # parts 0 and 1 wait for each other: both threads at work
            barrier.wait()
        seen.append(p)
        names.add(threading.current_thread().name)

    threads.split(list(range(parts)), work)
    assert sorted(seen) == list(range(parts))
    assert len(names) == min(2, parts)
    assert threading.current_thread().name in names  # the caller takes a share itself


def test_one_thread_runs_in_order_on_the_caller():
    la.set_num_threads(1)
    try:
        seen = []
        threads.split([3, 1, 2], lambda p: seen.append((p, threading.current_thread().name)))
        me = threading.current_thread().name
        assert seen == [(3, me), (1, me), (2, me)]
    finally:
        la.set_num_threads(os.cpu_count() or 1)


def test_a_split_inside_a_pool_thread_runs_inline(two_threads):
    """Nested splits do not hand work to the pool they run on (it could wait on itself forever)."""
    inner = []

    barrier = threading.Barrier(2, timeout=10)  # the two outer parts on two threads, one the pool's

    def outer(p):
        barrier.wait()
        outer_name = threading.current_thread().name
        threads.split([10 * p, 10 * p + 1],
                      lambda q: inner.append((q, outer_name, threading.current_thread().name)))

    threads.split([0, 1], outer)
    assert sorted(q for q, _, _ in inner) == [0, 1, 10, 11]
    in_pool = [(outer_name, name) for _, outer_name, name in inner if outer_name.startswith("lazyarray")]
    assert len(in_pool) == 2 and all(o == n for o, n in in_pool)  # the pool thread ran both itself


def test_work_inside_a_split_runs_inline_on_the_caller_too(two_threads):
    """While the calling thread works on its share of a split, a nested split or chunked kernel runs
    inline there as on the pool's threads (no third thread on two cores), and the caller is itself
    again after."""
    seen = []
    barrier = threading.Barrier(2, timeout=10)

    def outer(p):
        barrier.wait()
        me = threading.current_thread().name
        assert threads.in_pool()
        threads.chunked(4, 1, threads.MIN_PARALLEL_BYTES,
                        lambda bounds: seen.append((me, threading.current_thread().name, tuple(bounds))))

    assert not threads.in_pool()
    threads.split([0, 1], outer)
    assert not threads.in_pool()
    assert len(seen) == 2 and all(outer_name == name for outer_name, name, _ in seen)
    assert all(bounds == ((0, 1), (1, 2), (2, 3), (3, 4)) for _, _, bounds in seen)  # one call: every chunk
    chunks = []
    threads.chunked(4, 1, threads.MIN_PARALLEL_BYTES, lambda bounds: chunks.append(threading.current_thread().name))
    assert len(chunks) == 2  # outside a split the chunks go over the two threads again


def test_blas_runs_on_one_thread_inside_and_gets_its_threads_back(two_threads):
    before = _blas_threads()
    assert before and all(n == 2 for n in before)
    inside = []
    threads.split([0, 1, 2], lambda p: inside.append(_blas_threads()))
    assert inside and all(all(n == 1 for n in ns) for ns in inside)
    assert _blas_threads() == before


def test_an_error_is_raised_after_every_thread_stopped_and_blas_is_restored(two_threads):
    before = _blas_threads()
    started, running = [], [0]
    lock = threading.Lock()

    def work(p):
        with lock:
            started.append(p)
            running[0] += 1
        try:
            if p == 1:
                raise ValueError("part 1 failed")
        finally:
            with lock:
                running[0] -= 1

    with pytest.raises(ValueError, match="part 1 failed"):
        threads.split(list(range(40)), work)
    assert running[0] == 0  # every started part had finished when split raised
    assert len(started) == len(set(started)) and 1 in started
    assert len(started) < 40  # no thread went on through all the parts after the error
    assert _blas_threads() == before


def test_a_thread_held_back_leaves_its_parts_to_the_others(two_threads):
    """Parts are taken one at a time: while one thread is stuck in a slow part, the other does the rest."""
    done = []
    release = threading.Event()

    def work(p):
        if p == 0:
            release.wait(10)  # part 0 holds its thread until every other part is done
        done.append(p)
        if len(done) == 15:
            release.set()

    threads.split(list(range(16)), work)
    assert sorted(done) == list(range(16)) and done[-1] == 0


def test_overlapping_splits_from_two_callers_restore_blas_once_both_are_out(two_threads):
    before = _blas_threads()
    a_in, b_done = threading.Event(), threading.Event()
    seen = {}

    def caller_a():
        def work(p):
            if p == 0:
                a_in.set()
                b_done.wait(10)  # B enters and leaves while A is still inside
                seen["a after b left"] = _blas_threads()
        threads.split([0, 1], work)

    t = threading.Thread(target=caller_a)
    t.start()
    assert a_in.wait(10)
    threads.split([0, 1], lambda p: None)
    b_done.set()
    t.join(10)
    assert all(n == 1 for n in seen["a after b left"])  # B's exit left A's region alone
    assert _blas_threads() == before


def test_split_threads_below_the_threshold_or_with_too_few_pieces_is_one(two_threads, monkeypatch):
    monkeypatch.setattr(la.config, "min_split_macs", 1000)
    assert threads.split_threads(999, 64) == 1
    assert threads.split_threads(1000, 64) == 2
    assert threads.split_threads(1000, 2) == 2
    assert threads.split_threads(10**9, 1) == 1  # one piece: nothing to share
    la.set_num_threads(3)
    assert threads.split_threads(10**9, 2) == 1  # a third core would idle: BLAS's threads use it
    la.set_num_threads(1)
    assert threads.split_threads(10**9, 64) == 1


@pytest.mark.parametrize("env,want", [("1", 1), ("3", 3), ("2,1", 2), ("", None), ("zero", None), ("0", None)])
def test_default_threads_follow_omp_num_threads(monkeypatch, env, want):
    """``OMP_NUM_THREADS=1 python ...`` puts every pool of the process on one thread, ours too;
    unset (or not a positive count) the default is the cores this process may run on."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    table = tuning_table.from_environment({"OMP_NUM_THREADS": env})  # (read once, at import)
    assert table.default_threads == (want or 0)
    with la.tuning(default_threads=table.default_threads):
        assert threads.default_threads() == (want if want is not None else cores)


def test_the_default_is_read_at_import():
    import subprocess
    import sys

    code = "import lazyarray as la; print(la.threads.num_threads())"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "1"


def test_the_pool_is_one_named_cache_entry_shut_down_when_replaced_or_cleared():
    """``la.set_num_threads`` replaces the pool (the old executor shut down, taking no more work);
    ``threads.POOL.clear()`` shuts it down and the count goes back to ``default_threads()``."""
    before = threads.num_threads()
    try:
        la.set_num_threads(2)
        old = threads.POOL.get(None)
        assert old.threads == threads.num_threads() == 2
        threads.chunked(4, 1, threads.MIN_PARALLEL_BYTES, lambda bounds: None)  # (its threads at work)
        la.set_num_threads(3)
        assert threads.num_threads() == 3 and threads.POOL.get(None) is not old and len(threads.POOL) == 1
        with pytest.raises(RuntimeError, match="shutdown"):
            old.executor.submit(lambda: None)
        now = threads.POOL.get(None)
        threads.POOL.clear()
        with pytest.raises(RuntimeError, match="shutdown"):
            now.executor.submit(lambda: None)
        assert threads.num_threads() == threads.default_threads()
        seen = []
        threads.chunked(4, 1, threads.MIN_PARALLEL_BYTES, lambda bounds: seen.extend(bounds))
        assert sorted(seen) == [(0, 1), (1, 2), (2, 3), (3, 4)]  # (a new pool runs the work)
    finally:
        la.set_num_threads(before)


def test_in_pool_is_per_thread():
    """The pool's threads say ``in_pool()``; the caller of a split only while it works on its share."""
    la.set_num_threads(2)
    try:
        inside = threads.POOL.get(None).executor.submit(threads.in_pool).result()
        assert inside and not threads.in_pool()
    finally:
        la.set_num_threads(os.cpu_count() or 1)


def test_the_switch_reads_and_sets_blas_through_the_c_functions_threadpoolctl_calls(two_threads):
    threadpoolctl = pytest.importorskip("threadpoolctl")
    controllers = [c for c in threadpoolctl.ThreadpoolController().lib_controllers if c.user_api == "blas"]
    if not controllers:
        pytest.skip("no BLAS library found by threadpoolctl")
    switches = [threads._switches(c) for c in controllers]
    before = [c.get_num_threads() for c in controllers]
    assert [get() for get, _ in switches] == before  # the same counts threadpoolctl reads
    try:
        for _, put in switches:
            put(1)
        assert [c.get_num_threads() for c in controllers] == [1] * len(controllers)
    finally:
        for (_, put), n in zip(switches, before):
            put(n)
    assert [c.get_num_threads() for c in controllers] == before


class _OtherBlas:
    """A BLAS controller of another library: its methods are what the switch calls."""

    internal_api = "mkl"

    def __init__(self):
        self.count = 4

    def get_num_threads(self):
        return self.count

    def set_num_threads(self, n):
        self.count = n


def test_another_library_is_switched_through_its_controllers_methods():
    other = _OtherBlas()
    get, put = threads._switches(other)
    put(1)
    assert (get(), other.count) == (1, 1)
