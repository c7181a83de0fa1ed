"""The compiled pass of ``nn.fused_attention``'s ``compiled`` implementation (``kernels/attention.py``):
the score chain and the softmax's row maxima subtracted, in one loop over the scores' rows.

``batched_blas`` runs the chain as one NumPy ufunc call per op over the whole scores buffer (a
multiply by the scale, an add of the mask: 1-2 us each at a small transformer's (1, 2, 7, 7)
scores), then ``softmax.in_place``'s first pass (the row maxima subtracted). ``scores_pass`` does
both in one call: per row of the scores, each chain op in turn (one rounding in the scores' dtype,
as the ufunc's; ``where`` a selection), then the row's maximum as ``np.maximum.reduce`` finds it
(a NaN wins, a tie keeps the first: ``softmax._max_subtract``'s rule) subtracted from each value.
The same operations in the same order on the same values: the same bits as the NumPy calls.

The scores arrive as a C-ordered 4-D array (padded with leading unit dims); each extra as a 4-D
view (any strides) that broadcasts against them; float extras in ``f0``..``f3`` in the order the
chain's ops read them (each op one: a ``where``'s fill), boolean masks in ``m0``, ``m1``; unused slots
get a (1, 1, 1, 1) dummy (``CHAIN_FLOATS``, ``CHAIN_MASKS``: the most a chain may have).
"""
from __future__ import annotations

from .. import jit
from ..ops.attention import WHERE

CHAIN_FLOATS, CHAIN_MASKS = 4, 2
MULTIPLY, DIVIDE, ADD = 0, 1, 2  # (ops/attention.py's OPS order; 3 is subtract)


@jit.tiered
def scores_pass(s4, codes, f0, f1, f2, f3, m0, m1):  # pragma: no cover  (compiled by numba)
    """Each row of the C-ordered 4-D scores ``s4``: the chain ``codes`` (ops/attention.py's codes),
    then its maximum subtracted (see the module)."""
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


def scores_kernel():
    """The compiled ``scores_pass``, or None where compiled kernels are off or this is a program's first
    run (``jit.tiered``: its callers' NumPy calls give the same values)."""
    return jit.compiled(scores_pass)
