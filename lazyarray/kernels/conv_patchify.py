"""conv2d ``patchify``: a convolution whose windows tile its input (stride equal to the kernel, no padding:
ConvNeXt's 2 x 2 stride-2 downsampling) as one copy of its patches and one product, the reference's values bit
for bit.

Such a layer reads each input pixel once: its columns (``ops/conv.py``'s ``gemm_conv``: (N, C, kh, kw, Ho, Wo))
are the input itself seen as (N, C, Ho, kh, Wo, kw) and transposed, with no window view over a padded copy.
Here they are one ``numpy.copyto`` of that view into C-ordered scratch (slot 1, as ``im2col``'s columns), then
the same ``numpy.matmul`` of the (O, C*kh*kw) weight by the (N, C*kh*kw, Ho*Wo) columns into the output's
(N, O, Ho*Wo) view, then the same bias add: the same arrays in the same layouts reach BLAS, so the values are
``im2col``'s bit for bit (``conv2d[blocked]``, which took these layers, sums in another order). Measured
(convnext_mini's (N, 16, 8, 8) by (32, 16, 2, 2), one thread, CPU time, loaded 2-core machine, a compiled
step's bound call): batch 8 91 -> 64 us; at batch 1 (32K multiply-adds) ``blocked`` stays faster (13.9 against
18.1 us: the views and the calls cost more than its loop), hence ``conv_patchify_min_macs``. Its 4 x 4 stem of 3
channels stays ``blocked`` too (88 against 97 us at batch 8: a copy of runs of 4 values is most of its time),
hence ``conv_patchify_min_channels``.

Applies (``applies``): NumPy float32/float64 arrays of one dtype, ``groups == 1``, no padding, no dilation, a
kernel of more than one tap, stride equal to it, at least ``conv_patchify_min_channels`` input channels and
``conv_patchify_min_macs`` multiply-adds, an
output C-ordered (images as C-ordered blocks) when given, the tuning table's ``conv_patchify`` on. Input rows or
columns past the last whole window are read by no window and skipped, as by the reference.
"""
from __future__ import annotations

import numpy as np

from ..ops.scratch import scratch
from .conv_direct import image_rows, images_c_ordered
from .depthwise import FLOATS

# Smaller columns are a plain allocation (the arena's look-up costs more: 3.8 against 0.5 us here), as
# kernels/layer_norm.py's squares
SCRATCH_FROM_BYTES = 64 << 10


def applies(xp, x, weight, out, stride, padding, dilation, groups, t) -> bool:
    """``patchify`` runs this call: see the module."""
    kh, kw = weight.shape[2:]
    if not t.conv_patchify or xp is not np or x.__class__ is not np.ndarray or weight.__class__ is not np.ndarray \
            or groups != 1 or padding != (0, 0) or dilation != (1, 1) or stride != (kh, kw) or kh * kw < 2 \
            or x.dtype not in FLOATS or weight.dtype != x.dtype or x.shape[1] < t.conv_patchify_min_channels \
            or x.shape[0] * weight.size * (x.shape[2] // kh) * (x.shape[3] // kw) < t.conv_patchify_min_macs:
        return False
    return out is None or (out.__class__ is np.ndarray and out.dtype == x.dtype and images_c_ordered(out))


def _product(x, weight, bias, y):
    """``y`` (N, O, Ho, Wo), C-ordered images = the layer: the patches copied into scratch, one product per
    image over the batch, then the bias (``gemm_conv``'s steps on the same arrays)."""
    n, c = x.shape[:2]
    o, _, kh, kw = weight.shape
    ho, wo = y.shape[2], y.shape[3]
    shape = (n, c, kh, kw, ho, wo)
    cols = np.empty(shape, x.dtype) if x.itemsize * x.size < SCRATCH_FROM_BYTES else scratch(np, 1, shape, x.dtype)
    patches = x[:, :, :ho * kh, :wo * kw].reshape(n, c, ho, kh, wo, kw)  # (a copy where x is a view)
    np.copyto(cols, patches.transpose(0, 1, 3, 5, 2, 4))
    np.matmul(weight.reshape(o, c * kh * kw), cols.reshape(n, c * kh * kw, ho * wo), out=y.reshape(n, o, ho * wo))
    if bias is not None:
        y += bias.reshape(1, o, 1, 1)
    return y


def conv2d_patchify(xp, x, weight, bias, stride, padding, dilation, groups, out):
    """conv2d of a layer whose windows tile its input (``applies``' case) into ``out`` where its images are
    C-ordered blocks, else into a new array (copied into ``out`` when given); None where the arrays are not
    the case (the fallback, ``im2col``, runs)."""
    kh, kw = weight.shape[2:]
    if xp is not np or x.dtype not in FLOATS or weight.dtype != x.dtype or padding != (0, 0) \
            or tuple(dilation) != (1, 1) or tuple(stride) != (kh, kw) or groups != 1 \
            or (bias is not None and bias.dtype != x.dtype):
        return None
    shape = (x.shape[0], weight.shape[0], x.shape[2] // kh, x.shape[3] // kw)
    into = out is not None and out.shape == shape and out.dtype == x.dtype and images_c_ordered(out)
    y = _product(x, weight, bias, out if into else np.empty(shape, x.dtype))
    if out is None or into:
        return y
    out[...] = y
    return out


def bound_patchify(x, weight, out, other):
    """A compiled step's call of the layer (``conv2d.bind_conv2d``) with what the step fixes made once (the
    shapes, the planned output's (N, O, Ho*Wo) view, the patches' view of a C-ordered input): ``fn(x,
    weight[, bias], out=)`` runs ``conv2d_patchify``'s steps (its values bit for bit: the bias added to the same
    values, in another view) into a C-ordered ``out`` (the planned one: checked by identity); any other call
    goes to ``other`` (the step's generic binding). None without a C-ordered planned output."""
    if out is None or not images_c_ordered(out):
        return None
    n, c = x.shape[:2]
    o, _, kh, kw = weight.shape
    ho, wo = out.shape[2], out.shape[3]
    k, hw = c * kh * kw, ho * wo
    planned, rows, shape, dtype = out, out.reshape(n, o, hw), (n, c, kh, kw, ho, wo), x.dtype
    whole = x.shape[2] == ho * kh and x.shape[3] == wo * kw
    small = n * k * hw * dtype.itemsize < SCRATCH_FROM_BYTES

    def fn(x, w, b=None, out=None):  # (x, weight[, bias]: as the step passes them)
        r = image_rows(out, planned, rows)
        if r is None:
            return other(x, w, b, out=out) if b is not None else other(x, w, out=out)
        cols = np.empty(shape, dtype) if small else scratch(np, 1, shape, dtype)
        src = x if whole else x[:, :, :ho * kh, :wo * kw]
        np.copyto(cols, src.reshape(n, c, ho, kh, wo, kw).transpose(0, 1, 3, 5, 2, 4))
        np.matmul(w.reshape(o, k), cols.reshape(n, k, hw), out=r)
        if b is not None:
            np.add(r, b.reshape(o, 1), out=r)
        return out

    return fn
