"""Compiled window copies for convolutions (``jit.compiled``): the copies around their products.

* ``im2col`` (``conv_batch_last.batch_last_conv`` and ``conv2d_weight_grad``): NumPy builds a small batch's columns in three copies:
  zero a padded (C, H + 2p, W + 2p, N) scratch, copy the image into its interior, then copy
  every tap's strided view into the (C, kh, kw, Ho, Wo, N) columns. One loop writes each column
  row straight from the image, zeros where a tap falls in the padding.
* ``scatter_windows`` (``col2im``: ``conv2d_transpose``, grouped input gradients): each tap's share
  added back where the tap read, one loop instead of one strided add per tap, in the same order.
* ``add_columns`` (``conv2d_input_grad``): the same for batch-last columns, in runs of N values.

Copies are copies and the adds come in the same order, so the values (and the products fed
with them) equal the NumPy path's bit for bit; the products stay NumPy's.
"""
from __future__ import annotations

import numpy as np

from .. import jit

_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))


@jit.tiered
def _im2col_batch_last(mem, cols, sh, sw, ph, pw, dh, dw, zero, p0, p1):
    """mem (C, H, W, N) -> cols (C, kh, kw, Ho, Wo, N) for the output pixels p0 <= i * Wo + j < p1:
    cols[c, a, b, i, j] = mem[c, r, q] with r = i * sh - ph + a * dh and q = j * sw - pw + b * dw,
    zero outside the image (``conv_regions`` fills its blocks of pixels with it)."""
    c_n, h_n, w_n, n_n = mem.shape
    kh, kw, wo_n = cols.shape[1], cols.shape[2], cols.shape[4]
    for c in range(c_n):
        for a in range(kh):
            for b in range(kw):
                for p in range(p0, p1):
                    i = p // wo_n
                    j = p - i * wo_n
                    r = i * sh - ph + a * dh
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
         int(dilation[0]), int(dilation[1]), x.dtype.type(0), 0, cols.shape[3] * cols.shape[4])
    return True


@jit.tiered
def _scatter_windows(dx, parts, sh, sw, dh, dw):
    """dx (N, C, H, W) += each tap's share: parts[n, c, i, j, a, b] added at
    dx[n, c, i * sh + a * dh, j * sw + b * dw], tap by tap in (a, b) order like NumPy's strided adds
    (each element gets its terms in the same order: the same sums)."""
    n_n, c_n, ho_n, wo_n, kh, kw = parts.shape
    for a in range(kh):
        for b in range(kw):
            for n in range(n_n):
                for c in range(c_n):
                    for i in range(ho_n):
                        r = i * sh + a * dh
                        for j in range(wo_n):
                            dx[n, c, r, j * sw + b * dw] += parts[n, c, i, j, a, b]


def scatter_windows(dx, parts, stride, dilation) -> bool:
    """``conv.scatter_windows`` compiled (the adjoint of the windows: ``conv2d``'s input gradient);
    False where it does not apply: the caller's strided NumPy adds run."""
    if dx.__class__ is not np.ndarray or parts.__class__ is not np.ndarray or dx.dtype not in _FLOATS \
            or parts.dtype != dx.dtype or np.may_share_memory(dx, parts):
        return False
    kern = jit.compiled(_scatter_windows)
    if kern is None:
        return False
    kern(dx, parts, int(stride[0]), int(stride[1]), int(dilation[0]), int(dilation[1]))
    return True


@jit.tiered
def _add_columns(padded, cols, sh, sw, dh, dw):
    """padded (C, Hp, Wp, N) += cols (C, kh, kw, Ho, Wo, N) where each tap read, tap by tap in
    (a, b) order like NumPy's strided adds (the same terms in the same order: the same sums)."""
    c_n, kh, kw, ho_n, wo_n, n_n = cols.shape
    for a in range(kh):
        for b in range(kw):
            for c in range(c_n):
                for i in range(ho_n):
                    r = i * sh + a * dh
                    for j in range(wo_n):
                        dst = padded[c, r, j * sw + b * dw]
                        src = cols[c, a, b, i, j]
                        for n in range(n_n):
                            dst[n] += src[n]


def add_columns(padded, cols, stride, dilation) -> bool:
    """``conv_grad._dense_input_grad``'s tap-by-tap adds compiled; False where they do not apply (numba
    absent or off, not float32/float64 NumPy, mixed dtypes, overlapping arrays)."""
    if padded.__class__ is not np.ndarray or cols.__class__ is not np.ndarray or padded.dtype not in _FLOATS \
            or cols.dtype != padded.dtype or np.may_share_memory(padded, cols):
        return False
    kern = jit.compiled(_add_columns)
    if kern is None:
        return False
    kern(padded, cols, int(stride[0]), int(stride[1]), int(dilation[0]), int(dilation[1]))
    return True
