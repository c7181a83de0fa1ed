"""A product BLAS shares over its threads, behind the contention guard (``contention.py``).

OpenBLAS splits a product over all its threads and the calling thread waits for the others at
the end. Beside a process that keeps a core busy the OS holds one of them back for a time slice:
measured on the 2-core development machine, the batch-8 ConvNeXt's pointwise layers (``nn.dense``
of (512, 64) @ (64, 256), 17 MFLOP, above ``blas_threads.MIN_PARALLEL_FLOPS``) took 20-30 ms a
product on two BLAS threads against about 0.3 ms quiet, and the model's call 150-600 ms against
2 ms (20-30x its quiet one-thread time: ``benchmarks/real_models.py --busy``). The numba regions
and the splits over the pool already stepped aside; BLAS's own threads did not.

``shared(flops)`` is the context such a product runs in (``blas_threads.one_thread`` gives it for
the products it leaves to BLAS's threads, ``matmul[shared_blas]`` for its large ones). While the
guard is quiet it times the product and tells the guard (``contention.region_done``, plan key
``("blas", flops, threads)``), so a stalled product opens a back-off window as a stalled region
does; while contended the product runs on one BLAS thread (``threads.blas_one_thread``). The
plan's expected time is the fastest it took (no one-thread calibration as the numba regions have,
``contention.calibrate``: beside a busy core most shared products still ran at their quiet time,
58 us for the ConvNeXt's, and only some waited 5-100 ms for the thread held back, so the fastest is
a quiet one). Values: the same call either way, float64 the same bits on one thread or two, but
float32 not (OpenBLAS splits a product's rows and columns among its threads, never the sum, yet the
rows at a thread's edge take other micro-kernels: (512, 256) @ (256, 256) differed in 6% of its
elements, by at most 1e-6 relative, a float32 rounding of the sum). So it is off by default, the
tuning table's ``contention_blas``: on, a float32 product's last bits hang on the guard's state.

Most such products of ``nn.dense`` and ``matmul`` no longer reach BLAS's threads: ``blas_rows.py`` runs them
in row blocks over the pool, each on one BLAS thread (one BLAS thread's values whatever the thread count
or the guard's state); this context is for the rest (fewer rows than two even blocks, a units-major
output, the convolutions' products, ``blas_row_blocks`` off).

The context is ``blas_threads.UNCHANGED`` (nothing timed, nothing switched) where the guard or
``contention_blas`` is off,
one thread is set, BLAS is on one thread already, or this is one of the pool's threads (a split's
part, BLAS already held at one thread).
"""
from __future__ import annotations

from .. import threads as thread_pool  # (the module, looked up at each call: tests replace its functions)
from ..tuning_table import current
from . import contention


class _Unchanged:
    __slots__ = ()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


UNCHANGED = _Unchanged()  # what ``shared`` gives when BLAS is left alone (a hot caller may skip ``with``)


class Shared:
    """The context of one product of plan ``key`` on BLAS's threads: timed for the guard while quiet,
    on one BLAS thread (``serial``) while contended."""

    __slots__ = ("key", "start", "serial")

    def __init__(self, key):
        self.key = key
        self.start = 0.0
        self.serial = None

    def __enter__(self):
        if contention.contended():
            self.serial = thread_pool.blas_one_thread()
            self.serial.__enter__()
        self.start = contention.now()
        return self

    def __exit__(self, exc_type, *exc):
        if self.serial is not None:
            self.serial.__exit__(exc_type, *exc)
        elif exc_type is None:
            contention.region_done(self.key, self.start)
        return False


def shared(flops: float):
    """The context for a product of ``flops`` floating-point operations left to BLAS's threads:
    ``Shared`` (timed for the contention guard, on one BLAS thread while contended), or
    ``UNCHANGED`` where nothing may stall (see the module)."""
    n = thread_pool.num_threads()
    t = current()
    if n < 2 or not (t.contention_guard and t.contention_blas) or thread_pool.in_pool() \
            or thread_pool.blas_one_thread().serial:
        return UNCHANGED
    return Shared(("blas", flops, n))
