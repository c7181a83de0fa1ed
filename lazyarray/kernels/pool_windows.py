"""``max_pool2d[windows]`` and ``max_pool2d_relu[windows]`` (issue #35): each output's window folded
in registers, for pools with a stride over 1 on some axis, not stored batch last and not 2 x 2 tiles
(those have their own loops, ``pool_jit.py``). Windows inside the input run ``_pool_windows``; a padded
pool (ResNet's 3 x 3 / 2 stem pool, padding 1) or ``ceil_mode``'s windows past the input run
``_pool_windows_padded``, whose windows fold only their taps inside x (a padding tap reads -inf,
which never changes a fold: the same values). ``relu``: ``maximum(u, 0)`` of each maximum before
its store (``nn.max_pool2d_relu``, one step for SqueezeNet's pool and relu), the relu's values.

``pool_jit``'s phase-plane pool copies every plane into padded phase planes and folds each tap over
a short flat slice: for the small planes of a small CNN (SqueezeNet's 15 x 15 and 7 x 7 planes,
3 x 3 windows, stride 2) the copies and the short loops cost more than the maxima (8 x 16 planes of
15 x 15 took about 110 us a call against about 45 here). Here each output value starts at ``-inf``
and takes its window's taps in ``_pool_rows``' order (row by row, left to right) with the same
``maximum`` rule (a NaN stays, a tie takes the later value), so the values are ``compiled``'s bit
for bit; 3 x 3 windows inside x fold each input row's three taps once (``_pool_windows3``: a row of a
stride-2 pool serves two output rows; the rows' folds folded in row order are the nine taps' fold
bit for bit), 8 x 16 planes of 15 x 15 about 5-12% under the per-window loop; padded 3 x 3 windows
(ResNet's stem pool) the same way (``_pool_windows3_padded``, the taps inside x only), (8, 8, 32, 32)
285 -> 205 us and (1, 8, 32, 32) 47 -> 37 us CPU with the relu; the padded loops visit the border columns
alone (a skipped inside column cost a branch each: 200 -> 163 us and 37 -> 31.5 us). A C-ordered x's 3 x 3
windows take ``_pool_windows3_flat``: the row folds of all of x's flat memory in one long loop that
vectorizes, then each output's three rows (SqueezeNet's float32 (8, 16, 15, 15) pool 63 -> 58 us; ResNet's
padded (8, 8, 32, 32) one 198 -> 133 us, float64 161 us, (1, 8, 32, 32) 36 -> 28 us; a float64 x whose windows
lie inside it ran 59 -> 67 us: ``_pool_windows3`` keeps those; an x past ``FLAT_MAX_VALUES`` values too,
the folds' scratch being x's size). Any strides: the result goes straight into the
planned buffer. Float32 and float64 NumPy arrays only.
"""
from __future__ import annotations

import numpy as np

from .. import jit
from .pool_jit import overlap, stored_batch_last

_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))
FLAT_MAX_VALUES = 1 << 20  # (``_pool_windows3_flat``'s row folds: a scratch of x's size, up to 4-8 MiB)


@jit.tiered
def _pool_windows(x, out, kh, kw, sh, sw, ph, pw, fill, relu, zero):  # pragma: no cover  (compiled by numba)
    """out (N, C, Ho, Wo) = window maxima of x (N, C, H, W), every window inside x (``ph``, ``pw``: 0,
    the padded kernel's signature), then where ``relu`` ``maximum(u, 0)`` before the store: taps from
    ``fill`` in (row, column) order, ``np.maximum``'s rule (NaN wins, a tie takes the later)."""
    n_n, c_n = x.shape[0], x.shape[1]
    ho_n, wo_n = out.shape[2], out.shape[3]
    for n in range(n_n):
        for c in range(c_n):
            p = x[n, c]
            for i in range(ho_n):
                o = out[n, c, i]
                for j in range(wo_n):
                    u = fill
                    for a in range(kh):
                        row = p[i * sh + a]
                        for b in range(kw):
                            v = row[j * sw + b]
                            u = u if (u > v) | (u != u) else v
                    if relu:
                        u = u if (u > zero) | (u != u) else zero
                    o[j] = u


@jit.tiered
def _pool_windows3(x, out, kh, kw, sh, sw, ph, pw, fill, relu, zero):  # pragma: no cover  (compiled by numba)
    """``_pool_windows`` of 3 x 3 windows inside x, each input row's three-tap maxima first: ``hm[r, j]``,
    row r's fold of columns ``j * sw`` to ``j * sw + 2``, made once per row (a row of a stride-2 pool serves
    two output rows), then each output the fold of its three rows' ``hm``. The fold keeps the first NaN
    and otherwise the last of the maxima (``np.maximum``'s rule, a tie taking the later), so folding the
    rows' folds in row order gives the nine taps' fold in (row, column) order bit for bit."""
    n_n, c_n = x.shape[0], x.shape[1]
    ho_n, wo_n = out.shape[2], out.shape[3]
    rows = max((ho_n - 1) * sh + 3, 0)
    hm = np.empty((rows, wo_n), out.dtype)
    for n in range(n_n):
        for c in range(c_n):
            p = x[n, c]
            for r in range(rows):
                row, h = p[r], hm[r]
                for j in range(wo_n):
                    q = j * sw
                    u = row[q]
                    v = row[q + 1]
                    u = u if (u > v) | (u != u) else v
                    v = row[q + 2]
                    h[j] = u if (u > v) | (u != u) else v
            for i in range(ho_n):
                o, h0, h1, h2 = out[n, c, i], hm[i * sh], hm[i * sh + 1], hm[i * sh + 2]
                for j in range(wo_n):
                    u = h0[j]
                    v = h1[j]
                    u = u if (u > v) | (u != u) else v
                    v = h2[j]
                    u = u if (u > v) | (u != u) else v
                    if relu:
                        u = u if (u > zero) | (u != u) else zero  # np.maximum(u, 0)
                    o[j] = u


@jit.tiered
def _pool_windows3_flat(x, out, kh, kw, sh, sw, ph, pw, fill, relu, zero):  # pragma: no cover  (numba)
    """``_pool_windows3`` / ``_pool_windows3_padded`` of a C-ordered x: the three-tap row folds of every
    position of x's flat memory first (``t[q]``: the fold of ``x.flat[q:q + 3]``, one long loop that
    vectorizes, where the short strided per-row loops did not; the folds that cross a row's end are never
    read), then each window inside x the fold of its three rows' ``t`` values in row order, and each window
    past x's edge (padding, ``ceil_mode``) the fold of its rows' folds of their taps inside x: those
    kernels' folds in their order (a fold from ``fill``, -inf, takes its first value as it is), bit for bit."""
    n_n, c_n, h_n, w_n = x.shape
    ho_n, wo_n = out.shape[2], out.shape[3]
    flat = x.reshape(-1)
    m = max(flat.shape[0] - 2, 0)
    t = np.empty(m, out.dtype)
    r0, r1, r2 = flat[:m], flat[1:m + 1], flat[2:m + 2]
    for q in range(m):
        u = r0[q]
        v = r1[q]
        u = u if (u > v) | (u != u) else v
        v = r2[q]
        t[q] = u if (u > v) | (u != u) else v
    j_lo = min((pw + sw - 1) // sw, wo_n)
    j_hi = max(min((w_n - 3 + pw) // sw + 1, wo_n), j_lo)
    for n in range(n_n):
        for c in range(c_n):
            p = x[n, c]
            for i in range(ho_n):
                o, i0 = out[n, c, i], i * sh - ph
                full = i0 >= 0 and i0 + 3 <= h_n
                b0 = ((n * c_n + c) * h_n + i0) * w_n - pw
                for j in range(j_lo if full else 0, j_hi if full else 0):
                    b = b0 + j * sw
                    u = t[b]
                    v = t[b + w_n]
                    u = u if (u > v) | (u != u) else v
                    v = t[b + 2 * w_n]
                    u = u if (u > v) | (u != u) else v
                    if relu:
                        u = u if (u > zero) | (u != u) else zero  # np.maximum(u, 0)
                    o[j] = u
                skip = j_hi - j_lo if full else 0  # (the windows above: not visited again)
                for jj in range(wo_n - skip):
                    j = jj if jj < j_lo else jj + skip
                    q, u = j * sw - pw, fill
                    for a in range(max(0, -i0), min(3, h_n - i0)):
                        row, h = p[i0 + a], fill
                        for bb in range(max(0, -q), min(3, w_n - q)):
                            v = row[q + bb]
                            h = h if (h > v) | (h != h) else v
                        u = u if (u > h) | (u != u) else h
                    if relu:
                        u = u if (u > zero) | (u != u) else zero
                    o[j] = u


@jit.tiered
def _pool_windows3_padded(x, out, kh, kw, sh, sw, ph, pw, fill, relu, zero):  # pragma: no cover  (numba)
    """``_pool_windows_padded`` of 3 x 3 windows, ``_pool_windows3``'s way: each input row's three-tap maxima first:
    ``hm[r, j]``, row r's fold of its taps inside x among columns ``j * sw - pw`` to ``j * sw - pw + 2``, made
    once per row (a row of a stride-2 pool serves two output rows), then each output the fold of its rows'
    ``hm`` inside x. The fold keeps the first NaN and otherwise the last of the maxima (``np.maximum``'s
    rule, a tie taking the later), so folding the rows' folds in row order gives the window's fold in
    (row, column) order bit for bit; windows inside x (columns ``j_lo`` to ``j_hi``, rows with all three)
    run unrolled."""
    n_n, c_n, h_n, w_n = x.shape
    ho_n, wo_n = out.shape[2], out.shape[3]
    j_lo = min((pw + sw - 1) // sw, wo_n)
    j_hi = max(min((w_n - 3 + pw) // sw + 1, wo_n), j_lo)
    rows = max(min(h_n, (ho_n - 1) * sh - ph + 3), 0)
    hm = np.empty((rows, wo_n), out.dtype)
    for n in range(n_n):
        for c in range(c_n):
            p = x[n, c]
            for r in range(rows):
                row, h = p[r], hm[r]
                for j in range(j_lo, j_hi):
                    q = j * sw - pw
                    u = row[q]
                    v = row[q + 1]
                    u = u if (u > v) | (u != u) else v
                    v = row[q + 2]
                    h[j] = u if (u > v) | (u != u) else v
                for jj in range(j_lo + wo_n - j_hi):  # (the border columns only: each inside one cost a branch)
                    j = jj if jj < j_lo else jj - j_lo + j_hi
                    q, u = j * sw - pw, fill
                    for b in range(max(0, -q), min(3, w_n - q)):
                        v = row[q + b]
                        u = u if (u > v) | (u != u) else v
                    h[j] = u
            for i in range(ho_n):
                o, i0 = out[n, c, i], i * sh - ph
                a_lo, a_hi = max(0, -i0), min(3, h_n - i0)
                if a_lo == 0 and a_hi == 3:
                    h0, h1, h2 = hm[i0], hm[i0 + 1], hm[i0 + 2]
                    for j in range(wo_n):
                        u = h0[j]
                        v = h1[j]
                        u = u if (u > v) | (u != u) else v
                        v = h2[j]
                        u = u if (u > v) | (u != u) else v
                        if relu:
                            u = u if (u > zero) | (u != u) else zero  # np.maximum(u, 0)
                        o[j] = u
                    continue
                for j in range(wo_n):
                    u = fill
                    for a in range(a_lo, a_hi):
                        v = hm[i0 + a, j]
                        u = u if (u > v) | (u != u) else v
                    if relu:
                        u = u if (u > zero) | (u != u) else zero  # np.maximum(u, 0)
                    o[j] = u


@jit.tiered
def _pool_windows_padded(x, out, kh, kw, sh, sw, ph, pw, fill, relu, zero):  # pragma: no cover  (numba)
    """``_pool_windows`` of x padded by (ph, pw) (-inf), or with ``ceil_mode``'s windows past it: a
    padding tap reads -inf, which never changes the fold, so each window folds its taps inside x in
    the same order; 3 x 3 windows inside x (rows ``i0`` to ``i0 + 2``, columns ``j_lo`` to ``j_hi``)
    run unrolled on rows sliced to start at column ``j_lo``'s first tap."""
    n_n, c_n, h_n, w_n = x.shape
    ho_n, wo_n = out.shape[2], out.shape[3]
    j_lo = min((pw + sw - 1) // sw, wo_n)
    j_hi = max(min((w_n - kw + pw) // sw + 1, wo_n), j_lo)
    q_lo = j_lo * sw - pw
    for n in range(n_n):
        for c in range(c_n):
            p = x[n, c]
            for i in range(ho_n):
                o = out[n, c, i]
                i0 = i * sh - ph
                three = kh == 3 and kw == 3 and i0 >= 0 and i0 + 3 <= h_n
                if three:
                    r0, r1, r2, oo = p[i0, q_lo:], p[i0 + 1, q_lo:], p[i0 + 2, q_lo:], o[j_lo:]
                    for j in range(j_hi - j_lo):
                        q = j * sw
                        u = r0[q]
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
                        u = u if (u > v) | (u != u) else v
                        if relu:
                            u = u if (u > zero) | (u != u) else zero  # np.maximum(u, 0)
                        oo[j] = u
                skip = j_hi - j_lo if three else 0  # (the columns the unrolled loop wrote: not visited)
                for jj in range(wo_n - skip):
                    j = jj if jj < j_lo or not three else jj + skip
                    q = j * sw - pw
                    u = fill
                    for a in range(max(0, -i0), min(kh, h_n - i0)):
                        row = p[i0 + a]
                        for b in range(max(0, -q), min(kw, w_n - q)):
                            v = row[q + b]
                            u = u if (u > v) | (u != u) else v
                    if relu:
                        u = u if (u > zero) | (u != u) else zero
                    o[j] = u


def applies(x, kernel, stride, padding, shape) -> bool:
    """Whether ``windows`` takes this pool (``pool_jit.jit_geometry``'s kernel, stride, leading
    padding and output shape): a 4-D float32/float64 NumPy array not stored batch last, every window
    over some of x (shape inference refuses others), not 2 x 2 tiles, not stride 1. Padding and
    ``ceil_mode``'s windows past x are taken: their taps outside x are skipped."""
    if x.__class__ is not np.ndarray or x.ndim != 4 or x.dtype not in _FLOATS or stored_batch_last(x):
        return False
    if tuple(stride) == (1, 1) or tuple(kernel) == (2, 2) and tuple(stride) == (2, 2) \
            and tuple(shape) == (x.shape[2] // 2, x.shape[3] // 2):
        return False  # (stride 1: the phase planes' long flat loops vectorize, 16 x 16 planes 14 us against 16)
    return all(shape[a] >= 1 and 0 <= padding[a] < kernel[a] and (shape[a] - 1) * stride[a] - padding[a] < x.shape[2 + a]
               for a in (0, 1))


def _inside(x, kernel, stride, padding, shape) -> bool:
    """No padding and every window inside x: ``_pool_windows`` (else ``_pool_windows_padded``)."""
    return tuple(padding) == (0, 0) and all((shape[a] - 1) * stride[a] + kernel[a] <= x.shape[2 + a] for a in (0, 1))


def _kernel(x, kernel, stride, padding, shape):
    """The kernel for this pool: for windows inside x ``_pool_windows3`` (3 x 3) or ``_pool_windows``,
    else ``_pool_windows3_padded`` (3 x 3) or ``_pool_windows_padded``."""
    three, inside = tuple(kernel) == (3, 3), _inside(x, kernel, stride, padding, shape)
    if three and x.flags.c_contiguous and x.size <= FLAT_MAX_VALUES and (not inside or x.dtype == np.float32):
        return _pool_windows3_flat  # (float64 windows inside x: the row loops as fast)
    if inside:
        return _pool_windows3 if three else _pool_windows
    return _pool_windows3_padded if three else _pool_windows_padded


def _scalars(x, kernel, stride, padding, relu):
    """The kernels' arguments after ``(x, out)``."""
    return (int(kernel[0]), int(kernel[1]), int(stride[0]), int(stride[1]), int(padding[0]), int(padding[1]),
            x.dtype.type(-np.inf), bool(relu), x.dtype.type(0))


def max_pool(x, out, kernel, stride, padding, shape, relu=False):
    """max_pool2d of ``x`` by ``_pool_windows`` (``_pool_windows_padded`` where x is padded or a
    window runs past it) into ``out`` (a new C-ordered array when None), then where ``relu``
    ``maximum(y, 0)``; None where it does not apply (``applies``, an ``out`` of another dtype or
    overlapping x, kernels off)."""
    if not applies(x, kernel, stride, padding, shape):
        return None
    if out is not None and (out.__class__ is not np.ndarray or out.dtype != x.dtype or overlap(out, x)):
        return None
    kern = jit.compiled(_kernel(x, kernel, stride, padding, shape))
    if kern is None:
        return None
    if out is None:
        out = np.empty((x.shape[0], x.shape[1]) + tuple(shape), x.dtype)
    kern(x, out, *_scalars(x, kernel, stride, padding, relu))
    return out


def bound(x, out, kernel, stride, padding, shape, other, relu=False):
    """A compiled step's call of ``max_pool``'s kernel with the kernel and its scalars made once:
    ``fn(x, out=)`` checks per call what a planned buffer or another input could change (x's dtype,
    shape and strides as bound, so its layout is the one ``applies`` took; an out given, of x's dtype,
    not overlapping x) and takes any other call to
    ``other(x, out=out)`` (the step's generic binding). None where ``windows`` would not run."""
    if not applies(x, kernel, stride, padding, shape) or out is None or out.dtype != x.dtype:
        return None
    kern = jit.compiled(_kernel(x, kernel, stride, padding, shape))
    if kern is None:
        return None
    dtype, x_shape, x_strides, out_shape = x.dtype, x.shape, x.strides, (x.shape[0], x.shape[1]) + tuple(shape)
    args = _scalars(x, kernel, stride, padding, relu)

    def fn(x, out=None):  # (x's shape and strides as bound: its layout as ``applies`` found it, not batch last)
        if out is None or out.dtype != dtype or x.dtype != dtype or x.shape != x_shape or out.shape != out_shape \
                or x.strides != x_strides or overlap(out, x):
            return other(x, out=out)
        kern(x, out, *args)
        return out

    return fn
