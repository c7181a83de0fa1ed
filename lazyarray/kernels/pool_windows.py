"""``max_pool2d[windows]`` (issue #35): each output's window folded in registers, for pools whose
windows all lie inside the input (no padding, no ``ceil_mode`` window past it), with a stride over 1
on some axis, not stored batch last and not 2 x 2 tiles (those have their own loops, ``pool_jit.py``).

``pool_jit``'s phase-plane pool copies every plane into padded phase planes and folds each tap over
a short flat slice: for the small planes of a small CNN (SqueezeNet's 15 x 15 and 7 x 7 planes,
3 x 3 windows, stride 2) the copies and the short loops cost more than the maxima (8 x 16 planes of
15 x 15 took about 110 us a call against about 45 here). Here each output value starts at ``-inf``
and takes its window's taps in ``_pool_rows``' order (row by row, left to right) with the same
``maximum`` rule (a NaN stays, a tie keeps the earlier value), so the values are ``compiled``'s bit
for bit; 3 x 3 windows run an unrolled loop. Any strides: the result goes straight into the
planned buffer. Float32 and float64 NumPy arrays only.
"""
from __future__ import annotations

import numpy as np

from .. import jit
from .pool_jit import overlap, stored_batch_last

_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))


@jit.tiered
def _pool_windows(x, out, kh, kw, sh, sw, fill):  # pragma: no cover  (compiled by numba)
    """out (N, C, Ho, Wo) = window maxima of x (N, C, H, W), every window inside x: taps from ``fill``
    in (row, column) order, ``np.maximum``'s rule (NaN wins, a tie keeps the earlier)."""
    n_n, c_n = x.shape[0], x.shape[1]
    ho_n, wo_n = out.shape[2], out.shape[3]
    for n in range(n_n):
        for c in range(c_n):
            p = x[n, c]
            for i in range(ho_n):
                o = out[n, c, i]
                if kh == 3 and kw == 3:
                    r0, r1, r2 = p[i * sh], p[i * sh + 1], p[i * sh + 2]
                    for j in range(wo_n):
                        q = j * sw
                        u = fill
                        v = r0[q]
                        u = u if (u > v) | (u != u) else v
                        v = r0[q + 1]
                        u = u if (u > v) | (u != u) else v
                        v = r0[q + 2]
                        u = u if (u > v) | (u != u) else v
                        v = r1[q]
                        u = u if (u > v) | (u != u) else v
                        v = r1[q + 1]
                        u = u if (u > v) | (u != u) else v
                        v = r1[q + 2]
                        u = u if (u > v) | (u != u) else v
                        v = r2[q]
                        u = u if (u > v) | (u != u) else v
                        v = r2[q + 1]
                        u = u if (u > v) | (u != u) else v
                        v = r2[q + 2]
                        o[j] = u if (u > v) | (u != u) else v
                else:
                    for j in range(wo_n):
                        u = fill
                        for a in range(kh):
                            row = p[i * sh + a]
                            for b in range(kw):
                                v = row[j * sw + b]
                                u = u if (u > v) | (u != u) else v
                        o[j] = u


def applies(x, kernel, stride, padding, shape) -> bool:
    """Whether ``windows`` takes this pool (``pool_jit.jit_geometry``'s kernel, stride, padding and
    output shape): a 4-D float32/float64 NumPy array not stored batch last, no padding, every window
    inside x, not 2 x 2 tiles, not stride 1."""
    if x.__class__ is not np.ndarray or x.ndim != 4 or x.dtype not in _FLOATS or tuple(padding) != (0, 0) \
            or stored_batch_last(x):
        return False
    if tuple(stride) == (1, 1) or tuple(kernel) == (2, 2) and tuple(stride) == (2, 2) \
            and tuple(shape) == (x.shape[2] // 2, x.shape[3] // 2):
        return False  # (stride 1: the phase planes' long flat loops vectorize, 16 x 16 planes 14 us against 16)
    return all(shape[a] >= 1 and (shape[a] - 1) * stride[a] + kernel[a] <= x.shape[2 + a] for a in (0, 1))


def max_pool(x, out, kernel, stride, padding, shape):
    """max_pool2d of ``x`` by ``_pool_windows`` into ``out`` (a new C-ordered array when None); None
    where it does not apply (``applies``, an ``out`` of another dtype or overlapping x, kernels off)."""
    if not applies(x, kernel, stride, padding, shape):
        return None
    if out is not None and (out.__class__ is not np.ndarray or out.dtype != x.dtype or overlap(out, x)):
        return None
    kern = jit.compiled(_pool_windows)
    if kern is None:
        return None
    if out is None:
        out = np.empty((x.shape[0], x.shape[1]) + tuple(shape), x.dtype)
    kern(x, out, int(kernel[0]), int(kernel[1]), int(stride[0]), int(stride[1]), x.dtype.type(-np.inf))
    return out


def bound(x, out, kernel, stride, padding, shape, other):
    """A compiled step's call of ``_pool_windows`` with the kernel and its scalars made once:
    ``fn(x, out=)`` checks per call what a planned buffer or another input could change (x's dtype,
    shape and layout; an out given, of x's dtype, not overlapping x) and takes any other call to
    ``other(x, out=out)`` (the step's generic binding). None where ``windows`` would not run."""
    if not applies(x, kernel, stride, padding, shape) or out is None or out.dtype != x.dtype:
        return None
    kern = jit.compiled(_pool_windows)
    if kern is None:
        return None
    dtype, x_shape, out_shape = x.dtype, x.shape, (x.shape[0], x.shape[1]) + tuple(shape)
    args = (int(kernel[0]), int(kernel[1]), int(stride[0]), int(stride[1]), x.dtype.type(-np.inf))

    def fn(x, out=None):
        if out is None or out.dtype != dtype or x.dtype != dtype or x.shape != x_shape or out.shape != out_shape \
                or stored_batch_last(x) or overlap(out, x):
            return other(x, out=out)
        kern(x, out, *args)
        return out

    return fn
