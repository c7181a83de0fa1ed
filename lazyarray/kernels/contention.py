"""The contention guard: threaded kernels step aside while another process holds a core.

A numba parallel region (``dense_regions.py``, ``conv_regions.py``) ends at a barrier that waits
for every thread of its team, and a ``threads.split`` waits for every part it handed out. When
another process keeps a core busy, the OS holds one of those threads back for a time slice
(milliseconds), and a region that takes 28 us quiet took 16 ms: the batch-1 MLP ran 95x slower
than NumPy beside a busy core. The threads of GNU OpenMP (numba's ``omp``
layer) already spin briefly and then sleep (``GOMP_SPINCOUNT``, 300k spins by default, far fewer
when the process has more threads than free cores; lazyarray sets no ``OMP_WAIT_POLICY``): the
waiting is not the cost, the thread the OS does not run is.

So each threaded kernel times its own region (two ``time.perf_counter`` calls) and tells the
guard (``region_done``, ``split``), which compares the time with what the region should cost:

* a numba region: the fastest time seen for the same plan (its shapes and threads), kept in
  ``QUIET_TIMES``, first set by the plan's region run on one thread (``calibrate``: a machine busy
  from the start would otherwise only ever show stalled times);
* a split over the pool (``split``; its threads take the next part as they finish, so a thread held
  back leaves more parts to the others, but the caller still waits for the part it holds): the
  time the calling thread spent waiting for the others against the time of one of its own parts,
  measured in the same call.

A region that took more than ``contention_stall_ratio`` times that, and at least
``contention_min_stall_us`` more, stalled: the process is *contended* for a back-off window of
``contention_backoff_ms``, doubled for each stall that follows a window (up to
``contention_max_backoff_ms``), back to the first length once a region after a window runs
quietly. While contended (``quiet()`` is False), the threaded kernels decline at run time: a
numba region returns None and its ``Impl.fallback`` runs (``explain()`` and ``la.profile()`` then
name the fallback, ``nn.dense[gemv]``, ``conv2d[batch_last]``), and, with ``contention_splits`` on
(off by default), a split runs its parts in order on the calling thread with BLAS on one thread
(``split``). Both compute the same values as
the threaded path (the tests check). After the window the next region probes again. The tuning
table's ``contention_guard`` turns it off.

The guard's state (``Guard``: the window's end, its length, the clock) is one ``NamedCache``
entry; the tests replace its ``clock`` to drive it without timing anything.
"""
from __future__ import annotations

import threading
import time

from .. import threads as thread_pool  # (the module, looked up at each call: tests replace its functions)
from ..caches import NamedCache
from ..tuning_table import current

QUIET_TIMES = NamedCache("contention: fastest region times", 512)  # region key -> fastest seconds seen


class Guard:
    """The process's contention state: contended until ``until`` (seconds on ``clock``), the
    current back-off ``window`` (0: none yet), and the count of ``stalls`` seen."""

    __slots__ = ("clock", "until", "window", "stalls")

    def __init__(self, clock=time.perf_counter):
        self.clock = clock
        self.until = float("-inf")
        self.window = 0.0
        self.stalls = 0


GUARD = NamedCache("contention guard", 1)  # None -> the Guard


def guard() -> Guard:
    """The process's ``Guard`` (made at first use)."""
    return GUARD.peek(None) or GUARD.get_or_make(None, Guard)


def quiet() -> bool:
    """True when threaded kernels may run: the guard is off, or no back-off window is open."""
    if not current().contention_guard:
        return True
    g = guard()
    return g.until == float("-inf") or g.clock() >= g.until


def contended() -> bool:
    """True while a back-off window is open (threaded kernels run their one-thread fallbacks)."""
    return not quiet()


def now() -> float:
    """The guard's clock (``time.perf_counter`` unless a test replaced it)."""
    return guard().clock()


def calibrate(key, one_thread) -> None:
    """Where plan ``key`` has no expected time yet (and the guard is on): its time on one thread,
    ``one_thread()`` (the region run on the calling thread alone, no team to wait for), called
    twice (the first call may compile) and the second timed. A region run on more threads should
    cost less; on a machine that is contended from the start the fastest threaded time seen would
    be a stalled one, and no stall would ever show."""
    if QUIET_TIMES.peek(key) is not None or not current().contention_guard:
        return
    one_thread()
    start = now()
    one_thread()
    QUIET_TIMES.put(key, now() - start)


def region_done(key, start: float) -> None:
    """Tell the guard a numba region of plan ``key`` that began at ``start`` (``now()``) ended now."""
    t = current()
    if not t.contention_guard:
        return
    elapsed = now() - start
    best = QUIET_TIMES.peek(key)
    if best is None or elapsed < best:
        QUIET_TIMES.put(key, elapsed)
    if best is not None:
        _judge(elapsed, best, t)


def _judge(elapsed: float, expected: float, t) -> None:
    """Open (or lengthen) a back-off window where ``elapsed`` is a stall against ``expected``."""
    if elapsed > t.contention_stall_ratio * expected and elapsed - expected > t.contention_min_stall_us * 1e-6:
        stalled()
    else:
        g = guard()
        if g.window and g.until != float("-inf") and g.clock() >= g.until + g.window:
            g.window = 0.0  # (a quiet region well after the last window: the next stall starts short)


def stalled() -> None:
    """A region stalled now: contended for the back-off window, doubled when this stall came
    within a window's length of the last window's end."""
    t = current()
    g = guard()
    at = g.clock()
    base = t.contention_backoff_ms * 1e-3
    soon = g.window and at < g.until + g.window
    g.window = min(max(base, 2 * g.window), t.contention_max_backoff_ms * 1e-3) if soon else base
    g.until = at + g.window
    g.stalls += 1


def reset() -> None:
    """Forget every window and quiet time (the tests start from here)."""
    GUARD.clear()
    QUIET_TIMES.clear()


def split(parts: list, work) -> None:
    """``threads.split(parts, work)`` while quiet, its stalls told to the guard; while contended,
    every part in order on this thread, BLAS on one thread (the values are the same: each part
    computes what it computes on any thread). Only with the tuning table's ``contention_splits``
    (off by default: a split's threads take the next part as they finish, so beside a busy core it
    stayed faster than one thread, and stepping aside after its stalls measured slower: see
    ``benchmarks/busy_kernels.py``)."""
    t = current()
    if not (t.contention_guard and t.contention_splits):
        thread_pool.split(parts, work)
        return
    if not quiet():
        with thread_pool.blas_one_thread():
            for p in parts:
                work(p)
        return
    if len(parts) < 2 or thread_pool.num_threads() < 2 or thread_pool.in_pool():
        thread_pool.split(parts, work)
        return
    mine = []  # the wall time of each part this thread ran
    me = threading.get_ident()
    clock = guard().clock

    def timed(p):
        if threading.get_ident() != me:
            work(p)
            return
        t0 = clock()
        work(p)
        mine.append(clock() - t0)

    start = clock()
    thread_pool.split(parts, timed)
    waited = clock() - start - sum(mine)  # (handing out parts, then waiting for the other threads)
    if mine:
        _judge(waited, sum(mine) / len(mine), t)
