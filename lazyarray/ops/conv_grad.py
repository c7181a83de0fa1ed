"""conv2d's gradients as registered ops: ``nn.conv2d_input_grad`` and ``nn.conv2d_weight_grad``,
with their reference kernels: ``conv.col2im`` and the windows' forms (strided window views).

The kernels layer (``kernels/conv2d_grad.py``) runs them faster: with groups == 1 on NumPy both
work batch last, like ``kernels/conv_batch_last.py``:

* the weight gradient is ``g (O, Ho*Wo*N) @ columns (K, Ho*Wo*N).T``, the columns filled by the
  forward's im2col (``conv.im2col_views``; compiled: ``conv_jit.im2col``), whose copies run in
  runs of Wo * N values (window rows copied out of the NCHW image ran in runs of kw: 3-4x slower
  on the demo CNN's convolutions, 1.1-1.5x on 16-56 pixel images);
* the input gradient adds ``W.T @ g`` columns tap by tap into a zero-padded (C, H, W, N) buffer in
  runs of N values (compiled: ``conv_jit.add_columns``, in the same tap order: the same bits).
"""
from __future__ import annotations

import numpy as np

from ..errors import ShapeError, fmt_shape
from .conv import (
    CONV_PARAMS,
    check_nchw,
    check_pair_param,
    col2im,
    conv_windows,
    conv_workspace,
    depthwise_shape,
    divides,
    geometry,
    im2col_groups,
    padded_shape,
    pair_param,
)
from .params import INTS, Param
from .registry import OpDef, register


def _conv2d_input_grad(xp, g, weight, like, stride=(1, 1), padding=(0, 0), dilation=(1, 1), groups=1, out=None):
    """The reference kernel: ``col2im`` (the kernels layer's ``conv2d_grad.py`` runs faster ways)."""
    return col2im(xp, g, weight, like.shape, *geometry(stride, padding, dilation, ""), groups)


def _input_grad_workspace(avals, stride=(1, 1), padding=(0, 0), **p):
    shape = avals[2].shape
    if len(shape) != 4:
        return []
    return [("padded input gradient", padded_shape(shape, pair_param(padding, "padding", "", 0)), avals[0].dtype)]


register(OpDef("conv2d_input_grad", ("g", "weight", "like"), _conv2d_input_grad, params=CONV_PARAMS,
               shape=lambda shapes, **p: shapes[2],
               dtype=lambda dtypes, **p: np.result_type(dtypes[0], dtypes[1]), namespace="nn",
               workspace=_input_grad_workspace,
               doc="conv2d's gradient w.r.t. its input (col2im); only like's shape is read"))


def _conv2d_weight_grad(xp, g, x, kernel, stride=(1, 1), padding=(0, 0), dilation=(1, 1), groups=1, out=None):
    kh, kw = pair_param(kernel, "kernel", "", 1)
    n, c = x.shape[:2]
    o = g.shape[1]
    geometry = (pair_param(stride, "stride", "", 1), pair_param(padding, "padding", "", 0), pair_param(dilation, "dilation", "", 1))
    win = conv_windows(xp, x, (kh, kw), geometry[0], geometry[1], dilation=geometry[2])
    if groups == 1:
        cols = win.transpose(0, 2, 3, 1, 4, 5).reshape(-1, c * kh * kw)
        dw = g.transpose(1, 0, 2, 3).reshape(o, -1) @ cols
        return dw.reshape(o, c, kh, kw)
    if depthwise_shape(groups, c, (o, c // groups, kh, kw)):  # per tap: sum of g * what the tap read
        dw = xp.empty((o, 1, kh, kw), dtype=xp.result_type(g, x))
        for i in range(kh):
            for j in range(kw):
                dw[:, 0, i, j] = (g * win[..., i, j]).sum(axis=(0, 2, 3))
        return dw
    ho, wo = win.shape[2], win.shape[3]
    og = o // groups
    gg = g.reshape(n, groups, og, ho, wo).transpose(1, 2, 0, 3, 4).reshape(groups, og, n * ho * wo)
    return (gg @ im2col_groups(win, groups)).reshape(o, c // groups, kh, kw)


def _conv2d_weight_grad_shape(shapes, kernel, stride=(1, 1), padding=(0, 0), dilation=(1, 1), groups=1):
    g, x = shapes
    check_nchw(g, "g", "conv2d_weight_grad")
    check_nchw(x, "x", "conv2d_weight_grad")
    for what, s in (("g", g), ("x", x)):
        if not divides(groups, s[1]):
            raise ShapeError(f"{what} {fmt_shape(s)} has {s[1]} channels, not divisible by groups={groups}")
    return (g[1], None if x[1] is None else x[1] // groups) + pair_param(kernel, "kernel", "conv2d_weight_grad", 1)


register(OpDef("conv2d_weight_grad", ("g", "x"), _conv2d_weight_grad,
               params=(Param("kernel", INTS, check=check_pair_param(1)),) + CONV_PARAMS,
               shape=_conv2d_weight_grad_shape,
               dtype=lambda dtypes, **p: np.result_type(*dtypes), namespace="nn",
               workspace=conv_workspace(1, lambda avals, p: pair_param(p["kernel"], "kernel", "", 1)),
               doc="conv2d's gradient w.r.t. its (O, C/groups, kh, kw) weight"))
