"""The compiled passes of ``nn.fused_attention``'s ``compiled`` and ``head_loop`` implementations
(``kernels/attention.py``).

``batched_blas`` runs the chain as one NumPy ufunc call per op over the whole scores buffer (a
multiply by the scale, an add of the mask: 1-2 us each at a small transformer's (1, 2, 7, 7)
scores), then ``softmax.in_place``'s first pass (the row maxima subtracted). ``scores_pass`` does
both in one call: per row of the scores, each chain op in turn (``chain_row``: one rounding in the
scores' dtype, as the ufunc's; ``where`` a selection), then the row's maximum as ``np.maximum.reduce``
finds it (``max_subtract_row``: a NaN wins, a tie keeps the first, ``softmax._max_subtract``'s rule)
subtracted from each value. The same operations in the same order on the same values: the same bits
as the NumPy calls.

``heads_pass`` (``head_loop``) is the whole attention of small heads in one call: per batch and head,
``k`` and ``v`` copied into C-ordered scratch (their views' strides would keep the loops scalar), then
per query row the scores as dot products (each summed over the features in order, as one sequential
loop: BLAS's products may sum in another order), ``chain_row``, ``max_subtract_row``, the exponential
(numba's ``exp``, the C library's; NumPy's own SIMD ``exp`` may differ by an ulp), the row divided by
its sum as NumPy's ``add.reduce`` makes it (``pairwise_sum.py``), and the weighted sum of ``v``'s rows
(each output summed over the keys in order), written through the result's view. Not the reference's
bits: see ``kernels/attention.py`` for the bound.

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


def _chain_row(s, codes, b, h, t, f0, f1, f2, f3, m0, m1):  # pragma: no cover  (compiled by numba)
    """The chain ``codes`` (ops/attention.py's codes) on ``s``, row ``(b, h, t)`` of the scores."""
    n = s.shape[0]
    mi = 0
    for i in range(codes.shape[0]):
        op, pos = codes[i] // 10, codes[i] % 10
        e = f0 if i == 0 else f1 if i == 1 else f2 if i == 2 else f3  # (the op's float extra)
        e1 = e[b if e.shape[0] > 1 else 0, h if e.shape[1] > 1 else 0, t if e.shape[2] > 1 else 0]
        es = 1 if e1.shape[0] > 1 else 0
        if op == WHERE:  # (a selection: s takes the fill where the mask holds, pos 2, or not, pos 1)
            m = m0 if mi == 0 else m1
            m1_ = m[b if m.shape[0] > 1 else 0, h if m.shape[1] > 1 else 0, t if m.shape[2] > 1 else 0]
            ms = 1 if m1_.shape[0] > 1 else 0
            mi += 1
            for j in range(n):
                if m1_[j * ms] == (pos == 2):
                    s[j] = e1[j * es]
            continue
        # (one rounding in the scores' dtype; the running value at ``pos``: a product or sum
        # is the same either way round)
        if op == MULTIPLY:
            for j in range(n):
                s[j] = s[j] * e1[j * es]
        elif op == ADD:
            for j in range(n):
                s[j] = s[j] + e1[j * es]
        elif op == DIVIDE and pos == 0:
            for j in range(n):
                s[j] = s[j] / e1[j * es]
        elif op == DIVIDE:
            for j in range(n):
                s[j] = e1[j * es] / s[j]
        elif pos == 0:
            for j in range(n):
                s[j] = s[j] - e1[j * es]
        else:
            for j in range(n):
                s[j] = e1[j * es] - s[j]


def _max_subtract_row(s):  # pragma: no cover  (compiled by numba)
    """``s`` minus its maximum as ``np.maximum.reduce`` finds it (a NaN wins, a tie keeps the first)."""
    n = s.shape[0]
    if n == 0:
        return
    mx = s[0]
    for j in range(1, n):
        v = s[j]
        if v > mx or v != v:
            if mx == mx:
                mx = v
    for j in range(n):
        s[j] = s[j] - mx


CHAIN_ROW, MAX_SUBTRACT_ROW = jit.inlined(_chain_row), jit.inlined(_max_subtract_row)


@jit.tiered
def scores_pass(s4, codes, f0, f1, f2, f3, m0, m1):  # pragma: no cover  (compiled by numba)
    """Each row of the C-ordered 4-D scores ``s4``: the chain ``codes`` (ops/attention.py's codes),
    then its maximum subtracted (see the module). Written out, not through ``chain_row`` and
    ``max_subtract_row`` as ``heads_pass`` is: through them (inlined) this pass measured 2x slower
    (Swin's (32, 2, 16, 16) scores at batch 8: 245 against 118 us a call)."""
    for b in range(s4.shape[0]):
        for h in range(s4.shape[1]):
            for t in range(s4.shape[2]):
                s = s4[b, h, t]
                n = s.shape[0]
                mi = 0
                for i in range(codes.shape[0]):
                    op, pos = codes[i] // 10, codes[i] % 10
                    e = f0 if i == 0 else f1 if i == 1 else f2 if i == 2 else f3  # (the op's float extra)
                    e1 = e[b if e.shape[0] > 1 else 0, h if e.shape[1] > 1 else 0, t if e.shape[2] > 1 else 0]
                    es = 1 if e1.shape[0] > 1 else 0
                    if op == WHERE:  # (a selection: s takes the fill where the mask holds, pos 2, or not, pos 1)
                        m = m0 if mi == 0 else m1
                        m1_ = m[b if m.shape[0] > 1 else 0, h if m.shape[1] > 1 else 0, t if m.shape[2] > 1 else 0]
                        ms = 1 if m1_.shape[0] > 1 else 0
                        mi += 1
                        for j in range(n):
                            if m1_[j * ms] == (pos == 2):
                                s[j] = e1[j * es]
                        continue
                    # (one rounding in the scores' dtype; the running value at ``pos``: a product or sum
                    # is the same either way round)
                    if op == MULTIPLY:
                        for j in range(n):
                            s[j] = s[j] * e1[j * es]
                    elif op == ADD:
                        for j in range(n):
                            s[j] = s[j] + e1[j * es]
                    elif op == DIVIDE and pos == 0:
                        for j in range(n):
                            s[j] = s[j] / e1[j * es]
                    elif op == DIVIDE:
                        for j in range(n):
                            s[j] = e1[j * es] / s[j]
                    elif pos == 0:
                        for j in range(n):
                            s[j] = s[j] - e1[j * es]
                    else:
                        for j in range(n):
                            s[j] = e1[j * es] - s[j]
                if n == 0:
                    continue
                mx = s[0]  # (np.maximum.reduce's maximum: a NaN wins, a tie keeps the first)
                for j in range(1, n):
                    v = s[j]
                    if v > mx or v != v:
                        if mx == mx:
                            mx = v
                for j in range(n):
                    s[j] = s[j] - mx


@jit.tiered
def _heads_pass_with(row_sum, squares_sum):
    """``heads_pass`` with the compiled row helpers and NumPy's row sum in it (``with_row_sum``). Tiered as
    ``compiled_cell``'s loop is (``kernels/rnn_cell.py``), though its values are within a bound of the NumPy
    path's, not its bits: a program's first run loads no numba for it (``compiled`` and then ``batched_blas``
    run there), the later runs take it."""
    chain_row, max_subtract_row = jit.compiled(CHAIN_ROW, always=True), jit.compiled(MAX_SUBTRACT_ROW, always=True)

    def heads_pass(q4, k4, v4, out4, codes, f0, f1, f2, f3, m0, m1, zero):  # pragma: no cover  (numba)
        """``out4`` = the attention of ``q4``, ``k4`` (the keys transposed: features, keys), ``v4``
        with the score chain ``codes`` (see the module)."""
        d_n, t_n, e_n = q4.shape[3], k4.shape[3], v4.shape[3]
        kc, vc = np.empty((d_n, t_n), q4.dtype), np.empty((t_n, e_n), q4.dtype)
        row, acc = np.empty(t_n, q4.dtype), np.empty(e_n, q4.dtype)
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
                for t in range(out4.shape[2]):
                    for j in range(t_n):
                        row[j] = zero
                    for d in range(d_n):  # (each score summed over the features in order)
                        x = qb[t, d]
                        for j in range(t_n):
                            row[j] += x * kc[d, j]
                    chain_row(row, codes, b, h, t, f0, f1, f2, f3, m0, m1)
                    max_subtract_row(row)
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


def scores_kernel():
    """The compiled ``scores_pass``, or None where compiled kernels are off or this is a program's first
    run (``jit.tiered``: its callers' NumPy calls give the same values)."""
    return jit.compiled(scores_pass)


def heads_kernel():
    """The compiled ``heads_pass`` (rows of at most ``pairwise_sum.BLOCK`` keys), or None where compiled
    kernels are off or this is a program's first run (``jit.tiered``)."""
    return with_row_sum(_heads_pass_with)
