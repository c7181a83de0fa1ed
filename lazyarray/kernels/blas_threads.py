"""BLAS threads by work size: a matrix product too small to share runs on one BLAS thread.

OpenBLAS splits a product over all its threads once ``m * n * k`` passes a fixed 262,144
(about 0.5 MFLOP), far below the size where a split pays on a small machine: handing half of a
20-100 us product to a second thread and waiting for it costs more than it saves, and when
another process holds that core the waiting thread spins (measured on the 2-core development
machine: the demo CNN at batch 64 ran 0.45 ms on 2 threads against 0.33 ms on 1, all of it in
its three small products; with the second core busy, a 21 MFLOP product took 16 ms on 2 threads
against 0.3-0.5 ms on 1). onnxruntime sizes its thread split by cost the same way: its time for
that model is the same on 1 and 2 threads.

``one_thread(flops)`` is a context: a product of fewer than ``MIN_PARALLEL_FLOPS`` runs inside
``threads.blas_one_thread()`` (the one switch of BLAS's thread count, shared with the thread splits
of convolutions: counted, so overlapping users restore it once, from any Python thread; without
the ``threads`` extra nothing changes). This module is only the size policy. The setting is
process-wide, as BLAS's own is: a product started meanwhile on another Python thread may run
on fewer threads than it could, never with different values.

Switching is not free: OpenBLAS's ``set_num_threads`` back to 2 cost the demo CNN's batch-64 call
about 20 us on 2 threads (239 against 205-219 us with BLAS held at one thread). OpenBLAS runs a
float32 product of at most ``SMALL_PRODUCT`` multiply-adds on its small-matrix kernels, on one
thread whatever its setting (measured: the demo CNN's three products, 16-19 us on 1 or 2 threads,
with no CPU time on a second thread; its second conv's whole product, 2.65 M multiply-adds, took
both threads). So a caller that says how large its largest single call is (``largest_call``, a
column-blocked product's block) skips the switch where that call is small, once a probe has seen
the small path stay on one thread in this process (``small_calls_serial``: other threads' CPU
time during a few small products, so a busy machine does not fool it).
"""
from __future__ import annotations

import functools
import time

import numpy as np

from .. import jit
from ..caches import NamedCache
from ..threads import blas_one_thread, blas_thread_counts, num_threads
from .blas_gemm import NO_TRANS, ROW_MAJOR, TRANS, gemm
from .blas_guard import UNCHANGED, shared  # (UNCHANGED: BLAS left alone; a hot caller may skip ``with``)
from .blas_known import answer as known_answer
from .blas_known import keep as keep_answer

# Below this many floating-point operations (2 * m * n * k) a product runs on one BLAS thread.
# Measured (benchmarks/onnx.py, 2 cores): the demo CNN's products (0.6, 1.3 and 5.3 MFLOP) each
# ran slower split over 2 threads; the MLP's 33-51 MFLOP layers gain from the split on a quiet machine.
MIN_PARALLEL_FLOPS = 16e6
# ... and below this many OpenBLAS runs on one thread anyway (m * n * k <= 65536 * 4): nothing to
# set, and a batch-1 layer does not pay the two calls into the library.
SERIAL_ANYWAY_FLOPS = 2 * 65536 * 4
# OpenBLAS multiplies float32 products of at most this many multiply-adds (m * n * k) with its
# "small matrix" kernels (no packing, one thread) on the cores that have them (SkylakeX and later).
SMALL_PRODUCT = 100 ** 3
# A compiled parallel region's product (conv_regions.py, dense_regions.py) is cut into at least
# this many blocks per thread (a thread's operands then stay in its cache: the demo CNN's first conv
# on 2 threads took 23 us in 4 blocks, 33-43 in 2)
BLOCKS_PER_THREAD = 2


def one_thread(flops: float, largest_call: float | None = None):
    """A context in which a product of ``flops`` floating-point operations runs on one BLAS thread
    when it is too small to share (``MIN_PARALLEL_FLOPS``); otherwise, for products BLAS runs on
    one thread anyway (``SERIAL_ANYWAY_FLOPS``; float32 calls of at most ``SMALL_PRODUCT``
    multiply-adds where ``small_calls_serial()``, when the caller gives ``largest_call``, the
    multiply-adds of its largest single float32 BLAS call) and while BLAS is on one thread,
    ``UNCHANGED``; a product left to BLAS's threads (``MIN_PARALLEL_FLOPS`` or more) runs in
    ``blas_guard.shared``: behind the contention guard, on one BLAS thread while contended.

    >>> import numpy as np
    >>> a = np.ones((8, 9), np.float32)
    >>> b = np.ones((9, 10000), np.float32)
    >>> with one_thread(2 * 8 * 9 * 10000):
    ...     c = a @ b
    >>> float(c[0, 0])
    9.0
    """
    if SERIAL_ANYWAY_FLOPS < flops < MIN_PARALLEL_FLOPS:
        ctx = blas_one_thread()
        # (BLAS already on one thread: nothing to switch, nothing to probe)
        if not ctx.serial and not serial_anyway(flops, largest_call):
            return ctx
        return UNCHANGED
    return shared(flops) if flops >= MIN_PARALLEL_FLOPS else UNCHANGED


def serial_anyway(flops: float, largest_call: float | None = None) -> bool:
    """Whether BLAS runs a product of ``flops`` on one thread whatever its setting: at most
    ``SERIAL_ANYWAY_FLOPS``, or, where the caller gives ``largest_call`` (the multiply-adds of its
    largest single float32 call), that call of at most ``SMALL_PRODUCT`` where ``small_calls_serial()``.
    Switching BLAS to one thread for such a product only costs (two library calls and the switch
    back, 10-15 us a product in the MLP's backward: ``kernels/matmul.py``)."""
    return flops <= SERIAL_ANYWAY_FLOPS or (largest_call is not None and largest_call <= SMALL_PRODUCT
                                            and small_calls_serial())


def region_blocks(macs_per_item: int, items: int, threads: int) -> int:
    """Blocks to cut ``items`` (a product's output pixels or units, ``macs_per_item`` multiply-adds
    each) into for a parallel region on ``threads`` threads: at most ``SMALL_PRODUCT`` multiply-adds
    each where one item allows (OpenBLAS's one-thread small-matrix kernel), at least
    ``BLOCKS_PER_THREAD`` per thread, their count a multiple of ``threads`` (an even share each),
    at most one per item."""
    blocks = max(BLOCKS_PER_THREAD * threads, -(-macs_per_item * items // SMALL_PRODUCT))
    blocks = -(-blocks // threads) * threads
    return max(1, min(blocks, items))


PROBE = NamedCache("BLAS small-product probe", 1)  # None -> True/False once probed (clear(): probe again)


def small_calls_serial() -> bool:
    """Whether this process's BLAS runs float32 products of at most ``SMALL_PRODUCT``
    multiply-adds on one thread whatever its thread setting: probed once, by the CPU time other
    threads spend while this thread runs such products (``_probe_products``: a column block of a
    batch-last convolution, dense layers' ``x @ w.T`` at a few shapes) for ``PROBE_SECONDS``, and by
    their pace against one BLAS thread's (``SERIAL_PACE``: beside a busy core a waiting worker spends
    little CPU time). False if some other thread worked, or the products ran slower, in every such
    window for ``PROBE_MAX_SECONDS`` (BLAS's own workers spin for a while after a shared product: a
    window after that tells). Not probed in a compiled program's first run
    (``jit.first_run``): False there, unremembered (the switch to one thread, which is right either
    way, costs microseconds a product; the probe 30-250 ms), and the first later run that asks probes.
    A probe in a background thread would not do: it counts every other thread's CPU time as BLAS's.
    Nor one while BLAS is on one thread (``la.set_num_threads(1)``): every product is serial there, so
    it said yes, and after ``la.set_num_threads(2)`` the remembered yes left products that OpenBLAS
    shares (its Haswell kernels have no small-matrix path) on both threads, outside every size policy
    and the contention guard (the batch-8 ConvNeXt's pointwise layers: 150-600 ms calls against 2 ms
    on a loaded machine). Unremembered there: True on ``la.set_num_threads(1)`` (NumPy's BLAS was set to
    one thread with it: its products are serial, and a plan for one thread keeps no switch), else False
    (``probe_tells``: some BLAS library on one thread, another maybe not). Where the answer is known
    without timing (``blas_known.answer``: the library's, e.g. no on OpenBLAS's Haswell kernels, or a
    probe's answer kept for this machine, its libraries and thread counts) there is no probe, in a
    first run too; the probe's answer is kept for the next process (``_probe``)."""
    found = PROBE.peek(None)
    if found is not None:
        return found
    if num_threads() == 1:
        return True
    if not all((n or 1) > 1 for n in blas_thread_counts() or [2]):
        return False
    found = known_answer()  # (the library's, or this machine's kept probe: no timing, so a first run may ask)
    if found is not None:
        PROBE.put(None, found)
        return found
    return PROBE.get_or_make(None, _probe) if probe_tells() else False


def probe_tells() -> bool:
    """Whether a probe now would find what BLAS does on several threads: not in a compiled program's
    first run (``jit.first_run``), and every BLAS library on more than one thread (threadpoolctl's
    counts; without threadpoolctl, unknown: the probe runs). Every one: a library loaded after
    ``la.set_num_threads(1)`` keeps its own count (SciPy's OpenBLAS, loaded by onnxruntime's
    benchmark, stayed on 2 beside NumPy's on 1), and a probe then multiplied on NumPy's one thread."""
    return not jit.in_first_run() and all((n or 1) > 1 for n in blas_thread_counts() or [2])


def probed() -> bool:
    """Whether ``small_calls_serial`` has its answer: a plan that keeps an answer must not keep the
    first run's unremembered False (``jit.first_run``)."""
    return PROBE.peek(None) is not None


ROW_PROBE = NamedCache("BLAS one-row product probe", 1)  # None -> True/False once probed


def row_calls_serial() -> bool:
    """Whether this process's BLAS runs one-row float32 products (``cblas_sgemm`` with M = 1, the blocks
    of ``dense_regions``' batch-1 layers) on one thread whatever its thread setting: yes where
    ``small_calls_serial``; else probed once in this process as that probe measures (``_row_products``),
    where a probe tells (``probe_tells``; unremembered False where not). OpenBLAS decides per call: on the
    AMD EPYC here its SkylakeX kernels share some small products over two threads (so not every small
    product is serial) and run these on one."""
    if small_calls_serial():
        return True
    found = ROW_PROBE.peek(None)
    if found is not None:
        return found
    if not probe_tells():
        return False
    return ROW_PROBE.get_or_make(None, _row_probe)


def row_probed() -> bool:
    """Whether ``row_calls_serial`` has its answer (as ``probed``)."""
    return probed() and (PROBE.peek(None) or ROW_PROBE.peek(None) is not None)


def _row_probe() -> bool:
    calls = _row_products()
    return bool(calls) and _measure(calls)


# The probe multiplies for at least this long: Linux adds another running thread's CPU time to the
# process clock at its scheduler ticks (4-10 ms), so over the 0.85 ms of 20 products a thread hashing
# without the GIL the whole time added nothing (tests/kernels/test_blas_threads.py)
PROBE_SECONDS = 0.03
# ... and tries again, window after window, for up to this long before it says no: after a product
# BLAS shared, OpenBLAS's worker threads spin waiting for more work for about 0.1 s (measured here:
# 110 ms; its THREAD_TIMEOUT, 2^28 cycles) and that CPU time looks like a small product's share. A
# probe started inside a training step, just after the layers' large products, saw that and said no,
# so every small product of the step paid the switch (benchmarks/training_loop.py at batch 64).
PROBE_MAX_SECONDS = 0.25
# A window counts as serial only where its products ran at most this much slower than on one BLAS thread
# (``_measure``): the probe once said yes on this machine while another process kept a core busy (an AMD EPYC
# whose OpenBLAS shares these products), the answer was kept, and a ViT's batch-8 call beside the busy core
# took 8.4 ms instead of 0.31 (its small products left on BLAS's two threads, outside every guard)
SERIAL_PACE = 1.5


def _probe() -> bool:
    """The probe (``small_calls_serial``), its answer kept for this machine (``blas_known.keep``)."""
    found = _measure()
    keep_answer(found)
    return found


def _probe_products() -> list:
    """The probe's products (calls of ``np.matmul``, their operands in ``args``), each at most ``SMALL_PRODUCT`` float32 multiply-adds: a column block of a
    batch-last convolution, and dense layers' ``x @ w.T`` through the weight's transposed view and through a
    packed copy (``ops/weight_pack.py``) at a few shapes (a small ViT's at batch 8: 136 rows of 32 by 128 and of
    128 by 32). OpenBLAS decides per call whether its one-thread "small matrix" kernel takes a product (by its
    sizes and transposes): a BLAS that shares any of these is not one whose small products are serial."""
    a = np.ones((16, 72), np.float32)
    b = np.ones((72, 2048), np.float32)[:, :868]  # (a column block: 16 * 72 * 868 = 1.0 M)
    pairs = [(a, b)]
    for rows, k, units in ((64, 144, 32), (136, 32, 128), (136, 128, 32)):
        x, w = np.ones((rows, k), np.float32), np.ones((units, k), np.float32)
        pairs += [(x, w.T), (x, np.ascontiguousarray(w.T))]
    return [functools.partial(np.matmul, a, b) for a, b in pairs]


def _row_products() -> list:
    """The row probe's products (``row_calls_serial``): ``cblas_sgemm`` of one row by blocks of a weight's
    units, as ``dense_regions``' blocks call it, at a few sizes; [] without the library's function."""
    fn = gemm(np.float32)
    if fn is None:
        return []
    calls = []
    one, zero = np.float32(1), np.float32(0)
    for k, units in ((784, 128), (512, 64), (2048, 64)):
        x, w, y = np.ones((1, k), np.float32), np.ones((units, k), np.float32), np.empty((1, units), np.float32)
        call = functools.partial(fn, ROW_MAJOR, NO_TRANS, TRANS, 1, units, k, one, x.ctypes.data, k,
                                 w.ctypes.data, k, zero, y.ctypes.data, units)
        call.arrays = (x, w, y)  # (alive while the call is: it holds their addresses)
        calls.append(call)
    return calls


def _measure(calls=None) -> bool:
    calls = _probe_products() if calls is None else calls
    _products(calls)  # (BLAS's threads started before counting)
    with blas_one_thread():
        alone = min(_timed_products(calls) for _ in range(5))
    end = time.perf_counter() + PROBE_MAX_SECONDS
    while True:
        own, total, start, rounds = time.thread_time(), time.process_time(), time.perf_counter(), 0
        while time.perf_counter() - start < PROBE_SECONDS:
            _products(calls)
            rounds += 1
        wall = time.perf_counter() - start
        own, total = time.thread_time() - own, time.process_time() - total
        # (no other thread worked, and the products took what they take on one thread: they ran on this one.
        # Beside a busy core the first alone is not enough: a worker BLAS gave a share to waited for its core
        # while this thread spun on, the share's few microseconds under a tenth of the spin)
        if total - own <= 0.1 * own and wall / rounds <= SERIAL_PACE * alone:
            return True
        if time.perf_counter() >= end:
            return False


def _products(calls) -> None:
    for call in calls:
        call()


def _timed_products(calls) -> float:
    start = time.perf_counter()
    _products(calls)
    return time.perf_counter() - start
