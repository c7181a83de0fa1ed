"""A one-row dense layer (batch-1 inference) split over threads by output units, in one compiled
parallel region (``nn._dense``'s short path).

At batch 1 a dense layer is a matrix-vector product: it reads the whole weight once and does
two flops per value, so its time is the weight's trip from memory or the shared L3 (the MLP's
(512, 784) float32 weight, 1.6 MB, is larger than a core's 1 MB L2). OpenBLAS runs it no faster
on 2 threads than on 1 (measured: 36 us for the MLP's two hidden layers either way), and a
Python thread hand-off (50-70 us here) costs more than the product. In a numba parallel region
(``jit.parallel_ready``; its threads spin, a region costs about 3 us) each thread multiplies the
rows of its blocks of units with NumPy's own BLAS (``blas_gemm.gemm``, an ``M = 1`` product per
block, small enough for OpenBLAS's one-thread kernel), and each core's share of the weight stays
in its own L2 from call to call. Measured on the development machine, 2 threads: (512, 784)
21.6 -> 12.5 us, (512, 512) 12.1 -> 10.5 us; the two hidden layers and the output layer together
36-46 -> 25-29 us.

Values equal the serial product's to rounding (the blocks' products sum in OpenBLAS's gemm order,
not gemv's). Only float32 weights of at least ``MIN_WEIGHT_BYTES`` on more than one thread, with
C-ordered operands, take it; everything else runs the caller's ``x.dot(w.T)``.
"""
from __future__ import annotations

import numpy as np

from .. import jit, threads
from ..caches import NamedCache
from ..tuning_table import current
from . import contention
from .blas_gemm import NO_TRANS, ROW_MAJOR, TRANS, gemm
from .blas_threads import SMALL_PRODUCT, region_blocks, row_calls_serial, row_probed

# Smaller weights gain less than a region costs (a (512, 512) float32 weight, 1 MiB, gains 1-2 us):
# the tuning table's ``dense_region_min_weight_bytes``; ``dense_region=False`` turns regions off
# (the tests and benchmarks compare both paths).

_F32 = np.dtype(np.float32)
PLANS = NamedCache("dense parallel-region plans", 256)  # (weight shape, threads) -> (kernel, blocks, per) or False
KERNEL = NamedCache("dense parallel-region kernel", 1)  # None -> the compiled region


def dense_row(x, weight, out) -> bool:
    """``out (1, units) := x (1, k) @ weight.T`` over ``la.set_num_threads``'s threads; False
    (nothing written) where this does not apply: one thread set, called from one of the pool's
    threads (no nested hand-offs), other dtypes or layouts, or while the contention guard says
    another process holds a core (``contention.py``; the region is timed for it). The caller skips weights under
    ``dense_region_min_weight_bytes`` before calling (a batch-1 layer's Python stays lean)."""
    n = threads.num_threads()
    if n < 2 or not current().dense_region or x.dtype != _F32 or weight.dtype != _F32 or out.dtype != _F32 \
            or not (weight.flags.c_contiguous and x.flags.c_contiguous and out.flags.c_contiguous) \
            or threads.in_pool() or not jit.parallel_ready() or not contention.quiet():
        return False  # (contended: another process holds a core, see contention.py)
    key = (weight.shape, n)
    plan = PLANS.peek(key)
    if plan is None:
        if jit.in_first_run() and not row_probed():  # (no region before the BLAS probe: a later run plans)
            return False
        plan = PLANS.get_or_make(key, _plan, weight.shape, n)
    if plan is False:
        return False
    kern, blocks, per = plan
    if contention.QUIET_TIMES.peek(key) is None:  # (its first call: the one-thread time, see contention.py)
        contention.calibrate(key, lambda: _one_thread(kern, x, weight, out, per, blocks))
    jit.use_threads(n)
    start = contention.now()
    kern(x, weight, out, per, blocks)
    contention.region_done(key, start)
    return True


def _one_thread(kern, *args):
    jit.use_threads(1)
    kern(*args)


def _plan(shape, threads):
    fn = gemm(_F32)
    units, k = shape
    blocks = region_blocks(k, units, threads)
    per = -(-units // blocks)
    # (each block's one-row product must run on one BLAS thread: two threads each calling a threaded
    # product fought over OpenBLAS's pool; switching BLAS to one thread costs more than a batch-1 layer)
    if fn is None or k * per > SMALL_PRODUCT or not row_calls_serial():
        return False
    return KERNEL.get_or_make(None, _build, fn), blocks, per


def _build(fn):
    """The parallel kernel, calling ``fn`` (a ctypes ``cblas_sgemm``) per block of units."""
    numba = jit._numba()
    prange = numba.prange
    one, zero = np.float32(1), np.float32(0)

    def part(x, w, y, lo, hi):
        k = w.shape[1]
        fn(ROW_MAJOR, NO_TRANS, TRANS, 1, hi - lo, k, one, x.ctypes.data, k, w.ctypes.data + 4 * lo * k, k,
           zero, y.ctypes.data + 4 * lo, y.shape[1])

    part = numba.njit(nogil=True)(part)

    def run(x, w, y, per, blocks):
        units = w.shape[0]
        for b in prange(blocks):
            lo = b * per
            hi = min(units, lo + per)
            if lo < hi:
                part(x, w, y, lo, hi)

    return numba.njit(nogil=True, parallel=True)(run)
