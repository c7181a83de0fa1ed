"""kernels/contention.py: a stalled region opens a back-off window (doubled while stalls follow
windows, up to the max) during which the threaded kernels decline: the dense and conv2d numba
regions hand over to their fallbacks (``gemv``, ``batch_last``, as ``la.profile()`` shows) and a
split runs its parts on the calling thread; after the window they run threaded again. The values
are the same either way. Driven by a fake clock: no timing is asserted."""
from __future__ import annotations

import os
import threading

import numpy as np
import pytest

import lazyarray as la
from lazyarray import blocks as B
from lazyarray import jit, threads
from lazyarray.caches import NamedCache
from lazyarray.kernels import contention, conv_regions, dense_regions
from lazyarray.kernels.conv2d import run_conv2d


class Clock:
    """A clock the test moves by hand (seconds)."""

    def __init__(self):
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


@pytest.fixture
def clock(monkeypatch):
    """The guard on, fresh, on a fake wall clock (``.cpu``: its fake CPU clock)."""
    monkeypatch.setattr(la.config, "contention_guard", True)
    contention.reset()
    wall = Clock()
    contention.guard().clock = wall
    yield wall
    contention.reset()
    la.set_num_threads(os.cpu_count() or 1)


def _region(clock, seconds, key="k"):
    start = contention.now()
    clock.t += seconds
    contention.region_done(key, start)


def test_a_stall_opens_a_window_that_closes_on_time(clock):
    _region(clock, 30e-6)  # (the first call only sets the region's quiet time)
    _region(clock, 60e-6)  # 2x: not a stall
    assert contention.quiet() and contention.guard().stalls == 0
    _region(clock, 0.016)
    assert contention.contended() and contention.guard().stalls == 1
    clock.t += 0.099
    assert not contention.quiet()
    clock.t += 0.002  # (the 100 ms window is over)
    assert contention.quiet()


def test_a_stall_is_a_ratio_and_an_absolute_amount(clock):
    _region(clock, 3e-6)
    _region(clock, 30e-6)  # 10x, but 27 us more: under contention_min_stall_us
    assert contention.quiet()
    with la.tuning(contention_min_stall_us=10):
        _region(clock, 30e-6)
    assert contention.contended()


def test_windows_double_while_stalls_follow_them_and_start_short_after_a_quiet_spell(clock):
    _region(clock, 30e-6)
    windows = []
    for _ in range(7):
        _region(clock, 0.02)
        g = contention.guard()
        windows.append(round(g.window, 6))
        clock.t = g.until  # the next region: the probe at the window's end
    assert windows == [0.1, 0.2, 0.4, 0.8, 1.6, 1.6, 1.6]
    clock.t += 1.7  # well after the last window
    _region(clock, 30e-6)  # quiet: the next stall starts short again
    _region(clock, 0.02)
    assert contention.guard().window == pytest.approx(0.1)


def test_switched_off_it_never_declines(clock, monkeypatch):
    monkeypatch.setattr(la.config, "contention_guard", False)
    _region(clock, 30e-6)
    _region(clock, 0.02)
    assert contention.quiet()
    contention.stalled()
    assert contention.quiet()  # (a window may be open: nothing reads it)


def test_stall_ratio_is_checked():
    with pytest.raises(la.ParamValueError):
        with la.tuning(contention_stall_ratio=0):
            pass


def _mlp():
    net = B.HybridSequential()
    net.add(B.Dense(512, activation="relu"), B.Dense(512, activation="relu"), B.Dense(10))
    net.initialize()
    net.hybridize()
    return net


def _profiled(net, x):
    with la.profile() as prof:
        y = net(x).asnumpy()
    return y, {e.impl.split(",")[0] for e in prof.events if e.name.startswith(("nn.dense", "nn.conv2d"))}


def _needs_regions():
    pytest.importorskip("numba")
    pytest.importorskip("threadpoolctl")
    if not jit.parallel_ready():
        pytest.skip("no thread-safe numba threading layer")


def test_dense_region_declines_while_contended_and_resumes_after(clock, monkeypatch):
    _needs_regions()
    la.set_num_threads(2)
    calls = []
    real = dense_regions.dense_row
    monkeypatch.setattr(dense_regions, "dense_row", lambda *a: calls.append(real(*a)) or calls[-1])
    # (the BLAS probe's answer, as on a quiet machine: on a loaded one OpenBLAS's spinning workers can make it
    # say no, and no plan would take a region, contended or not; the guard is what this test checks)
    monkeypatch.setattr(dense_regions, "row_calls_serial", lambda: True)
    monkeypatch.setattr(dense_regions, "PLANS", NamedCache("dense parallel-region plans (test)", 8))  # (made so)
    net = _mlp()
    x = la.array(np.random.default_rng(0).standard_normal((1, 784)).astype("float32"))
    net(x)
    quiet, impls = _profiled(net, x)
    assert "region" in impls and any(calls)
    contention.stalled()
    calls.clear()
    busy, impls = _profiled(net, x)
    assert calls == [False, False] and "region" not in impls and "gemv" in impls  # (the fallback, by name)
    np.testing.assert_allclose(busy, quiet, rtol=1e-5, atol=1e-5)  # (gemv: the same product, to rounding)
    clock.t = contention.guard().until
    calls.clear()
    again, impls = _profiled(net, x)
    assert calls == [True, True] and "region" in impls
    np.testing.assert_array_equal(again, quiet)


def _demo_cnn_b64(monkeypatch, threads: int):
    """The demo CNN hybridized on ``threads`` threads, called once at batch 64, and the list that
    records what each ``conv_regions.conv2d`` call returned (True: the region ran)."""
    _needs_regions()
    from lazyarray.cli import build_model

    la.set_num_threads(threads)
    monkeypatch.setattr(la.config, "conv_region_min_macs", 0)  # (its small convolutions on the threads set)
    calls = []
    real = conv_regions.conv2d
    monkeypatch.setattr(conv_regions, "conv2d", lambda *a: calls.append(real(*a)) or calls[-1])
    net = build_model("cnn")
    net.initialize()
    net.hybridize()
    x = la.array(np.random.default_rng(5).standard_normal((64, 1, 12, 12)).astype("float32"))
    net(x)
    calls.clear()
    return net, x, calls


def test_conv_region_declines_while_contended_and_resumes_after(clock, monkeypatch):
    net, x, calls = _demo_cnn_b64(monkeypatch, threads=2)
    quiet, impls = _profiled(net, x)
    assert calls == [True, True] and "region" in impls
    contention.stalled()
    calls.clear()
    busy, impls = _profiled(net, x)
    assert calls == [False, False] and "region" not in impls and "batch_last" in impls
    np.testing.assert_allclose(busy, quiet, rtol=1e-5, atol=1e-6)
    clock.t = contention.guard().until + 1e-3
    calls.clear()
    again, _ = _profiled(net, x)
    assert calls == [True, True]
    np.testing.assert_array_equal(again, quiet)


def test_a_conv_region_on_one_thread_is_never_guarded(clock, monkeypatch):
    """One thread has no team to wait for: the region runs through a window and is never timed
    (judging its noise once turned the demo CNN's batch-64 region off for 100 ms windows)."""
    net, x, calls = _demo_cnn_b64(monkeypatch, threads=1)
    quiet, impls = _profiled(net, x)
    assert calls == [True, True] and "region" in impls
    assert not contention.QUIET_TIMES.values()  # (never calibrated nor timed)
    contention.stalled()
    calls.clear()
    busy, impls = _profiled(net, x)
    assert calls == [True, True] and "region" in impls
    np.testing.assert_array_equal(busy, quiet)


@pytest.mark.parametrize("case", ["im2col split", "winograd"])
def test_splits_run_on_the_calling_thread_while_contended_with_the_same_values(clock, monkeypatch, case):
    monkeypatch.setattr(la.config, "contention_splits", True)
    monkeypatch.setattr(la.config, "min_split_macs", 0)
    la.set_num_threads(2)
    rng = np.random.default_rng(1)
    if case == "winograd":
        x, w, stride = rng.standard_normal((6, 64, 10, 10)), rng.standard_normal((64, 64, 3, 3)), (1, 1)
    else:
        x, w, stride = rng.standard_normal((7, 5, 12, 12)), rng.standard_normal((6, 5, 3, 3)), (2, 2)
    x, w = x.astype(np.float32), w.astype(np.float32)
    b = rng.standard_normal(w.shape[0]).astype(np.float32)
    splits, ran_on = [], set()
    real = threads.split

    def spy(parts, work):
        splits.append(len(parts))
        real(parts, work)

    monkeypatch.setattr(threads, "split", spy)
    quiet = run_conv2d(np, x, w, b, stride=stride, padding=(1, 1))
    assert splits and max(splits) >= 2
    contention.stalled()
    splits.clear()
    seen = contention.split

    def watched(parts, work):
        seen(parts, lambda p: ran_on.add(threading.get_ident()) or work(p))

    monkeypatch.setattr(contention, "split", watched)
    busy = run_conv2d(np, x, w, b, stride=stride, padding=(1, 1))
    assert splits == [] and ran_on == {threading.get_ident()}
    np.testing.assert_array_equal(busy, quiet)


def test_a_split_that_waits_on_a_held_back_thread_is_a_stall(clock, monkeypatch):
    monkeypatch.setattr(la.config, "contention_splits", True)
    la.set_num_threads(2)
    held = [0.0]

    def fake_split(parts, work):  # the last part on another thread, then waiting ``held`` for it
        for p in parts[:-1]:
            work(p)
        t = threading.Thread(target=work, args=(parts[-1],))
        t.start()
        t.join()
        clock.t += held[0]

    monkeypatch.setattr(threads, "split", fake_split)

    def work(p):  # each part: 1 ms
        clock.t += 1e-3

    contention.split(list(range(4)), work)  # waited 1 ms (the other thread's part): one part's time
    assert contention.quiet()
    held[0] = 0.02
    contention.split(list(range(4)), work)  # waited 21 ms: 21 of this thread's parts
    assert contention.contended()
    done = []
    contention.split(list(range(4)), done.append)  # (contended: in order, here)
    assert done == [0, 1, 2, 3]


def test_calibration_sets_the_one_thread_time_so_a_machine_busy_from_the_start_shows_stalls(clock):
    runs = []

    def one_thread():  # (the first call compiles: 1 s; the second is timed)
        runs.append(1)
        clock.t += 1.0 if len(runs) == 1 else 50e-6

    contention.calibrate("r", one_thread)
    contention.calibrate("r", one_thread)  # (known now: not run again)
    assert len(runs) == 2 and contention.QUIET_TIMES.peek("r") == pytest.approx(50e-6)
    _region(clock, 0.016, key="r")  # the first threaded call already stalls against it
    assert contention.contended()


def test_calibration_needs_the_guard(clock, monkeypatch):
    monkeypatch.setattr(la.config, "contention_guard", False)
    contention.calibrate("r", lambda: pytest.fail("calibrated with the guard off"))
    assert contention.QUIET_TIMES.peek("r") is None


def test_splits_ignore_the_guard_unless_asked(clock, monkeypatch):
    la.set_num_threads(2)
    calls = []
    monkeypatch.setattr(threads, "split", lambda parts, work: calls.append(len(parts)))
    contention.stalled()
    contention.split([0, 1, 2], lambda p: pytest.fail("ran on the calling thread"))
    assert calls == [3]
