"""``nn.conv2d_act[loop]``: a small 1x1 convolution with its bias and activation as one compiled loop.

Issue #35: SqueezeNet's, ShuffleNet's and MobileNet's 1x1 layers at batch 1 have a few thousand
multiply-adds ((1, 4, 7, 7) by (8, 4, 1, 1): 1,568). ``conv2d_act[fused, pointwise]`` runs them as
one BLAS product (``numpy.matmul``) and one compiled pass for the bias and the activation: two calls
with fixed costs of a microsecond or more each, and the Python between them (views of the input,
the weight and the output), for well under a microsecond of arithmetic. ``_pointwise`` does the layer
in one call: per image and output channel, each input channel's plane times its weight added to a
row accumulator (one flat loop over the pixels, which vectorizes), then ``act(acc + bias)`` written
into the output row (``activation_jit.activate_value``: the activation's ops rounded as the recorded
ops round them). It reads the input where it lies (an image stored C-ordered is a (C, H*W) view;
another order, one copy of the image), the weight and the bias at any strides.

Values: the sums run channel by channel from zero, not in BLAS's order, and their multiply-adds may
contract into fused ones (``jit.contracted``: ``_sums``, two output channels at a time, 10-20% off
MobileNetV3's layers), so they agree with the reference (and ``fused``, and ``conv2d[direct]``) within
float rounding (rtol 1e-5 float32, 1e-12 float64, as ``conv2d[direct]``'s), not bit for bit; the bias is
added last, as the reference adds it, and the activation (compiled without contraction) rounds as the
reference's calls. The step's binding and the runner run the same loop, so a program and an eager call
give the same values bit for bit.

Applies (``applies``): conv2d's choice ``pointwise`` with a bias of the input's dtype (so float32/
float64 NumPy arrays, a C-ordered output), numba on, the tuning table's ``conv_pointwise_loop`` on and
at most ``conv_pointwise_loop_max_macs`` multiply-adds (the batch's; past that BLAS's product wins:
at (1, 16, 8, 8) by (32, 16, 1, 1), 32K multiply-adds, the two ran even on the development machine),
or up to ``NARROW_MACS`` times that for a weight of at most ``conv_pointwise_loop_narrow_weights`` values.

conv2d's ``loop`` (``LOOP``, ``conv2d_pointwise_loop``): the same loop for a layer with a bias and no
activation (conv2d_act[loop]'s values without one, bit for bit), which ``conv2d.with_bias`` picks for
``pointwise``'s small layers once the bias is known (MobileNet's projection layers: issue #35).
"""
from __future__ import annotations

import functools

import numpy as np

from .. import jit
from .activation_jit import act_code, act_params, activate_row
from .conv_direct import POINTWISE
from .covering_view import covering
from .impl import Impl

# Layers of at most ``conv_pointwise_loop_narrow_weights`` weights (O * C) take the loop up to NARROW_MACS
# times ``conv_pointwise_loop_max_macs``: BLAS's product of a (O, C) weight that small runs at a fraction of
# its speed (one thread: MobileNet's batch-8 layers, (8, 8, 16, 16) by (24, 8, 1, 1), 393K multiply-adds,
# the loop 0.5x the product's and bias pass's CPU time; (8, 32, 8, 8) by (32, 32, 1, 1), O * C = 1024, 1.07x)
NARROW_MACS = 16


def _make(activate, sums):
    def _pointwise(x, w, b, y, code, p):  # pragma: no cover  (compiled by numba)
        """y[:, :O] (N, O, H, W) = act(w (O, C, 1, 1) . x (N, C, H, W) + b (O,)) (``y`` C-ordered, O channels
        or more: ``covering_view.covering``; ``p``: ``activation_jit.act_params``). Per image the sums
        into the output's rows (``sums``: ``_sums``, whose multiply-adds may contract), then each row
        ``act(row + bias)`` in place (``activate``: ``activation_jit.activate_row``, compiled here without
        contraction, so it rounds as the reference's calls; one vectorized loop per activation)."""
        n, c = x.shape[0], x.shape[1]
        o, hw = w.shape[0], y.shape[2] * y.shape[3]
        alpha, beta, zero, one = p[0], p[1], p[2], p[3]
        for img in range(n):
            xs = np.ascontiguousarray(x[img]).reshape(c, hw)  # (a view where the image is C-ordered)
            ys = y[img].reshape(y.shape[1], hw)
            sums(xs, w, ys, zero)
            for oc in range(o):
                yr = ys[oc]
                activate(yr, yr, b[oc], code, alpha, beta, zero, one)

    return _pointwise


@jit.contracted
def _sums(xs, w, ys, zero):  # pragma: no cover  (compiled by numba)
    """``ys[oc]`` = ``w[oc, :, 0, 0]`` times the planes ``xs`` (C, HW), for each of w's O output channels:
    each sum from ``zero`` over the input channels in order, four a pass over the row; output channels
    two at a time (each input value loaded once for both rows: two independent chains), the last of an
    odd count alone. Its multiply-adds may contract into fused ones (``jit.contracted``: 10-20% off
    MobileNetV3's 1x1 layers; the values within float rounding of the separate products, as the sums'
    order already is)."""
    c, hw = xs.shape
    o = w.shape[0]
    c4 = c - c % 4
    for oc in range(0, o - o % 2, 2):
        a0, a1, wr, vr = ys[oc], ys[oc + 1], w[oc, :, 0, 0], w[oc + 1, :, 0, 0]
        for q in range(hw):
            a0[q] = zero
            a1[q] = zero
        for ci in range(0, c4, 4):
            x0, x1, x2, x3 = xs[ci], xs[ci + 1], xs[ci + 2], xs[ci + 3]
            w0, w1, w2, w3 = wr[ci], wr[ci + 1], wr[ci + 2], wr[ci + 3]
            v0, v1, v2, v3 = vr[ci], vr[ci + 1], vr[ci + 2], vr[ci + 3]
            for q in range(hw):
                e0, e1, e2, e3 = x0[q], x1[q], x2[q], x3[q]
                s = a0[q] + e0 * w0
                t = a1[q] + e0 * v0
                s = s + e1 * w1
                t = t + e1 * v1
                s = s + e2 * w2
                t = t + e2 * v2
                a0[q] = s + e3 * w3
                a1[q] = t + e3 * v3
        for ci in range(c4, c):
            xr, w0, v0 = xs[ci], wr[ci], vr[ci]
            for q in range(hw):
                a0[q] += xr[q] * w0
                a1[q] += xr[q] * v0
    if o % 2:
        acc, wr = ys[o - 1], w[o - 1, :, 0, 0]
        for q in range(hw):
            acc[q] = zero
        for ci in range(0, c4, 4):
            w0, w1, w2, w3 = wr[ci], wr[ci + 1], wr[ci + 2], wr[ci + 3]
            x0, x1, x2, x3 = xs[ci], xs[ci + 1], xs[ci + 2], xs[ci + 3]
            for q in range(hw):
                u = acc[q] + x0[q] * w0
                u = u + x1[q] * w1
                u = u + x2[q] * w2
                acc[q] = u + x3[q] * w3
        for ci in range(c4, c):
            wv, xr = wr[ci], xs[ci]
            for q in range(hw):
                acc[q] += xr[q] * wv


@functools.lru_cache(maxsize=1)
def _kernel_fn():
    """The kernel function with the compiled ``activate_row`` inlined in it and ``_sums`` (made once)."""
    return _make(jit.compiled(activate_row, always=True), jit.compiled(_sums, always=True))


def kernel():
    """The compiled ``_pointwise``, or None where compiled kernels are off."""
    return jit.compiled(_kernel_fn()) if jit.enabled() else None


def applies(x, weight, bias, t) -> bool:
    """The loop runs a call that conv2d's ``pointwise`` runs (the caller's condition) with a bias of the
    input's dtype, by the tuning table ``t``: see the module."""
    n, c, h, w = x.shape
    o = weight.shape[0]
    macs = n * o * c * h * w
    fits = macs <= t.conv_pointwise_loop_max_macs or (
        o * c <= t.conv_pointwise_loop_narrow_weights and macs <= NARROW_MACS * t.conv_pointwise_loop_max_macs)
    return bias is not None and bias.dtype == x.dtype and t.conv_pointwise_loop and fits and jit.enabled()


def run_loop(xp, x, weight, bias, act, alpha, beta, out):
    """conv2d_act of a 1x1 layer (``pointwise``'s case, with a bias) by the loop, into ``out`` (its images
    C-ordered blocks at any batch stride: a batch's part of a concatenation written in place) or a new
    array; None where the kernel is off or ``out``'s images are not C-ordered (the caller's next choice
    runs)."""
    kern = kernel()
    if kern is None or (out is not None and covering(out) is None):
        return None
    n, _, h, w = x.shape
    y = np.empty((n, weight.shape[0], h, w), x.dtype) if out is None else out
    kern(x, weight, bias, covering(y), act_code(act), act_params(x.dtype, alpha, beta))
    return y


def bound_loop(x, weight, bias, act, alpha, beta, out, other):
    """A compiled step's call of the loop with what the step fixes made once (the kernel, the
    activation's code and scalars): ``fn(x, weight, bias, out=)`` writes into a C-ordered ``out``
    (the planned buffer: checked by identity) and takes any other call to ``other`` (the runner's
    path); None where the kernel is off."""
    kern = kernel()
    if kern is None:
        return None
    code, p = act_code(act), act_params(x.dtype, alpha, beta)
    planned = out if out is not None and covering(out) is not None else None
    rows = None if planned is None else covering(planned)

    def fn(x, w, b, out=None):
        if out is not None and out is planned:
            kern(x, w, b, rows, code, p)
            return out
        if out is None or not out.flags.c_contiguous:
            return other(x, w, b, out=out)
        kern(x, w, b, out, code, p)
        return out

    return fn


def conv2d_loop(xp, x, weight, bias, stride, padding, dilation, groups, out):
    """conv2d ``loop``: a 1x1 layer without an activation (``pointwise``'s case, with a bias of the input's
    dtype) by the same loop as ``nn.conv2d_act[loop]`` (its values with no activation bit for bit); None
    where there is no such bias, the kernel is off or ``out``'s images are not C-ordered (``pointwise``
    runs)."""
    if bias is None or bias.dtype != x.dtype:
        return None
    return run_loop(xp, x, weight, bias, None, 0.0, 0.0, out)


def conv2d_applies(x, weight, bias, t) -> bool:
    """conv2d ``loop`` runs a call ``pointwise`` takes (the caller's condition): ``conv2d_pointwise_loop``
    on and the loop's own condition (``applies``)."""
    return t.conv2d_pointwise_loop and applies(x, weight, bias, t)


LOOP = Impl("conv2d", "loop", conv2d_loop,
            "pointwise's case with a bias and at most conv_pointwise_loop_max_macs multiply-adds, "
            "conv2d_pointwise_loop on, numba: the product and the bias in one compiled loop (nn.conv2d_act[loop]'s "
            "without an activation)", fallback=POINTWISE)
