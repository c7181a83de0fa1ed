"""Depthwise conv2d (one filter per channel) as one compiled pass over the input.

The reference kernel (``ops/conv.py``'s ``conv2d_depthwise``, here the ``depthwise_taps``
implementation) makes a multiply-add over the whole batch for each of the kernel's taps: nine
passes over a strided window view for a 3x3, 49 for ConvNeXt's 7x7, each with a temporary. The
``depthwise`` implementation is a numba loop (``jit.compiled``). NCHW input: each image plane is
copied into a zero-padded plane (one plane of scratch per call), and each tap is one multiply-add
of the whole (row-padded) output plane by the padded plane shifted to the tap, a long loop without
bounds tests that vectorizes (stride 1: issue #35 measured it 1.4-1.7x faster than the loop it
replaced, which walked rows of 4-16 pixels per tap with bounds tests, at MobileNetV3's 3x3 and 5x5
layers, batch 1 and 8; other strides keep that loop, tap by tap over the output rows, the columns a
tap reaches computed once). Channels-last input (NHWC memory): per output pixel, the taps in bounds each add over the channels (innermost). Both sum the taps in the
reference's order (row by row, then along the row; padded taps add zero as the reference's padded
windows do) with the reference's dtypes, and add the bias last, so the values are the reference's.
The output is written in the input's order (into the planned buffer when it has that order). Where
numba is missing or switched off, or the dtypes are not float32/float64, ``depthwise_taps`` runs
instead.
"""
from __future__ import annotations

import numpy as np

from .. import jit
from ..ops import conv
from .impl import Impl

FLOATS = (np.dtype(np.float32), np.dtype(np.float64))


@jit.tiered
def _dw_nchw(x, w, b, y, sh, sw, ph, pw, dh, dw):  # pragma: no cover  (compiled by numba)
    """y (N, C, Ho, Wo) = depthwise conv of x (N, C, H, W) by w (C, kh, kw), stride 1 (``sh``, ``sw``
    are 1), plus b (C,) if b has C values.

    Per image plane: the plane copied into a zero-padded one, flat (Hp * Wp values); output pixel
    (oh, ow) is then flat position q = oh * Wp + ow of a row-padded result, and each tap (i, j) one
    multiply-add of the whole flat result by the padded plane shifted by i * dh * Wp + j * dw: a long
    loop without bounds tests, which vectorizes (the Wp - Wo columns between rows are computed and
    dropped). Taps in the reference's order, each adding its weight times the padded value (zero in
    the padding, as the reference's padded windows); the valid columns copied out, the bias added last."""
    n, c, h, wd = x.shape
    ho, wo = y.shape[2], y.shape[3]
    kh, kw = w.shape[1], w.shape[2]
    if n * c * ho * wo == 0:
        return
    hp, wp = h + 2 * ph, wd + 2 * pw
    pad = np.zeros(hp * wp, y.dtype)
    length = (ho - 1) * wp + wo
    acc = np.empty(length, y.dtype)
    for img in range(n):
        for ch in range(c):
            xs, ys = x[img, ch], y[img, ch]
            for r in range(h):
                base = (r + ph) * wp + pw
                for q in range(wd):
                    pad[base + q] = xs[r, q]
            for q in range(length):
                acc[q] = 0
            for i in range(kh):
                for j in range(kw):
                    wv = w[ch, i, j]
                    off = i * dh * wp + j * dw
                    for q in range(length):
                        acc[q] += pad[q + off] * wv
            for oh in range(ho):
                for ow in range(wo):
                    ys[oh, ow] = acc[oh * wp + ow]
            if b.shape[0] == c:
                ys += b[ch]


@jit.tiered
def _dw_nchw_strided(x, w, b, y, sh, sw, ph, pw, dh, dw):  # pragma: no cover  (compiled by numba)
    """``_dw_nchw`` for other strides: y (N, C, Ho, Wo) = depthwise conv of x (N, C, H, W) by w (C, kh, kw),
    plus b (C,) if b has C values. (A padded plane and strided runs per output row measured 1.1x slower
    than this at MobileNetV3's stride-2 layers, batch 1 and 8: the plane's copy is not paid back.)

    Per image plane, tap by tap: each tap adds its weight times a shifted input row to every output
    row it reaches (the columns it reaches computed once per tap, so no bounds test in the row loop;
    stride 1 has its own row loop, which vectorizes)."""
    n, c, h, wd = x.shape
    ho, wo = y.shape[2], y.shape[3]
    kh, kw = w.shape[1], w.shape[2]
    for img in range(n):
        for ch in range(c):
            xs, ys = x[img, ch], y[img, ch]
            ys[:, :] = 0
            for i in range(kh):
                for j in range(kw):
                    wv = w[ch, i, j]
                    off = j * dw - pw
                    lo = 0 if off >= 0 else (sw - 1 - off) // sw
                    hi = min(wo, (wd - 1 - off) // sw + 1)
                    for oh in range(ho):
                        ih = oh * sh - ph + i * dh
                        if ih < 0 or ih >= h:
                            continue
                        if sw == 1:
                            for ow in range(lo, hi):
                                ys[oh, ow] += xs[ih, ow + off] * wv
                        else:
                            for ow in range(lo, hi):
                                ys[oh, ow] += xs[ih, ow * sw + off] * wv
            if b.shape[0] == c:
                ys += b[ch]


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


def conv2d_depthwise_compiled(xp, x, weight, bias, stride, padding, dilation, groups, out):
    """Depthwise conv2d by the compiled loops (None where they do not apply: ``depthwise_taps`` runs)."""
    if not applies(xp, x, weight, bias, out):
        return None
    last = _channels_last(x)
    kern = jit.compiled(_dw_nhwc if last else _dw_nchw if stride == (1, 1) else _dw_nchw_strided)
    if kern is None:
        return None
    dtype = np.result_type(x.dtype, weight.dtype)  # (the bias is added in place, as the reference adds it)
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
        kern(np.ascontiguousarray(x), np.ascontiguousarray(weight.reshape(c, kh, kw)), b, y,
             *stride, *padding, *dilation)
    if out is None or into_out:
        return out if into_out else y
    out[...] = y
    return out


TAPS = Impl("conv2d", "depthwise_taps", conv.conv2d_depthwise,
            "one filter per channel: a multiply-add per tap over all channels (NumPy, any dtype)")
DEPTHWISE = Impl("conv2d", "depthwise", conv2d_depthwise_compiled,
                 "one filter per channel, float32/float64, numba: one compiled pass, no window copies "
                 "(NCHW or channels-last input, any stride, padding, dilation, bias)", fallback=TAPS)


def choose_impl(xp, x, weight, out) -> Impl:
    """``DEPTHWISE`` where its compiled loops run this call, else ``TAPS``."""
    return DEPTHWISE if applies(xp, x, weight, None, out) else TAPS
