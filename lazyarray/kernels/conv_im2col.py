"""conv2d ``im2col_compiled``: the reference's im2col and products, its columns written by one compiled
pass straight from the image.

The reference (``ops/conv.py``'s ``gemm_conv``) pads the batch into a new array (``np.zeros`` and a
copy), then NumPy copies every window row of its strided (N, C, Ho, Wo, kh, kw) view into the (N, C,
kh, kw, Ho, Wo) columns in runs of ``Wo`` values: about 45% of a small layer's time at batch 8
(issue #35: ResNet's (8, 8, 16, 16) 3x3 layer, 20 us padding and 96 us copying of 260 us CPU).
``_columns`` instead copies each image plane once into zero-padded phase planes (``phase_planes``,
as ``depthwise``'s and ``direct``'s loops do; no padded batch) and each tap's column rows from one
of them, in one compiled call; the columns (the same scratch slot, shape and values), the products
(one ``W (O, C*kh*kw) @ cols (C*kh*kw, Ho*Wo)`` per image, one ``numpy.matmul`` over the batch,
into the planned output) and the bias add are the reference's, so the values are its bit for bit.
Measured (one thread, CPU time, batch 8): ResNet's 3x3 layers 264 -> 227, 164 -> 130 and 298 ->
185 us, the 3-channel stems 343 -> 305 and 164 -> 138 us; a 1x1 kernel's columns gain nothing
(52 -> 73 us: the phase planes are a second copy), so the chooser leaves those to ``im2col``. It
takes NumPy float32/float64 arrays of one dtype, ``groups == 1``, numba on; elsewhere (or in a
program's first run, ``jit.tiered``) ``im2col`` runs.
"""
from __future__ import annotations

import numpy as np

from .. import jit
from ..ops import conv
from ..ops.scratch import scratch
from .depthwise import FLOATS
from .phase_planes import phase_tables, with_fill


@jit.tiered
def _columns(fill):
    """The columns kernel, ``fill`` (``phase_planes.FILL``) compiled into it (``phase_planes.with_fill``)."""
    def columns(x, cols, tables, taps, sh, ph, hq, wq):  # pragma: no cover  (compiled by numba)
        """cols (N, C * kh * kw, Ho, Wo) from x (N, C, H, W); ``tables``, ``taps``, ``hq``, ``wq``:
        ``phase_tables``' cols, taps, Hq and Wq. Per image plane: the plane copied into zero-padded
        phase planes (``fill``, the padding zeros as the reference's padded copy); tap t's column row
        (oh, ow) is then flat position oh * Wq + ow of the slice of a phase plane from ``taps[t]``,
        each output row one run (slices only: no index can wrap, which kept LLVM from vectorizing)."""
        n_n, c_n = x.shape[0], x.shape[1]
        n_taps, ho, wo = taps.shape[0], cols.shape[2], cols.shape[3]
        planes = sh * tables.shape[0] * hq * wq
        pad = np.zeros(planes, cols.dtype)
        for n in range(n_n):
            for c in range(c_n):
                fill(pad, x[n, c], tables, sh, ph, wq)
                for t in range(n_taps):
                    src, dst = pad[taps[t]:], cols[n, c * n_taps + t]
                    for oh in range(ho):
                        s, d = src[oh * wq:oh * wq + wo], dst[oh]
                        for ow in range(wo):
                            d[ow] = s[ow]

    return columns


def applies(xp, x, weight, bias, out, groups) -> bool:
    """The compiled columns run this call: NumPy float32/float64 arrays of one dtype (``out`` and
    ``bias`` too, where given), ``groups == 1``, numba on."""
    if xp is not np or groups != 1 or x.dtype not in FLOATS or weight.dtype != x.dtype:
        return False
    if (bias is not None and bias.dtype != x.dtype) or (out is not None and out.dtype != x.dtype):
        return False
    return jit.enabled()


def conv2d_im2col_compiled(xp, x, weight, bias, stride, padding, dilation, groups, out):
    """conv2d as one product per image over row-padded columns written by ``_columns`` (None where
    that does not apply: ``im2col`` runs)."""
    if not applies(xp, x, weight, bias, out, groups):
        return None
    kern = with_fill(_columns)
    if kern is None:
        return None
    n, c, h, w = x.shape
    o, _, kh, kw = weight.shape
    ho, wo = conv.out_size(x, weight, stride, padding, dilation)
    tables, taps, hq, wq = phase_tables(h, w, kh, kw, stride, padding, dilation)
    k = c * kh * kw
    cols = scratch(np, 1, (n, k, ho, wo), x.dtype)  # (the reference's columns: the same slot and size)
    kern(np.ascontiguousarray(x), cols, tables, taps, stride[0], padding[0], hq, wq)
    shape = (n, o, ho, wo)
    target = conv.into(np, out, shape, x.dtype)
    y = np.matmul(weight.reshape(o, k), cols.reshape(n, k, ho * wo),
                  out=None if target is None else target.reshape(n, o, ho * wo)).reshape(shape)
    if bias is not None:
        y += bias.reshape(1, o, 1, 1)
    if target is not None:
        return target
    if out is None:
        return y
    out[...] = y
    return out
