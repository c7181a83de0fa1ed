"""NumPy's sum of a short row, written out once for the compiled kernels that must give its values.

NumPy's ``add.reduce`` of up to ``BLOCK`` adjacent values is one block of its pairwise summation:
below 8 values one by one from ``-0.0``; else eight running sums (values 0-7, then each next 8
values added to them in turn), combined as a tree ``((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 +
r7))``, then the remaining values one by one; the reduction then adds that to its start, ``0``.
``ROW_SUM`` is that, every operation one rounding in the row's dtype (numba without ``fastmath``):
the same value bit for bit, of the row or of its squares (each square rounded first, as
``np.multiply(x, x)`` stores it: ``SQUARES_SUM``). ``layer_norm.py`` (layer and RMS norms) and ``softmax.py``
(the in-place softmax) compile them into their kernels: ``with_row_sum(make)`` compiles
``make(row_sum, squares_sum)``, both compiled inlined into it (``jit.inlined``; ``tests/kernels/test_layer_norm.py``,
``test_softmax.py`` and ``test_attention.py`` check the callers' values bit for bit).
"""
from __future__ import annotations

from collections.abc import Callable

from .. import jit
from ..caches import NamedCache

BLOCK = 128  # NumPy sums a row of up to this many values as one block of its pairwise sum
# a kernel maker (``with_row_sum``) -> the kernel function it made with the compiled ``row_sum`` (the
# function ``jit.compiled`` compiles and keeps; the disk cache keys it by the code it captures)
MADE = NamedCache("kernels made with the pairwise row sum", 16)


def _summing(square: bool):
    """``row_sum(row, zero)``: ``zero + `` the pairwise block sum of the 1-D ``row`` (of at most
    ``BLOCK`` values), or of their squares where ``square`` (a constant where numba compiles it: no
    test in the loop), ``np.add.reduce``'s value of such a row (see the module's docstring).
    ``zero``: 0 in the row's dtype."""
    def row_sum(row, zero):
        n = row.shape[0]
        if n < 8:
            s = -zero
            for i in range(n):
                v = row[i]
                s += v * v if square else v
            return zero + s
        r0, r1, r2, r3, r4, r5, r6, r7 = row[0], row[1], row[2], row[3], row[4], row[5], row[6], row[7]
        if square:
            r0, r1, r2, r3, r4, r5, r6, r7 = r0 * r0, r1 * r1, r2 * r2, r3 * r3, r4 * r4, r5 * r5, r6 * r6, r7 * r7
        m = n - n % 8
        for i in range(8, m, 8):
            v0, v1, v2, v3 = row[i], row[i + 1], row[i + 2], row[i + 3]
            v4, v5, v6, v7 = row[i + 4], row[i + 5], row[i + 6], row[i + 7]
            if square:
                v0, v1, v2, v3, v4, v5, v6, v7 = v0 * v0, v1 * v1, v2 * v2, v3 * v3, v4 * v4, v5 * v5, v6 * v6, v7 * v7
            r0 += v0
            r1 += v1
            r2 += v2
            r3 += v3
            r4 += v4
            r5 += v5
            r6 += v6
            r7 += v7
        s = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
        for i in range(m, n):
            v = row[i]
            s += v * v if square else v
        return zero + s

    return row_sum


ROW_SUM, SQUARES_SUM = jit.inlined(_summing(False)), jit.inlined(_summing(True))


def with_row_sum(make: Callable):
    """``make(row_sum, squares_sum)`` compiled (``jit.compiled``), the compiled ``ROW_SUM`` and
    ``SQUARES_SUM`` in it, made once per ``make``; None where compiled kernels are off, or ``make`` is
    ``jit.tiered`` and this is a program's first run."""
    if jit.declined(make):  # (``make`` tiered, in a program's first run: numba not looked up)
        return None
    fn = MADE.peek(make)
    if fn is None:
        if not jit.enabled():
            return None
        fn = MADE.get_or_make(make, _made, make)
    return jit.compiled(fn)


def _made(make: Callable):
    return make(jit.compiled(ROW_SUM, always=True), jit.compiled(SQUARES_SUM, always=True))
