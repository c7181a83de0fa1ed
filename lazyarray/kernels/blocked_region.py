"""conv2d ``blocked_region``: ``conv2d[blocked]``'s compiled loop spread over ``la.set_num_threads``'s
threads in one numba parallel region, each thread its share of the images (or, for fewer images
than threads, of an image's output channels in blocks of four).

ResNet's few-filter 3x3 layers (0.6-1.8 M multiply-adds at batch 8, 100-200 us each on one thread)
ran ``blocked`` on one core under two threads, while onnxruntime spread them over both: the two-thread
batch-8 row was the worst of the real models. A Python thread hand-off (``threads.split``: 50-70 us)
costs a third of such a layer; a numba parallel region (``jit.parallel_ready``; its threads spin
between regions, a few microseconds a region, as ``conv_regions.py`` and ``dense_regions.py`` use)
does not. The region's parts call the serial kernel (``conv_blocked``'s, compiled once) on their
ranges ``(first image, end, first channel, end)``: every value is computed as the one-thread loop
computes it, bit for bit ``blocked``'s.

It takes ``blocked``'s case (``conv_blocked.applies``, the plane that fits) with more than one thread
set, at least ``conv_blocked_region_min_macs`` multiply-adds, C-ordered arrays and a planned C-ordered
output (a bound step's; per call a new one), not on one of the pool's threads, ``conv_blocked_region``
on. It runs nothing (None: ``blocked`` runs, the same values) while the contention guard says another
process holds a core (``contention.py``; each region is timed for it, the plan's one-thread time
calibrated at its first call).

The region kernel takes ``conv_blocked``'s residual and relu flag too: ``conv2d_act[write_out_region]`` and
``conv2d_add_relu[write_out_region]`` (write_out's loop over the threads; ``bound_region(relu=True)``,
``bound_residual``), so a two-thread program keeps blocked's write-out (before, it chose ``blocked_region``
and ran the relu or the residual as a pass after it).

On by default (``conv_blocked_region``; it was off after the shared machine's two-thread rows, at load 8-9,
ran worse with it: resnet_mini la / onnxruntime 1.13 -> 2.00x, the region waiting on a thread the OS held
back). Per-call best of 2400 calls at two threads (load 9, the guard off): resnet_mini batch 8 870 -> 684
us; the layers 0.63-0.69x blocked's time at 1.2-1.8 M multiply-adds, 0.82x at 0.59 M, 1.0x at 0.29 M
(``conv_blocked_region_min_macs``, 512K). At load 9 with the guard on it steps aside (windows at their
maximum) and the median call ran 1-3% slower than with the region off.
"""
from __future__ import annotations

import numpy as np

from .. import jit, threads
from ..caches import NamedCache
from ..ops import conv
from . import contention
from .conv_blocked import applies, geometry, make_blocked, no_residual, plane_fits, residual_fits
from .phase_planes import with_fill

PLANS = NamedCache("conv2d blocked-region parts", 256)  # (images, filters, threads) -> parts (P, 4), read-only
KERNEL = NamedCache("conv2d blocked-region kernel", 1)  # the serial kernel -> the compiled region
BLOCK = 4  # output channels the serial loop computes a pass (a channel part is whole blocks of them)


def parts(n: int, o: int, threads: int) -> np.ndarray:
    """``(P, 4)`` ranges ``(i0, i1, o0, o1)`` covering an (n images, o channels) output, about one part
    a thread: the images split evenly where there are as many as threads, else each image's channels
    split in whole blocks of ``BLOCK`` (as few parts as threads allow); none for an empty output."""
    if n * o == 0:
        rows = []
    elif n >= threads:
        per = -(-n // threads)
        rows = [(lo, min(n, lo + per), 0, o) for lo in range(0, n, per)]
    else:
        blocks = -(-o // BLOCK)
        groups = min(blocks, -(-threads // n))
        per = -(-blocks // groups) * BLOCK
        rows = [(i, i + 1, lo, min(o, lo + per)) for i in range(n) for lo in range(0, o, per)]
    a = np.array(rows, np.int64).reshape(-1, 4)
    a.flags.writeable = False
    return a


def _build(serial):
    """The parallel region over ``serial`` (``conv_blocked``'s compiled kernel): one call a part."""
    numba = jit._numba()
    prange = numba.prange

    def run(x, w, b, y, r, relu, cols, taps, g, ranges):  # pragma: no cover  (compiled by numba)
        for p in prange(ranges.shape[0]):
            serial(x, w, b, y, r, relu, cols, taps, g, ranges[p, 0], ranges[p, 1], ranges[p, 2], ranges[p, 3])

    return numba.njit(nogil=True, parallel=True)(run)


def _region():
    """The compiled region (None where compiled kernels or parallel regions are off)."""
    serial = with_fill(make_blocked)
    if serial is None or not jit.parallel_ready():
        return None
    return KERNEL.peek(serial) or KERNEL.get_or_make(serial, _build, serial)


def fits(xp, x, weight, out, groups, macs: int, t) -> bool:
    """Whether the chooser takes ``blocked_region`` for a call ``blocked`` takes (checked by the caller):
    on, more than one thread, ``macs`` at least its minimum, more than one part, C-ordered arrays."""
    n_threads = threads.num_threads()
    if not t.conv_blocked_region or n_threads < 2 or macs < t.conv_blocked_region_min_macs or threads.in_pool():
        return False
    if not x.flags.c_contiguous or (out is not None and not out.flags.c_contiguous):
        return False
    return len(parts(x.shape[0], weight.shape[0], n_threads)) > 1 and jit.parallel_ready()


def _plan(n: int, o: int, n_threads: int) -> np.ndarray:
    key = (n, o, n_threads)
    return PLANS.peek(key) if PLANS.peek(key) is not None else PLANS.get_or_make(key, parts, n, o, n_threads)


def _launch(kern, args, key, n_threads: int) -> None:
    """One region on ``n_threads`` threads, timed for the contention guard (its one-thread time
    calibrated at the plan's first call)."""
    if contention.QUIET_TIMES.peek(key) is None:
        contention.calibrate(key, lambda: _one_thread(kern, args))
    jit.use_threads(n_threads)
    start = contention.now()
    kern(*args)
    contention.region_done(key, start)


def _one_thread(kern, args) -> None:
    jit.use_threads(1)
    kern(*args)


def conv2d_blocked_region(xp, x, weight, bias, stride, padding, dilation, groups, out, residual=None, relu=False):
    """conv2d by ``blocked``'s loop over the threads (None where it does not apply, or while contended:
    ``blocked`` runs); ``residual`` and ``relu``: ``conv_blocked.conv2d_blocked``'s write-out (None where
    the residual does not fit it)."""
    n_threads = threads.num_threads()
    if n_threads < 2 or threads.in_pool() or not contention.quiet() \
            or not applies(xp, x, weight, bias, out, groups, weight.shape[0]) or not x.flags.c_contiguous:
        return None
    ho, wo = conv.out_size(x, weight, stride, padding, dilation)
    kern = _region() if plane_fits(ho, wo) else None
    if kern is None:
        return None
    n, (o, c, kh, kw) = x.shape[0], weight.shape
    shape = (n, o, ho, wo)
    into = out is not None and out.shape == shape and out.flags.c_contiguous
    y = out if into else np.empty(shape, x.dtype)
    if residual is not None and not residual_fits(residual, y):
        return None
    b = np.zeros(0, x.dtype) if bias is None else np.ascontiguousarray(bias.reshape(-1))
    geo = geometry(*x.shape[2:], kh, kw, stride, padding, dilation)
    r = no_residual(y.dtype) if residual is None else residual
    args = (x, np.ascontiguousarray(weight).reshape(o, c, kh * kw), b, y, r, relu, *geo, _plan(n, o, n_threads))
    key = (x.shape, weight.shape, x.dtype, stride, padding, dilation, n_threads, residual is not None, relu)
    _launch(kern, args, key, n_threads)
    if out is None or into:
        return y
    out[...] = y
    return out


def _step(x, weight, bias, stride, padding, dilation, out, relu: bool, residual: bool):
    """``launch(x, w, b, r, out)`` for a compiled step's calls (the kernel, phase tables, parts and the
    weight's (O, C, kh * kw) shape made once): runs the region into a C-ordered ``out`` and returns True,
    or runs nothing and returns False (another memory order, contended, on a pool thread); None where
    this step's arrays would not run the region."""
    n_threads = threads.num_threads()
    if out is None or not (x.flags.c_contiguous and out.flags.c_contiguous) or n_threads < 2 \
            or not applies(np, x, weight, bias, out, 1, weight.shape[0]):
        return None
    ho, wo = conv.out_size(x, weight, stride, padding, dilation)
    kern = _region() if plane_fits(ho, wo) else None
    n, (o, c, kh, kw) = x.shape[0], weight.shape
    if kern is None or out.shape != (n, o, ho, wo):
        return None
    geo = geometry(*x.shape[2:], kh, kw, stride, padding, dilation)
    ranges, no_bias, wshape, none = _plan(n, o, n_threads), np.zeros(0, x.dtype), (o, c, kh * kw), no_residual(x.dtype)
    key = (x.shape, weight.shape, x.dtype, stride, padding, dilation, n_threads, residual, relu)

    def launch(x, w, b, r, out) -> bool:
        if out is None or not (out.flags.c_contiguous and x.flags.c_contiguous and w.flags.c_contiguous) \
                or threads.in_pool() or not contention.quiet():
            return False
        if r is None:
            r = none
        elif not (r.flags.c_contiguous and r.shape == out.shape) or np.may_share_memory(r, out):
            return False
        _launch(kern, (x, w.reshape(wshape), no_bias if b is None else b, out, r, relu, *geo, ranges), key, n_threads)
        return True

    return launch


def bound_region(x, weight, bias, stride, padding, dilation, out, other, relu=False):
    """A compiled step's call of the region (``conv2d.bind_conv2d``; ``conv_act``'s with ``relu``):
    ``fn(x, weight[, bias], out=)`` writes into a C-ordered ``out``; any other call (another memory
    order, no output, contended) goes to ``other`` (the step's serial binding). None where this call
    would not run the region into ``out``."""
    launch = _step(x, weight, bias, stride, padding, dilation, out, relu, False)
    if launch is None:
        return None

    def fn(x, w, b=None, out=None):  # (x, weight[, bias]: as the step passes them)
        if launch(x, w, b, None, out):
            return out
        return other(x, w, b, out=out) if b is not None else other(x, w, out=out)

    return fn


def bound_residual(x, weight, residual, bias, stride, padding, dilation, out, other):
    """``conv_add_relu``'s step: ``fn(x, w, r[, b], out=)`` runs the region with the residual added and
    the relu taken in the write-out into a C-ordered ``out`` (never the residual's memory); any other
    call goes to ``other``. None where this step's arrays would not run the region."""
    if out is None or not residual_fits(residual, out):
        return None
    launch = _step(x, weight, bias, stride, padding, dilation, out, False, True)
    if launch is None:
        return None

    def fn(x, w, r, b=None, out=None):
        if launch(x, w, b, r, out):
            return out
        return other(x, w, r, b, out=out)

    return fn
