"""``conv1d``'s ``rows`` loop: a stride-1 1-D convolution of a batch as passes over one flat, zero-padded
row per input channel (the images end to end), four output channels by three taps a pass.

``conv1d``'s first loop (``kernels/conv1d.py``) adds each tap's input value times a row of the
group's output channels to a row accumulator: a loop of 16 values a (channel, tap, position), mostly
its own setup (issue #35: ``conv1d_net``'s (8, 16, 1, 11) by (16, 16, 1, 3) layer ran 35 us a call, one
thread, 2 GMAC/s). Here each input channel's images are copied once, end to end with their zero padding
between, into one row (``(N - 1) * (L + 2p) + Lo`` output positions, rounded up to ``ROUND`` values so
the loop runs whole), and per block of four output channels, per input channel and per three taps one
vectorized pass over that row adds twelve products to four accumulator rows (``conv_blocked``'s passes
over a flat plane; the positions between images are computed and not written out). The write-out adds
the bias and applies the activation a row at a time (``activation_jit.activate_row``).

Values: per output, the input channels in order and each channel's taps in order, each product added
to the running sum (no fused multiply-add), the bias last: the order of ``conv1d``'s first loop, so its
values bit for bit (a tap in the padding adds a product with zero, which leaves a sum as it is, and
that loop skips it; both differ only where a weight is infinite or NaN); within float rounding of the
reference (im2col and BLAS: rtol 1e-5 float32, 1e-12 float64).

Applies (``applies``, asked by ``conv1d.choose`` where ``conv1d`` applies): stride 1 and the tuning
table's ``conv1d_rows`` on; any batch, dilation, padding and groups, any memory order of the input
(read once, into the rows).
"""
from __future__ import annotations

import functools

import numpy as np

from .. import jit
from .activation_jit import activate_row
from .conv_blocked import PASS1, PASS3

ROUND = 16  # (the flat loop's length a multiple of this, as conv_blocked's: its vectorized loop runs whole)


def _fill(pad, x, pw, lp):  # pragma: no cover  (compiled by numba, inlined)
    """``pad`` (C, >= N * lp) zeros, then each image's row of each channel at ``img * lp + pw``."""
    pad[:, :] = 0
    for ch in range(x.shape[1]):
        pr = pad[ch]
        for img in range(x.shape[0]):
            xr, at = x[img, ch, 0], img * lp + pw
            for i in range(x.shape[3]):
                pr[at + i] = xr[i]


def _make(fill, pass3, pass1, activate_row):
    def _rows(x, w, b, y, pw, dw, code, prm):  # pragma: no cover  (compiled by numba)
        """y (N, O, 1, Lo) = act(conv of x (N, C, 1, L) by w (O, C/groups, 1, K), stride 1, padding ``pw``,
        dilation ``dw``, + b (O,)); ``b`` with no values: no bias; ``prm``: (alpha, beta, 0, 1). A last
        block of fewer than four channels computes its last one again (not written out)."""
        n, c, length, lo = x.shape[0], x.shape[1], x.shape[3], y.shape[3]
        o, cg, k = w.shape[0], w.shape[1], w.shape[3]
        if n * o * lo == 0:
            return
        groups = c // cg if cg > 0 else 1
        og, lp = o // groups, length + 2 * pw
        flat = ((n - 1) * lp + lo + ROUND - 1) // ROUND * ROUND
        pad = np.empty((c, max(n * lp, flat + (k - 1) * dw)), y.dtype)
        fill(pad, x, pw, lp)
        acc = np.empty((4, flat), y.dtype)
        a0, a1, a2, a3 = acc[0], acc[1], acc[2], acc[3]
        k3 = k - k % 3
        for g in range(groups):
            for ob in range(0, og, 4):
                acc[:, :] = 0
                o0, last = g * og + ob, g * og + og - 1
                o1, o2, o3 = min(o0 + 1, last), min(o0 + 2, last), min(o0 + 3, last)
                for ci in range(cg):
                    pc = pad[g * cg + ci]
                    u0, u1, u2, u3 = w[o0, ci, 0], w[o1, ci, 0], w[o2, ci, 0], w[o3, ci, 0]
                    for tap in range(0, k3, 3):
                        t0 = tap * dw
                        pass3(a0, a1, a2, a3, pc[t0:t0 + flat], pc[t0 + dw:t0 + dw + flat],
                              pc[t0 + 2 * dw:t0 + 2 * dw + flat], u0, u1, u2, u3, tap)
                    for tap in range(k3, k):
                        src = pc[tap * dw:tap * dw + flat]
                        for blk in range(4):
                            pass1(acc[blk], src, w[min(o0 + blk, last), ci, 0, tap])
                for blk in range(min(4, og - ob)):  # (bias -0.0 where there is none: every sum stays as it is)
                    bo = b[o0 + blk] if b.shape[0] == o else -prm[2]
                    for img in range(n):
                        activate_row(y[img, o0 + blk, 0], acc[blk, img * lp:img * lp + lo], bo, code, prm[0], prm[1],
                                     prm[2], prm[3])

    return _rows


FILL = jit.inlined(_fill)


@functools.lru_cache(maxsize=1)
def _kernel_fn():
    """The kernel function with its compiled helpers inlined in it (made once)."""
    return _make(*(jit.compiled(f, always=True) for f in (FILL, PASS3, PASS1, activate_row)))


def kernel():
    """The compiled ``_rows``, or None where compiled kernels are off."""
    return jit.compiled(_kernel_fn()) if jit.enabled() else None


def applies(stride, t) -> bool:
    """``rows`` runs a call ``conv1d`` takes (``conv1d.applies`` held): stride 1, ``conv1d_rows`` on."""
    return t.conv1d_rows and stride[1] == 1
