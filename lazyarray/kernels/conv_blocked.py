"""conv2d ``blocked``: a convolution of few filters (a kernel larger than 1x1, no groups) as one compiled
loop per image over zero-padded phase planes, four output channels by three taps a pass.

Issue #35: ResNet's 3x3 layers of 8-16 filters at batch 8 ran as ``im2col_compiled`` (the columns,
then one ``W (O, C*9) @ cols (C*9, Ho*Wo)`` product per image) at about 20 GFLOP/s: a product only
8-16 rows tall is thin for OpenBLAS. ``blocked`` copies each input plane into zero-padded phase planes
(``phase_planes``, as ``direct``'s loop does) and, per block of four output channels, per input
channel and per three taps, makes one pass over the flat (row-padded) output plane, reading three
slices of a phase plane and adding their products with the block's twelve weights to four
accumulator rows: four outputs a load of each input value, twelve multiply-adds a pass where
``direct`` makes four (one output channel a pass). The flat length is rounded up to 32 values (the
phase planes padded with zeros past their end), so the vectorized loop runs whole, without the scalar
tail that cost a short plane a tenth of its values. Measured (one thread, CPU time, float32):
ResNet's (8, 8, 16, 16) x (8, 8, 3, 3) layer 245 -> 131 us, its (8, 3, 32, 32) stem 318 -> 171 us,
its (8, 16, 8, 8) x (16, 16, 3, 3) layer 228 -> 170 us; 16-64 channels at 16 x 16 ran 0.4x
``im2col_compiled``'s time, 32-64 channels at 8 x 8 about as fast (float64 at 64 filters slower:
``conv_blocked_max_filters``, 32, bounds the filters).

Values: the products summed in another order than BLAS's (input channel, then taps in threes, each
multiply-add contracted, ``jit.contracted``): within float rounding of the reference (rtol 1e-5
float32, 1e-12 float64), not bit for bit; the bias added last, as the reference adds it. It takes
NumPy float32/float64 arrays of one dtype, numba on, ``groups == 1``, a kernel of more than one tap,
output planes of ``PLANE_MIN_PIXELS`` pixels and two rows or more, neither array stored batch last
(``batch_last`` and ``region`` are made for those); a non-C-ordered input is copied once.
"""
from __future__ import annotations

import functools

import numpy as np

from .. import jit
from ..ops import conv
from .conv_direct import PLANE_MIN_PIXELS, images_c_ordered
from .covering_view import covering
from .depthwise import FLOATS
from .phase_planes import phase_tables, with_fill

ROUND = 16  # (the flat loop's length a multiple of this: 2 vectors of 8 float32 values; 32 ran 12-14% slower on 8 x 8 planes)


def _pass3(a0, a1, a2, a3, s0, s1, s2, u0, u1, u2, u3, tap):  # pragma: no cover  (compiled by numba, inlined)
    """Four accumulator rows ``a0..a3`` += three tap slices ``s0..s2`` times the weights ``uk[tap:tap + 3]``
    (``uk``: output channel k's taps of one input channel)."""
    w00, w01, w02 = u0[tap], u0[tap + 1], u0[tap + 2]
    w10, w11, w12 = u1[tap], u1[tap + 1], u1[tap + 2]
    w20, w21, w22 = u2[tap], u2[tap + 1], u2[tap + 2]
    w30, w31, w32 = u3[tap], u3[tap + 1], u3[tap + 2]
    for q in range(a0.shape[0]):
        x0, x1, x2 = s0[q], s1[q], s2[q]
        a0[q] = a0[q] + x0 * w00 + x1 * w01 + x2 * w02
        a1[q] = a1[q] + x0 * w10 + x1 * w11 + x2 * w12
        a2[q] = a2[q] + x0 * w20 + x1 * w21 + x2 * w22
        a3[q] = a3[q] + x0 * w30 + x1 * w31 + x2 * w32


def _pass1(a, src, wv):  # pragma: no cover  (compiled by numba, inlined)
    """One accumulator row ``a`` += one tap slice ``src`` times its weight ``wv`` (``conv1d_rows``'s)."""
    for q in range(a.shape[0]):
        a[q] = a[q] + src[q] * wv


def _pass4(a0, a1, a2, a3, src, w0, w1, w2, w3):  # pragma: no cover  (compiled by numba, inlined)
    """Four accumulator rows ``a0..a3`` += one tap slice ``src`` times their weights ``w0..w3`` (each row's
    sums as ``_pass1``'s, one pass instead of four)."""
    for q in range(a0.shape[0]):
        x = src[q]
        a0[q] = a0[q] + x * w0
        a1[q] = a1[q] + x * w1
        a2[q] = a2[q] + x * w2
        a3[q] = a3[q] + x * w3


def _add_relu(yr, ar, rr, bo, zero):  # pragma: no cover  (compiled by numba, inlined)
    """``yr = maximum((ar + bo) + rr, 0)``, each sum rounded in the dtype as conv2d's bias, ``add`` and
    ``relu`` round them (a NaN stays; ``bo`` zero for no bias: ``relu`` takes either zero to +0). Each
    ``rr[q]`` is read before ``yr[q]`` is written: ``rr`` may be ``yr``."""
    for q in range(yr.shape[0]):
        u = (ar[q] + bo) + rr[q]
        yr[q] = u if (u > zero) | (u != u) else zero


def _bias_relu(yr, ar, bo, zero):  # pragma: no cover  (compiled by numba, inlined)
    """``yr = maximum(ar + bo, 0)``, the sum rounded in the dtype as conv2d's bias rounds it, then ``relu``
    as ``conv_act``'s compiled pass takes it (a NaN stays, either zero to +0)."""
    for q in range(yr.shape[0]):
        u = ar[q] + bo
        yr[q] = u if (u > zero) | (u != u) else zero


PASS3, PASS1 = jit.contracted(jit.inlined(_pass3)), jit.contracted(jit.inlined(_pass1))
PASS4 = jit.contracted(jit.inlined(_pass4))
ADD_RELU, BIAS_RELU = jit.inlined(_add_relu), jit.inlined(_bias_relu)


@functools.lru_cache(maxsize=4)
def no_residual(dtype) -> np.ndarray:
    """The kernel's ``r`` for a plain conv2d (no residual): an empty read-only array of ``dtype``."""
    a = np.zeros((0, 0, 0, 0), dtype)
    a.flags.writeable = False
    return a


def make_blocked(fill):
    """The kernel, ``fill`` (``phase_planes.FILL``) and the passes compiled into it (``with_fill``)."""
    pass3, pass4 = jit.compiled(PASS3, always=True), jit.compiled(PASS4, always=True)
    add_relu, bias_relu = jit.compiled(ADD_RELU, always=True), jit.compiled(BIAS_RELU, always=True)

    def blocked(x, w, b, y, r, relu, cols, taps, g, i0, i1, o0, o1):  # pragma: no cover  (compiled by numba)
        """y[i0:i1, o0:o1] (of (N, O, Ho, Wo)) = conv of x[i0:i1] (of (N, C, H, W)) by w[o0:o1] (of (O, C,
        kh * kw)), plus b (O,) if b has O values; where ``r`` has y's shape (``nn.conv2d_add_relu``'s
        residual, else an empty array), relu(that + r) as the write-out's last two ops; else where ``relu``
        (``nn.conv2d_act[write_out]``), relu(that) as its last op (a last block of fewer than four channels
        computes its last one again, not written out); the whole conv for (0, N, 0, O), a part of it otherwise
        (``blocked_region``'s threads, each its own images or channels: each value computed as the whole
        conv computes it); ``cols``, ``taps``: ``phase_tables``'; ``g``: (sh, ph, hq, wq). Per image: its planes copied into phase planes
        (``fill``); per block of four output channels, per input channel, the taps three at a time
        (``pass3``; the last ones one at a time, ``pass4``) over the flat output plane rounded up to
        ``ROUND`` values; the valid columns written out, the bias added last."""
        c, o, nt = x.shape[1], w.shape[0], taps.shape[0]  # (y: O channels or more, ``covering``)
        ho, wo, sw = y.shape[2], y.shape[3], cols.shape[0]
        if (i1 - i0) * (o1 - o0) * ho * wo <= 0:
            return
        sh, ph, hq, wq = g[0], g[1], g[2], g[3]
        length = ((ho - 1) * wq + wo + ROUND - 1) // ROUND * ROUND
        plane = sh * sw * hq * wq
        pad = np.zeros((c, plane + length), y.dtype)  # (past the planes: zeros the rounded loops read)
        acc = np.empty((4, length), y.dtype)
        nt3, biased = nt - nt % 3, b.shape[0] == o
        residual, zero = r.shape[0] == y.shape[0], np.zeros(1, y.dtype)[0]
        for img in range(i0, i1):
            for ch in range(c):
                fill(pad[ch, :plane], x[img, ch], cols, sh, ph, wq)
            for ob in range(o0, o1, 4):
                acc[:, :] = 0
                a0, a1, a2, a3 = acc[0], acc[1], acc[2], acc[3]
                k1, k2, k3 = min(ob + 1, o1 - 1), min(ob + 2, o1 - 1), min(ob + 3, o1 - 1)
                for ci in range(c):
                    pc, u0, u1, u2, u3 = pad[ci], w[ob, ci], w[k1, ci], w[k2, ci], w[k3, ci]
                    for tap in range(0, nt3, 3):
                        t0, t1, t2 = taps[tap], taps[tap + 1], taps[tap + 2]
                        pass3(a0, a1, a2, a3, pc[t0:t0 + length], pc[t1:t1 + length], pc[t2:t2 + length],
                              u0, u1, u2, u3, tap)
                    for tap in range(nt3, nt):
                        src = pc[taps[tap]:taps[tap] + length]
                        pass4(a0, a1, a2, a3, src, u0[tap], u1[tap], u2[tap], u3[tap])
                for k in range(min(4, o1 - ob)):
                    oc = ob + k
                    ys, ak = y[img, oc], acc[k]
                    for oh in range(ho):
                        yr, ar = ys[oh], ak[oh * wq:oh * wq + wo]
                        if residual:
                            add_relu(yr, ar, r[img, oc, oh], b[oc] if biased else zero, zero)
                            continue
                        if relu:  # (+0 added without a bias: relu's value of every sum the same)
                            bias_relu(yr, ar, b[oc] if biased else zero, zero)
                            continue
                        for ow in range(wo):
                            yr[ow] = ar[ow] + b[oc] if biased else ar[ow]

    return jit.contracted(blocked)


def applies(xp, x, weight, bias, out, groups, max_filters: int) -> bool:
    """``blocked`` runs this call: NumPy float32/float64 arrays of one dtype, ``groups == 1``, a kernel
    of more than one tap, at most ``max_filters`` filters, an output plane of ``PLANE_MIN_PIXELS`` pixels
    and two rows or more, neither the input nor the output stored batch last, numba on."""
    if xp is not np or groups != 1 or x.ndim != 4 or x.dtype not in FLOATS or weight.dtype != x.dtype:
        return False
    o, _, kh, kw = weight.shape
    if o > max_filters or kh * kw < 2 or (bias is not None and bias.dtype != x.dtype):
        return False
    if out is not None and (out.dtype != x.dtype or conv.is_batch_last(out)):
        return False
    return not conv.is_batch_last(x) and jit.enabled()


def plane_fits(ho: int, wo: int) -> bool:
    """The output plane is long enough for the flat loop (as ``direct``'s: ``PLANE_MIN_PIXELS``, two rows)."""
    return ho * wo >= PLANE_MIN_PIXELS and ho > 1


def residual_fits(r, y) -> bool:
    """The write-out takes ``r`` for ``y``: C-ordered, y's shape and dtype, sharing no memory with y
    (the kernel reads each residual value before it writes that place, but a caller's other path, the
    convolution then the add, would read what it overwrote)."""
    return r.shape == y.shape and r.dtype == y.dtype and r.flags.c_contiguous and not np.may_share_memory(r, y)


@functools.lru_cache(maxsize=256)
def geometry(h: int, wd: int, kh: int, kw: int, stride, padding, dilation) -> tuple:
    """``(cols, taps, g)`` for the kernel at this geometry (made once; read-only arrays)."""
    cols, taps, hq, wq = phase_tables(h, wd, kh, kw, stride, padding, dilation)
    g = np.array((stride[0], padding[0], hq, wq), np.int64)
    g.flags.writeable = False
    return cols, taps, g


def conv2d_blocked(xp, x, weight, bias, stride, padding, dilation, groups, out, residual=None, relu=False):
    """conv2d by the compiled blocked loop (None where it does not apply: ``im2col_compiled`` runs);
    ``residual``: ``nn.conv2d_add_relu``'s, added and the relu taken in the write-out (None where it is
    not C-ordered of the output's shape and dtype: the caller runs the convolution, then the pass);
    ``relu`` (no residual): ``nn.conv2d_act[write_out]``'s relu taken in the write-out."""
    if not applies(xp, x, weight, bias, out, groups, weight.shape[0]):
        return None
    ho, wo = conv.out_size(x, weight, stride, padding, dilation)
    kern = with_fill(make_blocked) if plane_fits(ho, wo) else None
    if kern is None:
        return None
    shape = (x.shape[0], weight.shape[0], ho, wo)
    into = out is not None and out.shape == shape and covering(out) is not None  # (its images C-ordered blocks)
    y = out if into else np.empty(shape, x.dtype)
    if residual is not None and not residual_fits(residual, y):
        return None
    b = np.zeros(0, x.dtype) if bias is None else np.ascontiguousarray(bias.reshape(-1))
    o, c, kh, kw = weight.shape
    r = no_residual(y.dtype) if residual is None else residual
    kern(np.ascontiguousarray(x), np.ascontiguousarray(weight).reshape(o, c, kh * kw), b, covering(y), r, relu,
         *geometry(*x.shape[2:], kh, kw, stride, padding, dilation), 0, shape[0], 0, o)
    if out is None or into:
        return y
    out[...] = y
    return out


def bound_blocked(x, weight, bias, stride, padding, dilation, out, other, relu=False):
    """A compiled step's call of the blocked loop (``conv2d.bind_conv2d``) with what the step's arrays fix
    made once (the kernel, the phase tables, the weight's (O, C, kh * kw) shape): ``fn(x, weight[, bias],
    out=)`` writes into a C-ordered ``out`` the values ``conv2d_blocked`` writes (the same loop) and takes
    any other call (another memory order, no output) to ``other`` (the step's generic binding). None where
    this call would not run the loop into ``out``. ``relu``: the relu taken in the write-out
    (``nn.conv2d_act[write_out]``)."""
    if out is None or not (x.flags.c_contiguous and images_c_ordered(out)) \
            or not applies(np, x, weight, bias, out, 1, weight.shape[0]):
        return None
    ho, wo = conv.out_size(x, weight, stride, padding, dilation)
    kern = with_fill(make_blocked) if plane_fits(ho, wo) else None
    if kern is None or out.shape != (x.shape[0], weight.shape[0], ho, wo):
        return None
    n, (o, c, kh, kw), planned, into = x.shape[0], weight.shape, out, covering(out)
    if into is None:
        return None
    wshape, args, no_bias = (o, c, kh * kw), geometry(*x.shape[2:], kh, kw, stride, padding, dilation), np.zeros(0, x.dtype)
    none = no_residual(x.dtype)

    def fn(x, w, b=None, out=None):  # (x, weight[, bias]: as the step passes them)
        if out is None or not ((out is planned or out.flags.c_contiguous) and x.flags.c_contiguous
                               and w.flags.c_contiguous):
            return other(x, w, b, out=out) if b is not None else other(x, w, out=out)
        kern(x, w.reshape(wshape), no_bias if b is None else b, into if out is planned else out, none, relu, *args,
             0, n, 0, o)
        return out

    return fn
