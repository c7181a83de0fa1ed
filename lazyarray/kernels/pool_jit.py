"""Compiled pooling (``jit.compiled``): one pass over the input for ``max_pool2d``, for
``batch_norm_max_pool2d``'s pool, relu and per-channel scale and shift, and for ``avg_pool2d``
(``avg_pool``: its sums in the NumPy path's order, so its values are the same bit for bit).

The NumPy path (``pool.py``) folds the window's taps with one ``maximum`` call each, then the
pooled norm adds a relu, a multiply and an add: 4-6 passes and as many calls. Here each output
value is its window's maximum followed by the same operations in the same order and dtype, so
the values equal the NumPy path's (``maximum``'s rules: a NaN anywhere in the window gives NaN,
a tie keeps the later tap; padding is ``-inf`` and never wins). Signed zeros may differ where a
window ties ``-0.0`` with ``0.0``: the NumPy path's own two tap orders differ there too.

Two loops: for an input stored batch last (``executor/batch_last.py``, memory ``(C, H, W, N)``)
the innermost loop runs over the N images of one position, contiguous in memory; otherwise over
the output columns of one row. Both take arrays of any strides, so the result goes straight
into the planned buffer whatever its layout. A plain max pool whose windows lie inside the padded
input, not stored batch last and not 2 x 2 tiles, runs a third (``_pool_phases``, issue #35): each
plane copied into ``-inf``-padded phase planes (``phase_planes.py``, as the depthwise convolution's
loop), each tap one vectorized maximum over a flat slice, in the row loop's tap order (its values);
``bound_max_pool`` makes its tables once for a compiled step. Only float32 and float64 NumPy
arrays come here; others run the NumPy path.
"""
from __future__ import annotations

import numpy as np

from .. import jit
from ..tuning_table import current
from .phase_planes import phase_tables, with_fill

_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))


@jit.tiered
def _pool_batch_last(mem, out, kh, kw, sh, sw, ph, pw, fill, relu, affine, scale, shift, zero):
    """mem (C, H, W, N) -> out (C, Ho, Wo, N): window maxima of every image, then the epilogue."""
    c_n, h_n, w_n, n_n = mem.shape
    ho_n, wo_n = out.shape[1], out.shape[2]
    for c in range(c_n):
        for i in range(ho_n):
            for j in range(wo_n):
                o = out[c, i, j]
                for n in range(n_n):
                    o[n] = fill
                for a in range(kh):
                    r = i * sh - ph + a
                    if r < 0 or r >= h_n:
                        continue
                    for b in range(kw):
                        q = j * sw - pw + b
                        if q < 0 or q >= w_n:
                            continue
                        src = mem[c, r, q]
                        for n in range(n_n):
                            u = o[n]
                            v = src[n]
                            o[n] = u if (u > v) | (u != u) else v  # np.maximum(u, v) (no short cut: the loop vectorizes)
                if relu or affine:
                    s = scale[c] if affine else zero
                    t = shift[c] if affine else zero
                    for n in range(n_n):
                        u = o[n]
                        if relu:
                            u = u if (u > zero) | (u != u) else zero  # np.maximum(u, 0)
                        if affine:
                            u = u * s
                            u = u + t
                        o[n] = u


@jit.tiered
def _pool_tiles_batch_last(mem, out, relu, affine, scale, shift, zero):
    """``_pool_batch_last`` for 2 x 2 tiles (stride 2, no padding): the four taps folded in
    registers, the epilogue before the one store (about twice as fast as the general loop)."""
    c_n = mem.shape[0]
    ho_n, wo_n, n_n = out.shape[1], out.shape[2], out.shape[3]
    for c in range(c_n):
        s = scale[c] if affine else zero
        t = shift[c] if affine else zero
        for i in range(ho_n):
            for j in range(wo_n):
                s0 = mem[c, 2 * i, 2 * j]
                s1 = mem[c, 2 * i, 2 * j + 1]
                s2 = mem[c, 2 * i + 1, 2 * j]
                s3 = mem[c, 2 * i + 1, 2 * j + 1]
                o = out[c, i, j]
                for n in range(n_n):
                    u = s0[n]
                    v = s1[n]
                    u = u if (u > v) | (u != u) else v
                    v = s2[n]
                    u = u if (u > v) | (u != u) else v
                    v = s3[n]
                    u = u if (u > v) | (u != u) else v
                    if relu:
                        u = u if (u > zero) | (u != u) else zero
                    if affine:
                        u = u * s
                        u = u + t
                    o[n] = u


@jit.tiered
def _pool_tiles_rows(x, out, relu, affine, scale, shift, zero):
    """``_pool_rows`` for 2 x 2 tiles (stride 2, no padding)."""
    n_n, c_n = x.shape[0], x.shape[1]
    ho_n, wo_n = out.shape[2], out.shape[3]
    for n in range(n_n):
        for c in range(c_n):
            s = scale[c] if affine else zero
            t = shift[c] if affine else zero
            for i in range(ho_n):
                r0 = x[n, c, 2 * i]
                r1 = x[n, c, 2 * i + 1]
                o = out[n, c, i]
                for j in range(wo_n):
                    u = r0[2 * j]
                    v = r0[2 * j + 1]
                    u = u if (u > v) | (u != u) else v
                    v = r1[2 * j]
                    u = u if (u > v) | (u != u) else v
                    v = r1[2 * j + 1]
                    u = u if (u > v) | (u != u) else v
                    if relu:
                        u = u if (u > zero) | (u != u) else zero
                    if affine:
                        u = u * s
                        u = u + t
                    o[j] = u


@jit.tiered
def _pool_rows(x, out, kh, kw, sh, sw, ph, pw, fill, relu, affine, scale, shift, zero):
    """x (N, C, H, W) -> out (N, C, Ho, Wo), one output row at a time."""
    n_n, c_n, h_n, w_n = x.shape
    ho_n, wo_n = out.shape[2], out.shape[3]
    for n in range(n_n):
        for c in range(c_n):
            s = scale[c] if affine else zero
            t = shift[c] if affine else zero
            for i in range(ho_n):
                o = out[n, c, i]
                for j in range(wo_n):
                    o[j] = fill
                for a in range(kh):
                    r = i * sh - ph + a
                    if r < 0 or r >= h_n:
                        continue
                    row = x[n, c, r]
                    for b in range(kw):
                        for j in range(wo_n):
                            q = j * sw - pw + b
                            if q >= 0 and q < w_n:
                                u = o[j]
                                v = row[q]
                                o[j] = u if (u > v) | (u != u) else v
                if relu or affine:
                    for j in range(wo_n):
                        u = o[j]
                        if relu:
                            u = u if (u > zero) | (u != u) else zero
                        if affine:
                            u = u * s
                            u = u + t
                        o[j] = u


@jit.tiered
def _pool_phases(fill):
    """The phase-plane max pool, ``fill`` (``phase_planes.FILL``) compiled into it (``phase_planes.with_fill``)."""
    def pool_phases(x, out, cols, taps, sh, ph, hq, wq, lo):  # pragma: no cover  (compiled by numba)
        """out (N, C, Ho, Wo) = window maxima of x (N, C, H, W), windows inside the padded input: per
        plane, the plane copied into phase planes padded with ``lo`` (-inf), then each tap one
        ``maximum`` of the whole flat (row-padded) result by a slice of one phase plane (as
        ``depthwise``'s taps: a long loop without bounds tests, which vectorizes), taps in
        ``_pool_rows``' order from ``lo``: its values (a padding tap reads -inf, which never wins)."""
        n_n, c_n = x.shape[0], x.shape[1]
        ho_n, wo_n, sw = out.shape[2], out.shape[3], cols.shape[0]
        if n_n * c_n * ho_n * wo_n == 0:
            return
        length = (ho_n - 1) * wq + wo_n
        pad = np.full(sh * sw * hq * wq, lo, out.dtype)
        acc = np.empty(length, out.dtype)
        for n in range(n_n):
            for c in range(c_n):
                fill(pad, x[n, c], cols, sh, ph, wq)
                acc[:] = lo
                for tap in range(taps.shape[0]):
                    src = pad[taps[tap]:taps[tap] + length]
                    for q in range(length):
                        u = acc[q]
                        v = src[q]
                        acc[q] = u if (u > v) | (u != u) else v  # np.maximum(u, v)
                o = out[n, c]
                for i in range(ho_n):
                    row, ar = o[i], acc[i * wq:i * wq + wo_n]
                    for j in range(wo_n):
                        row[j] = ar[j]

    return pool_phases


def _phases_fit(x, kernel, stride, padding, shape) -> bool:
    """Whether every window lies inside the input padded on both sides (not ``ceil_mode``'s windows
    past it): ``_pool_phases``' planes hold it."""
    return all((shape[a] - 1) * stride[a] + kernel[a] <= x.shape[2 + a] + 2 * padding[a] for a in (0, 1))


def _phases(x, out, kernel, stride, padding, shape):
    """``_pool_phases`` of ``x`` into ``out`` (a new C-ordered array when None); None where its kernel is off."""
    kern = with_fill(_pool_phases)
    if kern is None:
        return None
    if out is None:
        out = np.empty((x.shape[0], x.shape[1]) + tuple(shape), x.dtype)
    cols, taps, hq, wq = phase_tables(x.shape[2], x.shape[3], *kernel, tuple(stride), tuple(padding), (1, 1))
    kern(x, out, cols, taps, int(stride[0]), int(padding[0]), hq, wq, x.dtype.type(-np.inf))
    return out


def bound_max_pool(x, out, kernel, stride, padding, shape, other):
    """A compiled step's call of ``_pool_phases`` with what the step's arrays fix made once (the
    kernel, the phase tables, the scalars): ``fn(x, out=)`` checks per call only what a planned
    buffer could change (an out given, of x's dtype, not overlapping x) and takes any other call to
    ``other(x, out=out)`` (the step's generic binding: ``max_pool``, else the NumPy path). None where this pool would not run it (issue #35: a 3 x 3 / 2 stem pool at batch 1
    paid about 12 us of argument handling around its kernel)."""
    kernel, stride, padding = tuple(map(int, kernel)), tuple(map(int, stride)), tuple(map(int, padding))
    tiles = kernel == (2, 2) and stride == (2, 2) and padding == (0, 0) and tuple(shape) == (x.shape[2] // 2,
                                                                                              x.shape[3] // 2)
    if x.__class__ is not np.ndarray or x.ndim != 4 or x.dtype not in _FLOATS or tiles or stored_batch_last(x) \
            or not _phases_fit(x, kernel, stride, padding, shape) or out is None or out.dtype != x.dtype:
        return None
    kern = with_fill(_pool_phases)
    if kern is None:
        return None
    cols, taps, hq, wq = phase_tables(x.shape[2], x.shape[3], *kernel, stride, padding, (1, 1))
    dtype, lo = x.dtype, x.dtype.type(-np.inf)

    def fn(x, out=None):
        if out is None or out.dtype != dtype or x.dtype != dtype or overlap(out, x):
            return other(x, out=out)
        kern(x, out, cols, taps, stride[0], padding[0], hq, wq, lo)
        return out

    return fn


def stored_batch_last(x) -> bool:
    """x (N, C, H, W) of several images stored batch last (memory (C, H, W, N))."""
    return x.shape[0] > 1 and x.strides[0] == x.itemsize and x.transpose(1, 2, 3, 0).flags.c_contiguous


def overlap(a, b) -> bool:
    """Whether ``a`` and ``b`` may share bytes: False for two values the planner placed side by side
    in one buffer (``np.may_share_memory`` alone says True for those: same buffer, crossing bounds);
    True where exactness would cost more than a quick check (``TooHardError``)."""
    if not np.may_share_memory(a, b):
        return False
    try:
        return np.shares_memory(a, b, max_work=1000)
    except np.exceptions.TooHardError:
        return True


def max_pool(x, out, kernel, stride, padding, shape, relu=False, scale=None, shift=None):
    """``max_pool2d`` of NCHW ``x`` into ``out`` (allocated in x's layout when None), then where
    asked a relu and ``* scale + shift`` per channel (axis 1), by a compiled kernel; None where
    none applies (numba absent or off, not a float32/float64 NumPy array, mixed dtypes): the
    caller runs its NumPy path. ``shape`` is the output's (Ho, Wo); ``padding`` its leading pads
    (trailing pads and ``ceil_mode``'s extra are windows that run past the input)."""
    if x.__class__ is not np.ndarray or x.ndim != 4 or x.dtype not in _FLOATS:
        return None
    if out is not None and (out.__class__ is not np.ndarray or out.dtype != x.dtype or overlap(out, x)):
        return None  # (an out overlapping x: NumPy's ufuncs buffer such operands)
    affine = scale is not None
    if affine and (scale.dtype != x.dtype or shift.dtype != x.dtype):
        return None
    batch_last = stored_batch_last(x)
    tiles = tuple(kernel) == (2, 2) and tuple(stride) == (2, 2) and tuple(padding) == (0, 0) \
        and tuple(shape) == (x.shape[2] // 2, x.shape[3] // 2)
    if not (tiles or batch_last or affine or relu) and _phases_fit(x, kernel, stride, padding, shape):
        y = _phases(x, out, kernel, stride, padding, shape)
        if y is not None:
            return y
    if tiles:
        kern = jit.compiled(_pool_tiles_batch_last if batch_last else _pool_tiles_rows)
    else:
        kern = jit.compiled(_pool_batch_last if batch_last else _pool_rows)
    if kern is None:
        return None
    full = (x.shape[0], x.shape[1]) + tuple(shape)
    if out is None:
        out = np.empty(full[1:] + full[:1], x.dtype).transpose(3, 0, 1, 2) if batch_last else np.empty(full, x.dtype)
    if not affine:
        scale = shift = np.empty(0, x.dtype)
    zero = x.dtype.type(0)
    args = (bool(relu), affine, scale, shift, zero)
    if not tiles:
        args = (int(kernel[0]), int(kernel[1]), int(stride[0]), int(stride[1]), int(padding[0]), int(padding[1]),
                x.dtype.type(-np.inf)) + args
    if batch_last:
        kern(x.transpose(1, 2, 3, 0), out.transpose(1, 2, 3, 0), *args)
    else:
        kern(x, out, *args)
    return out


@jit.tiered
def _norm_scales(gamma, beta, mean, var, eps, scale, shift):
    """An inference batch norm's ``scale = gamma / sqrt(var + eps)`` and ``shift = beta - mean *
    scale`` per channel, rounded as ``batch_norm`` computes them; False when a scale is not >= 0
    (NaN included): the pool may then not go first."""
    ok = True
    for c in range(gamma.shape[0]):
        s = gamma[c] / np.sqrt(var[c] + eps)
        scale[c] = s
        shift[c] = beta[c] - mean[c] * s
        if not s >= 0:
            ok = False
    return ok


def max_pool_norm(x, out, gamma, beta, mean, var, eps, relu, kernel, stride, padding, shape):
    """``batch_norm_max_pool2d`` pooled first in one compiled pass: the scales and shifts, then
    ``max_pool`` with the relu and the norm as its epilogue. None where that does not apply
    (``max_pool``'s cases, statistics of another dtype, a scale not >= 0: the caller's NumPy path
    then runs the recorded order)."""
    if x.__class__ is not np.ndarray or x.dtype not in _FLOATS:
        return None
    stats = (gamma, beta, mean, var)
    if any(a.__class__ is not np.ndarray or a.dtype != x.dtype or a.ndim != 1 for a in stats):
        return None
    kern = jit.compiled(_norm_scales)
    if kern is None:
        return None
    scale, shift = np.empty(gamma.shape[0], x.dtype), np.empty(gamma.shape[0], x.dtype)
    if not kern(gamma, beta, mean, var, x.dtype.type(eps), scale, shift):
        return None
    return max_pool(x, out, kernel, stride, padding, shape, relu, scale, shift)


@jit.tiered
def _max_pool_grad(x, g, dx, first, kh, kw, sh, sw, ph, pw, zero, one, fill):
    """``max_pool2d_grad`` in two passes: each window's ``np.argmax`` over its taps in (a, b)
    order (padding reads as -inf; the first NaN wins, else the first maximum), then tap by tap
    in (a, b) order ``g * (first == tap)`` added where the tap read, as the NumPy path adds it (the
    same terms in the same order: the same sums; a padding tap's share is dropped there too)."""
    n_n, c_n, h_n, w_n = x.shape
    ho_n, wo_n = g.shape[2], g.shape[3]
    for n in range(n_n):
        for c in range(c_n):
            for i in range(ho_n):
                for j in range(wo_n):
                    best = 0
                    m = fill
                    for t in range(kh * kw):
                        r = i * sh - ph + t // kw
                        q = j * sw - pw + t % kw
                        v = x[n, c, r, q] if r >= 0 and r < h_n and q >= 0 and q < w_n else fill
                        if v != v:  # the first NaN
                            best = t
                            break
                        if t == 0 or v > m:
                            best = t
                            m = v
                    first[n, c, i, j] = best
    for a in range(kh):
        for b in range(kw):
            t = a * kw + b
            for n in range(n_n):
                for c in range(c_n):
                    for i in range(ho_n):
                        r = i * sh - ph + a
                        if r < 0 or r >= h_n:
                            continue
                        for j in range(wo_n):
                            q = j * sw - pw + b
                            if q >= 0 and q < w_n:
                                dx[n, c, r, q] += g[n, c, i, j] * (one if first[n, c, i, j] == t else zero)


@jit.tiered
def _max_pool_grad_tiles(x, g, dx, zero, one):
    """``_max_pool_grad`` for 2 x 2 tiles (stride 2, no padding): each input value is read by one
    window, so each gradient value is that window's one term, ``0 + g * (first == tap)``, written
    in one pass (the first pass's argmax folded in)."""
    n_n, c_n = x.shape[0], x.shape[1]
    ho_n, wo_n = g.shape[2], g.shape[3]
    for n in range(n_n):
        for c in range(c_n):
            for i in range(ho_n):
                r0 = x[n, c, 2 * i]
                r1 = x[n, c, 2 * i + 1]
                d0 = dx[n, c, 2 * i]
                d1 = dx[n, c, 2 * i + 1]
                gr = g[n, c, i]
                for j in range(wo_n):
                    v0, v1, v2, v3 = r0[2 * j], r0[2 * j + 1], r1[2 * j], r1[2 * j + 1]
                    # argmax as selects (no branches: the loop vectorizes): a later tap wins when it
                    # is larger, or a NaN after no NaN; ties and everything after a NaN keep the earlier
                    take = (v1 > v0) | ((v1 != v1) & (v0 == v0))
                    m = v1 if take else v0
                    best = 1 if take else 0
                    take = (v2 > m) | ((v2 != v2) & (m == m))
                    m = v2 if take else m
                    best = 2 if take else best
                    take = (v3 > m) | ((v3 != v3) & (m == m))
                    best = 3 if take else best
                    gv = gr[j]
                    d0[2 * j] = zero + gv * (one if best == 0 else zero)
                    d0[2 * j + 1] = zero + gv * (one if best == 1 else zero)
                    d1[2 * j] = zero + gv * (one if best == 2 else zero)
                    d1[2 * j + 1] = zero + gv * (one if best == 3 else zero)


def max_pool_grad(g, x, kernel, stride, padding, out=None):
    """``max_pool2d_grad`` of NCHW ``x`` compiled, into ``out`` (the planned buffer: a reused one
    saves a fresh array's page faults, 100-170 us a call in the demo CNN's training step) or a new
    C-ordered array; None where the compiled loops do not apply (numba absent or off, not
    float32/float64 NumPy, g or out of another dtype, an out overlapping x or g): the caller's
    NumPy path runs."""
    if x.__class__ is not np.ndarray or g.__class__ is not np.ndarray or x.dtype not in _FLOATS \
            or g.dtype != x.dtype or x.ndim != 4:
        return None
    if out is not None and (out.__class__ is not np.ndarray or out.dtype != g.dtype or out.shape != x.shape
                            or overlap(out, x) or overlap(out, g)):
        return None
    t = x.dtype.type
    if tuple(kernel) == (2, 2) and tuple(stride) == (2, 2) and tuple(padding) == (0, 0) \
            and g.shape[2:] == (x.shape[2] // 2, x.shape[3] // 2) and x.shape[2] % 2 == 0 and x.shape[3] % 2 == 0:
        kern = jit.compiled(_max_pool_grad_tiles)
        if kern is None:
            return None
        dx = np.empty(x.shape, g.dtype) if out is None else out  # (every value written: the tiles cover x)
        kern(x, g, dx, t(0), t(1))
        return dx
    kern = jit.compiled(_max_pool_grad)
    if kern is None:
        return None
    if out is None:
        dx = np.zeros(x.shape, g.dtype)
    else:
        dx = out
        dx[...] = 0
    first = np.empty(g.shape, np.int64)
    kern(x, g, dx, first, int(kernel[0]), int(kernel[1]), int(stride[0]), int(stride[1]), int(padding[0]),
         int(padding[1]), t(0), t(1), t(-np.inf))
    return dx


@jit.tiered
def _avg_tiles(x, out, kh, kw, scale):
    """``avg_pool2d`` of windows tiling C-ordered x: per window the kh rows of each column summed
    first, then the columns, times ``scale`` (``ops/pool.py``'s ``_fold_tiles`` order)."""
    n_n, c_n = x.shape[0], x.shape[1]
    ho_n, wo_n = out.shape[2], out.shape[3]
    for n in range(n_n):
        for c in range(c_n):
            for i in range(ho_n):
                o = out[n, c, i]
                for j in range(wo_n):
                    acc = x[n, c, i * kh, j * kw]
                    for a in range(1, kh):
                        acc = acc + x[n, c, i * kh + a, j * kw]
                    for b in range(1, kw):
                        col = x[n, c, i * kh, j * kw + b]
                        for a in range(1, kh):
                            col = col + x[n, c, i * kh + a, j * kw + b]
                        acc = acc + col
                    o[j] = acc * scale


@jit.tiered
def _avg_tiles_2x2(x, out, scale):
    """``_avg_tiles`` for 2 x 2 tiles, the taps at constant offsets (the loop vectorizes)."""
    n_n, c_n = x.shape[0], x.shape[1]
    ho_n, wo_n = out.shape[2], out.shape[3]
    for n in range(n_n):
        for c in range(c_n):
            for i in range(ho_n):
                r0 = x[n, c, 2 * i]
                r1 = x[n, c, 2 * i + 1]
                o = out[n, c, i]
                for j in range(wo_n):
                    o[j] = ((r0[2 * j] + r1[2 * j]) + (r0[2 * j + 1] + r1[2 * j + 1])) * scale


@jit.tiered
def _avg_taps(x, out, kh, kw, sh, sw, ph, pw, include_pad, h_pad, w_pad, uniform, scale, zero, one, cnt):
    """``avg_pool2d`` over the taps in (a, b) order, padding read as zeros (``_fold_taps`` order),
    times ``scale`` or, unless ``uniform``, one over the window's count computed in x's dtype as the
    NumPy path's ``_divisor`` does (clipped to the padded input, ``h_pad`` x ``w_pad``, or to x). The
    factors are made once per output position (``fac``), not once per output (a division and two
    stores an output: conv1d_net's (8, 16, 1, 11) ceil-mode pool, 12.8 -> 6.4 us, issue #35)."""
    n_n, c_n, h_n, w_n = x.shape
    ho_n, wo_n = out.shape[2], out.shape[3]
    lo_h, hi_h = (0, h_pad) if include_pad else (ph, ph + h_n)
    lo_w, hi_w = (0, w_pad) if include_pad else (pw, pw + w_n)
    fac = np.empty((ho_n, wo_n), out.dtype)
    for i in range(ho_n):
        for j in range(wo_n):
            cnt[0] = min(i * sh + kh, hi_h) - max(i * sh, lo_h)  # (stored in x's dtype: the
            cnt[1] = min(j * sw + kw, hi_w) - max(j * sw, lo_w)  # arithmetic stays in it)
            fac[i, j] = scale if uniform else one / (cnt[0] * cnt[1])
    for n in range(n_n):
        for c in range(c_n):
            for i in range(ho_n):
                for j in range(wo_n):
                    acc = zero
                    for a in range(kh):
                        r = i * sh - ph + a
                        for b in range(kw):
                            q = j * sw - pw + b
                            v = x[n, c, r, q] if r >= 0 and r < h_n and q >= 0 and q < w_n else zero
                            acc = v if a == 0 and b == 0 else acc + v
                    out[n, c, i, j] = acc * fac[i, j]


@jit.tiered
def _avg_row(x, out, kw, sw, pw, fac, zero):
    """``avg_pool2d`` of a unit-height x by 1 x ``kw`` windows without height padding (a 1-D pool as the
    ONNX importer writes it): ``_avg_taps``'s sums (the taps in order from the window's first, padding
    read as zeros) times ``fac`` (each output column's factor, made once by ``_row_factors``), the
    windows inside x summed with no bounds check (``rows``: conv1d_net's (8, 16, 1, 11) ceil-mode
    pool, 768 outputs, ran ``_avg_taps``'s six loops and per-tap checks at about 5 ns an output)."""
    w_n, wo_n = x.shape[3], out.shape[3]
    for n in range(x.shape[0]):
        for c in range(x.shape[1]):
            xr, yr = x[n, c, 0], out[n, c, 0]
            for j in range(wo_n):
                q = j * sw - pw
                if q >= 0 and q + kw <= w_n:
                    acc = xr[q]
                    for b in range(1, kw):
                        acc = acc + xr[q + b]
                else:
                    acc = xr[q] if q >= 0 and q < w_n else zero
                    for b in range(1, kw):
                        v = xr[q + b] if q + b >= 0 and q + b < w_n else zero
                        acc = acc + v
                yr[j] = acc * fac[j]


def _row_factors(dtype, wo, kw, sw, pw, w_n, include_pad, uniform, scale) -> np.ndarray:
    """Each output column's factor as ``_avg_taps`` computes it for a unit-height pool (the window's
    row count 1): ``scale``, or one over the column count clipped to the padded input (``include_pad``)
    or to x, in ``dtype``."""
    if uniform:
        return np.full(wo, scale, dtype)
    lo, hi = (0, w_n + 2 * pw) if include_pad else (pw, pw + w_n)
    starts = np.arange(wo) * sw
    cnt = (np.minimum(starts + kw, hi) - np.maximum(starts, lo)).astype(dtype)
    one = np.ones(wo, dtype)
    with np.errstate(divide="ignore", invalid="ignore"):  # (a window past the input: inf, as the loop gives)
        return one / (one * cnt)


def row_applies(x, kernel, padding, shape, extra) -> bool:
    """``_avg_row`` runs an ``avg_pool`` of ``x`` that takes the taps loop: a unit-height x and window,
    no height padding or ceil-mode row, the tuning table's ``avg_pool_rows`` on."""
    return x.ndim == 4 and x.shape[2] == 1 and kernel[0] == 1 and padding[0] == 0 and shape[0] == 1 \
        and extra[0] == 0 and current().avg_pool_rows


def _avg_plan(x, kernel, stride, padding, shape, extra, include_pad, max_taps):
    """``(kern, args, taps)``: the compiled kernel ``avg_pool`` runs for ``x`` and its arguments after
    ``(x, out)`` (``taps``: ``_avg_taps``, which also takes a 2-value scratch array in x's dtype); None
    where none applies (``avg_pool``'s cases, ``out`` aside)."""
    if x.__class__ is not np.ndarray or x.ndim != 4 or x.dtype not in _FLOATS or not x.flags.c_contiguous:
        return None
    (kh, kw), (sh, sw), (ph, pw) = kernel, stride, padding
    t = x.dtype.type
    tiles = kh == sh and kw == sw and ph == pw == 0 and tuple(extra) == (0, 0) and x.shape[2] % kh == 0 \
        and x.shape[3] % kw == 0
    two = tiles and kh == kw == 2
    if not two and x.shape[0] * x.shape[1] * shape[0] * shape[1] * kh * kw > max_taps:
        return None
    kern = jit.compiled(_avg_tiles_2x2 if two else _avg_tiles if tiles else _avg_taps)
    if kern is None:
        return None
    uniform = include_pad and tuple(extra) == (0, 0)
    # (NumPy's path: the Python float 1 / (kh * kw), weak, cast to x's dtype; else one over counts in it)
    scale = t(1.0 / (kh * kw)) if uniform else t(1) / (t(kh) * t(kw))
    if two:
        return kern, (scale,), False
    if row_applies(x, kernel, padding, shape, extra):  # (tiles too: with one row, the tiles loop's sums)
        fac = _row_factors(x.dtype, shape[1], int(kw), int(sw), int(pw), x.shape[3], include_pad, uniform, scale)
        row = jit.compiled(_avg_row)
        return None if row is None else (row, (int(kw), int(sw), int(pw), fac, t(0)), False)
    if tiles:
        return kern, (int(kh), int(kw), scale), False
    return kern, (int(kh), int(kw), int(sh), int(sw), int(ph), int(pw), bool(include_pad), int(x.shape[2] + 2 * ph),
                  int(x.shape[3] + 2 * pw), bool(uniform), scale, t(0), t(1)), True


def avg_pool(x, out, kernel, stride, padding, shape, extra, include_pad, max_taps=1 << 62):
    """``avg_pool2d`` of C-ordered NCHW ``x`` into ``out`` (a new array when None) by a compiled
    kernel; None where none applies (numba absent or off, not float32/float64 NumPy, x not
    C-ordered (batch last), an out of another dtype or overlapping x, windows other than 2 x 2
    tiles with more than ``max_taps`` reads (outputs times kernel taps): the NumPy path's strided
    sums are faster there): the caller's NumPy path runs. ``shape``: the output's (Ho, Wo); ``extra``:
    ceil mode's rows and columns past the padded input."""
    if out is not None and (out.__class__ is not np.ndarray or out.dtype != x.dtype or overlap(out, x)):
        return None
    plan = _avg_plan(x, kernel, stride, padding, shape, extra, include_pad, max_taps)
    if plan is None:
        return None
    kern, args, taps = plan
    if out is None:
        out = np.empty((x.shape[0], x.shape[1]) + tuple(shape), x.dtype)
    if taps:
        kern(x, out, *args, np.empty(2, x.dtype))
    else:
        kern(x, out, *args)
    return out


def bound_avg_pool(x, out, kernel, stride, padding, shape, extra, include_pad, max_taps, other):
    """A compiled step's call of ``avg_pool``'s kernel with what the step's arrays fix made once (the
    window layout, the kernel, its scalars): ``fn(x, out=)`` checks per call only x's shape, dtype and
    order and what a planned buffer could change (an out given, of x's dtype and the output's
    shape, not overlapping x), and takes any other call to ``other(x, out=out)`` (the step's generic
    binding: ``avg_pool``, else the NumPy path). None where ``avg_pool`` would not run a kernel for
    these arrays (issue #35: conv1d_net's (1, 16, 1, 11) pool spent about 25 of its 33 us a call
    working out its windows and arguments around a 5 us kernel)."""
    if out is None or out.__class__ is not np.ndarray or out.dtype != x.dtype:
        return None
    plan = _avg_plan(x, kernel, stride, padding, shape, extra, include_pad, max_taps)
    if plan is None:
        return None
    kern, args, taps = plan
    dtype, x_shape, out_shape = x.dtype, x.shape, (x.shape[0], x.shape[1]) + tuple(shape)

    def fn(x, out=None):
        if out is None or out.dtype != dtype or x.dtype != dtype or x.shape != x_shape or out.shape != out_shape \
                or not x.flags.c_contiguous or overlap(out, x):
            return other(x, out=out)
        if taps:  # (a scratch array per call: a step may run in two threads at once)
            kern(x, out, *args, np.empty(2, dtype))
        else:
            kern(x, out, *args)
        return out

    return fn
