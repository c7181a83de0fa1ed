"""``max``'s and ``min``'s ``rows``: a reduction of a C-ordered array's last axis as one compiled loop.

``ufunc`` (``kernels/extrema.py``) is ``np.maximum.reduce``; over a short last axis it sets up its
inner loop once per row: conv1d_net's (8, 16, 6) -> (8, 16) maximum over the length axis (a 1-D
net's global max pool) ran about 10 us a call, one thread, 128 rows of six values. Here one
compiled loop runs every row: per row the values in order, each step ``np.maximum``'s rule (a NaN
on either side gives NaN; ``np.minimum``'s for min), so every result is NumPy's value. The one case a
result could differ in its bits is a row whose extremum is a zero and which holds zeros of both signs
(which one NumPy's vectorized reduction keeps hangs on its lanes): the loop counts those rows and,
where there are any, the whole result is the ufunc's: bit for bit in every case.

Applies (``applies``): NumPy float32/float64 arrays, C-ordered, of at least one dim, reduced over
their last axis alone (any keepdims), that axis not empty (an empty one raises as the ufunc does:
it runs), numba on, the tuning table's ``extremum_rows`` on. The result is a new C-ordered array,
as ``ufunc``'s.
"""
from __future__ import annotations

import functools
import math

import numpy as np

from .. import jit

_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))


def _mixed_zeros(row):  # pragma: no cover  (compiled by numba, inlined)
    """1 where ``row`` holds both a ``-0.0`` and a ``0.0``, else 0."""
    neg = pos = False
    for i in range(row.shape[0]):
        if row[i] == 0:
            if math.copysign(1.0, row[i]) < 0:
                neg = True
            else:
                pos = True
    return 1 if neg and pos else 0


def _larger(m, v):  # pragma: no cover  (compiled by numba, inlined)
    return m if (m > v) | (m != m) else v  # np.maximum(m, v): a NaN on either side gives NaN


def _smaller(m, v):  # pragma: no cover  (compiled by numba, inlined)
    return m if (m < v) | (m != m) else v  # np.minimum(m, v)


def _make(pick, mixed_zeros):
    def _rows(xs, ys):  # pragma: no cover  (compiled by numba)
        """ys (..., [1]) = the extremum (``pick``) of each row of C-ordered xs (..., L), L >= 1 (seen as 2-D
        and 1-D inside); returns how many rows' extremum is a zero with zeros of both signs in the row."""
        x = xs.reshape((xs.size // xs.shape[-1], xs.shape[-1]))
        y = ys.reshape(ys.size)
        mixed = 0
        for r in range(x.shape[0]):
            row = x[r]
            m = row[0]
            for i in range(1, x.shape[1]):
                m = pick(m, row[i])
            y[r] = m
            if m == 0:
                mixed += mixed_zeros(row)
        return mixed

    return _rows


PICKS = {"max": jit.inlined(_larger), "min": jit.inlined(_smaller)}
MIXED_ZEROS = jit.inlined(_mixed_zeros)


@functools.lru_cache(maxsize=2)
def _kernel_fn(name: str):
    """``max``'s or ``min``'s kernel function with its helpers inlined in it (made once each)."""
    return _make(jit.compiled(PICKS[name], always=True), jit.compiled(MIXED_ZEROS, always=True))


def kernel(name: str):
    """The compiled kernel of ``name`` (max or min), or None where compiled kernels are off."""
    return jit.compiled(_kernel_fn(name)) if jit.enabled() else None




def run(name: str, x, axes: tuple, keepdims: bool):
    """The reduction of ``x`` over ``axes`` by the compiled loop (``applies`` held); None where the
    kernel is off or a row's extremum is a zero (the caller's ufunc runs)."""
    kern = kernel(name)
    if kern is None:
        return None
    y = np.empty(x.shape[:-1] + (1,) if keepdims else x.shape[:-1], x.dtype)
    return None if kern(x, y) else y


def applies(x, axes: tuple, on: bool) -> bool:
    """``rows`` runs this reduction of ``x`` over the normalized ``axes`` (``on``: the tuning table's
    ``extremum_rows``): see the module."""
    return on and x.__class__ is np.ndarray and x.ndim >= 1 and axes == (x.ndim - 1,) and x.dtype in _FLOATS \
        and x.shape[-1] > 0 and x.flags.c_contiguous and jit.enabled()


def bound(name: str, x, keepdims: bool, other):
    """``fn(x, out=None)``: the reduction of arrays shaped and typed as ``x`` (``applies`` held) by the
    compiled loop, the geometry fixed; any other call, and any call where a row's extremum is a zero,
    goes to ``other(x)`` (``ufunc``'s bound reduction). None where the kernel is off."""
    kern = kernel(name)
    if kern is None:
        return None
    shape, dtype = x.shape, x.dtype
    y_shape = shape[:-1] + (1,) if keepdims else shape[:-1]

    def fn(x, out=None):
        if x.shape != shape or x.dtype != dtype or not x.flags.c_contiguous:
            return other(x)
        y = np.empty(y_shape, dtype)
        return other(x) if kern(x, y) else y

    return fn
