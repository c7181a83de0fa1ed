"""conv2d ``pointwise_strided``: a 1x1 convolution with a stride (ResNet's downsampling shortcut) as one
copy of the pixels it reads and one product, the reference's values bit for bit.

A 1x1 kernel with stride (sh, sw) and no padding reads only the input pixels ``x[:, :, ::sh, ::sw]``:
the layer is ``weight (O, C) @ those pixels (C, Ho*Wo)`` per image, ``pointwise``'s product over a
subsampled input. The chooser's last resort for it was ``im2col`` (``ops/conv.py``'s ``gemm_conv``):
window views over a padded-or-contiguous copy, a 6-D strided copy into the columns, the product, the
bias. Here the columns are one 4-D strided copy (``numpy.copyto`` of the view into C-ordered scratch,
slot 1 as ``im2col``'s columns), then the same ``numpy.matmul`` on the same (N, C, Ho*Wo) matrix into
the output's (N, O, Ho*Wo) view, then the same bias add: the same arrays in the same layouts reach
BLAS, so the values are ``im2col``'s bit for bit. Issue #35: resnet_mini's (8, 8, 16, 16) by
(16, 8, 1, 1) stride-2 layer at batch 8, 52 -> 29 us of CPU time in isolation.

Applies (``applies``): the chooser's ``im2col`` case (``groups == 1``, none of the faster choices) with
NumPy float32/float64 arrays of one dtype, a 1x1 kernel, a stride other than (1, 1) (stride 1 is
``pointwise``'s), no padding, an output C-ordered (images as C-ordered blocks) when given, the tuning
table's ``conv_pointwise_strided`` on. Elsewhere ``im2col`` runs as before.
"""
from __future__ import annotations

import numpy as np

from ..ops import conv
from ..ops.scratch import scratch
from .conv_direct import images_c_ordered
from .depthwise import FLOATS


def applies(xp, x, weight, bias, out, stride, padding, groups, t) -> bool:
    """``pointwise_strided`` runs this call of ``im2col``'s case: see the module."""
    if not t.conv_pointwise_strided or xp is not np or groups != 1 or weight.shape[2:] != (1, 1) \
            or stride == (1, 1) or padding != (0, 0) or x.dtype not in FLOATS or weight.dtype != x.dtype:
        return False
    if (bias is not None and bias.dtype != x.dtype) or (out is not None and out.dtype != x.dtype):
        return False
    return out is None or images_c_ordered(out)


def _product(x, weight, bias, stride, y):
    """``y`` (N, O, Ho, Wo), C-ordered images = the layer: the strided pixels copied into scratch, one
    product per image over the batch, then the bias (``gemm_conv``'s steps on the same arrays)."""
    n, c = x.shape[:2]
    o, ho, wo = weight.shape[0], y.shape[2], y.shape[3]
    cols = scratch(np, 1, (n, c, ho, wo), x.dtype)
    np.copyto(cols, x[:, :, ::stride[0], ::stride[1]])
    np.matmul(weight.reshape(o, c), cols.reshape(n, c, ho * wo), out=y.reshape(n, o, ho * wo))
    if bias is not None:
        y += bias.reshape(1, o, 1, 1)
    return y


def conv2d_pointwise_strided(xp, x, weight, bias, stride, padding, dilation, groups, out):
    """conv2d of a strided 1x1 layer (``applies``' case) into ``out`` where its images are C-ordered
    blocks, else into a new array (copied into ``out`` when given); None where the arrays are not the
    case (the fallback, ``im2col``, runs)."""
    if xp is not np or x.dtype not in FLOATS or weight.dtype != x.dtype or weight.shape[2:] != (1, 1) \
            or padding != (0, 0) or (bias is not None and bias.dtype != x.dtype):
        return None
    ho, wo = conv.out_size(x, weight, stride, padding, dilation)
    shape = (x.shape[0], weight.shape[0], ho, wo)
    into = out is not None and out.shape == shape and out.dtype == x.dtype and images_c_ordered(out)
    y = _product(x, weight, bias, stride, out if into else np.empty(shape, x.dtype))
    if out is None or into:
        return y
    out[...] = y
    return out


def bound_strided(x, weight, stride, out, other):
    """A compiled step's call of the layer (``conv2d.bind_conv2d``) with what the step fixes made once
    (the shapes, the planned output's (N, O, Ho*Wo) view): ``fn(x, weight[, bias], out=)`` writes into a
    C-ordered ``out`` (the planned one: checked by identity) the steps of ``conv2d_pointwise_strided``
    (its values bit for bit: the bias added to the same values, in another view); any other call goes
    to ``other`` (the step's generic binding). None without a C-ordered planned output."""
    if out is None or not images_c_ordered(out):
        return None
    n, c = x.shape[:2]
    o, ho, wo = weight.shape[0], out.shape[2], out.shape[3]
    sh, sw = stride
    planned, rows, shape, dtype = out, out.reshape(n, o, ho * wo), (n, c, ho, wo), x.dtype

    def fn(x, w, b=None, out=None):  # (x, weight[, bias]: as the step passes them)
        if out is planned:
            r = rows
        elif out is not None and out.flags.c_contiguous:  # (a program's output: new memory each run)
            r = out.reshape(n, o, ho * wo)
        else:
            return other(x, w, b, out=out) if b is not None else other(x, w, out=out)
        cols = scratch(np, 1, shape, dtype)
        np.copyto(cols, x[:, :, ::sh, ::sw])
        np.matmul(w.reshape(o, c), cols.reshape(n, c, ho * wo), out=r)
        if b is not None:
            np.add(r, b.reshape(o, 1), out=r)
        return out

    return fn
