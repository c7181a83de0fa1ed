"""conv2d's gradients as registered ops: ``nn.conv2d_input_grad`` and ``nn.conv2d_weight_grad``.

With groups == 1 on NumPy both work batch last, like ``conv._batch_last_conv``:

* the weight gradient is ``g (O, Ho*Wo*N) @ columns (K, Ho*Wo*N).T``, the columns filled by the
  forward's im2col (``conv.im2col_views``; compiled: ``conv_jit.im2col``), whose copies run in
  runs of Wo * N values (window rows copied out of the NCHW image ran in runs of kw: 3-4x slower
  on the demo CNN's convolutions, 1.1-1.5x on 16-56 pixel images);
* the input gradient adds ``W.T @ g`` columns tap by tap into a zero-padded (C, H, W, N) buffer in
  runs of N values (compiled: ``conv_jit.add_columns``, in the same tap order: the same bits).

Grouped and depthwise convolutions and other array modules keep the windows' forms
(``conv.col2im`` and strided window views).
"""
from __future__ import annotations

import numpy as np

from ..errors import ShapeError, fmt_shape
from . import conv_jit
from .blas_threads import one_thread
from .conv import (
    _CONV_PARAMS,
    _conv_workspace,
    _divides,
    _geometry,
    _im2col_groups,
    _is_depthwise,
    check_nchw,
    check_pair_param,
    col2im,
    conv_windows,
    im2col_views,
    padded_shape,
    pair_param,
)
from .params import INTS, Param
from .registry import OpDef, register


def _conv2d_input_grad(xp, g, weight, like, stride=(1, 1), padding=(0, 0), dilation=(1, 1), groups=1, out=None):
    if xp is np and groups == 1 and g.__class__ is np.ndarray and weight.__class__ is np.ndarray:
        return _dense_input_grad(g, weight, like.shape, *_geometry(stride, padding, dilation))
    return col2im(xp, g, weight, like.shape, *_geometry(stride, padding, dilation), groups)


def _dense_input_grad(g, weight, shape, stride, padding, dilation):
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


def _input_grad_workspace(avals, stride=(1, 1), padding=(0, 0), **p):
    shape = avals[2].shape
    if len(shape) != 4:
        return []
    return [("padded input gradient", padded_shape(shape, pair_param(padding, "padding", "", 0)), avals[0].dtype)]


register(OpDef("conv2d_input_grad", ("g", "weight", "like"), _conv2d_input_grad, params=_CONV_PARAMS,
               shape=lambda shapes, **p: shapes[2],
               dtype=lambda dtypes, **p: np.result_type(dtypes[0], dtypes[1]), namespace="nn",
               workspace=_input_grad_workspace,
               doc="conv2d's gradient w.r.t. its input (col2im); only like's shape is read"))


def _conv2d_weight_grad(xp, g, x, kernel, stride=(1, 1), padding=(0, 0), dilation=(1, 1), groups=1, out=None):
    kh, kw = pair_param(kernel, "kernel", "", 1)
    n, c = x.shape[:2]
    o = g.shape[1]
    geometry = (pair_param(stride, "stride", "", 1), pair_param(padding, "padding", "", 0), pair_param(dilation, "dilation", "", 1))
    if groups == 1 and xp is np:
        return _dense_weight_grad(g, x, kh, kw, *geometry)
    win = conv_windows(xp, x, (kh, kw), geometry[0], geometry[1], dilation=geometry[2])
    if groups == 1:
        cols = win.transpose(0, 2, 3, 1, 4, 5).reshape(-1, c * kh * kw)
        dw = g.transpose(1, 0, 2, 3).reshape(o, -1) @ cols
        return dw.reshape(o, c, kh, kw)
    if _is_depthwise(groups, c, (o, c // groups, kh, kw)):  # per tap: sum of g * what the tap read
        dw = xp.empty((o, 1, kh, kw), dtype=xp.result_type(g, x))
        for i in range(kh):
            for j in range(kw):
                dw[:, 0, i, j] = (g * win[..., i, j]).sum(axis=(0, 2, 3))
        return dw
    ho, wo = win.shape[2], win.shape[3]
    og = o // groups
    gg = g.reshape(n, groups, og, ho, wo).transpose(1, 2, 0, 3, 4).reshape(groups, og, n * ho * wo)
    return (gg @ _im2col_groups(win, groups)).reshape(o, c // groups, kh, kw)


def _dense_weight_grad(g, x, kh, kw, stride, padding, dilation):
    """``conv2d_weight_grad`` with groups == 1 on NumPy: ``g (O, M) @ columns (K, M).T``, the
    columns (one row per kernel tap (c, a, b), one column per output position in (Ho, Wo, N)
    order) filled by ``_batch_last_conv``'s im2col: copies in runs of Wo * N values (about 14 us
    for the demo CNN's first conv, where copying window rows (N * Ho * Wo, K) out of the NCHW image,
    in runs of kw values, took 120-140). The compiled im2col (``conv_jit``) fills the same values,
    so the product is the same either way."""
    n, c = x.shape[:2]
    o, ho, wo = g.shape[1], g.shape[2], g.shape[3]
    k, m = c * kh * kw, n * ho * wo
    padded, interior, taps, cols = im2col_views(np, x.shape, x.dtype, kh, kw, stride, padding, dilation)
    if not conv_jit.im2col(x, cols, stride, padding, dilation):
        if padded is not None:
            padded[...] = 0
        interior[...] = x.transpose(1, 2, 3, 0)
        cols[...] = taps
    gt = g.transpose(1, 2, 3, 0).reshape(o, m)  # (a view of a batch-last g, else a copy)
    with one_thread(2.0 * o * k * m):  # (small products: blas_threads.py)
        dw = gt @ cols.reshape(k, m).T
    return dw.reshape(o, c, kh, kw)


def _conv2d_weight_grad_shape(shapes, kernel, stride=(1, 1), padding=(0, 0), dilation=(1, 1), groups=1):
    g, x = shapes
    check_nchw(g, "g", "conv2d_weight_grad")
    check_nchw(x, "x", "conv2d_weight_grad")
    for what, s in (("g", g), ("x", x)):
        if not _divides(groups, s[1]):
            raise ShapeError(f"{what} {fmt_shape(s)} has {s[1]} channels, not divisible by groups={groups}")
    return (g[1], None if x[1] is None else x[1] // groups) + pair_param(kernel, "kernel", "conv2d_weight_grad", 1)


register(OpDef("conv2d_weight_grad", ("g", "x"), _conv2d_weight_grad,
               params=(Param("kernel", INTS, check=check_pair_param(1)),) + _CONV_PARAMS,
               shape=_conv2d_weight_grad_shape,
               dtype=lambda dtypes, **p: np.result_type(*dtypes), namespace="nn",
               workspace=_conv_workspace(1, lambda avals, p: pair_param(p["kernel"], "kernel", "", 1)),
               doc="conv2d's gradient w.r.t. its (O, C/groups, kh, kw) weight"))
