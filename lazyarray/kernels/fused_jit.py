"""The compiled loop of ``fused[numba]`` (``kernels/fused.py``): a fused group as a table of ops
run over tiles of the output, every intermediate in a tile-sized register.

``make_loop`` gives ``run_table``, one function compiled by ``jit.compiled`` once per dtype
(float32, float64); the group itself is data (``table``: one row ``(code, dest, a, b)`` per op),
so a new group structure costs no compilation, and no source text is ever generated. For each
tile of ``TILE`` output values (tiles walk the output as ``rows x cols``, see ``fused.layout``),
the ops run in order, each over the whole tile (one short loop LLVM vectorizes), so the values
stay in L1 between ops and memory sees each input and the output once.

Every op computes in the group's one dtype and rounds as NumPy's ufunc does (IEEE-exact
operations only; ``fused.py``'s ``OPS`` lists them): ``maximum`` / ``minimum`` keep NumPy's NaN
rule (a NaN operand wins, the first one if both) and give the second operand on a tie
(``maximum(-0.0, 0.0)`` is ``0.0``, ``maximum(0.0, -0.0)`` is ``-0.0``); ``relu`` is
``maximum(x, 0)``; division goes through ``np.true_divide`` so a zero divisor gives inf or NaN
as NumPy's does (numba's ``/`` raises under its Python error model).
"""
from __future__ import annotations

import numpy as np

TILE = 512  # values per tile: a few registers of 2-4 KB stay in L1

# op codes (the ``code`` column of a table): LOAD reads array input ``a`` into register ``dest``,
# LOAD_SCALAR fills it with scalar input ``a``, STORE writes register ``dest`` to output ``a``; the
# binary ops come next (``binary``), then the unary ones (``unary``, ``rounding``)
STORE, LOAD_SCALAR = -2, -1
LOAD, ADD, SUBTRACT, MULTIPLY, DIVIDE, MAXIMUM, MINIMUM, NEGATIVE, POSITIVE, ABS, RELU, SQUARE, SQRT, \
    FLOOR, CEIL, TRUNC, RECIPROCAL, SIGN = range(18)


def make_loop(compiled):
    """The compiled loop ``run_table`` (``compiled``: ``jit.compiled``), calling the compiled ``load``,
    ``binary``, ``unary`` and ``rounding`` (numba inlines compiled functions a compiled closure names)."""
    load_tile, binary_op, unary_op, rounding_op = compiled(load), compiled(binary), compiled(unary), compiled(rounding)

    def run_table(table, ins, strides, scalars, outs, cols, first, last, nregs, zero, one):
        """Tiles ``first`` to ``last`` (exclusive) of the group ``table`` over the array inputs ``ins``
        (a tuple of flat arrays; ``strides[k]``: input k's (row, column) strides in values, 0 where
        it broadcasts) and the ``scalars`` into the flat outputs ``outs`` (a tuple of arrays of the
        output's size, ``cols`` values per row; STORE rows say which register goes to which).
        ``zero`` / ``one``: 0 and 1 in the dtype. Registers are read through row views (``regs[d]``):
        compiled alone, an add over a 2-d index ran at 1.2 ns a value, over row views 0.065 (its loop
        vectorized); inside this loop the ops still run near scalar speed (about 0.24 ns a value
        and op, float32, process time, tile size 512 or 2048 alike), which ``fused.pays`` counts."""
        regs = np.empty((nregs, TILE), outs[0].dtype)
        per_row = (cols + TILE - 1) // TILE
        for t in range(first, last):
            r = t // per_row
            c0 = (t - r * per_row) * TILE
            m = min(TILE, cols - c0)
            for k in range(table.shape[0]):
                code, d, a, b = table[k, 0], table[k, 1], table[k, 2], table[k, 3]
                if code == STORE:
                    o, rd, dst = r * cols + c0, regs[d], outs[a]
                    for j in range(m):
                        dst[o + j] = rd[j]
                elif code == LOAD_SCALAR:
                    v, rd = scalars[a], regs[d]
                    for j in range(m):
                        rd[j] = v
                elif code == LOAD:
                    load_tile(ins[a], strides[a, 0], strides[a, 1], regs, d, r, c0, m)
                elif code <= MINIMUM:
                    binary_op(code, regs, d, a, b, m)
                elif code <= SQRT:
                    unary_op(code, regs, d, a, m, zero)
                else:
                    rounding_op(code, regs, d, a, m, zero, one)

    return compiled(run_table)


def load(src, rs, cs, regs, d, r, c0, m):
    """Register ``d`` = the tile of flat input ``src`` at row ``r``, columns ``c0:c0 + m``."""
    at = r * rs + c0 * cs
    rd = regs[d]
    if cs == 0:
        v = src[at]
        for j in range(m):
            rd[j] = v
    else:
        for j in range(m):
            rd[j] = src[at + j]


def binary(code, regs, d, a, b, m):
    """Register ``d`` = op(register ``a``, register ``b``) over the first ``m`` values."""
    rd, ra, rb = regs[d], regs[a], regs[b]
    if code == ADD:
        for j in range(m):
            rd[j] = ra[j] + rb[j]
    elif code == SUBTRACT:
        for j in range(m):
            rd[j] = ra[j] - rb[j]
    elif code == MULTIPLY:
        for j in range(m):
            rd[j] = ra[j] * rb[j]
    elif code == DIVIDE:
        for j in range(m):
            rd[j] = np.true_divide(ra[j], rb[j])
    elif code == MAXIMUM:
        for j in range(m):
            u, w = ra[j], rb[j]
            rd[j] = u if (u > w) | (u != u) else w
    else:  # MINIMUM
        for j in range(m):
            u, w = ra[j], rb[j]
            rd[j] = u if (u < w) | (u != u) else w


def unary(code, regs, d, a, m, zero):
    """Register ``d`` = op(register ``a``) over the first ``m`` values."""
    rd, ra = regs[d], regs[a]
    if code == NEGATIVE:
        for j in range(m):
            rd[j] = -ra[j]
    elif code == POSITIVE:
        for j in range(m):
            rd[j] = ra[j]
    elif code == ABS:
        for j in range(m):
            rd[j] = abs(ra[j])
    elif code == RELU:
        for j in range(m):
            u = ra[j]
            rd[j] = u if (u > zero) | (u != u) else zero
    elif code == SQUARE:
        for j in range(m):
            rd[j] = ra[j] * ra[j]
    else:  # SQRT
        for j in range(m):
            rd[j] = np.sqrt(ra[j])


def rounding(code, regs, d, a, m, zero, one):
    """The other unary ops: rounding to integers, the reciprocal, the sign (NumPy's: a NaN is
    passed on as it is, both zeros give ``0.0``)."""
    rd, ra = regs[d], regs[a]
    if code == FLOOR:
        for j in range(m):
            rd[j] = np.floor(ra[j])
    elif code == CEIL:
        for j in range(m):
            rd[j] = np.ceil(ra[j])
    elif code == TRUNC:
        for j in range(m):
            rd[j] = np.trunc(ra[j])
    elif code == RECIPROCAL:
        for j in range(m):
            rd[j] = np.true_divide(one, ra[j])
    else:  # SIGN
        for j in range(m):
            u = ra[j]
            rd[j] = one if u > zero else -one if u < zero else u if u != u else zero
