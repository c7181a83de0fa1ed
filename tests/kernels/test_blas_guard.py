"""kernels/blas_guard.py and the BLAS probe's rule (kernels/blas_threads.py): a product left to
BLAS's threads runs behind the contention guard (timed while quiet, a stall opens a window, on one
BLAS thread while contended, the same values), and the small-product probe neither runs nor
remembers while a BLAS library is on one thread. Driven by a fake clock and fake thread counts: no
timing is asserted."""
from __future__ import annotations

import os

import numpy as np
import pytest

import lazyarray as la
from lazyarray import threads
from lazyarray.caches import NamedCache
from lazyarray.kernels import blas_guard, blas_threads, contention, dense
from lazyarray.threads import blas_changed, blas_thread_counts

threadpoolctl = pytest.importorskip("threadpoolctl")


class Clock:
    """A clock the test moves by hand (seconds)."""

    def __init__(self):
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


@pytest.fixture
def clock(monkeypatch):
    """The guard on, fresh, on a fake clock, two threads set (BLAS too), BLAS able to run two."""
    monkeypatch.setattr(la.config, "contention_guard", True)
    monkeypatch.setattr(la.config, "contention_blas", True)
    la.set_num_threads(2)
    if not blas_thread_counts() or min(n or 1 for n in blas_thread_counts()) < 2:
        la.set_num_threads(os.cpu_count() or 1)
        pytest.skip("BLAS cannot run 2 threads here")
    contention.reset()
    wall = Clock()
    contention.guard().clock = wall
    yield wall
    contention.reset()
    la.set_num_threads(os.cpu_count() or 1)


def test_a_large_product_is_shared_and_timed(clock):
    ctx = blas_threads.one_thread(blas_threads.MIN_PARALLEL_FLOPS)
    assert isinstance(ctx, blas_guard.Shared) and ctx.key == ("blas", blas_threads.MIN_PARALLEL_FLOPS, 2)
    before = blas_thread_counts()
    with ctx:
        assert blas_thread_counts() == before  # (quiet: BLAS keeps its threads)
        clock.t += 300e-6
    assert contention.QUIET_TIMES.peek(ctx.key) == pytest.approx(300e-6)
    assert contention.quiet() and contention.guard().stalls == 0


def test_a_stalled_product_opens_a_window_and_the_next_runs_on_one_blas_thread(clock):
    flops = 4 * blas_threads.MIN_PARALLEL_FLOPS
    for seconds in (300e-6, 0.02):  # (its quiet time, then a stall: 66x and 20 ms more)
        with blas_threads.one_thread(flops):
            clock.t += seconds
    assert contention.contended() and contention.guard().stalls == 1
    before = blas_thread_counts()
    with blas_threads.one_thread(flops) as ctx:
        assert ctx.serial is not None and blas_thread_counts() == [1] * len(before)
        clock.t += 0.02  # (not judged: it ran on one thread)
    assert blas_thread_counts() == before and contention.guard().stalls == 1
    clock.t += 0.2  # (the window is over: shared again)
    with blas_threads.one_thread(flops) as ctx:
        assert ctx.serial is None and blas_thread_counts() == before


@pytest.mark.parametrize("setting", ["guard off", "contention_blas off (the default)", "one thread", "in the pool",
                                     "small"])
def test_nothing_is_timed_or_switched_where_nothing_may_stall(clock, monkeypatch, setting):
    flops = blas_threads.MIN_PARALLEL_FLOPS
    if setting == "guard off":
        monkeypatch.setattr(la.config, "contention_guard", False)
    elif setting.startswith("contention_blas"):
        monkeypatch.setattr(la.config, "contention_blas", la.tuning_table.DEFAULTS["contention_blas"])
    elif setting == "one thread":
        la.set_num_threads(1)
    elif setting == "in the pool":
        monkeypatch.setattr(threads, "in_pool", lambda: True)
    else:
        flops = blas_threads.SERIAL_ANYWAY_FLOPS
    assert blas_threads.one_thread(flops) is blas_threads.UNCHANGED
    assert blas_guard.shared(flops) is blas_threads.UNCHANGED or setting == "small"


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("layout", ["contiguous", "view", "empty"])
def test_a_large_dense_layer_contended_or_not(clock, dtype, layout):
    """``nn.dense[stack]`` of a product over ``MIN_PARALLEL_FLOPS``: the same call on BLAS's threads and,
    while contended, on one (a strided view of x, and rows of none, too): float64's bits, float32's
    within its rounding of the sum."""
    rng = np.random.default_rng(0)
    rows = {"contiguous": 512, "view": 512, "empty": 0}[layout]
    x = rng.standard_normal((rows * 2 if layout == "view" else rows, 256)).astype(dtype)
    x = x[::2] if layout == "view" else x
    w, b = rng.standard_normal((256, 256)).astype(dtype), rng.standard_normal(256).astype(dtype)
    quiet = dense._stack(np, x, w, b, np.empty((rows, 256), dtype))
    contention.stalled()
    assert contention.contended()
    busy = dense._stack(np, x, w, b, np.empty((rows, 256), dtype))
    if dtype == "float64":
        np.testing.assert_array_equal(quiet, busy)
    else:  # (OpenBLAS's edge kernels: float32's last bits differ on one thread and two, see the module)
        scale = np.abs(x) @ np.abs(w).T + np.abs(b)
        assert np.all(np.abs(quiet - busy) <= 4 * 256 * np.finfo(np.float32).eps * scale)
    np.testing.assert_allclose(quiet, x @ w.T + b, rtol=1e-4 if dtype == "float32" else 1e-10, atol=1e-4)


def test_the_probe_waits_for_blas_on_several_threads(monkeypatch):
    """While a BLAS library is on one thread (``la.set_num_threads(1)``, or SciPy's OpenBLAS on 2 beside
    NumPy's on 1) every product is serial: a probe would say yes and the yes would outlive the setting.
    No probe then, False unremembered (True on one thread set: serial there, and unremembered too); with
    every library on several threads it probes and remembers."""
    monkeypatch.setattr(blas_threads, "PROBE", NamedCache("test probe", 1))
    monkeypatch.setattr(blas_threads, "known_answer", lambda: None)  # (nothing known without the probe)
    calls = []
    monkeypatch.setattr(blas_threads, "_probe", lambda: calls.append(1) or True)
    monkeypatch.setattr(blas_threads, "num_threads", lambda: 1)
    monkeypatch.setattr(blas_threads, "blas_thread_counts", lambda: [1])
    assert blas_threads.small_calls_serial() is True and calls == [] and blas_threads.PROBE.peek(None) is None
    monkeypatch.setattr(blas_threads, "num_threads", lambda: 2)
    for counts in ([1], [2, 1], [1, 2], [None]):
        monkeypatch.setattr(blas_threads, "blas_thread_counts", lambda counts=counts: counts)
        assert not blas_threads.probe_tells()
        assert blas_threads.small_calls_serial() is False
        assert not blas_threads.serial_anyway(2 * 100 ** 3, 100 ** 3)
    assert calls == [] and blas_threads.PROBE.peek(None) is None
    monkeypatch.setattr(blas_threads, "blas_thread_counts", lambda: [2, 2])
    assert blas_threads.probe_tells()
    assert blas_threads.small_calls_serial() is True and calls == [1]
    monkeypatch.setattr(blas_threads, "blas_thread_counts", lambda: [1])
    assert blas_threads.small_calls_serial() is True and calls == [1]  # (a several-thread answer holds)


def test_after_one_thread_the_probe_does_not_leave_small_products_on_two(monkeypatch):
    """The ConvNeXt's case: a process that first runs on one thread, then on two. A small product
    asked about on one thread does not fix the answer for two (here the probe's real answer is
    replaced by False, as it is on a machine whose BLAS shares such products)."""
    monkeypatch.setattr(blas_threads, "PROBE", NamedCache("test probe", 1))
    monkeypatch.setattr(blas_threads, "_probe", lambda: False)
    monkeypatch.setattr(blas_threads, "known_answer", lambda: None)  # (not the library's or this machine's)
    try:
        la.set_num_threads(1)
        blas_changed()
        blas_threads.serial_anyway(2 * 100 ** 3, 100 ** 3)
        la.set_num_threads(2)
        if min((n or 1) for n in blas_thread_counts() or [1]) < 2:
            pytest.skip("BLAS cannot run 2 threads here")
        assert blas_threads.serial_anyway(2 * 100 ** 3, 100 ** 3) is False
        assert blas_threads.one_thread(2 * 100 ** 3, 100 ** 3) is threads.blas_one_thread()
    finally:
        la.set_num_threads(os.cpu_count() or 1)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("impl", ["rows", "units_major"])
def test_rows_and_units_major_take_the_size_policy(monkeypatch, dtype, impl):
    """``nn.dense[rows]`` (no planned output: an eager call) and ``[units_major]`` of a 1 MFLOP product on
    two threads run it on one BLAS thread, as ``stack`` and ``gemm`` do (the probe's answer replaced by
    False, as on a machine whose BLAS shares such products); the values are the reference's."""
    la.set_num_threads(2)
    try:
        if min((n or 1) for n in blas_thread_counts() or [1]) < 2:
            pytest.skip("BLAS cannot run 2 threads here")
        monkeypatch.setattr(blas_threads, "PROBE", NamedCache("test probe", 1))
        monkeypatch.setattr(blas_threads, "_probe", lambda: False)
        monkeypatch.setattr(blas_threads, "known_answer", lambda: None)  # (not the library's or this machine's)
        seen = []

        class Spy:
            def matmul(self, *a, **kw):
                seen.append(max(blas_thread_counts()))
                return np.matmul(*a, **kw)
        rng = np.random.default_rng(2)
        x = rng.standard_normal((8, 8, 8, 16) if impl == "rows" else (512, 16)).astype(dtype)
        w, b = rng.standard_normal((64, 16)).astype(dtype), rng.standard_normal(64).astype(dtype)
        out = None if impl == "rows" else np.empty((64, 512), dtype).T  # (units-major: its transpose C-ordered)
        assert dense.choose_dense(np, x, w, out, la.config).impl.name == impl
        y = {"rows": dense._rows, "units_major": dense._units_major}[impl](Spy(), x, w, b, out)
        np.testing.assert_allclose(y, x @ w.T + b, rtol=1e-5, atol=1e-5)
        assert seen == [1]
    finally:
        la.set_num_threads(os.cpu_count() or 1)
