"""Compiled elementwise loops (``jit.compiled``) for the ops whose NumPy ufunc is slow here.

NumPy's float ``maximum`` keeps its NaN rule with a slower loop than ``add`` (on the development
machine 0.5 ns a value against 0.15): a relu over a small activation is a third of a pooled
layer's time. ``relu_flat`` is ``np.maximum(x, 0)`` value for value: a NaN stays NaN, ``-0.0``
becomes ``0.0`` as in ``maximum`` (a tie gives its second operand), every other value is the
larger one. It runs on flat views (``_relu`` walks any array in its memory order).
"""
from __future__ import annotations


def relu_flat(src, dst, zero):
    """dst[i] = np.maximum(src[i], 0) for flat ``src`` and ``dst`` (``zero``: 0 in their dtype)."""
    for i in range(src.shape[0]):
        u = src[i]
        dst[i] = u if (u > zero) | (u != u) else zero
