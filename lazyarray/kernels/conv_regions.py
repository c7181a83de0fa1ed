"""A batch of small images convolved in one compiled parallel region (``conv_batch_last.conv2d_region``).

The demo CNN at batch 64 is two convolutions of about 0.7 and 2.7 M multiply-adds, 20-60 us
of products each. Splitting one over a Python thread pool costs more than it saves: waking a
thread and waiting for it took 50-70 us on the development machine (``threads.split`` is kept
for a millisecond of work and more). onnxruntime's pool spins instead, and ran that model in
0.15 ms on 2 threads against 0.29 on 1, while ours ran at its one-thread speed.

Here the whole convolution is one numba parallel region (``jit.parallel_ready``), whose threads
spin between regions (a region costs about 3 us after gaps of up to 100 us). The output pixels
are cut into blocks (``blas_threads.region_blocks``), each at most ``SMALL_PRODUCT``
multiply-adds where one pixel allows, so OpenBLAS runs it on its one-thread small-matrix kernel;
each thread then, for its blocks:

1. copies the block's im2col columns, in runs of N values, from the input stored batch last
   ``(C, H, W, N)`` (a C-ordered NCHW input is first copied batch last into scratch by NumPy);
2. multiplies ``W (O, C*kh*kw) @ columns`` with NumPy's own BLAS (``blas_gemm.gemm``, called
   without the GIL) straight into its columns of the batch-last output;
3. adds the bias there.

These are the serial kernel's steps on the same values (im2col copies, the product, then the
bias); the products' column blocks differ, so results equal it to rounding, not bit for bit (the
tests compare the two and a direct sum). Where anything is missing (numba, a thread-safe
threading layer, NumPy's OpenBLAS symbols), or the layout or dtype is another, the caller runs
its serial kernel. On one thread the region runs on the calling thread alone and still saves
the serial kernel's NumPy copies and Python (demo CNN: 230 -> 205 us a call).

Measured on the 2-core development VM (a shared host): while the host is quiet the demo CNN on
2 threads ran 166-177 us a call against 194-210 for the serial kernels; while it is busy both
slow down, the region more (370-450 against 300-320 us), since it waits for its slowest thread,
as onnxruntime's and OpenBLAS's spinning pools do.
"""
from __future__ import annotations

import numpy as np

from .. import jit
from ..caches import NamedCache
from ..threads import blas_one_thread
from . import contention, conv_jit
from .blas_gemm import NO_TRANS, ROW_MAJOR, gemm
from .blas_threads import SMALL_PRODUCT, probed, region_blocks, small_calls_serial

KERNELS = NamedCache("conv2d parallel-region kernels", 2)  # dtype -> the compiled region
PLANS = NamedCache("conv2d parallel-region plans", 256)  # (shapes, dtypes, geometry, threads) -> _plan(...)
_NO_BIAS = {np.dtype(np.float32): np.zeros(0, np.float32), np.dtype(np.float64): np.zeros(0, np.float64)}


def conv2d(x, weight, bias, stride, padding, dilation, out, cols, mem, threads: int) -> bool:
    """``out`` (N, O, Ho, Wo) stored batch last := conv2d(x, weight) + bias, in one parallel
    region on ``threads`` threads; ``cols``: scratch of (C*kh*kw, Ho*Wo*N) values; ``mem``: scratch
    of x's (C, H, W, N) values, used when x is C-ordered NCHW (None when x is batch last). False
    (nothing written) where the compiled kernel does not apply, or while the contention guard says
    another process holds a core (``contention.py``; the region is timed for it where it runs on
    several threads: one thread has no team to wait for, and judging its noise would only turn it off)."""
    guarded = threads > 1
    if not jit.parallel_ready() or (guarded and not contention.quiet()):  # (contended: see contention.py)
        return False
    key = (x.shape, weight.shape, x.dtype, weight.dtype, out.dtype, None if bias is None else bias.dtype,
           *stride, *padding, *dilation, threads)
    plan = PLANS.peek(key)
    if plan is None and jit.in_first_run() and not probed():  # (BLAS not probed yet: a plan not kept)
        plan = _plan(x, weight, bias, out, threads)
    elif plan is None:
        plan = PLANS.get_or_make(key, _plan, x, weight, bias, out, threads)
    if plan is False:
        return False
    kern, blocks, per, serial = plan
    n, c, h, w = x.shape
    o, _, kh, kw = weight.shape
    k, m = c * kh * kw, out.shape[2] * out.shape[3] * n
    if mem is None:
        mem = x.transpose(1, 2, 3, 0)
    else:  # (NumPy's strided copy: a transposing loop in the region ran slower on the demo CNN's input)
        mem[...] = x.transpose(1, 2, 3, 0)
    args = (mem, np.ascontiguousarray(weight.reshape(o, k)), _NO_BIAS[x.dtype] if bias is None else bias,
            cols.reshape(k, m), out.transpose(1, 2, 3, 0).reshape(o, m), out.shape[2], out.shape[3], kh, kw,
            stride[0], stride[1], padding[0], padding[1], dilation[0], dilation[1], bias is not None, per, blocks)
    if not guarded:
        _run(kern, args, serial, threads)
        return True
    if contention.QUIET_TIMES.peek(key) is None:  # (its first call: the one-thread time, see contention.py)
        contention.calibrate(key, lambda: _run(kern, args, serial, 1))
    start = contention.now()
    _run(kern, args, serial, threads)
    contention.region_done(key, start)
    return True


def _run(kern, args, serial, threads):
    jit.use_threads(threads)
    if serial is None:
        kern(*args)
    else:
        with serial:
            kern(*args)


def _plan(x, weight, bias, out, threads):
    """``(kernel, blocks, pixels per block, None or the context that puts BLAS on one thread)`` for
    a call of these shapes and dtypes, or False where the compiled kernel does not apply."""
    dtype = x.dtype
    if dtype not in _NO_BIAS or weight.dtype != dtype or out.dtype != dtype \
            or (bias is not None and (bias.dtype != dtype or bias.ndim != 1)):
        return False
    fn = gemm(dtype)
    if fn is None:
        return False
    n, c = x.shape[:2]
    o, _, kh, kw = weight.shape
    pixels = out.shape[2] * out.shape[3]
    macs = o * c * kh * kw * n  # per output pixel
    blocks = region_blocks(macs, pixels, threads)
    per = -(-pixels // blocks)
    serial = None  # OpenBLAS's small-matrix kernel runs on one thread whatever its setting
    if dtype != np.float32 or macs * per > SMALL_PRODUCT or not small_calls_serial():
        serial = blas_one_thread()  # (each block's product on one BLAS thread: the region's threads share the work)
    return _kernel(dtype, fn), blocks, per, serial


def _kernel(dtype, fn):
    return KERNELS.get_or_make(dtype, _build, dtype, fn)


def _build(dtype, fn):
    """The parallel kernel for ``dtype``, calling ``fn`` (a ctypes ``cblas_?gemm``) per block."""
    numba = jit._numba()
    prange = numba.prange
    one, zero = dtype.type(1), dtype.type(0)
    size = dtype.itemsize

    im2col = jit.compiled(conv_jit._im2col_batch_last, always=True)  # (built in: never None here)

    def block(mem, wmat, bias, cols, out, p0, p1, ho, wo, kh, kw, sh, sw, ph, pw, dh, dw, has_bias):
        # the im2col columns of pixels [p0, p1), then their product and bias
        c_n, n_n = mem.shape[0], mem.shape[3]
        o_n, k_n = wmat.shape
        m_n = cols.shape[1]
        im2col(mem, cols.reshape((c_n, kh, kw, ho, wo, n_n)), sh, sw, ph, pw, dh, dw, zero, p0, p1)
        m0, mb = p0 * n_n, (p1 - p0) * n_n
        fn(ROW_MAJOR, NO_TRANS, NO_TRANS, o_n, mb, k_n, one, wmat.ctypes.data, k_n,
           cols.ctypes.data + size * m0, m_n, zero, out.ctypes.data + size * m0, m_n)
        if has_bias:
            for o in range(o_n):
                bo = bias[o]
                seg = out[o, m0:m0 + mb]
                for j in range(mb):
                    seg[j] += bo

    block = numba.njit(nogil=True)(block)

    def run(mem, wmat, bias, cols, out, ho, wo, kh, kw, sh, sw, ph, pw, dh, dw, has_bias, per, blocks):
        pixels = ho * wo
        for blk in prange(blocks):
            p0 = blk * per
            p1 = min(pixels, p0 + per)
            if p0 < p1:
                block(mem, wmat, bias, cols, out, p0, p1, ho, wo, kh, kw, sh, sw, ph, pw, dh, dw, has_bias)

    return numba.njit(nogil=True, parallel=True)(run)
