"""Depthwise conv2d (one filter per channel) as one compiled pass over the input.

The reference kernel (``ops/conv.py``'s ``conv2d_depthwise``, here the ``depthwise_taps``
implementation) makes a multiply-add over the whole batch for each of the kernel's taps: nine
passes over a strided window view for a 3x3, 49 for ConvNeXt's 7x7, each with a temporary. The
``depthwise`` implementation is a numba loop (``jit.compiled``). NCHW input: each image plane is
copied into zero-padded phase planes (``stride`` rows by columns of them; stride 1: one, the padded
plane), and each tap is one multiply-add of the whole (row-padded) output plane by a slice of one
phase plane, a long loop without bounds tests that vectorizes. (Issue #35: every loop indexes
slices, so no index can wrap: numba's negative-index test on ``a[q + off]`` kept LLVM from
vectorizing, and the loop it replaced, 18 us a call at MobileNetV3's (1, 16, 16, 16) 3x3 layer,
runs in 4-5 us; stride 2, which walked output rows tap by tap, runs as fast as that loop did
once it indexed slices too, in one kernel for every stride.) Channels-last input (NHWC memory): per output pixel, the taps
in bounds each add over the channels (innermost). Both sum the taps in the reference's order (row by row, then along the row; padded taps add zero as the
reference's padded windows do) with the reference's dtypes, and add the bias last, so the values are the reference's.
The NCHW loop adds four taps a pass over its accumulator, in tap order (the same sums), and applies
``nn.conv2d_act``'s activation as it writes each row (``activation_jit.activate_row``: the
separate pass's values bit for bit, one vectorized loop per activation; ``conv_act`` runs ``conv2d_act[compiled, depthwise]`` so, eager
and bound, one call and one pass a layer).
The output is written in the input's order (into the planned buffer when it has that order). Where
numba is missing or switched off, or the dtypes are not float32/float64, ``depthwise_taps`` runs
instead.
"""
from __future__ import annotations

import functools

import numpy as np

from .. import jit
from ..ops import conv
from .activation_jit import act_code, act_params, activate_row
from .impl import Impl
from .phase_planes import phase_tables, with_fill

FLOATS = (np.dtype(np.float32), np.dtype(np.float64))
# the NCHW loop's passes run over a multiple of this many values: the 32-value step of LLVM's
# vectorized loop (8 float32 lanes of AVX2, unrolled four times), so none is left to its scalar remainder
LANES = 32


@jit.inlined
def _nine_taps(acc, pad, taps, wr, length, zero):  # pragma: no cover  (compiled by numba, inlined)
    """``acc[:length]`` = the nine taps of a 3 x 3 (or 1 x 9, 9 x 1) kernel in one pass (from
    zero, in tap order, so the sums are one tap at a time's): nine loads and one store a value where
    passes of four loaded and stored ``acc`` three times."""
    t0, t1, t2, t3, t4, t5, t6, t7, t8 = taps[0], taps[1], taps[2], taps[3], taps[4], taps[5], taps[6], \
        taps[7], taps[8]
    s0, s1, s2 = pad[t0:t0 + length], pad[t1:t1 + length], pad[t2:t2 + length]
    s3, s4, s5 = pad[t3:t3 + length], pad[t4:t4 + length], pad[t5:t5 + length]
    s6, s7, s8 = pad[t6:t6 + length], pad[t7:t7 + length], pad[t8:t8 + length]
    w0, w1, w2, w3, w4, w5, w6, w7, w8 = wr[0], wr[1], wr[2], wr[3], wr[4], wr[5], wr[6], wr[7], wr[8]
    for q in range(length):
        u = zero + s0[q] * w0
        u = u + s1[q] * w1
        u = u + s2[q] * w2
        u = u + s3[q] * w3
        u = u + s4[q] * w4
        u = u + s5[q] * w5
        u = u + s6[q] * w6
        u = u + s7[q] * w7
        acc[q] = u + s8[q] * w8


@jit.inlined
def _four_taps(acc, pad, taps, wr, first, nt, length):  # pragma: no cover  (compiled by numba, inlined)
    """``acc[:length]`` += taps ``first`` to ``nt`` of ``wr``, four a pass over ``acc`` (added in tap
    order, so the sums are one tap at a time's), then the rest one a pass."""
    nt4 = first + (nt - first) - (nt - first) % 4
    for tap in range(first, nt4, 4):
        t0, t1, t2, t3 = taps[tap], taps[tap + 1], taps[tap + 2], taps[tap + 3]
        s0, s1 = pad[t0:t0 + length], pad[t1:t1 + length]
        s2, s3 = pad[t2:t2 + length], pad[t3:t3 + length]
        w0, w1, w2, w3 = wr[tap], wr[tap + 1], wr[tap + 2], wr[tap + 3]
        for q in range(length):
            u = acc[q] + s0[q] * w0
            u = u + s1[q] * w1
            u = u + s2[q] * w2
            acc[q] = u + s3[q] * w3
    for tap in range(nt4, nt):
        wv, src = wr[tap], pad[taps[tap]:taps[tap] + length]
        for q in range(length):
            acc[q] += src[q] * wv


@jit.tiered
def _dw_nchw(fill):
    """The NCHW kernel, ``fill`` (``phase_planes.FILL``), ``_nine_taps``, ``_four_taps`` and
    ``activation_jit.activate_row`` compiled into it (``phase_planes.with_fill``)."""
    activate = jit.compiled(activate_row, always=True)
    nine, four = jit.compiled(_nine_taps, always=True), jit.compiled(_four_taps, always=True)

    def dw_nchw(x, w, b, y, cols, taps, g, p):  # pragma: no cover  (compiled by numba)
        """y (N, C, Ho, Wo) = act(depthwise conv of x (N, C, H, W) by w (C, kh * kw), plus b (C,) if b
        has C values); ``cols``, ``taps``, (``hq``, ``wq``): ``phase_tables``; ``g``: (sh, ph, hq, wq,
        activation code), ``p``: ``activation_jit.act_params``.

        Per image plane: the plane copied into zero-padded phase planes (``fill``). Output pixel
        (oh, ow) is flat position p = oh * Wq + ow of a row-padded result, and tap (i, j) reads phase
        ((i * dh) % sh, (j * dw) % sw) at p + (i * dh) // sh * Wq + (j * dw) // sw: a 3 x 3 kernel's
        nine taps one pass of multiply-adds over the whole flat result by slices of the phase planes
        (``_nine_taps``), other kernels' four at a time (``_four_taps``), long loops without bounds
        tests, which vectorize (the Wq - Wo columns between rows are computed and dropped). The
        passes run over ``length`` rounded up to a multiple of ``LANES`` (zeros past the phase planes
        in ``pad``): no scalar remainder after the vectorized loop, whose 32-value steps left 28 of
        a (8, 8) 5 x 5 layer's 92 values to it. Taps in the reference's order (zero in the padding,
        as the reference's padded windows); the valid columns written out row by row with the bias
        added last (-0.0 where there is none) and the activation (``activate_row``: as ``conv_act``'s
        separate pass rounds, bit for bit; code -1: none)."""
        n, c = x.shape[0], x.shape[1]
        ho, wo, sw = y.shape[2], y.shape[3], cols.shape[0]
        if n * c * ho * wo == 0:
            return
        sh, ph, hq, wq, code = g[0], g[1], g[2], g[3], g[4]
        alpha, beta, zero, one = p[0], p[1], p[2], p[3]
        length = ((ho - 1) * wq + wo + LANES - 1) // LANES * LANES
        nt = taps.shape[0]
        planes = sh * sw * hq * wq
        pad = np.zeros(max(planes, (taps.max() if nt else 0) + length), y.dtype)
        phases, acc = pad[:planes], np.empty(length, y.dtype)
        biased = b.shape[0] == c
        for img in range(n):
            for ch in range(c):
                fill(phases, x[img, ch], cols, sh, ph, wq)
                wr = w[ch]
                if nt == 9:
                    nine(acc, pad, taps, wr, length, zero)
                else:
                    acc[:] = 0
                four(acc, pad, taps, wr, 9 if nt == 9 else 0, nt, length)
                ys = y[img, ch]
                bo = b[ch] if biased else -zero  # (-0.0: adding it changes no value)
                for oh in range(ho):
                    activate(ys[oh], acc[oh * wq:oh * wq + wo], bo, code, alpha, beta, zero, one)

    return dw_nchw


@jit.tiered
def _dw_nhwc(x, w, b, y, sh, sw, ph, pw, dh, dw):  # pragma: no cover  (compiled by numba)
    """y (N, Ho, Wo, C) = depthwise conv of x (N, H, W, C) by w (kh, kw, C), plus b (C,) if b has C values."""
    n, h, wd, c = x.shape
    ho, wo = y.shape[1], y.shape[2]
    kh, kw = w.shape[0], w.shape[1]
    for img in range(n):
        for oh in range(ho):
            for ow in range(wo):
                acc = y[img, oh, ow]
                for ch in range(c):
                    acc[ch] = 0
                for i in range(kh):
                    ih = oh * sh - ph + i * dh
                    if ih < 0 or ih >= h:
                        continue
                    for j in range(kw):
                        iw = ow * sw - pw + j * dw
                        if iw < 0 or iw >= wd:
                            continue
                        xv = x[img, ih, iw]
                        wv = w[i, j]
                        for ch in range(c):
                            acc[ch] += xv[ch] * wv[ch]
                if b.shape[0] == c:
                    for ch in range(c):
                        acc[ch] += b[ch]


def applies(xp, x, weight, bias, out) -> bool:
    """The compiled kernel runs this call: NumPy arrays of float32/float64 and compiled kernels on."""
    if xp is not np or x.dtype not in FLOATS or weight.dtype not in FLOATS:
        return False
    if (bias is not None and bias.dtype not in FLOATS) or (out is not None and out.dtype not in FLOATS):
        return False
    return jit.enabled()


def _channels_last(a) -> bool:
    """(N, C, H, W) stored as (N, H, W, C) (and not also plainly C-ordered)."""
    return not a.flags.c_contiguous and a.transpose(0, 2, 3, 1).flags.c_contiguous


def _target(out, shape, dtype, last: bool):
    """Where the kernel writes: ``out`` (as the kernel's order sees it) when it has that order, else a new array."""
    if out is not None and out.shape == shape and out.dtype == dtype:
        view = out.transpose(0, 2, 3, 1) if last else out
        if view.flags.c_contiguous:
            return view, True
    n, c, h, w = shape
    return np.empty((n, h, w, c) if last else shape, dtype), False


@functools.lru_cache(maxsize=256)
def _nchw_args(h: int, wd: int, kh: int, kw: int, stride, padding, dilation, dtype, act, alpha, beta) -> tuple:
    """The NCHW kernel's arguments after the output, made once per geometry and activation:
    ``phase_tables``' ``cols`` and ``taps``, ``(sh, ph, hq, wq, activation code)`` as one read-only
    array (one argument where five scalars cost a compiled call five unboxings), ``act_params``."""
    cols, taps, hq, wq = phase_tables(h, wd, kh, kw, stride, padding, dilation)
    g = np.array((stride[0], padding[0], hq, wq, act_code(act)), np.int64)
    g.flags.writeable = False
    return cols, taps, g, act_params(dtype, alpha, beta)


def conv2d_depthwise_compiled(xp, x, weight, bias, stride, padding, dilation, groups, out, act=None, alpha=0.2,
                              beta=0.5):
    """Depthwise conv2d by the compiled loops (None where they do not apply: ``depthwise_taps`` runs);
    ``act``: ``nn.conv2d_act``'s activation applied in the NCHW loop (as its compiled pass rounds;
    None, not run, for a channels-last input: the caller runs the convolution, then the pass)."""
    if not applies(xp, x, weight, bias, out):
        return None
    last = _channels_last(x)
    if last and act is not None:
        return None
    kern = jit.compiled(_dw_nhwc) if last else with_fill(_dw_nchw)
    if kern is None:
        return None
    dtype = x.dtype if x.dtype == weight.dtype else np.result_type(x.dtype, weight.dtype)  # (bias: added in place)
    ho, wo = conv.out_size(x, weight, stride, padding, dilation)
    shape = (x.shape[0], weight.shape[0], ho, wo)
    c, _, kh, kw = weight.shape
    b = np.zeros(0, dtype) if bias is None else np.ascontiguousarray(bias.reshape(-1))
    y, into_out = _target(out, shape, dtype, last)
    if last:
        kern(x.transpose(0, 2, 3, 1), np.ascontiguousarray(weight.reshape(c, kh, kw).transpose(1, 2, 0)), b, y,
             *stride, *padding, *dilation)
        y = y.transpose(0, 3, 1, 2)
    else:
        args = _nchw_args(*x.shape[2:], kh, kw, stride, padding, dilation, dtype, act, alpha, beta)
        kern(np.ascontiguousarray(x), np.ascontiguousarray(weight.reshape(c, kh * kw)), b, y, *args)
    if out is None or into_out:
        return out if into_out else y
    out[...] = y
    return out


def bound_nchw(x, weight, bias, stride, padding, dilation, out, act=None, alpha=0.2, beta=0.5, other=None):
    """A compiled step's call of the NCHW loop (``conv2d.bind_conv2d``; ``conv_act``'s binding with its
    ``act``) with what the step's arrays fix made once (the kernel, the phase tables, the output's shape
    and dtype): ``fn(x, weight[, bias], out=)`` writes into the planned C-ordered ``out`` and takes any
    other call (another memory order, no planned output) to ``other`` (``conv_act``'s generic binding),
    else to ``conv2d_depthwise_compiled``. None where this call would not run the loop into ``out``
    (issue #35: ShuffleNet's six depthwise layers at batch 1 paid 3 us a call of checks). The weight's and
    bias's flat views are made once and kept while the step passes the same arrays (its parameters), and the
    planned output's order is not asked again: about 1 us a call less."""
    if not applies(np, x, weight, bias, out) or not x.flags.c_contiguous or out is None \
            or not out.flags.c_contiguous or x.dtype != weight.dtype or out.dtype != x.dtype:
        return None
    kern = with_fill(_dw_nchw)
    c, _, kh, kw = weight.shape
    ho, wo = conv.out_size(x, weight, stride, padding, dilation)
    if kern is None or out.shape != (x.shape[0], c, ho, wo):
        return None
    args = _nchw_args(*x.shape[2:], kh, kw, stride, padding, dilation, x.dtype, act, alpha, beta)
    no_bias = np.zeros(0, x.dtype)
    planned = out
    kept = [(None, None, None, None)]  # (the last call's weight and bias and their flat views: one tuple,
    # replaced whole, so a thread reads one call's four)

    def fn(x, weight, bias=None, out=None):
        if out is not planned and (out is None or not out.flags.c_contiguous) or not x.flags.c_contiguous:
            return _other(x, weight, bias, out)
        last = kept[0]
        if weight is not last[0] or bias is not last[1]:  # (a step's parameters: the same arrays each call)
            if not weight.flags.c_contiguous:
                return _other(x, weight, bias, out)
            last = weight, bias, weight.reshape(c, kh * kw), no_bias if bias is None else bias.reshape(-1)
            kept[0] = last
        kern(x, last[2], last[3], out, *args)
        return out

    def _other(x, weight, bias, out):
        if other is not None:
            return other(x, weight, bias, out=out) if bias is not None else other(x, weight, out=out)
        return conv2d_depthwise_compiled(np, x, weight, bias, stride, padding, dilation, c, out)

    return fn


TAPS = Impl("conv2d", "depthwise_taps", conv.conv2d_depthwise,
            "one filter per channel: a multiply-add per tap over all channels (NumPy, any dtype)")
DEPTHWISE = Impl("conv2d", "depthwise", conv2d_depthwise_compiled,
                 "one filter per channel, float32/float64, numba: one compiled pass, no window copies "
                 "(NCHW or channels-last input, any stride, padding, dilation, bias)", fallback=TAPS)


def choose_impl(xp, x, weight, out) -> Impl:
    """``DEPTHWISE`` where its compiled loops run this call, else ``TAPS``."""
    return DEPTHWISE if applies(xp, x, weight, None, out) else TAPS
