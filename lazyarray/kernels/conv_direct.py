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
is added last, as the reference adds it, and ``nn.conv2d_act``'s activation, when given, as the value
is written (``activation_jit.activate_value``: its compiled pass's values bit for bit, one pass fewer).

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

import functools

import numpy as np

from .. import jit
from ..ops import conv
from ..threads import split_threads
from .activation_jit import act_code, act_params, activate_value
from .covering_view import covering
from .depthwise import FLOATS, LANES
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


def image_rows(out, planned, rows):
    """The (N, O, H*W) matrices a bound step writes ``out`` through: ``rows`` (the ``planned`` output's,
    made once at binding) where ``out`` is it, ``out``'s own where it is C-ordered (a program's output: new
    memory each run), else None (the step's generic binding then takes the call)."""
    if out is planned:
        return rows
    return out.reshape(rows.shape) if out is not None and out.flags.c_contiguous else None


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
    if not images_c_ordered(x) or (out is not None and not images_c_ordered(out)):  # (batch last: region's)
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
    into = out is not None and out.shape == shape and images_c_ordered(out)  # (its (N, O, H*W) view: a view)
    y = out if into else np.empty(shape, x.dtype)
    np.matmul(weight.reshape(o, c), x.reshape(n, c, h * w), out=y.reshape(n, o, h * w))
    if bias is not None:
        y += bias.reshape(1, o, 1, 1)
    if out is None or into:
        return y
    out[...] = y
    return out


def bound_pointwise(x, weight, out, other):
    """A compiled step's call of ``conv2d_pointwise`` (``conv2d.bind_conv2d``) with what the step fixes
    made once (the shapes, the planned output's (N, O, H*W) view): ``fn(x, weight[, bias], out=)``
    writes into a C-ordered ``out`` the values ``conv2d_pointwise`` writes, bit for bit (the same product
    and bias add), and takes any other call (images not C-ordered blocks, no output) to ``other`` (the
    step's generic binding). None without a C-ordered planned output (issue #35: MobileNet's 1x1 layers
    without an activation paid the generic call's checks and views per call)."""
    if out is None or not images_c_ordered(out):  # (its images C-ordered blocks: (N, O, H*W) is a view)
        return None
    n, c, h, wd = x.shape
    o, hw = weight.shape[0], h * wd
    planned, rows = out, out.reshape(n, o, hw)

    def fn(x, w, b=None, out=None):  # (x, weight[, bias]: as the step passes them)
        r = image_rows(out, planned, rows)
        if r is None or not (x.flags.c_contiguous or x[0].flags.c_contiguous):
            return other(x, w, b, out=out) if b is not None else other(x, w, out=out)
        np.matmul(w.reshape(o, c), x.reshape(n, c, hw), out=r)
        if b is not None:
            np.add(r, b.reshape(o, 1), out=r)
        return out

    return fn


POINTWISE = Impl("conv2d", "pointwise", conv2d_pointwise,
                 "1x1 kernel, stride 1, no padding, groups == 1, float32/float64, C-ordered input images (at any "
                 "batch stride) and output, "
                 "not split over the threads, "
                 "conv_pointwise on: one product weight (O, C) @ image (C, H*W) over the batch, into the output")


def _direct(fill):
    """The flat-loop kernel, ``fill`` (``phase_planes.FILL``) and ``activation_jit.activate_value``
    compiled into it (``phase_planes.with_fill``)."""
    activate = jit.compiled(activate_value, always=True)

    def direct(x, w, b, y, cols, taps, g, p):  # pragma: no cover  (compiled by numba)
        """y (N, O, Ho, Wo) = act(conv of x (N, C, H, W) by w (O, C/groups, kh * kw), plus b (O,) if b
        has O values); ``cols``, ``taps``, (``hq``, ``wq``): ``phase_planes.phase_tables`` (the groups:
        C / w's C); ``g``: (sh, ph, hq, wq, activation code), ``p``: ``activation_jit.act_params``.

        Per image: each input plane copied into zero-padded phase planes (``fill``, as ``depthwise``'s
        loop does); per output channel, each of its group's input channels' taps one multiply-add of
        the whole flat (row-padded) output plane by a slice of one phase plane, a long loop without
        bounds tests that vectorizes; the valid columns written out with the bias added last and the
        activation (``activate_value``: bit for bit). Passes of a multiple of ``LANES`` values (zeros
        past each channel's phase planes), as ``depthwise``'s: no scalar remainder after the vectorized
        loop (a (7, 7) 3 x 3 plane's 61 values left 29 to it); the values past the plane never written."""
        n, c = x.shape[0], x.shape[1]
        o, cg = w.shape[0], w.shape[1]
        ho, wo, sw = y.shape[2], y.shape[3], cols.shape[0]
        if n * o * ho * wo == 0:
            return
        sh, ph, hq, wq, code = g[0], g[1], g[2], g[3], g[4]
        alpha, beta, zero, one = p[0], p[1], p[2], p[3]
        og = o // (c // cg) if cg > 0 else o
        length = ((ho - 1) * wq + wo + LANES - 1) // LANES * LANES  # (see the docstring's end)
        nt = taps.shape[0]
        nt4 = nt - nt % 4
        planes = sh * sw * hq * wq
        pad, acc = np.zeros((c, max(planes, (taps.max() if nt else 0) + length)), y.dtype), np.empty(length, y.dtype)
        for img in range(n):
            for ch in range(c):
                fill(pad[ch, :planes], x[img, ch], cols, sh, ph, wq)
            for oc in range(o):
                acc[:] = 0
                for ci in range(cg):
                    pc, wr = pad[(oc // og) * cg + ci], w[oc, ci]
                    for tap in range(0, nt4, 4):  # (four taps a pass over acc, added in tap order)
                        t0, t1, t2, t3 = taps[tap], taps[tap + 1], taps[tap + 2], taps[tap + 3]
                        s0, s1 = pc[t0:t0 + length], pc[t1:t1 + length]
                        s2, s3 = pc[t2:t2 + length], pc[t3:t3 + length]
                        w0, w1, w2, w3 = wr[tap], wr[tap + 1], wr[tap + 2], wr[tap + 3]
                        for q in range(length):
                            u = acc[q] + s0[q] * w0
                            u = u + s1[q] * w1
                            u = u + s2[q] * w2
                            acc[q] = u + s3[q] * w3
                    for tap in range(nt4, nt):
                        wv, src = wr[tap], pc[taps[tap]:taps[tap] + length]
                        for q in range(length):
                            acc[q] += src[q] * wv
                ys = y[img, oc]
                biased = b.shape[0] == o
                bo = b[oc] if biased else zero
                for oh in range(ho):
                    yr, ar = ys[oh], acc[oh * wq:oh * wq + wo]
                    for ow in range(wo):
                        yr[ow] = activate(ar[ow] + bo if biased else ar[ow], code, alpha, beta, zero, one)

    return direct


def _rows(activate):
    def direct_rows(x, w, b, y, g, p):  # pragma: no cover  (compiled by numba)
        """``_direct`` for output planes under ``PLANE_MIN_PIXELS`` pixels (a plane's flat loops would be
        a few values long): y (N, O, Ho, Wo) = act(conv of x (N, C, H, W) by w (O, C/groups, kh, kw),
        plus b (O,) if b has O values); ``g``: (sh, sw, ph, pw, dh, dw, activation code), ``p``:
        ``activation_jit.act_params``.

        The weight is first copied with its output channels innermost (groups, C/groups, kh, kw,
        O/groups). Per image, group and output row: each input channel's taps add their input value
        times the tap's weights of all the group's output channels to the row's accumulator (Wo,
        O/groups), a short contiguous loop LLVM vectorizes; taps in the padding are skipped by bounds;
        the bias added last, then the activation (as a separate pass rounds, bit for bit)."""
        n, c, h, wd = x.shape[0], x.shape[1], x.shape[2], x.shape[3]
        o, cg, kh, kw = w.shape[0], w.shape[1], w.shape[2], w.shape[3]
        ho, wo = y.shape[2], y.shape[3]
        sh, sw, ph, pw, dh, dw, code = g[0], g[1], g[2], g[3], g[4], g[5], g[6]
        alpha, beta, zero, one = p[0], p[1], p[2], p[3]
        groups = c // cg if cg > 0 else 1
        og = o // groups
        wt = np.empty((groups, cg, kh, kw, og), y.dtype)
        for oc in range(o):
            for ci in range(cg):
                for i in range(kh):
                    for j in range(kw):
                        wt[oc // og, ci, i, j, oc % og] = w[oc, ci, i, j]
        acc = np.empty((wo, og), y.dtype)
        biased = b.shape[0] == o
        for img in range(n):
            for gr in range(groups):
                for oh in range(ho):
                    acc[:, :] = 0
                    for ci in range(cg):
                        xs = x[img, gr * cg + ci]
                        for i in range(kh):
                            ih = oh * sh - ph + i * dh
                            if ih < 0 or ih >= h:
                                continue
                            for j in range(kw):
                                wv = wt[gr, ci, i, j]
                                off = j * dw - pw
                                lo = 0 if off >= 0 else (sw - 1 - off) // sw
                                hi = min(wo, (wd - 1 - off) // sw + 1)
                                for ow in range(lo, hi):
                                    xv = xs[ih, ow * sw + off]
                                    for oc in range(og):
                                        acc[ow, oc] += xv * wv[oc]
                    for oc in range(og):
                        bo = b[gr * og + oc] if biased else zero
                        yr = y[img, gr * og + oc, oh]
                        for ow in range(wo):
                            yr[ow] = activate(acc[ow, oc] + bo if biased else acc[ow, oc], code, alpha, beta,
                                              zero, one)

    return direct_rows


@functools.lru_cache(maxsize=1)
def _rows_fn():
    """The row-loop kernel function with the compiled ``activate_value`` inlined in it (made once)."""
    return _rows(jit.compiled(activate_value, always=True))


def _rows_kernel():
    """The compiled row loop, or None where compiled kernels are off."""
    return jit.compiled(_rows_fn()) if jit.enabled() else None


@functools.lru_cache(maxsize=256)
def _int_args(*values: int) -> np.ndarray:
    """A kernel's integer arguments as one read-only array (one argument where several scalars cost a
    compiled call an unboxing each), made once per geometry."""
    a = np.array(values, np.int64)
    a.flags.writeable = False
    return a


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


@functools.lru_cache(maxsize=256)
def _args(h: int, wd: int, weight_shape, stride, padding, dilation, dtype, act, alpha, beta) -> tuple:
    """``(flat, weight shape, args)`` for a call of the loops at this geometry: ``flat``, whether
    ``_direct``'s flat loop runs (else the row loop), the shape the weight is viewed as (None: as it
    is), the kernel's arguments after the output (made once per geometry and activation)."""
    o, cg, kh, kw = weight_shape
    ho, wo = conv.out_dim(h, kh, stride[0], padding[0], dilation[0]), conv.out_dim(wd, kw, stride[1], padding[1],
                                                                                  dilation[1])
    code, p = act_code(act), act_params(dtype, alpha, beta)
    if ho * wo < PLANE_MIN_PIXELS or ho == 1:  # (one output row: no rows to run together)
        return False, None, (_int_args(*stride, *padding, *dilation, code), p)
    cols, taps, hq, wq = phase_tables(h, wd, kh, kw, stride, padding, dilation)
    return True, (o, cg, kh * kw), (cols, taps, _int_args(stride[0], padding[0], hq, wq, code), p)


def conv2d_direct(xp, x, weight, bias, stride, padding, dilation, groups, out, act=None, alpha=0.2, beta=0.5):
    """conv2d by the compiled direct loop (None where it does not apply: the chooser's next choice runs);
    ``act``: ``nn.conv2d_act``'s activation applied in the loop (as its compiled pass rounds)."""
    if xp is not np or x.dtype not in FLOATS or weight.dtype != x.dtype or (bias is not None and bias.dtype != x.dtype) \
            or conv.is_depthwise(x, weight, groups):
        return None
    flat, wshape, args = _args(*x.shape[2:], weight.shape, stride, padding, dilation, x.dtype, act, alpha, beta)
    kern = with_fill(_direct) if flat else _rows_kernel()
    if kern is None:
        return None
    ho, wo = conv.out_size(x, weight, stride, padding, dilation)
    shape = (x.shape[0], weight.shape[0], ho, wo)
    into = out is not None and out.shape == shape and out.dtype == x.dtype and covering(out) is not None
    y = out if into else np.empty(shape, x.dtype)  # (the loops write channels [0, O) of ``covering``'s view)
    b = np.zeros(0, x.dtype) if bias is None else bias.reshape(-1)
    w = weight if wshape is None else weight.reshape(wshape)
    kern(np.ascontiguousarray(x), np.ascontiguousarray(w), np.ascontiguousarray(b), covering(y), *args)
    if out is None or into:
        return y
    out[...] = y
    return out


def bound_direct(x, weight, bias, stride, padding, dilation, groups, out, other, act=None, alpha=0.2, beta=0.5):
    """A compiled step's call of the direct loops (``conv2d.bind_conv2d``; ``conv_act``'s binding with
    its ``act``) with what the step's arrays fix made once (the kernel, the phase tables, the weight's
    view's shape, the arguments): ``fn(x, weight[, bias], out=)`` writes into a C-ordered ``out`` (the
    planned one: checked by identity) and takes any other call (another memory order, no planned
    output) to ``other`` (the step's generic binding). None where this call would not run the loops into
    ``out`` (issue #35: ``conv2d_direct``'s checks and copies cost about as much as a small layer's loop)."""
    if out is None or not (x.flags.c_contiguous and images_c_ordered(out)) or x.dtype not in FLOATS \
            or weight.dtype != x.dtype or out.dtype != x.dtype or (bias is not None and bias.dtype != x.dtype):
        return None
    flat, wshape, args = _args(*x.shape[2:], weight.shape, stride, padding, dilation, x.dtype, act, alpha, beta)
    kern = with_fill(_direct) if flat else _rows_kernel()
    ho, wo = conv.out_size(x, weight, stride, padding, dilation)
    if kern is None or out.shape != (x.shape[0], weight.shape[0], ho, wo) or conv.is_depthwise(x, weight, groups):
        return None
    planned, no_bias, into = out, np.zeros(0, x.dtype), covering(out)
    if into is None:
        return None

    def fn(x, w, b=None, out=None):  # (x, weight[, bias]: as the step passes them)
        if out is None or (out is not planned and not out.flags.c_contiguous) or not x.flags.c_contiguous:
            return other(x, w, b, out=out) if b is not None else other(x, w, out=out)
        kern(x, w if wshape is None else w.reshape(wshape), no_bias if b is None else b,
             into if out is planned else out, *args)
        return out

    return fn


DIRECT = Impl("conv2d", "direct", conv2d_direct,
              "float32/float64, numba, one image or groups > 1, not depthwise, at most conv_direct_max_macs "
              "multiply-adds (8x that for output planes of 64 pixels and up): "
              "one compiled loop over the input where it lies (no window or padded copies)", fallback=GROUPED)
