"""BLAS threads by work size (lazyarray/kernels/blas_threads.py): small products run on one BLAS
thread and the count comes back after; large ones and the kernels' values are left alone."""
from __future__ import annotations

import time

import numpy as np
import pytest

from lazyarray import threads
from lazyarray.caches import NamedCache
from lazyarray.kernels import blas_threads, conv_batch_last
from lazyarray.threads import blas_changed, blas_thread_counts

threadpoolctl = pytest.importorskip("threadpoolctl")


def _blas_threads() -> list[int]:
    """The thread counts of the BLAS libraries the module controls (NumPy's, found at first use;
    other libraries loaded later, such as SciPy's own OpenBLAS, are not NumPy's)."""
    return blas_thread_counts()


@pytest.fixture
def two_blas_threads():
    if not _blas_threads():
        pytest.skip("no BLAS library found by threadpoolctl")
    with threadpoolctl.threadpool_limits(2, user_api="blas"):
        blas_changed()  # (set behind la.set_num_threads' back)
        if max(_blas_threads()) < 2:
            pytest.skip("BLAS cannot run 2 threads here")
        yield
    blas_changed()


@pytest.fixture
def unknown(monkeypatch):
    """The probe's rules alone: no answer known without timing (``blas_known``: the library's, a kept
    one) and none kept (a probe here runs beside threads the test starts)."""
    monkeypatch.setattr(blas_threads, "known_answer", lambda: None)
    monkeypatch.setattr(blas_threads, "keep_answer", lambda found: None)


def test_with_blas_on_one_thread_the_switch_does_nothing():
    with threadpoolctl.threadpool_limits(1, user_api="blas"):
        blas_changed()
        with blas_threads.one_thread(blas_threads.MIN_PARALLEL_FLOPS / 2):
            assert set(_blas_threads()) <= {1}
            assert threads._BLAS.depth == 0  # the serial fast path took nothing
        assert set(_blas_threads()) <= {1}
    blas_changed()


def test_a_small_product_runs_on_one_thread_and_the_count_comes_back(two_blas_threads):
    before = _blas_threads()
    with blas_threads.one_thread(blas_threads.MIN_PARALLEL_FLOPS / 2):
        assert _blas_threads() == [1] * len(before)
    assert _blas_threads() == before


@pytest.mark.parametrize("flops", [blas_threads.MIN_PARALLEL_FLOPS, blas_threads.SERIAL_ANYWAY_FLOPS],
                         ids=["large", "serial-anyway"])
def test_large_and_tiny_products_leave_blas_alone(two_blas_threads, flops):
    before = _blas_threads()
    with blas_threads.one_thread(flops):
        assert _blas_threads() == before


def test_the_count_comes_back_after_an_error(two_blas_threads):
    before = _blas_threads()
    with pytest.raises(RuntimeError, match="inside"), blas_threads.one_thread(blas_threads.MIN_PARALLEL_FLOPS / 2):
        raise RuntimeError("inside")
    assert _blas_threads() == before


def probed(answer: bool) -> NamedCache:
    """A probe cache that already holds ``answer``."""
    cache = NamedCache("test probe", 1)
    cache.put(None, answer)
    return cache


@pytest.fixture(params=[True, False], ids=["small-calls-serial", "small-calls-threaded"])
def probe(request, monkeypatch):
    """What ``small_calls_serial`` found (set here: both answers are exercised on any machine)."""
    monkeypatch.setattr(blas_threads, "PROBE", probed(request.param))
    return request.param


def _conv_blas_threads(monkeypatch, x, w):
    seen = []
    real = np.matmul

    def spy(*a, **kw):
        seen.append(max(_blas_threads()))
        return real(*a, **kw)

    expected = conv_batch_last.batch_last_conv(np, x, w, None, (1, 1), (1, 1), (1, 1), None)
    monkeypatch.setattr(np, "matmul", spy)
    got = conv_batch_last.batch_last_conv(np, x, w, None, (1, 1), (1, 1), (1, 1), None)
    monkeypatch.setattr(np, "matmul", real)
    np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-6)
    return seen


def test_batch_last_conv_multiplies_on_one_thread(two_blas_threads, monkeypatch, probe):
    """The demo CNN's second conv (5.3 MFLOP) multiplies in column blocks of at most
    ``SMALL_PRODUCT`` multiply-adds, on one thread either way: OpenBLAS's small-matrix kernels where
    the probe saw them stay on one thread (BLAS's setting left alone: no 20 us switch), else under
    the switch. The values are the same."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((64, 8, 6, 6)).astype("float32")
    w = rng.standard_normal((16, 8, 3, 3)).astype("float32")
    seen = _conv_blas_threads(monkeypatch, x, w)
    assert len(seen) > 1  # (one call per column block)
    assert set(seen) == ({2} if probe else {1})


def test_a_product_over_the_small_size_switches_whatever_the_probe(two_blas_threads, monkeypatch, probe):
    """float64 (one call of 2.65 M multiply-adds: OpenBLAS would split it) switches either way."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((64, 8, 6, 6))
    w = rng.standard_normal((16, 8, 3, 3))
    assert set(_conv_blas_threads(monkeypatch, x, w)) == {1}


def test_the_probe_counts_other_threads_work(monkeypatch, unknown):
    """``small_calls_serial`` says no when another thread works while it multiplies (here a thread
    hashing 16 MB blocks, which ``hashlib`` does without the GIL, so the work overlaps the probe
    whoever holds the GIL; a thread spinning in Python code only ran when the probe let go of the
    GIL, and on a busy machine sometimes not at all), and its answer is kept."""
    import hashlib
    import threading
    monkeypatch.setattr(blas_threads, "PROBE", NamedCache("test probe", 1))
    stop, started = threading.Event(), threading.Event()
    data = bytes(1 << 24)

    def spin():
        while not stop.is_set():
            hashlib.sha256(data).digest()
            started.set()
    t = threading.Thread(target=spin)
    t.start()
    try:
        assert started.wait(30)
        assert blas_threads.small_calls_serial() is False
    finally:
        stop.set()
        t.join()
    assert blas_threads.PROBE.get(None) is False
    assert blas_threads.small_calls_serial() is False  # (kept: not probed again)


def test_the_probe_waits_out_a_thread_that_stops(monkeypatch, unknown):
    """Other threads that work only for a while (OpenBLAS's workers spin for about 0.1 s after a
    product they shared: a probe started inside a training step saw them and said no) do not decide
    the answer: the probe tries window after window, and answers as it does in a quiet process."""
    import hashlib
    import threading
    import time
    monkeypatch.setattr(blas_threads, "PROBE_MAX_SECONDS", 2.0)  # (room on a busy machine)
    quiet = blas_threads._probe()
    started = threading.Event()
    data = bytes(1 << 22)

    def busy_for_a_while():
        end = time.perf_counter() + 0.08
        while time.perf_counter() < end:
            hashlib.sha256(data).digest()
            started.set()
    t = threading.Thread(target=busy_for_a_while)
    t.start()
    try:
        assert started.wait(30)
        assert blas_threads._probe() is quiet
    finally:
        t.join()


def _spin(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


@pytest.mark.parametrize("alone_us,serial", [(20.0, False), (400.0, True)])
def test_a_window_slower_than_one_thread_is_not_serial(monkeypatch, unknown, alone_us, serial):
    """Beside a busy core a product BLAS shared waits for its worker while this thread spins on: no other
    thread's CPU time to see, but the products run far slower than on one thread (here: 200 us a round of
    this thread's own spinning, against 20 us alone). Such windows do not pass for serial ones; the same
    windows at one thread's pace do."""
    monkeypatch.setattr(blas_threads, "_products", lambda calls: _spin(200e-6))
    monkeypatch.setattr(blas_threads, "_timed_products", lambda calls: alone_us * 1e-6)
    monkeypatch.setattr(blas_threads, "PROBE_MAX_SECONDS", 0.1)
    assert blas_threads._measure() is serial


def test_the_probes_products_are_small_ones_in_both_weight_layouts():
    pairs = [call.args for call in blas_threads._probe_products()]
    assert all(a.dtype == b.dtype == np.float32 for a, b in pairs)
    assert all(a.shape[0] * a.shape[1] * b.shape[1] <= blas_threads.SMALL_PRODUCT for a, b in pairs)
    assert any(b.flags.f_contiguous and not b.flags.c_contiguous for _, b in pairs)  # (a weight's view)
    assert any(b.flags.c_contiguous and b.shape[0] < b.shape[1] for _, b in pairs[1:])  # (a packed weight)


def test_one_row_products_are_serial_where_small_ones_are_else_probed_once(monkeypatch, unknown):
    """``row_calls_serial`` (dense_regions' blocks): yes without a probe where every small product is serial;
    else its own probe, once, not in a first run (unremembered no there), and ``row_probed`` says when."""
    monkeypatch.setattr(blas_threads, "ROW_PROBE", NamedCache("test row probe", 1))
    asked = []
    monkeypatch.setattr(blas_threads, "_row_probe", lambda: asked.append(1) or True)
    monkeypatch.setattr(blas_threads, "PROBE", probed(True))
    assert blas_threads.row_calls_serial() and blas_threads.row_probed() and asked == []
    monkeypatch.setattr(blas_threads, "PROBE", probed(False))
    assert not blas_threads.row_probed()
    monkeypatch.setattr(blas_threads, "probe_tells", lambda: False)  # (a first run)
    assert blas_threads.row_calls_serial() is False and asked == [] and not blas_threads.row_probed()
    monkeypatch.setattr(blas_threads, "probe_tells", lambda: True)
    assert blas_threads.row_calls_serial() is True and blas_threads.row_calls_serial() is True
    assert asked == [1] and blas_threads.row_probed()


def test_the_row_probes_calls_are_dense_region_blocks():
    calls = blas_threads._row_products()
    if not calls:
        pytest.skip("no cblas_sgemm found")
    for call in calls:
        x, w, y = call.arrays
        call()
        np.testing.assert_array_equal(y, x @ w.T)
        assert x.shape[0] == 1 and x.shape[1] * w.shape[0] <= blas_threads.SMALL_PRODUCT


def test_the_probe_after_a_shared_product_answers_as_in_a_quiet_process(two_blas_threads, monkeypatch, unknown):
    """The case it failed: a product BLAS shared over two threads just before the probe (its worker
    still spinning)."""
    import time
    monkeypatch.setattr(blas_threads, "PROBE_MAX_SECONDS", 2.0)
    a = np.ones((512, 512), np.float32)
    time.sleep(0.3)  # (BLAS's workers asleep)
    quiet = blas_threads._probe()
    a @ a
    assert blas_threads._probe() is quiet


def test_a_small_dense_layer_multiplies_on_one_thread(two_blas_threads):
    """``dense`` of a few rows: one BLAS thread during the product (float64 rows against a float32
    weight take the ``xp.matmul`` branch, spied on here), the values of ``x @ w.T + b``."""
    from types import SimpleNamespace

    from lazyarray.kernels.dense import run_dense as _dense

    seen = []

    def spy(*a, **kw):
        seen.append(max(_blas_threads()))
        return np.matmul(*a, **kw)

    rng = np.random.default_rng(1)
    x = rng.standard_normal((64, 144))  # the demo CNN's first dense layer: 0.6 MFLOP (float64: no small path)
    w, b = (rng.standard_normal(s).astype("float32") for s in ((32, 144), (32,)))
    y = _dense(SimpleNamespace(matmul=spy), x, w, b)
    assert seen == [1]
    np.testing.assert_allclose(y, x @ w.T.astype(np.float64) + b, rtol=1e-6, atol=1e-6)


def test_a_one_row_dense_layer_leaves_blas_alone(two_blas_threads):
    """One row (batch-1 inference) is a matrix-vector product, as fast on two BLAS threads as on one
    (784 x 512: 19-21 us either way): ``dense`` does not pay the switch (2.5 us per call)."""
    from types import SimpleNamespace

    from lazyarray.kernels.dense import run_dense as _dense

    seen = []

    def spy(*a, **kw):
        seen.append(max(_blas_threads()))
        return np.matmul(*a, **kw)

    rng = np.random.default_rng(2)
    x = rng.standard_normal((1, 784))  # 0.8 MFLOP: a product of several rows this size would switch
    w, b = (rng.standard_normal(s).astype("float32") for s in ((512, 784), (512,)))
    y = _dense(SimpleNamespace(matmul=spy), x, w, b)
    assert seen == [2]
    np.testing.assert_allclose(y, x @ w.T.astype(np.float64) + b, rtol=1e-6, atol=1e-6)


def test_a_small_product_runs_on_one_thread_from_another_python_thread_too(two_blas_threads):
    # threadpoolctl's public OpenBLAS setter ignores every thread but the first that set a limit;
    # the shared switch (threads.blas_one_thread) must not
    import threading
    seen = []

    def work():
        with blas_threads.one_thread(blas_threads.MIN_PARALLEL_FLOPS / 2):
            seen.append(blas_thread_counts())
    t = threading.Thread(target=work)
    t.start()
    t.join()
    assert seen and all(n == 1 for n in seen[0])
    assert max(blas_thread_counts()) >= 2


def test_set_num_threads_forgets_that_blas_was_serial(two_blas_threads):
    import lazyarray as la
    before = la.threads.num_threads()
    try:
        la.set_num_threads(1)
        with blas_threads.one_thread(blas_threads.MIN_PARALLEL_FLOPS / 2):  # BLAS serial: nothing to switch
            pass
        la.set_num_threads(2)  # (the fixture made sure BLAS can run 2)
        ctx = blas_threads.one_thread(blas_threads.MIN_PARALLEL_FLOPS / 2)  # asked before anything looks again
        assert ctx is not blas_threads.UNCHANGED
        with ctx:
            assert set(blas_thread_counts()) == {1}
        assert max(blas_thread_counts()) == 2
    finally:
        la.set_num_threads(before)


def test_a_small_float32_dense_layer_leaves_blas_alone_where_small_calls_are_serial(two_blas_threads, probe,
                                                                                     monkeypatch):
    """float32 rows of the demo CNN's first dense layer (64 x 144 @ 144 x 32: 0.3 M multiply-adds):
    BLAS's setting is left alone where the probe saw small calls stay on one thread."""
    from lazyarray.kernels import dense

    got = []
    real = dense.one_thread

    def spy(*a):
        ctx = real(*a)
        got.append(ctx)
        return ctx

    monkeypatch.setattr(dense, "one_thread", spy)
    rng = np.random.default_rng(1)
    x, w, b = (rng.standard_normal(s).astype("float32") for s in ((64, 144), (32, 144), (32,)))
    y = dense.run_dense(np, x, w, b)
    assert len(got) == 1 and (got[0] is blas_threads.UNCHANGED) == probe
    np.testing.assert_allclose(y, x @ w.T + b, rtol=1e-5, atol=1e-5)


def test_a_programs_first_run_does_not_probe_and_a_later_run_does(monkeypatch, unknown):
    """Inside ``jit.first_run`` an unprobed BLAS answers False (BLAS is switched to one thread, right
    either way) without probing or remembering; the first question outside probes."""
    from lazyarray import jit
    monkeypatch.setattr(blas_threads, "PROBE", NamedCache("test probe", 1))
    calls = []
    monkeypatch.setattr(blas_threads, "_probe", lambda: calls.append(1) or True)
    with jit.first_run():
        assert jit.in_first_run()
        assert blas_threads.small_calls_serial() is False
        assert not blas_threads.serial_anyway(2 * 100 ** 3, 100 ** 3)  # (a product the probe would have said runs serial)
    assert calls == [] and blas_threads.PROBE.peek(None) is None
    assert blas_threads.small_calls_serial() is True and calls == [1]
    with jit.first_run():
        assert blas_threads.small_calls_serial() is True  # (once probed, the answer holds everywhere)


def test_a_region_plan_is_not_kept_from_a_first_run_before_the_probe(monkeypatch, unknown):
    """A one-row dense layer's region needs the probe's answer; a program's first run, which does not
    probe, must not keep its provisional False in the region's plans: the next run plans again and
    takes the region (it once never did after a hybridized MLP's first call)."""
    from lazyarray import jit
    from lazyarray.kernels import dense_regions

    pytest.importorskip("numba")
    if not jit.parallel_ready():
        pytest.skip("no thread-safe numba threading layer")
    monkeypatch.setattr(blas_threads, "PROBE", NamedCache("test probe", 1))
    monkeypatch.setattr(blas_threads, "_probe", lambda: True)
    monkeypatch.setattr(dense_regions, "PLANS", NamedCache("test dense plans", 8))
    before = threads.num_threads()
    threads.set_num_threads(2)
    try:
        x, w = np.ones((1, 784), np.float32), np.ones((512, 784), np.float32)
        out = np.empty((1, 512), np.float32)
        with jit.first_run():
            assert dense_regions.dense_row(x, w, out) is False
        assert not dense_regions.PLANS.values()
        assert dense_regions.dense_row(x, w, out) is True
        np.testing.assert_array_equal(out, x @ w.T)
    finally:
        threads.set_num_threads(before)
