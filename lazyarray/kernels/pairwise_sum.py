"""NumPy's sum of a row, written out once for the compiled kernels that must give its values.

NumPy's ``add.reduce`` of up to ``BLOCK`` adjacent values is one block of its pairwise summation:
below 8 values one by one from ``-0.0``; else eight running sums (values 0-7, then each next 8
values added to them in turn), combined as a tree ``((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 +
r7))``, then the remaining values one by one; the reduction then adds that to its start, ``0``.
Longer rows it splits in two (the first ``n // 2`` rounded down to a multiple of 8 values, the rest),
each summed the same way, recursively, then adds the two sums (numpy's ``loops_utils.h.src``,
``pairwise_sum``; ``PW_BLOCKSIZE``). ``BLOCK_SUM`` is one block, every operation one rounding in the
row's dtype (numba without ``fastmath``), and ``_summing``'s ``row_sum`` the whole: the same value bit for
bit, of the row or of its squares (each square rounded first, as ``np.multiply(x, x)`` stores it:
``BLOCK_SQUARES_SUM``). ``layer_norm.py`` (layer and RMS norms), ``mean.py`` and ``softmax.py`` (the in-place
softmax) compile them into their kernels: ``with_row_sum(make, long)`` compiles ``make(row_sum,
squares_sum)``, both compiled inlined into it (``jit.inlined``), rows of any length where ``long``
(``tests/kernels/test_layer_norm.py`` checks lengths to 4100; ``test_layer_norm.py``, ``test_softmax.py`` and
``test_attention.py`` check the callers' values bit for bit).
"""
from __future__ import annotations

from collections.abc import Callable

import numpy as np

from .. import jit
from ..caches import NamedCache

BLOCK = 128  # NumPy sums a row of up to this many values as one block of its pairwise sum
# a kernel maker (``with_row_sum``) -> the kernel function it made with the compiled ``row_sum`` (the
# function ``jit.compiled`` compiles and keeps; the disk cache keys it by the code it captures)
MADE = NamedCache("kernels made with the pairwise row sum", 16)


def _block_summing(square: bool):
    """``block(row, lo, n, zero)``: the pairwise block sum of ``row[lo:lo + n]`` (``n`` at most
    ``BLOCK``), or of their squares where ``square`` (a constant where numba compiles it: no test in
    the loop): NumPy's ``pairwise_sum`` of such a block (see the module's docstring). ``zero``: 0 in
    the row's dtype."""
    def block(row, lo, n, zero):
        if n < 8:
            s = -zero
            for i in range(lo, lo + n):
                v = row[i]
                s += v * v if square else v
            return s
        r0, r1, r2, r3 = row[lo], row[lo + 1], row[lo + 2], row[lo + 3]
        r4, r5, r6, r7 = row[lo + 4], row[lo + 5], row[lo + 6], row[lo + 7]
        if square:
            r0, r1, r2, r3, r4, r5, r6, r7 = r0 * r0, r1 * r1, r2 * r2, r3 * r3, r4 * r4, r5 * r5, r6 * r6, r7 * r7
        m = lo + n - n % 8
        for i in range(lo + 8, m, 8):
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
        for i in range(m, lo + n):
            v = row[i]
            s += v * v if square else v
        return s

    return block


def _halving(block):
    """``halves_sum(row, zero)``: NumPy's pairwise sum of the 1-D ``row`` of more than ``BLOCK`` values, as its
    ``pairwise_sum`` recurses (each half ``n // 2`` rounded down to a multiple of 8, the rest the other), the
    blocks summed by the compiled ``block``. Walked without recursion: down the left halves to a block, the
    sum of each left half held (``held``, by depth) until its right half's is known, then the two added,
    left first, as NumPy adds them."""
    def halves_sum(row, zero):
        n = row.shape[0]
        held = np.empty(64, row.dtype)
        path, depth, lo, m = 0, 0, 0, n  # (the node: its path's bits from the row, 1 a right half)
        while True:
            while m > BLOCK:  # (down the left halves)
                h = m // 2
                m = h - h % 8
                path, depth = path << 1, depth + 1
            s = block(row, lo, m, zero)
            while path & 1:  # (up from right halves: the left half's sum plus theirs)
                path, depth = path >> 1, depth - 1
                s = held[depth] + s
            if depth == 0:
                return s
            held[depth - 1] = s
            path |= 1
            lo, m = 0, n  # (the right half: its place found from the row down)
            for k in range(depth - 1, -1, -1):
                h = m // 2
                h -= h % 8
                if (path >> k) & 1:
                    lo, m = lo + h, m - h
                else:
                    m = h

    return halves_sum


def _summing(block, halves_sum):
    """``row_sum(row, zero)``: ``zero + `` NumPy's pairwise sum of the 1-D ``row``: up to ``BLOCK`` values one
    ``block`` (inlined); where ``halves_sum`` is given (``_halving``: called, not inlined, which keeps the kernels
    that inline ``row_sum`` quick to compile), longer rows by it. Without it (None, a constant where numba
    compiles it: no test), rows of at most ``BLOCK`` values only: the kernel then pays no reference counting
    for a call it never makes (5% of a short rows' layer norm)."""
    def row_sum(row, zero):
        n = row.shape[0]
        if halves_sum is None or n <= BLOCK:
            return zero + block(row, 0, n, zero)
        return zero + halves_sum(row, zero)

    return row_sum


BLOCK_SUM, BLOCK_SQUARES_SUM = jit.inlined(_block_summing(False)), jit.inlined(_block_summing(True))


def with_row_sum(make: Callable, long: bool = False):
    """``make(row_sum, squares_sum)`` compiled (``jit.compiled``), the compiled row sums (``_summing``) in it,
    made once per ``make`` and ``long``: rows of any length where ``long``, else of at most ``BLOCK`` values.
    None where compiled kernels are off, or ``make`` is ``jit.tiered`` and this is a program's first run."""
    if jit.declined(make):  # (``make`` tiered, in a program's first run: numba not looked up)
        return None
    key = (make, long) if long else make
    fn = MADE.peek(key)
    if fn is None:
        if not jit.enabled():
            return None
        fn = MADE.get_or_make(key, _made, make, long)
    return jit.compiled(fn)


def _made(make: Callable, long: bool):
    return make(_row_sum(BLOCK_SUM, long), _row_sum(BLOCK_SQUARES_SUM, long))


def _row_sum(block: Callable, long: bool):
    """``_summing``'s ``row_sum`` over ``block`` compiled (to be inlined), made once per ``block`` and ``long``."""
    fn = MADE.peek((block, long))
    if fn is None:
        fn = MADE.get_or_make((block, long), _summing_made, block, long)
    return jit.compiled(fn, always=True)


def _summing_made(block: Callable, long: bool):
    inline = jit.compiled(block, always=True)
    return jit.inlined(_summing(inline, jit.compiled(_halving(inline), always=True) if long else None))
