"""conv2d ``direct``: a small convolution (any groups but depthwise) as one compiled loop, no copies;
and ``pointwise``: a 1x1 convolution as one product.

The products behind ``im2col``, ``batch_last`` and ``grouped`` pay a fixed cost per call (window
views, the im2col copy, a padded copy, the product's dispatch, the bias add): 20-35 us on the
development machine however small the layer. A 1-D audio net exported from torch (``conv1d_net``:
(1, 4, 1, 23) by (16, 4, 1, 3)) spends its convolutions there on a few thousand multiply-adds.
``direct`` copies each input plane into zero-padded phase planes (``phase_planes.phase_tables``, as
``depthwise``'s loop does) and per output channel adds each input channel's taps as one flat
multiply-add over a slice of a phase plane, a long loop that vectorizes (issue #35: SqueezeNet's
(1, 4, 7, 7) 3x3 layer 9.3 -> 5.3 us); output planes under ``PLANE_MIN_PIXELS`` pixels, whose flat
loops would be a few values long, and of one row (a 1-D net's: conv1d_net measured 1.3 us slower on
the flat loops) keep the row loop (``_direct_rows``: the input read where it lies,
the taps in the padding skipped by bounds, each tap's weights of all output channels added to a
row's accumulator): a few microseconds for such a layer. It takes float32/float64 NumPy
arrays, numba on, one image or ``groups`` > 1 (a batch of images without groups has ``batch_last``'s
one product for the batch, as fast on the development machine), ``groups`` that are not depthwise (``depthwise`` has its own pass; a grouped
layer is one loop here, not a batched product over window copies), and layers of at most
``conv_direct_max_macs`` multiply-adds (the tuning table; ``WIDE_MACS`` times that for output planes
of ``WIDE_PIXELS`` pixels and up, whose flat loops are long): past that the products' BLAS wins.

Values: sums in another order than BLAS's (channel, then row of taps, then tap; both loops): they agree with
the reference within float rounding (rtol 1e-5 float32, 1e-12 float64), not bit for bit; the bias
is added last, as the reference adds it.

``pointwise`` (issue #35: MobileNet's, SqueezeNet's and ShuffleNet's 1x1 layers at batch 1 spent
9-27 us each in ``direct``'s loop or ``im2col``'s fixed cost): a 1x1 convolution with stride 1, no
padding and no groups is ``weight (O, C) @ image (C, H*W)`` per image, one ``numpy.matmul`` over
the batch written into the output where it is C-ordered, then the bias: no window view, no copy of
a C-ordered input. Values as the reference's product within float rounding (BLAS's order). The
input's images need only be C-ordered blocks, at any batch stride (``images_c_ordered``; issue #35:
ShuffleNet's split halves after ``channel_shuffle`` at batch 8 took ``im2col`` / ``batch_last``):
the product reads them in place, the values a C-ordered copy would give bit for bit.
"""
from __future__ import annotations

import numpy as np

from .. import jit
from ..ops import conv
from ..threads import split_threads
from .depthwise import FLOATS
from .impl import Impl
from .phase_planes import phase_tables, with_fill

PLANE_MIN_PIXELS = 16  # (output planes this size and up, of 2 rows or more: ``_direct``'s flat loops)
# Output planes of WIDE_PIXELS pixels and up take ``direct`` up to WIDE_MACS times ``conv_direct_max_macs``
# (issue #35, one thread: the CNN stems' (1, 3, 32, 32) 3x3 layers (55-221K multiply-adds) and ResNet's
# 8-16 channel 3x3 layers (147K) ran 0.5-0.8x im2col's CPU time there; planes of 4x4 and 8x8 with
# 16-32 channels and 290K+ multiply-adds ran 1.3-1.5x it: their flat loops are short)
WIDE_PIXELS, WIDE_MACS = 64, 8
GROUPED = Impl("conv2d", "grouped", conv.conv2d_grouped, "groups > 1: one batched product over the groups")


def images_c_ordered(x) -> bool:
    """Every image of the 4-D ``x`` is one C-ordered (C, H, W) block, at any batch stride: a C-ordered
    array, or a batch of such blocks further apart (issue #35: a ``split``'s half after
    ``channel_shuffle``, a view made once, its images (C, H*W) apart by 2C*H*W). ``x.reshape(N, C,
    H*W)`` is then a view whose images are C-ordered (C, H*W) matrices, as a C-ordered input's are."""
    return x.flags.c_contiguous or x[0].flags.c_contiguous  # (an empty batch is C-ordered)


def pointwise_applies(xp, x, weight, bias, out, stride, padding, groups) -> bool:
    """``pointwise`` runs this call: NumPy float32/float64 arrays of one dtype, a 1x1 kernel, stride 1,
    no padding, no groups, each input image a C-ordered block (``images_c_ordered``: its images are
    then (C, H*W) views) and the output C-ordered when given (a planned batch-last output is left to
    the implementations made for it), and not a batch ``split`` would spread over the threads."""
    if xp is not np or groups != 1 or weight.shape[2] != 1 or weight.shape[3] != 1 or stride != (1, 1) \
            or padding != (0, 0) or x.dtype not in FLOATS or weight.dtype != x.dtype:
        return False
    if (bias is not None and bias.dtype != x.dtype) or (out is not None and out.dtype != x.dtype):
        return False
    if not images_c_ordered(x) or (out is not None and not out.flags.c_contiguous):  # (batch last: region's)
        return False
    n, c, h, w = x.shape
    return split_threads(n * weight.shape[0] * c * h * w, n) <= 1  # (a batch split over the threads: split's)


def conv2d_pointwise(xp, x, weight, bias, stride, padding, dilation, groups, out):
    """A 1x1 convolution as ``weight (O, C) @ x (N, C, H*W)`` into the output (C-ordered ``out``, or a
    new array copied into another ``out``), plus the bias; ``x``'s images C-ordered blocks at any batch
    stride (``images_c_ordered``: the (N, C, H*W) view reads them where they lie, one (C, H*W) matrix
    an image as a C-ordered input gives, so the same values bit for bit)."""
    n, c, h, w = x.shape
    o = weight.shape[0]
    shape = (n, o, h, w)
    into = out is not None and out.shape == shape and out.flags.c_contiguous
    y = out if into else np.empty(shape, x.dtype)
    np.matmul(weight.reshape(o, c), x.reshape(n, c, h * w), out=y.reshape(n, o, h * w))
    if bias is not None:
        y += bias.reshape(1, o, 1, 1)
    if out is None or into:
        return y
    out[...] = y
    return out


POINTWISE = Impl("conv2d", "pointwise", conv2d_pointwise,
                 "1x1 kernel, stride 1, no padding, groups == 1, float32/float64, C-ordered input images (at any "
                 "batch stride) and output, "
                 "not split over the threads, "
                 "conv_pointwise on: one product weight (O, C) @ image (C, H*W) over the batch, into the output")


def _direct(fill):
    """The flat-loop kernel, ``fill`` (``phase_planes.FILL``) compiled into it (``phase_planes.with_fill``)."""
    def direct(x, w, b, y, cols, taps, sh, ph, hq, wq):  # pragma: no cover  (compiled by numba)
        """y (N, O, Ho, Wo) = conv of x (N, C, H, W) by w (O, C/groups, kh * kw), plus b (O,) if b has O
        values; ``cols``, ``taps``, (``hq``, ``wq``): ``phase_planes.phase_tables`` (the groups: C / w's C).

        Per image: each input plane copied into zero-padded phase planes (``fill``, as ``depthwise``'s
        loop does); per output channel, each of its group's input channels' taps one multiply-add of
        the whole flat (row-padded) output plane by a slice of one phase plane, a long loop without
        bounds tests that vectorizes; the valid columns copied out, the bias added last."""
        n, c = x.shape[0], x.shape[1]
        o, cg = w.shape[0], w.shape[1]
        ho, wo, sw = y.shape[2], y.shape[3], cols.shape[0]
        if n * o * ho * wo == 0:
            return
        og = o // (c // cg) if cg > 0 else o
        length = (ho - 1) * wq + wo
        pad = np.zeros((c, sh * sw * hq * wq), y.dtype)
        acc = np.empty(length, y.dtype)
        for img in range(n):
            for ch in range(c):
                fill(pad[ch], x[img, ch], cols, sh, ph, wq)
            for oc in range(o):
                acc[:] = 0
                for ci in range(cg):
                    pc = pad[(oc // og) * cg + ci]
                    for tap in range(taps.shape[0]):
                        wv, src = w[oc, ci, tap], pc[taps[tap]:taps[tap] + length]
                        for q in range(length):
                            acc[q] += src[q] * wv
                ys = y[img, oc]
                for oh in range(ho):
                    yr, ar = ys[oh], acc[oh * wq:oh * wq + wo]
                    for ow in range(wo):
                        yr[ow] = ar[ow]
                if b.shape[0] == o:
                    ys += b[oc]

    return direct


def _direct_rows(x, wt, b, y, sh, sw, ph, pw, dh, dw):  # pragma: no cover  (compiled by numba)
    """``_direct`` for output planes under ``PLANE_MIN_PIXELS`` pixels (a plane's flat loops would be a
    few values long): y (N, O, Ho, Wo) = conv of x (N, C, H, W) by wt (groups, C/groups, kh, kw, O/groups)
    (the weight with its output channels innermost), plus b (O,) if b has O values.

    Per image, group and output row: each input channel's taps add their input value times the
    tap's weights of all the group's output channels to the row's accumulator (Wo, O/groups), a
    short contiguous loop LLVM vectorizes; taps in the padding are skipped by bounds."""
    n, h, wd = x.shape[0], x.shape[2], x.shape[3]
    groups, cg, kh, kw, og = wt.shape
    ho, wo = y.shape[2], y.shape[3]
    acc = np.empty((wo, og), y.dtype)
    for img in range(n):
        for g in range(groups):
            for oh in range(ho):
                acc[:, :] = 0
                for ci in range(cg):
                    xs = x[img, g * cg + ci]
                    for i in range(kh):
                        ih = oh * sh - ph + i * dh
                        if ih < 0 or ih >= h:
                            continue
                        for j in range(kw):
                            wv = wt[g, ci, i, j]
                            off = j * dw - pw
                            lo = 0 if off >= 0 else (sw - 1 - off) // sw
                            hi = min(wo, (wd - 1 - off) // sw + 1)
                            for ow in range(lo, hi):
                                xv = xs[ih, ow * sw + off]
                                for oc in range(og):
                                    acc[ow, oc] += xv * wv[oc]
                for oc in range(og):
                    for ow in range(wo):
                        y[img, g * og + oc, oh, ow] = acc[ow, oc]
        if b.shape[0] == groups * og:
            for oc in range(groups * og):
                y[img, oc] += b[oc]


def applies(xp, x, weight, bias, out, groups, macs: int, max_macs: int, pixels: int = 0) -> bool:
    """The compiled loop runs this call: NumPy float32/float64 arrays, numba on, not depthwise, small
    (``max_macs``, ``WIDE_MACS`` times that for output planes of ``pixels`` >= ``WIDE_PIXELS``), one
    image or grouped (a batch without groups: ``batch_last``'s one product for the batch is as fast)."""
    limit = max_macs * WIDE_MACS if pixels >= WIDE_PIXELS else max_macs
    if xp is not np or macs > limit or x.dtype not in FLOATS or weight.dtype != x.dtype \
            or (x.shape[0] != 1 and groups == 1):
        return False
    if (bias is not None and bias.dtype != x.dtype) or (out is not None and out.dtype != x.dtype):
        return False
    return not conv.is_depthwise(x, weight, groups) and jit.enabled()


def conv2d_direct(xp, x, weight, bias, stride, padding, dilation, groups, out):
    """conv2d by the compiled direct loop (None where it does not apply: the chooser's next choice runs)."""
    kern = with_fill(_direct) if xp is np and x.dtype in FLOATS and weight.dtype == x.dtype else None
    if kern is None or (bias is not None and bias.dtype != x.dtype) or conv.is_depthwise(x, weight, groups):
        return None
    ho, wo = conv.out_size(x, weight, stride, padding, dilation)
    shape = (x.shape[0], weight.shape[0], ho, wo)
    into = out is not None and out.shape == shape and out.dtype == x.dtype and out.flags.c_contiguous
    y = out if into else np.empty(shape, x.dtype)
    b = np.zeros(0, x.dtype) if bias is None else np.ascontiguousarray(bias.reshape(-1))
    o, cg, kh, kw = weight.shape
    if ho * wo < PLANE_MIN_PIXELS or ho == 1:  # (one output row: no rows to run together)
        wt = np.ascontiguousarray(weight.reshape(groups, o // groups, cg, kh, kw).transpose(0, 2, 3, 4, 1))
        jit.compiled(_direct_rows)(np.ascontiguousarray(x), wt, b, y, *stride, *padding, *dilation)
    else:
        cols, taps, hq, wq = phase_tables(x.shape[2], x.shape[3], kh, kw, stride, padding, dilation)
        kern(np.ascontiguousarray(x), np.ascontiguousarray(weight.reshape(o, cg, kh * kw)), b, y, cols, taps,
             stride[0], padding[0], hq, wq)
    if out is None or into:
        return y
    out[...] = y
    return out


def bound_flat(x, weight, bias, stride, padding, dilation, groups, out, other):
    """A compiled step's call of ``_direct``'s flat loop (``conv2d.bind_conv2d``) with what the step's
    arrays fix made once (the kernel, the phase tables, the weight's shape): ``fn(x, weight[, bias],
    out=)`` writes into the planned C-ordered ``out`` and takes any other call (another memory order,
    no planned output) to ``other`` (the step's generic binding). None where this call would not run
    the flat loop into ``out`` (issue #35: ``conv2d_direct``'s checks and copies cost about as much
    as a small layer's loop)."""
    if out is None or not (x.flags.c_contiguous and out.flags.c_contiguous) or x.dtype not in FLOATS \
            or weight.dtype != x.dtype or out.dtype != x.dtype or (bias is not None and bias.dtype != x.dtype):
        return None
    kern = with_fill(_direct)
    o, cg, kh, kw = weight.shape
    ho, wo = conv.out_size(x, weight, stride, padding, dilation)
    if kern is None or out.shape != (x.shape[0], o, ho, wo) or ho * wo < PLANE_MIN_PIXELS or ho == 1 \
            or conv.is_depthwise(x, weight, groups):
        return None
    cols, taps, hq, wq = phase_tables(x.shape[2], x.shape[3], kh, kw, stride, padding, dilation)
    no_bias = np.zeros(0, x.dtype)

    def fn(*arrays, out=None):  # (x, weight[, bias]: as the step passes them)
        x, weight = arrays[0], arrays[1]
        if out is None or not (x.flags.c_contiguous and weight.flags.c_contiguous and out.flags.c_contiguous):
            return other(*arrays, out=out)
        b = arrays[2].reshape(-1) if len(arrays) > 2 and arrays[2] is not None else no_bias
        kern(x, weight.reshape(o, cg, kh * kw), b, out, cols, taps, stride[0], padding[0], hq, wq)
        return out

    return fn


DIRECT = Impl("conv2d", "direct", conv2d_direct,
              "float32/float64, numba, one image or groups > 1, not depthwise, at most conv_direct_max_macs "
              "multiply-adds (8x that for output planes of 64 pixels and up): "
              "one compiled loop over the input where it lies (no window or padded copies)", fallback=GROUPED)
