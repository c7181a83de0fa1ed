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
"""
from __future__ import annotations

from ..threads import blas_one_thread

# Below this many floating-point operations (2 * m * n * k) a product runs on one BLAS thread.
# Measured (benchmarks/onnx.py, 2 cores): the demo CNN's products (0.6, 1.3 and 5.3 MFLOP) each
# ran slower split over 2 threads; the MLP's 33-51 MFLOP layers gain from the split on a quiet machine.
MIN_PARALLEL_FLOPS = 16e6
# ... and below this many OpenBLAS runs on one thread anyway (m * n * k <= 65536 * 4): nothing to
# set, and a batch-1 layer does not pay the two calls into the library.
SERIAL_ANYWAY_FLOPS = 2 * 65536 * 4


class _Unchanged:
    __slots__ = ()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


UNCHANGED = _Unchanged()  # what ``one_thread`` gives when BLAS is left alone (a hot caller may skip ``with``)


def one_thread(flops: float):
    """A context in which a product of ``flops`` floating-point operations runs on one BLAS thread
    when it is too small to share (``MIN_PARALLEL_FLOPS``); otherwise, for products BLAS runs on
    one thread anyway (``SERIAL_ANYWAY_FLOPS``) and while BLAS is on one thread, ``UNCHANGED``.

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
        if not ctx.serial:  # (BLAS already on one thread: nothing to switch)
            return ctx
    return UNCHANGED
