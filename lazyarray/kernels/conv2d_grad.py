"""conv2d's gradients and conv2d_transpose: their implementations and choosers.

``ops/conv_grad.py`` and ``ops/conv.py`` hold the reference kernels (``col2im`` and the windows'
forms). Here, with groups == 1 on NumPy both gradients work batch last (``batch_last``), as the
forward's ``conv_batch_last.py`` does; ``col2im`` (the input gradient otherwise, and
conv2d_transpose) adds its windows with the compiled loop (``conv_jit.scatter_windows``, the same
adds in the same order) and multiplies small products on one BLAS thread.
"""
from __future__ import annotations

import numpy as np

from ..ops import conv, registry
from . import conv_batch_last, conv_jit
from .blas_threads import one_thread
from .impl import Choice, Impl
from .runner import noted


def scatter_windows(dx, parts, kernel, stride, dilation=(1, 1)):
    """``conv.scatter_windows`` by one compiled loop where numba takes the arrays (the same adds)."""
    if not conv_jit.scatter_windows(dx, parts, stride, dilation):
        conv.scatter_windows(dx, parts, kernel, stride, dilation)


def _serial(flops):
    return one_thread(flops)  # (small products: blas_threads.py)


def batch_last_input_grad(g, weight, shape, stride, padding, dilation):
    """``conv2d_input_grad`` with groups == 1 on NumPy, batch last: the columns ``W (O, K).T @
    g (O, Ho*Wo*N)`` added tap by tap into a zero-padded (C, H + 2p, W + 2p, N) buffer, in runs of
    N values (``col2im`` adds (N, C, Ho, Wo) windows in runs of Wo: 620-930 us on the demo CNN's
    second conv), then its interior as NCHW. The compiled loop (``conv_jit.add_columns``) adds the
    same terms in the same (tap) order, so both paths give the same bits."""
    n, c, h, w = shape
    o, _, kh, kw = weight.shape
    ho, wo = g.shape[2], g.shape[3]
    (sh, sw), (ph, pw), (dh, dw) = stride, padding, dilation
    m = ho * wo * n
    with one_thread(2.0 * o * c * kh * kw * m):  # (small products: blas_threads.py)
        cols = weight.reshape(o, c * kh * kw).T @ g.transpose(1, 2, 3, 0).reshape(o, m)
    cols = cols.reshape(c, kh, kw, ho, wo, n)
    padded = np.zeros((c, h + 2 * ph, w + 2 * pw, n), cols.dtype)
    if not conv_jit.add_columns(padded, cols, stride, dilation):
        for a in range(kh):
            for b in range(kw):
                r, q = a * dh, b * dw
                padded[:, r:r + sh * (ho - 1) + 1:sh, q:q + sw * (wo - 1) + 1:sw] += cols[:, a, b]
    return np.ascontiguousarray(padded[:, ph:ph + h, pw:pw + w].transpose(3, 0, 1, 2))


def batch_last_weight_grad(g, x, kh, kw, stride, padding, dilation):
    """``conv2d_weight_grad`` with groups == 1 on NumPy: ``g (O, M) @ columns (K, M).T``, the
    columns (one row per kernel tap (c, a, b), one column per output position in (Ho, Wo, N)
    order) filled by ``conv_batch_last.batch_last_conv``'s im2col: copies in runs of Wo * N values (about 14 us
    for the demo CNN's first conv, where copying window rows (N * Ho * Wo, K) out of the NCHW image,
    in runs of kw values, took 120-140). The compiled im2col (``conv_jit``) fills the same values,
    so the product is the same either way."""
    n, c = x.shape[:2]
    o, ho, wo = g.shape[1], g.shape[2], g.shape[3]
    k, m = c * kh * kw, n * ho * wo
    padded, interior, taps, cols = conv_batch_last.im2col_views(np, x.shape, x.dtype, kh, kw, stride, padding, dilation)
    if not conv_jit.im2col(x, cols, stride, padding, dilation):
        if padded is not None:
            padded[...] = 0
        interior[...] = x.transpose(1, 2, 3, 0)
        cols[...] = taps
    gt = g.transpose(1, 2, 3, 0).reshape(o, m)  # (a view of a batch-last g, else a copy)
    with one_thread(2.0 * o * k * m):  # (small products: blas_threads.py)
        dw = gt @ cols.reshape(k, m).T
    return dw.reshape(o, c, kh, kw)


def _input_batch_last(xp, g, weight, like, stride, padding, dilation, groups):
    return batch_last_input_grad(g, weight, like.shape, stride, padding, dilation)


def _input_col2im(xp, g, weight, like, stride, padding, dilation, groups):
    return conv.col2im(xp, g, weight, like.shape, stride, padding, dilation, groups, scatter_windows, _serial)


INPUT_BATCH_LAST = Impl("conv2d_input_grad", "batch_last", _input_batch_last,
                        "groups == 1 on NumPy: W.T @ g columns added tap by tap in runs of N values (a (C, H, W, N) "
                        "buffer of its own)")
INPUT_COL2IM = Impl("conv2d_input_grad", "col2im", _input_col2im,
                    "otherwise: col2im with the compiled adds, small products on one BLAS thread")
_INPUT = {impl: Choice(impl) for impl in (INPUT_BATCH_LAST, INPUT_COL2IM)}


def choose_input_grad(xp, g, weight, groups) -> Choice:
    """What runs ``conv2d_input_grad`` of these arrays."""
    if xp is np and groups == 1 and g.__class__ is np.ndarray and weight.__class__ is np.ndarray:
        return _INPUT[INPUT_BATCH_LAST]
    return _INPUT[INPUT_COL2IM]


def run_input_grad(xp, g, weight, like, stride=(1, 1), padding=(0, 0), dilation=(1, 1), groups=1, out=None):
    """conv2d_input_grad by the implementation ``choose_input_grad`` picks."""
    choice = choose_input_grad(xp, g, weight, groups)
    y = choice.impl.run(xp, g, weight, like, *conv.geometry(stride, padding, dilation, ""), groups)
    noted(choice, g, weight)
    return y


def _weight_batch_last(xp, g, x, kernel, stride, padding, dilation, groups):
    return batch_last_weight_grad(g, x, *conv.pair_param(kernel, "kernel", "", 1), stride, padding, dilation)


WEIGHT_BATCH_LAST = Impl("conv2d_weight_grad", "batch_last", _weight_batch_last,
                         "groups == 1 on NumPy: g @ columns.T, the columns by the forward's batch-last im2col")
_WEIGHT_BATCH_LAST = Choice(WEIGHT_BATCH_LAST)


def choose_weight_grad(xp, groups) -> Choice | None:
    """What runs ``conv2d_weight_grad``: ``batch_last``, or None (the reference kernel)."""
    return _WEIGHT_BATCH_LAST if groups == 1 and xp is np else None


def run_weight_grad(xp, g, x, kernel, stride=(1, 1), padding=(0, 0), dilation=(1, 1), groups=1, out=None):
    """conv2d_weight_grad by ``batch_last`` where it applies, else the reference kernel."""
    choice = choose_weight_grad(xp, groups)
    if choice is None:
        return _WEIGHT_REFERENCE(xp, g, x, kernel, stride, padding, dilation, groups)
    y = choice.impl.run(xp, g, x, kernel, *conv.geometry(stride, padding, dilation, ""), groups)
    noted(choice, g, x)
    return y


def _transpose_col2im(xp, x, weight, bias, stride, padding, output_padding, dilation, groups):
    return conv.transpose_col2im(xp, x, weight, bias, stride, padding, output_padding, dilation, groups,
                                 scatter_windows, _serial)


TRANSPOSE_COL2IM = Impl("conv2d_transpose", "col2im", _transpose_col2im,
                        "col2im with the compiled adds, small products on one BLAS thread")
_TRANSPOSE = Choice(TRANSPOSE_COL2IM)


def run_transpose(xp, x, weight, bias=None, stride=(1, 1), padding=(0, 0), output_padding=(0, 0), dilation=(1, 1),
                  groups=1, out=None):
    """conv2d_transpose by ``col2im`` with the compiled adds."""
    y = TRANSPOSE_COL2IM.run(xp, x, weight, bias, stride, padding, output_padding, dilation, groups)
    noted(_TRANSPOSE, x, weight)
    return y


_WEIGHT_REFERENCE = registry.get("conv2d_weight_grad").kernel
INPUT_IMPLS = (INPUT_BATCH_LAST, INPUT_COL2IM)
WEIGHT_IMPLS = (WEIGHT_BATCH_LAST,)
TRANSPOSE_IMPLS = (TRANSPOSE_COL2IM,)


def _choose_input(xp, g, weight, like, stride=(1, 1), padding=(0, 0), dilation=(1, 1), groups=1, out=None):
    return choose_input_grad(xp, g, weight, groups)


def _choose_weight(xp, g, x, kernel, stride=(1, 1), padding=(0, 0), dilation=(1, 1), groups=1, out=None):
    return choose_weight_grad(xp, groups)


def _choose_transpose(xp, *arrays, **params):
    return _TRANSPOSE


# op name -> its implementations, runner, and chooser for a call's arguments (``kernels.choose``)
IMPLS = {"conv2d_input_grad": INPUT_IMPLS, "conv2d_weight_grad": WEIGHT_IMPLS, "conv2d_transpose": TRANSPOSE_IMPLS}
RUNNERS = {"conv2d_input_grad": run_input_grad, "conv2d_weight_grad": run_weight_grad,
           "conv2d_transpose": run_transpose}
CHOOSERS = {"conv2d_input_grad": _choose_input, "conv2d_weight_grad": _choose_weight,
            "conv2d_transpose": _choose_transpose}
