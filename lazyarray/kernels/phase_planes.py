"""Zero-padded phase planes: the input layout of the compiled NCHW depthwise and direct convolutions.

``depthwise``'s ``_dw_nchw`` and ``conv_direct``'s ``_direct`` copy each input plane into ``stride``
rows by columns of zero-padded phase planes (padded pixel (r, q) goes to phase (r % sh, q % sw) at
(r // sh, q // sw) of an (Hq, Wq) plane; stride 1 is one phase, the padded plane), so that each
tap of a convolution is one multiply-add of the whole flat (row-padded) output plane by a slice of
one phase plane. ``phase_tables`` gives, per geometry, where each phase column's values go and
where each tap's slice starts; ``FILL`` is the copy of one plane into its phases, written once
and compiled inlined (``jit.inlined``) into both kernels: ``with_fill(make)`` compiles the kernel
``make(fill)`` with it (``jit.made_with``). The copy moves
values only, so the kernels' values are what they were with their own copies, bit for bit.
"""
from __future__ import annotations

import functools
from collections.abc import Callable

import numpy as np

from .. import jit


@functools.lru_cache(maxsize=256)
def phase_tables(h: int, wd: int, kh: int, kw: int, stride, padding, dilation) -> tuple:
    """``(cols, taps, hq, wq)`` for an (H, W) plane's zero-padded phase planes (``depthwise._dw_nchw``;
    ``conv_direct``'s ``_direct``): per phase column t, (first input column, columns, first plane
    column); per tap (i, j), where its slice starts in the plane's phases; each phase plane's (Hq, Wq).
    (Read-only arrays, made once per geometry: no division in the compiled loops.)"""
    (sh, sw), (ph, pw), (dh, dw) = stride, padding, dilation
    hq, wq = (h + 2 * ph + sh - 1) // sh, (wd + 2 * pw + sw - 1) // sw
    q0 = [(t - pw) % sw for t in range(sw)]
    cols = np.array([(q, (wd - q + sw - 1) // sw, (q + pw) // sw) for q in q0], np.int64).reshape(sw, 3)
    taps = np.array([(((i * dh) % sh) * sw + (j * dw) % sw) * hq * wq + (i * dh) // sh * wq + (j * dw) // sw
                     for i in range(kh) for j in range(kw)], np.int64)
    cols.flags.writeable = taps.flags.writeable = False
    return cols, taps, hq, wq


def _fill(pad, xs, cols, sh, ph, wq):  # pragma: no cover  (compiled by numba, inlined into its callers)
    """The (H, W) plane ``xs`` copied into the flat phase planes ``pad`` (sh * sw planes of Hq x Wq
    values, ``cols``: ``phase_tables``'), its padding left as it is (zeros: every plane of a kernel
    writes the same positions). Every loop indexes slices, so no index can wrap (numba's
    negative-index test kept LLVM from vectorizing, issue #35); one column phase (stride 1 along rows)
    copies each row by a slice without a step (with a runtime step the copy stayed
    scalar: a third to a half of MobileNetV3's batch-8 stride-1 depthwise layers' time). Two column
    phases (stride 2) split each row's column pairs in one loop: a row of fewer than 8 pairs indexes
    the planes directly, by unsigned indices (no negative-index test: ShuffleNet's 8 x 8 stride-2 layer
    8% faster; the two phase-row slices and the source row made per row cost more than its copy), a longer one writes through the phase-row slices, whose
    indices cannot wrap (indexing the planes directly, each value's store paid numba's negative-index
    test and its loop bound was reloaded: a third of MobileNetV3's batch-8 stride-2 layer's time,
    the layer 15% faster by slices)."""
    sw = cols.shape[0]
    plane = pad.shape[0] // (sh * sw)
    rm, rd = ph % sh, ph // sh  # (padded row r + ph: phase row rm, row rd of its plane)
    wd = xs.shape[1]
    half = wd // 2
    t0 = 0 if cols[0, 0] == 0 else 1  # (two phases: the one whose first input column is 0, then 1)
    t1 = (1 - t0) % sw
    for r in range(xs.shape[0]):
        if sw == 2:  # (columns 2k and 2k + 1 of the row to phases t0 and t1: one loop over its pairs)
            d0 = (rm * 2 + t0) * plane + rd * wq + cols[t0, 2]
            d1 = (rm * 2 + t1) * plane + rd * wq + cols[t1, 2]
            if half >= 8:  # (by slices: no index can wrap, so no negative-index test per value)
                e, o, row = pad[d0:d0 + half], pad[d1:d1 + half], xs[r]
                for k in range(half):
                    e[k] = row[2 * k]
                    o[k] = row[2 * k + 1]
            else:  # (a short row: the three slices would cost more; unsigned indices, which numba does not test)
                u0, u1, one = np.uint64(d0), np.uint64(d1), np.uint64(1)
                for k in range(np.uint64(half)):
                    pad[u0 + k] = xs[r, k + k]
                    pad[u1 + k] = xs[r, k + k + one]
            if wd > 2 * half:  # (an odd width: the last column, 2 * half, is phase t0's)
                pad[d0 + half] = xs[r, wd - 1]
            rm += 1
            if rm == sh:
                rm, rd = 0, rd + 1
            continue
        for t in range(sw):
            d0 = (rm * sw + t) * plane + rd * wq + cols[t, 2]
            dst = pad[d0:d0 + cols[t, 1]]
            if sw == 1:  # (a slice without a step: a contiguous row, whose copy vectorizes)
                row = xs[r, :cols[t, 1]]
                for k in range(dst.shape[0]):
                    dst[k] = row[k]
            else:
                src = xs[r, cols[t, 0]::sw]
                for k in range(dst.shape[0]):
                    dst[k] = src[k]
        rm += 1
        if rm == sh:
            rm, rd = 0, rd + 1


FILL = jit.inlined(_fill)


def with_fill(make: Callable):
    """``make(fill)`` compiled (``jit.made_with``), the compiled ``FILL`` inlined in it, made once per
    ``make``; None where compiled kernels are off, or ``make`` is ``jit.tiered`` and this is a
    program's first run."""
    return jit.made_with(make, FILL)
