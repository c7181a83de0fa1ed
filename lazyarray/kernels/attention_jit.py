"""The compiled passes of ``nn.fused_attention``'s ``compiled`` and ``head_loop`` implementations
(``kernels/attention.py``).

``batched_blas`` runs the chain as one NumPy ufunc call per op over the whole scores buffer (a
multiply by the scale, an add of the mask: 1-2 us each at a small transformer's (1, 2, 7, 7)
scores), then ``softmax.in_place``'s first pass (the row maxima subtracted). ``scores_pass`` does
both in one call: per (batch, head) block of the scores, each chain op in turn over the block
(``chain_rows``: one rounding in the scores' dtype, as the ufunc's; ``where`` a selection), then each
row's maximum as ``np.maximum.reduce`` finds it (``max_subtract_rows``: a NaN wins, a tie keeps the
first, ``softmax._max_subtract``'s rule) subtracted from each value. The same operations in the same
order on each value: the same bits as the NumPy calls.

The helpers take a block, not a row, and read the extras by index, not through per-row views: numba
counts a reference to every array an inlined call is handed (and to every view it makes), an atomic
increment and decrement each, and per row of 16 keys those were most of the time (a row helper given
the scores, the four float extras and the two masks ran Swin's (32, 2, 16, 16) scores at 190-245 us a
call, perf's samples on the reference counts; the loop written out in the pass without the call, 100;
the block helpers, 53). An op whose extra has one value per row reads it once per row, so the row's
loop vectorizes.

``heads_pass`` (``head_loop``) is the whole attention of small heads in one call: per batch and head,
``k`` and ``v`` copied into C-ordered scratch (their views' strides would keep the loops scalar), the
scores of all the head's queries as dot products into a block of scratch (each summed over the
features in order, as one sequential loop: BLAS's products may sum in another order), ``chain_rows``,
``max_subtract_rows``, then per query row the exponential (numba's ``exp``, the C library's; NumPy's
own SIMD ``exp`` may differ by an ulp), the row divided by its sum as NumPy's ``add.reduce`` makes it
(``pairwise_sum.py``), and the weighted sum of ``v``'s rows (each output summed over the keys in
order), written through the result's view. Not the reference's bits: see ``kernels/attention.py``
for the bound.

The scores arrive as a C-ordered 4-D array (padded with leading unit dims); ``q``, ``k``, ``v`` and the
result as 4-D views (any strides; batch and head dims of ``q``, ``k``, ``v`` of 1 broadcast); each extra
as a 4-D view (any strides) that broadcasts against the scores; float extras in ``f0``..``f3`` in the
order the chain's ops read them (each op one: a ``where``'s fill), boolean masks in ``m0``, ``m1``;
unused slots get a (1, 1, 1, 1) dummy (``CHAIN_FLOATS``, ``CHAIN_MASKS``: the most a chain may have).
"""
from __future__ import annotations

import numpy as np

from .. import jit
from ..ops.attention import WHERE
from .pairwise_sum import with_row_sum

CHAIN_FLOATS, CHAIN_MASKS = 4, 2
MULTIPLY, DIVIDE, ADD = 0, 1, 2  # (ops/attention.py's OPS order; 3 is subtract)


def _chain_rows(s, codes, b, h, f0, f1, f2, f3, m0, m1):  # pragma: no cover  (compiled by numba)
    """The chain ``codes`` (ops/attention.py's codes) on ``s``, the (queries, keys) scores of batch ``b`` and
    head ``h``: op by op over the whole block, each extra read by index (no per-row views: see the module)."""
    def apply(op, pos, a, x):  # (the op on the running value ``a`` at ``pos``; one rounding in its dtype)
        if op == MULTIPLY:
            return a * x
        if op == ADD:
            return a + x
        if op == DIVIDE:
            return a / x if pos == 0 else x / a
        return a - x if pos == 0 else x - a

    t_n, n = s.shape[0], s.shape[1]
    mi = 0
    for i in range(codes.shape[0]):
        op, pos = codes[i] // 10, codes[i] % 10
        e = f0 if i == 0 else f1 if i == 1 else f2 if i == 2 else f3  # (the op's float extra)
        eb, eh, et = b if e.shape[0] > 1 else 0, h if e.shape[1] > 1 else 0, 1 if e.shape[2] > 1 else 0
        if op == WHERE:  # (a selection: s takes the fill where the mask holds, pos 2, or not, pos 1)
            m = m0 if mi == 0 else m1
            mb, mh = b if m.shape[0] > 1 else 0, h if m.shape[1] > 1 else 0
            mt, ms, es = 1 if m.shape[2] > 1 else 0, 1 if m.shape[3] > 1 else 0, 1 if e.shape[3] > 1 else 0
            mi += 1
            for t in range(t_n):
                for j in range(n):
                    if m[mb, mh, t * mt, j * ms] == (pos == 2):
                        s[t, j] = e[eb, eh, t * et, j * es]
        elif e.shape[3] == 1:  # (one value per row: read once, the row's loop vectorizes)
            for t in range(t_n):
                x = e[eb, eh, t * et, 0]
                for j in range(n):
                    s[t, j] = apply(op, pos, s[t, j], x)
        else:
            for t in range(t_n):
                for j in range(n):
                    s[t, j] = apply(op, pos, s[t, j], e[eb, eh, t * et, j])


def _max_subtract_rows(s):  # pragma: no cover  (compiled by numba)
    """Each row of the 2-D ``s`` minus its maximum as ``np.maximum.reduce`` finds it (a NaN wins, a tie keeps
    the first)."""
    n = s.shape[1]
    if n == 0:
        return
    for t in range(s.shape[0]):
        mx = s[t, 0]
        for j in range(1, n):
            v = s[t, j]
            if v > mx or v != v:
                if mx == mx:
                    mx = v
        for j in range(n):
            s[t, j] = s[t, j] - mx


CHAIN_ROWS, MAX_SUBTRACT_ROWS = jit.inlined(_chain_rows), jit.inlined(_max_subtract_rows)


@jit.tiered
def _scores_pass_with(row_sum, squares_sum):
    """``scores_pass`` with the compiled block helpers in it (``pairwise_sum.with_row_sum`` makes it once; the
    row sums unused)."""
    chain_rows, max_subtract_rows = jit.compiled(CHAIN_ROWS, always=True), jit.compiled(MAX_SUBTRACT_ROWS, always=True)

    def scores_pass(s4, codes, f0, f1, f2, f3, m0, m1):  # pragma: no cover  (compiled by numba)
        """Each (batch, head) block of the C-ordered 4-D scores ``s4``: the chain ``codes``, then each row's
        maximum subtracted (see the module)."""
        for b in range(s4.shape[0]):
            for h in range(s4.shape[1]):
                s = s4[b, h]
                chain_rows(s, codes, b, h, f0, f1, f2, f3, m0, m1)
                max_subtract_rows(s)

    return scores_pass


@jit.tiered
def _heads_pass_with(row_sum, squares_sum):
    """``heads_pass`` with the compiled block helpers and NumPy's row sum in it (``with_row_sum``). Tiered as
    ``compiled_cell``'s loop is (``kernels/rnn_cell.py``), though its values are within a bound of the NumPy
    path's, not its bits: a program's first run loads no numba for it (``compiled`` and then ``batched_blas``
    run there), the later runs take it."""
    chain_rows, max_subtract_rows = jit.compiled(CHAIN_ROWS, always=True), jit.compiled(MAX_SUBTRACT_ROWS, always=True)

    def heads_pass(q4, k4, v4, out4, codes, f0, f1, f2, f3, m0, m1, zero):  # pragma: no cover  (numba)
        """``out4`` = the attention of ``q4``, ``k4`` (the keys transposed: features, keys), ``v4``
        with the score chain ``codes`` (see the module)."""
        d_n, t_n, e_n, q_n = q4.shape[3], k4.shape[3], v4.shape[3], out4.shape[2]
        kc, vc = np.empty((d_n, t_n), q4.dtype), np.empty((t_n, e_n), q4.dtype)
        blk, acc = np.empty((q_n, t_n), q4.dtype), np.empty(e_n, q4.dtype)
        for b in range(out4.shape[0]):
            for h in range(out4.shape[1]):
                qb = q4[b if q4.shape[0] > 1 else 0, h if q4.shape[1] > 1 else 0]
                kb = k4[b if k4.shape[0] > 1 else 0, h if k4.shape[1] > 1 else 0]
                vb = v4[b if v4.shape[0] > 1 else 0, h if v4.shape[1] > 1 else 0]
                for d in range(d_n):
                    for j in range(t_n):
                        kc[d, j] = kb[d, j]
                for j in range(t_n):
                    for e in range(e_n):
                        vc[j, e] = vb[j, e]
                for t in range(q_n):
                    for j in range(t_n):
                        blk[t, j] = zero
                    for d in range(d_n):  # (each score summed over the features in order)
                        x = qb[t, d]
                        for j in range(t_n):
                            blk[t, j] += x * kc[d, j]
                chain_rows(blk, codes, b, h, f0, f1, f2, f3, m0, m1)
                max_subtract_rows(blk)
                for t in range(q_n):
                    row = blk[t]
                    for j in range(t_n):
                        row[j] = np.exp(row[j])
                    total = row_sum(row, zero)
                    for e in range(e_n):
                        acc[e] = zero
                    for j in range(t_n):  # (each output summed over the keys in order)
                        p = row[j] / total
                        for e in range(e_n):
                            acc[e] += p * vc[j, e]
                    o = out4[b, h, t]
                    for e in range(e_n):
                        o[e] = acc[e]

    return heads_pass


@jit.tiered
def _heads_few_with(row_sum, squares_sum):
    """``heads_pass`` for a chain of at most two ops, so two float extras and one mask (``f0``, ``f1``, ``m0``;
    the unused slots' dummies and the zero made inside): eight arguments instead of twelve, numba's
    dispatch of each of which was 0.3-0.4 us of a small head's call (the same operations: the same values
    as ``heads_pass``)."""
    heads = jit.compiled(_heads_pass_with(row_sum, squares_sum), always=True)

    def heads_few(q4, k4, v4, out4, codes, f0, f1, m0):  # pragma: no cover  (compiled by numba)
        f, m, z = np.zeros((1, 1, 1, 1), q4.dtype), np.zeros((1, 1, 1, 1), np.bool_), np.zeros(1, q4.dtype)
        heads(q4, k4, v4, out4, codes, f0, f1, f, f, m0, m, z[0])

    return heads_few


def scores_kernel():
    """The compiled ``scores_pass``, or None where compiled kernels are off or this is a program's first
    run (``jit.tiered``: its callers' NumPy calls give the same values)."""
    return with_row_sum(_scores_pass_with)


def heads_kernel(few: bool = False):
    """The compiled ``heads_pass`` (rows of at most ``pairwise_sum.BLOCK`` keys), or ``heads_few`` where
    ``few``, or None where compiled kernels are off or this is a program's first run (``jit.tiered``)."""
    return with_row_sum(_heads_few_with if few else _heads_pass_with)
