"""Compiled elementwise loops (``jit.compiled``) for the ops whose NumPy ufunc is slow here.

NumPy's float ``maximum`` keeps its NaN rule with a slower loop than ``add`` (on the development
machine 0.5 ns a value against 0.15): a relu over a small activation is a third of a pooled
layer's time. ``relu_flat`` is ``np.maximum(x, 0)`` value for value: a NaN stays NaN, ``-0.0``
becomes ``0.0`` as in ``maximum`` (a tie gives its second operand), every other value is the
larger one. ``relu_grad_flat`` is ``relu_grad``'s ``g * (y > 0)`` in one pass instead of two. Both run
on flat views (the callers walk arrays of one memory order, batch-last buffers included). Each has
a loop per destination (``RELU``, ``RELU_GRAD``): a new array, or the buffer of one input.
"""
from __future__ import annotations

import numpy as np

from .. import jit


@jit.tiered
def relu_flat(src, dst, zero, one):
    """dst[i] = np.maximum(src[i], 0) for flat ``src`` and ``dst`` (``zero``: 0 in their dtype)."""
    for i in range(src.shape[0]):
        u = src[i]
        dst[i] = u if (u > zero) | (u != u) else zero


IN_PLACE_BLOCK = 512  # values a block of ``relu_in_place``: 2-4 KiB of scratch, in L1 with the block itself


@jit.tiered
def relu_in_place(a, zero, one):
    """``relu_flat`` of ``a`` into ``a``, block by block through a scratch block: each block's values into
    the scratch, then copied back. (A loop whose source and destination may be one array runs
    unvectorized when they are: 4x slower, so in-place writes have their own loop. Written as
    ``a[i] = u if ... else zero``, LLVM stores only where the value changes: masked stores (AVX's
    ``vmaskmovps``), microcoded on AMD's Zen: T5's relu of (8, 7, 128) float32 took 6.2 us at best and
    ~22 us on a shared machine, against 2.9 and 3.2 through the scratch, bit for bit (signaling NaNs
    too, where ``u + zero`` would quiet them).)"""
    n = a.shape[0]
    t = np.empty(IN_PLACE_BLOCK, a.dtype)
    for lo in range(0, n, IN_PLACE_BLOCK):
        m = min(IN_PLACE_BLOCK, n - lo)
        s = a[lo:lo + m]
        for j in range(m):
            u = s[j]
            t[j] = u if (u > zero) | (u != u) else zero
        for j in range(m):
            s[j] = t[j]


@jit.tiered
def relu_grad_flat(y, g, dst, zero, one):
    """dst[i] = g[i] * (y[i] > 0), the comparison as 1 or 0 in g's dtype: ``relu_grad``'s values
    bit for bit (a NaN or infinite gradient where y <= 0 gives NaN, a negative one -0.0)."""
    for i in range(g.shape[0]):
        dst[i] = g[i] * (one if y[i] > zero else zero)


@jit.tiered
def relu_grad_into_g(y, g, zero, one):
    """``relu_grad_flat`` into ``g``'s own buffer."""
    for i in range(g.shape[0]):
        g[i] = g[i] * (one if y[i] > zero else zero)


@jit.tiered
def relu_grad_into_y(y, g, zero, one):
    """``relu_grad_flat`` into ``y``'s own buffer."""
    for i in range(g.shape[0]):
        y[i] = g[i] * (one if y[i] > zero else zero)


@jit.tiered
def add_relu_cols_in_place(a, b, zero, one):
    """a[i, j] = relu(a[i, j] + b[j]) for a C-ordered 2-D ``a`` (a dense layer's rows): the bias add
    and ``relu_flat``'s comparison in one pass, the values of ``a += b`` then ``relu`` bit for bit
    (one rounding in the add, as NumPy's)."""
    for i in range(a.shape[0]):
        for j in range(a.shape[1]):
            u = a[i, j] + b[j]
            a[i, j] = u if (u > zero) | (u != u) else zero


@jit.tiered
def add_relu_rows_in_place(a, b, zero, one):
    """a[i, j] = relu(a[i, j] + b[i]): the same over a units-major dense value's memory (units, rows)."""
    for i in range(a.shape[0]):
        c = b[i]
        for j in range(a.shape[1]):
            u = a[i, j] + c
            a[i, j] = u if (u > zero) | (u != u) else zero


RELU = (relu_flat, relu_in_place)  # (into another array, into input 0)
RELU_GRAD = (relu_grad_flat, relu_grad_into_y, relu_grad_into_g)  # (..., into input 0 (y), into input 1 (g))


@jit.tiered
def relu_4d(x, out, zero):
    """``relu_flat`` between 4-D arrays stored in different orders (a convolution's batch-last
    result into an NCHW buffer): walked (C, H) block by block, each block's (N, W) values read
    and written while they sit in L1, whatever the two layouts. (NumPy's ``maximum`` between
    those layouts ran at 1.4 ns a value on the demo CNN's training step.)"""
    n_n, c_n, h_n, w_n = x.shape
    for c in range(c_n):
        for h in range(h_n):
            for n in range(n_n):
                for w in range(w_n):
                    u = x[n, c, h, w]
                    out[n, c, h, w] = u if (u > zero) | (u != u) else zero
