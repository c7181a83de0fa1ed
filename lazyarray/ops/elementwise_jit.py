"""Compiled elementwise loops (``jit.compiled``) for the ops whose NumPy ufunc is slow here.

NumPy's float ``maximum`` keeps its NaN rule with a slower loop than ``add`` (on the development
machine 0.5 ns a value against 0.15): a relu over a small activation is a third of a pooled
layer's time. ``relu_flat`` is ``np.maximum(x, 0)`` value for value: a NaN stays NaN, ``-0.0``
becomes ``0.0`` as in ``maximum`` (a tie gives its second operand), every other value is the
larger one. ``relu_grad_flat`` is ``relu_grad``'s ``g * (y > 0)`` in one pass instead of two. Both run
on flat views (the callers walk arrays of one memory order, batch-last buffers included).
"""
from __future__ import annotations


def relu_flat(src, dst, zero):
    """dst[i] = np.maximum(src[i], 0) for flat ``src`` and ``dst`` (``zero``: 0 in their dtype)."""
    for i in range(src.shape[0]):
        u = src[i]
        dst[i] = u if (u > zero) | (u != u) else zero


def relu_grad_flat(y, g, dst, zero, one):
    """dst[i] = g[i] * (y[i] > 0), the comparison as 1 or 0 in g's dtype: ``relu_grad``'s values
    bit for bit (a NaN or infinite gradient where y <= 0 gives NaN, a negative one -0.0)."""
    for i in range(g.shape[0]):
        dst[i] = g[i] * (one if y[i] > zero else zero)
