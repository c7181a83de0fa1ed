"""The compiled time loop of ``foreach[compiled_cell]`` (``kernels/rnn_cell.py``): a recurrent cell's
body as a table of ops run by one compiled function over every time step.

``make_scan`` gives ``run_scan``, one function compiled by ``jit.compiled`` once per dtype (float32,
float64); the body itself is data (``table``: one row ``(code, dest, a, b, lo)`` per op; a product's row: ``(MATMUL, dest, a, offset of
its matrix, the matrix's row length)``), so a new
cell costs no compilation and no source text is generated. Every value of the body is a register
``regs[k]`` of ``rows[k]`` x ``cols[k]`` values (``rows`` 1: the value broadcasts over the batch,
``cols`` 1: over the columns). Registers of values that depend only on the loop's free inputs
(weights, biases, constants) are filled once before the loop; the step's ops run in order, each
over its whole register, so a step of an LSTM or GRU cell with a small hidden size is a few
microseconds with no Python in it.

Values: arithmetic rounds as NumPy's ufuncs do (``maximum`` / ``minimum`` with NumPy's NaN rule,
division through ``np.true_divide``); ``sigmoid`` is the op's own formula (``1 / (1 + e^-|x|)``,
times ``e^-|x|`` where x < 0); ``exp`` and ``tanh`` are the C library's (NumPy's SIMD versions can
differ by a few ulp) and the product ``h @ R`` sums in index order where BLAS blocks and fuses:
results agree with the reference to ``rtol`` 1e-5 (float32) / 1e-12 (float64), not bit for bit.
"""
from __future__ import annotations

import numpy as np

# op codes (the ``code`` column): the loads, then the binary ops (``binary``), then the unary ones
LOAD_X, SLICE, MATMUL, ADD, SUBTRACT, MULTIPLY, DIVIDE, MAXIMUM, MINIMUM, \
    SIGMOID, TANH, EXP, RELU, NEGATIVE = range(14)
BINARY = (ADD, SUBTRACT, MULTIPLY, DIVIDE, MAXIMUM, MINIMUM)
UNARY = (SIGMOID, TANH, EXP, RELU, NEGATIVE)


def make_scan(compiled):
    """The compiled ``run_scan`` (``compiled``: ``jit.compiled``), calling the compiled ``binary``,
    ``unary``, ``matmul`` and ``load`` (numba inlines compiled functions a compiled closure names)."""
    binary_op, unary_op, matmul_op, load_op = compiled(binary), compiled(unary), compiled(matmul), compiled(load)

    def run_scan(table, rows, cols, regs, pack, fixed, xs, states, outs, ys, one):
        """Every step ``t`` of ``xs`` ([T, B, N]): the table's ops in order, then the step outputs
        (registers ``outs[:n_y]``) into ``ys[t]`` (their columns side by side) and the next states
        (registers ``outs[n_y:]``) into the state registers ``states``. ``fixed`` rows ``(dest, offset)``:
        registers loaded from ``pack`` once, before the loop. ``one``: 1 in the dtype."""
        b = xs.shape[1]
        for k in range(fixed.shape[0]):
            load_op(pack, fixed[k, 1], regs, fixed[k, 0], rows[fixed[k, 0]], cols[fixed[k, 0]])
        n_y = outs.shape[0] - states.shape[0]
        nxt = np.empty((states.shape[0], regs.shape[1], regs.shape[2]), regs.dtype)
        for t in range(xs.shape[0]):
            for k in range(table.shape[0]):
                code, d, a, src, lo = table[k, 0], table[k, 1], table[k, 2], table[k, 3], table[k, 4]
                if code == LOAD_X:
                    for i in range(b):
                        for j in range(cols[d]):
                            regs[d, i, j] = xs[t, i, j]
                elif code == SLICE:
                    ra = rows[a] > 1
                    for i in range(rows[d]):
                        for j in range(cols[d]):
                            regs[d, i, j] = regs[a, i if ra else 0, lo + j]
                elif code == MATMUL:
                    matmul_op(regs, d, a, pack, src, lo, rows[d], cols[a], cols[d], rows[a] > 1)
                elif code <= MINIMUM:
                    binary_op(code, regs, d, a, src, rows, cols)
                else:
                    unary_op(code, regs, d, a, rows, cols, one)
            at = 0
            for k in range(outs.shape[0]):
                r = outs[k]
                for i in range(b):
                    ii = i if rows[r] > 1 else 0
                    if k < n_y:
                        for j in range(cols[r]):
                            ys[t, i, at + j] = regs[r, ii, 0 if cols[r] == 1 else j]
                    else:
                        for j in range(regs.shape[2]):
                            nxt[k - n_y, i, j] = regs[r, ii, j]
                if k < n_y:
                    at += cols[r]
            for s in range(states.shape[0]):
                for i in range(b):
                    for j in range(regs.shape[2]):
                        regs[states[s], i, j] = nxt[s, i, j]

    return compiled(run_scan)


def load(pack, off, regs, d, nrows, ncols):
    """Register ``d`` = ``nrows`` x ``ncols`` values of ``pack`` from ``off`` (row-major)."""
    for i in range(nrows):
        for j in range(ncols):
            regs[d, i, j] = pack[off + i * ncols + j]


def matmul(regs, d, a, pack, off, ld, nrows, k_in, n_out, a_rows):
    """Register ``d`` = register ``a`` ([rows, k_in]) @ the [k_in, n_out] matrix of ``pack`` at ``off``
    whose rows are ``ld`` apart (a column slice of a wider matrix read in place). Rows are read
    through 1-D views: the inner loop then vectorizes (about 3x the 3-D indexing's speed), the sums
    taken in the same order."""
    for i in range(nrows):
        out, src = regs[d, i], regs[a, i if a_rows else 0]
        for j in range(n_out):
            out[j] = 0
        for k in range(k_in):
            w = src[k]
            row = pack[off + k * ld:off + k * ld + n_out]
            for j in range(n_out):
                out[j] += w * row[j]


def binary(code, regs, d, a, b, rows, cols):
    """Register ``d`` = op(register ``a``, register ``b``), each broadcast where its rows or columns are 1.
    Rows are read through 1-D views, and add, subtract and multiply of whole rows (a cell's gate
    arithmetic) run as loops of their own, which vectorize."""
    ra, ca, rb, cb = rows[a] > 1, cols[a] > 1, rows[b] > 1, cols[b] > 1
    n = cols[d]
    for i in range(rows[d]):
        out, x, y = regs[d, i], regs[a, i if ra else 0], regs[b, i if rb else 0]
        if ca and cb and code == ADD:
            for j in range(n):
                out[j] = x[j] + y[j]
        elif ca and cb and code == SUBTRACT:
            for j in range(n):
                out[j] = x[j] - y[j]
        elif ca and cb and code == MULTIPLY:
            for j in range(n):
                out[j] = x[j] * y[j]
        else:
            for j in range(n):
                u, w = x[j if ca else 0], y[j if cb else 0]
                if code == ADD:
                    v = u + w
                elif code == SUBTRACT:
                    v = u - w
                elif code == MULTIPLY:
                    v = u * w
                elif code == DIVIDE:
                    v = np.true_divide(u, w)
                elif code == MAXIMUM:
                    v = u if (u > w) | (u != u) else w
                else:  # MINIMUM
                    v = u if (u < w) | (u != u) else w
                out[j] = v


def unary(code, regs, d, a, rows, cols, one):
    """Register ``d`` = op(register ``a``); ``one``: 1 in the registers' dtype."""
    ra, ca = rows[a] > 1, cols[a] > 1
    zero = one - one
    for i in range(rows[d]):
        ia = i if ra else 0
        for j in range(cols[d]):
            u = regs[a, ia, j if ca else 0]
            if code == SIGMOID:
                e = np.exp(-abs(u))
                p = one / (one + e)
                v = p if u >= 0 else e * p
            elif code == TANH:
                v = np.tanh(u)
            elif code == EXP:
                v = np.exp(u)
            elif code == RELU:
                v = u if (u > zero) | (u != u) else zero
            else:  # NEGATIVE
                v = -u
            regs[d, i, j] = v
