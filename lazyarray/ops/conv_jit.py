"""Compiled im2col for ``conv._batch_last_conv`` (``jit.compiled``): the columns in one pass.

The NumPy path builds a small batch's im2col columns in three copies: zero a padded
(C, H + 2p, W + 2p, N) scratch, copy the image into its interior, then copy every tap's
strided view of it into the (C, kh, kw, Ho, Wo, N) columns. Here one loop writes each column
row straight from the image, zeros where a tap falls in the padding: the same values (a copy
is a copy), about a third of the memory traffic. The product and the bias stay NumPy's.
"""
from __future__ import annotations

import numpy as np

from .. import jit

_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))


def _im2col_batch_last(mem, cols, sh, sw, ph, pw, dh, dw, zero):
    """mem (C, H, W, N) -> cols (C, kh, kw, Ho, Wo, N): cols[c, a, b, i, j] = mem[c, r, q] with
    r = i * sh - ph + a * dh and q = j * sw - pw + b * dw, zero outside the image."""
    c_n, h_n, w_n, n_n = mem.shape
    kh, kw, ho_n, wo_n = cols.shape[1], cols.shape[2], cols.shape[3], cols.shape[4]
    for c in range(c_n):
        for a in range(kh):
            for b in range(kw):
                for i in range(ho_n):
                    r = i * sh - ph + a * dh
                    for j in range(wo_n):
                        q = j * sw - pw + b * dw
                        dst = cols[c, a, b, i, j]
                        if r < 0 or r >= h_n or q < 0 or q >= w_n:
                            for n in range(n_n):
                                dst[n] = zero
                        else:
                            src = mem[c, r, q]
                            for n in range(n_n):
                                dst[n] = src[n]


def im2col(x, cols, stride, padding, dilation) -> bool:
    """Fill ``cols`` (C, kh, kw, Ho, Wo, N) from the NCHW ``x`` stored batch last, compiled;
    False where that does not apply (numba absent or off, another dtype or layout, or ``cols``
    of another dtype): the caller copies with NumPy."""
    if x.__class__ is not np.ndarray or x.dtype not in _FLOATS or cols.dtype != x.dtype or x.ndim != 4:
        return False
    mem = x.transpose(1, 2, 3, 0)
    if not mem.flags.c_contiguous:  # (a C-ordered input, e.g. a model's: gathering its N values in
        return False                # this loop measured 50 -> 68 us on the demo CNN's first conv)
    kern = jit.compiled(_im2col_batch_last)
    if kern is None:
        return False
    kern(mem, cols, int(stride[0]), int(stride[1]), int(padding[0]), int(padding[1]),
         int(dilation[0]), int(dilation[1]), x.dtype.type(0))
    return True
