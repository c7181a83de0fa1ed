"""The compiled time loop of ``foreach[compiled_cell]`` (``kernels/rnn_cell.py``): a recurrent cell's
body as a table of ops run by one compiled function over every time step.

``make_scan`` gives ``run_scan``, one function compiled by ``jit.compiled`` once per dtype (float32,
float64); the body itself is data (``table``: one row ``(code, dest, a, b, lo)`` per op; a product's
row: ``(MATMUL, dest, a, offset of its matrix, the matrix's row length)``), so a new cell costs no
compilation and no source text is generated. Every value of the body is a register: ``regs[k]``
holds its ``rows[k]`` x ``cols[k]`` values flat, row-major (``rows`` 1: the value broadcasts over
the batch, ``cols`` 1: over the columns), so an op over operands of its own shape (most of a cell's
gate arithmetic) is one loop over every row, which vectorizes. Registers of values that depend only
on the loop's free inputs (weights, biases, constants) are filled once before the loop; the step's
ops run in order, each over its whole register: a step of an LSTM or GRU cell with a small hidden
size is a few microseconds with no Python in it.

Values: arithmetic rounds as NumPy's ufuncs do (``maximum`` / ``minimum`` with NumPy's NaN rule,
division through ``np.true_divide``); ``sigmoid`` is the op's own formula (``1 / (1 + e^-|x|)``,
times ``e^-|x|`` where x < 0); ``exp`` and ``tanh`` are the C library's (NumPy's SIMD versions can
differ by a few ulp), except float32's sigmoid and tanh where ``fast`` (the tuning table's
``foreach_cell_fast_exp``): computed in float64 from an exp of loops that vectorize (``unary_fast``:
relative error under 1e-9 before the rounding to float32; with ``foreach_cell_f32_math``, in float32
arithmetic, ``unary_f32``: within 3 ulps); the product ``h @ R`` sums in index order
where BLAS blocks and fuses: results agree with the reference to ``rtol`` 1e-5 (float32) / 1e-12
(float64), not bit for bit.
"""
from __future__ import annotations

import numpy as np

from .. import jit

# op codes (the ``code`` column): the loads, then the binary ops (``binary``), then the unary ones
LOAD_X, SLICE, MATMUL, ADD, SUBTRACT, MULTIPLY, DIVIDE, MAXIMUM, MINIMUM, \
    SIGMOID, TANH, EXP, RELU, NEGATIVE = range(14)
BINARY = (ADD, SUBTRACT, MULTIPLY, DIVIDE, MAXIMUM, MINIMUM)
UNARY = (SIGMOID, TANH, EXP, RELU, NEGATIVE)

# unary_fast's exp: e^x = 2^k e^r, k = round(x / ln 2) (``_ROUND``: adding and taking away 1.5 * 2^52
# rounds a float64 to an integer), |r| <= ln 2 / 2, e^r by its Taylor series to r^8 / 8! (relative
# error under 3e-10), 2^k from its bits
_LOG2E, _LN2, _ROUND = 1.4426950408889634, 0.6931471805599453, 6755399441055744.0
_EXP_MAX = 110.0  # (e^-110 is 0 in float32, as the unclamped value rounds)
_SHIFT, _ONE_BITS = np.uint64(52), np.uint64(1023 << 52)  # (2^k's bits: the low 12 of t's, shifted, plus 1.0's)
_TANH_SERIES = 0.1  # tanh of |x| under this by its odd series (no cancellation in 1 - e)

# unary_f32's exp in float32: the same reduction (``_ROUND32``: 1.5 * 2^23), ln 2 in two parts (the first's
# products by k exact), e^r - 1 by its Taylor series to r^7 / 7! (relative error under 6e-9); where
# v > ``_BIG32`` (k <= -99) 2^k is made as 2^(k + 64) times 2^-64 (a result below float32's normal range rounds once)
_F32T = np.float32
_LOG2E32, _LN2_HI32, _LN2_LO32 = _F32T(_LOG2E), _F32T(0.693359375), _F32T(-2.12194440e-4)
_ROUND32, _EXP_MAX32, _BIG32 = _F32T(12582912.0), _F32T(104.0), _F32T(69.0)
_SHIFT32, _ONE_BITS32, _TWO_64, _MINUS_64 = 23, 127 << 23, _F32T(64.0), _F32T(2.0 ** -64)


HEADER = 6  # ``meta``'s first values: the sizes of its parts (``meta_of``)
# ``run_scan``'s flags: float32's fast sigmoid and tanh; the data read back to front; with FAST, those in
# float32 arithmetic (``unary_f32``)
FAST, REVERSED, FAST32 = 1, 2, 4


def meta_of(table, rows, cols, fixed, states, outs, width: int):
    """The int64 arrays ``run_scan`` reads as one (``[len(table), len(rows), len(fixed), len(states),
    len(outs), width]``, then each flat, in that order): one argument where there were six (a compiled
    call's dispatch costs about 0.1 us an argument)."""
    head = [len(table), len(rows), len(fixed), len(states), len(outs), width]
    parts = [np.array(head, np.int64)] + \
        [np.ravel(np.asarray(a, np.int64)) for a in (table, rows, cols, fixed, states, outs)]
    return np.concatenate(parts)


def make_scan(compiled):
    """The compiled ``run_scan`` (``compiled``: ``jit.compiled``), calling the compiled ``step`` (one
    call per time step) and ``step_outputs``."""
    step_op, outputs_op = compiled(step(compiled)), compiled(step_outputs)

    def run_scan(meta, pack, x, ys, f0, f1, rest, flags):
        """Every step ``t`` of ``x`` ([T, B, N], C-ordered; read from its last step back where ``flags``
        has ``REVERSED``: ``x`` is then the time-reversed view of the op's data): the table's ops in order,
        then the step outputs (registers ``outs[:n_y]``) into ``ys[t]`` ([B, sum of their columns])
        and the next states (registers ``outs[n_y:]``) into the state registers ``states``; at the
        end the first two states into ``f0`` and ``f1`` ([B, their columns]), the others into the rows
        of ``rest`` (flat). ``meta`` (``meta_of``): the table, each register's rows and columns,
        ``fixed`` rows ``(dest, offset)`` (registers loaded from ``pack`` once, before the loop), the
        state and output registers, the registers' width. ``flags`` with ``FAST``: float32's sigmoid and
        tanh through ``unary_fast``. The registers are made here (no array made per call in Python)."""
        n_t, n_r, n_f, n_s, n_o = meta[0], meta[1], meta[2], meta[3], meta[4]
        at = HEADER + n_t * 5
        table = meta[HEADER:at].reshape((n_t, 5))
        rows, cols = meta[at:at + n_r], meta[at + n_r:at + 2 * n_r]
        at += 2 * n_r
        fixed = meta[at:at + 2 * n_f].reshape((n_f, 2))
        states, outs = meta[at + 2 * n_f:at + 2 * n_f + n_s], meta[at + 2 * n_f + n_s:at + 2 * n_f + n_s + n_o]
        regs = np.empty((n_r, meta[5]), pack.dtype)
        one = pack.dtype.type(1)
        for k in range(n_f):
            d, off = fixed[k, 0], fixed[k, 1]
            dst = regs[d]
            for j in range(rows[d] * cols[d]):
                dst[j] = pack[off + j]
        scratch = np.empty((2, regs.shape[1]), np.float64)  # (unary_fast's values and scales)
        s32 = scratch.view(np.float32)  # (unary_f32's, made once: a view made per call costs its counts)
        bits = s32.view(np.int32)
        nxt = np.empty((n_s, regs.shape[1]), regs.dtype)  # (step_outputs' next states)
        fast = (2 if flags & FAST32 else 1) if flags & FAST else 0  # (``step``'s ``fast``)
        xs, last = x.reshape((x.shape[0], x.shape[1] * x.shape[2])), x.shape[0] - 1
        for t in range(xs.shape[0]):
            step_op(table, rows, cols, regs, pack, xs, last - t if flags & REVERSED else t, one, fast, scratch,
                    s32, bits)
            outputs_op(regs, rows, cols, states, outs, ys, t, nxt)
        for s in range(min(n_s, 2)):
            f = f0 if s == 0 else f1
            for i in range(f.shape[0]):
                for j in range(f.shape[1]):
                    f[i, j] = regs[states[s], i * f.shape[1] + j]
        for s in range(2, n_s):
            r = rest[s - 2]
            for j in range(r.shape[0]):
                r[j] = regs[states[s], j]

    return compiled(run_scan)


def step(compiled):
    """The compiled ``step`` (``compiled``: ``jit.compiled``), calling the compiled ``binary``,
    ``unary`` and ``matmul`` where it does not run an op itself."""
    binary_op, matmul_op, unary_op = compiled(binary), compiled(matmul), compiled(unary(compiled))
    fast_op, f32_op = compiled(unary_fast), compiled(unary_f32)

    def step_ops(table, rows, cols, regs, pack, xs, t, one, fast, scratch, s32, bits):
        """A time step: the table's ops in order over the registers (``xs[t]``: the step's data, flat).
        The data's load, column slices, add, subtract and multiply of operands of the output's
        columns, negative, and float32's sigmoid and tanh (``unary_fast``) are run or called here (a
        call into another compiled function costs more than such an op of a small cell); products
        and the rest through ``matmul``, ``binary``, ``unary``, each given the whole ``regs`` (a view
        made to be passed costs its reference counts, one made inside a function nothing)."""
        for k in range(table.shape[0]):  # (2-D indexing, no views: a view kept across a call costs its counts)
            code, d, a, src, lo = table[k, 0], table[k, 1], table[k, 2], table[k, 3], table[k, 4]
            n = rows[d] * cols[d]
            same = rows[a] == rows[d] and cols[a] == cols[d]
            if code == LOAD_X:
                for j in range(xs.shape[1]):
                    regs[d, j] = xs[t, j]
            elif code == SLICE:
                c, ca, ra = cols[d], cols[a], rows[a] > 1
                for i in range(rows[d]):
                    at = (i if ra else 0) * ca + lo
                    for j in range(c):
                        regs[d, i * c + j] = regs[a, at + j]
            elif code == MATMUL:
                matmul_op(regs, d, a, pack, src, lo, rows[d], cols[a], cols[d], rows[a] > 1)
            elif code <= MULTIPLY and same and rows[src] == rows[d] and cols[src] == cols[d]:
                if code == ADD:
                    for j in range(n):
                        regs[d, j] = regs[a, j] + regs[src, j]
                elif code == SUBTRACT:
                    for j in range(n):
                        regs[d, j] = regs[a, j] - regs[src, j]
                else:
                    for j in range(n):
                        regs[d, j] = regs[a, j] * regs[src, j]
            elif code <= MULTIPLY and cols[a] == cols[d] and cols[src] == cols[d]:  # (a row broadcast: a bias)
                c, pa, pb = cols[d], (cols[d] if rows[a] > 1 else 0), (cols[d] if rows[src] > 1 else 0)
                for i in range(rows[d]):
                    for j in range(c):
                        u, v = regs[a, i * pa + j], regs[src, i * pb + j]
                        regs[d, i * c + j] = u + v if code == ADD else (u - v if code == SUBTRACT else u * v)
            elif code <= MINIMUM:
                binary_op(code, regs, d, a, src, rows[d], cols[d], rows[a], cols[a], rows[src], cols[src])
            elif code == NEGATIVE and same:
                for j in range(n):
                    regs[d, j] = -regs[a, j]
            elif fast == 2 and same and (code == SIGMOID or code == TANH):
                f32_op(code, regs, d, a, n, s32, bits)
            elif fast and same and (code == SIGMOID or code == TANH):
                fast_op(code, regs, d, a, n, scratch)
            else:
                unary_op(code, regs, d, a, rows[d], cols[d], rows[a], cols[a], one, fast, scratch, s32, bits)

    return step_ops


def step_outputs(regs, rows, cols, states, outs, ys, t, nxt):
    """The step outputs (registers ``outs[:n_y]``) into ``ys[t]`` ([B, their columns side by side]), then
    the next states (``outs[n_y:]``) into the state registers, through ``nxt`` where there are several
    (all read before any is written: a body may hand one state's value to another)."""
    n_s = states.shape[0]
    n_y = outs.shape[0] - n_s
    at, y = 0, ys[t]
    for k in range(n_y):
        r = regs[outs[k]]
        c, rr = cols[outs[k]], rows[outs[k]] > 1
        for i in range(y.shape[0]):
            o, v = y[i, at:at + c], r[(i if rr else 0) * c:(i if rr else 0) * c + c]
            for j in range(c):
                o[j] = v[j]
        at += c
    for s in range(n_s if n_s > 1 else 0):
        src, dst = regs[outs[n_y + s]], nxt[s]
        for j in range(rows[states[s]] * cols[states[s]]):
            dst[j] = src[j]
    for s in range(n_s):
        src, dst = nxt[s] if n_s > 1 else regs[outs[n_y + s]], regs[states[s]]
        for j in range(rows[states[s]] * cols[states[s]]):
            dst[j] = src[j]


def matmul(regs, d, a, pack, off, ld, nrows, k_in, n_out, a_rows):
    """Register ``d`` = register ``a`` ([rows, k_in]) @ the [k_in, n_out] matrix of ``pack`` at ``off`` whose rows are
    ``ld`` apart (a column slice of a wider matrix read in place); the inner loop over a matrix row
    vectorizes, the sums taken in index order. Four matrix rows per pass over the output row (each
    value still summed one term at a time, in index order: the same values as one row per pass, with
    a quarter of the output's loads and stores: 0.6-0.7x the time of a recurrent cell's product)."""
    dst, x = regs[d], regs[a]
    for i in range(nrows):
        s = (i if a_rows else 0) * k_in
        o, v = dst[i * n_out:i * n_out + n_out], x[s:s + k_in]  # (row views: the loop vectorizes)
        for j in range(n_out):
            o[j] = 0
        fours = k_in - k_in % 4
        for k in range(0, fours, 4):
            w0, w1, w2, w3 = v[k], v[k + 1], v[k + 2], v[k + 3]
            at = off + k * ld
            r0, r1 = pack[at:at + n_out], pack[at + ld:at + ld + n_out]
            r2, r3 = pack[at + 2 * ld:at + 2 * ld + n_out], pack[at + 3 * ld:at + 3 * ld + n_out]
            for j in range(n_out):
                o[j] = (((o[j] + w0 * r0[j]) + w1 * r1[j]) + w2 * r2[j]) + w3 * r3[j]
        for k in range(fours, k_in):
            w = v[k]
            row = pack[off + k * ld:off + k * ld + n_out]
            for j in range(n_out):
                o[j] += w * row[j]


def binary(code, regs, d, a, b, rows, cols, rx, cx, ry, cy):
    """Register ``d`` (``rows`` x ``cols``) = op(register ``a``, register ``b``), each broadcast where its rows or columns are 1.
    Add, subtract and multiply of operands of the output's shape are one loop over every value; of a
    row and a whole-width row vector (a bias), one loop per row; both vectorize."""
    n, dst, x, y = rows * cols, regs[d], regs[a], regs[b]
    if code <= MULTIPLY and cx == cols and cy == cols and (rx == rows or ry == rows):
        flat = rx == rows and ry == rows
        w = n if flat else cols
        for i in range(1 if flat else rows):
            p, q = (i * cols if rx > 1 else 0), (i * cols if ry > 1 else 0)
            o, u, v = dst[i * cols:i * cols + w], x[p:p + w], y[q:q + w]  # (views: the loops vectorize)
            if code == ADD:
                for j in range(w):
                    o[j] = u[j] + v[j]
            elif code == SUBTRACT:
                for j in range(w):
                    o[j] = u[j] - v[j]
            else:
                for j in range(w):
                    o[j] = u[j] * v[j]
        return
    for i in range(rows):
        p, q = (i * cx if rx > 1 else 0), (i * cy if ry > 1 else 0)
        for j in range(cols):
            u, w = x[p + (j if cx > 1 else 0)], y[q + (j if cy > 1 else 0)]
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
            dst[i * cols + j] = v


def unary_fast(code, regs, d, a, n, scratch):
    """float32 ``sigmoid`` / ``tanh`` (``code``) of register ``a``'s first ``n`` values into register
    ``d``, in float64, so each value is within one rounding of the exact one: first ``e`` = e^(-|x|)
    (sigmoid) or e^(-2|x|) (tanh) of every value in loops that vectorize (no call into the C library
    per value; a NaN gives e^-110 there and is kept as it is at the end): ``scratch[0]`` the
    polynomial's values (Estrin's scheme), ``scratch[1]`` the scales 2^k, made from the bits of
    ``_ROUND - v / ln 2`` by an integer shift and add (a float-to-int64 conversion has no vector
    instruction in AVX2: it kept the loop scalar); the divisions are ``np.true_divide`` (``/`` checks
    for zero, a branch that kept the loop scalar)."""
    out, x, vals, scales = regs[d], regs[a], scratch[0], scratch[1]
    bits = scales.view(np.uint64)
    scale = 1.0 if code == SIGMOID else 2.0
    for j in range(n):
        v = abs(np.float64(x[j])) * scale
        v = v if v < _EXP_MAX else _EXP_MAX
        t = _ROUND - v * _LOG2E  # (k in its low bits)
        k = t - _ROUND
        r = -v - k * _LN2
        r2 = r * r
        r4 = r2 * r2  # (Estrin's scheme: a short chain of dependent operations)
        vals[j] = ((1.0 + r) + r2 * (0.5 + r * (1 / 6))) + r4 * (((1 / 24) + r * (1 / 120)) + r2 * (
            (1 / 720 + r * (1 / 5040)) + r2 * (1 / 40320)))
        scales[j] = t
    for j in range(n):  # (2^k from t's bits in integer ops that vectorize: no float-to-int conversion)
        bits[j] = (bits[j] << _SHIFT) + _ONE_BITS
    if code == SIGMOID:
        for j in range(n):
            u = np.float64(x[j])
            e = vals[j] * scales[j]
            p = np.true_divide(1.0, 1.0 + e)  # (not /: its zero check keeps the loop from vectorizing)
            v = p if u >= 0 else e * p
            out[j] = v if u == u else u
    else:
        for j in range(n):
            u = np.float64(x[j])
            e = vals[j] * scales[j]
            a2 = u * u
            w = np.true_divide(1.0 - e, 1.0 + e)
            v = u * (1.0 + a2 * (-1 / 3 + a2 * (2 / 15 + a2 * (-17 / 315 + a2 * (62 / 2835))))) \
                if abs(u) < _TANH_SERIES else (w if u >= 0 else -w)  # (the series keeps -0's sign)
            out[j] = v if u == u else u


@jit.contracted
def unary_f32(code, regs, d, a, n, s32, bits):
    """float32 ``sigmoid`` / ``tanh`` (``code``) of register ``a``'s first ``n`` values into register ``d``,
    as ``unary_fast`` but in float32 arithmetic (eight values a vector instruction where ``unary_fast``
    has four, no conversions): about 0.4x its time. ``m`` = e^(-|x|) - 1 (sigmoid) or e^(-2|x|) - 1
    (tanh) from the series of e^r - 1 (no cancellation near 0: tanh of a small value keeps its
    relative accuracy); sigmoid ``1 / (1 + e)`` (times ``e`` where x < 0, ``e`` = 2^k (1 + the series)),
    tanh ``-m / (2 + m)`` with x's sign (+-0 kept). Within 3 float32 ulps of the exact values (2.5 over
    tests/kernels/test_scan_jit.py's values; relative error under 2e-7 in the normal range); a NaN is
    kept. ``s32`` (float32, two rows of at least ``n``): the series' values and the scales 2^k, made
    from their bits through ``bits`` (``s32`` as int32). 2-D indexing, no views (a view costs its
    reference counts: 0.6x the time of a cell's 16 values)."""
    scale, one, two = _F32T(1.0) if code == SIGMOID else _F32T(2.0), _F32T(1.0), _F32T(2.0)
    for j in range(n):
        v = abs(regs[a, j]) * scale
        v = v if v < _EXP_MAX32 else _EXP_MAX32
        t = _ROUND32 - v * _LOG2E32  # (k in its low bits)
        k = t - _ROUND32
        r = (-v - k * _LN2_HI32) - k * _LN2_LO32
        s32[0, j] = r * (one + r * (_F32T(1 / 2) + r * (_F32T(1 / 6) + r * (_F32T(1 / 24) + r * (
            _F32T(1 / 120) + r * (_F32T(1 / 720) + r * _F32T(1 / 5040)))))))
        s32[1, j] = t + _TWO_64 if v > _BIG32 else t
    for j in range(n):  # (2^k from t's bits, as unary_fast)
        bits[1, j] = (bits[1, j] << _SHIFT32) + _ONE_BITS32
    for j in range(n):
        u = regs[a, j]
        v = abs(u) * scale
        v = v if v < _EXP_MAX32 else _EXP_MAX32
        s = s32[1, j] * _MINUS_64 if v > _BIG32 else s32[1, j]
        if code == SIGMOID:
            e = s + s * s32[0, j]
            p = np.true_divide(one, one + e)
            w = p if u >= 0 else e * p
        else:
            m = (s - one) + s * s32[0, j]
            w = np.true_divide(-m, two + m)
            w = w if u > 0 else (-w if u < 0 else u)
        regs[d, j] = w if u == u else u


def unary(compiled):
    """The compiled unary step (``compiled``: ``jit.compiled``): register ``d`` (``rows`` x ``cols``) =
    op(register ``a``, ``rx`` x ``cx``; a broadcast operand is first spread into ``d``). Each op is one
    loop of its own over every value (no branch on the op per value); float32's sigmoid and tanh
    through ``unary_fast`` where ``fast``."""
    fast_op, f32_op = compiled(unary_fast), compiled(unary_f32)

    def unary_step(code, regs, d, a, rows, cols, rx, cx, one, fast, scratch, s32, bits):
        zero, n = one - one, rows * cols
        if rx != rows or cx != cols:
            for i in range(rows):
                for j in range(cols):
                    regs[d, i * cols + j] = regs[a, (i if rx > 1 else 0) * cx + (j if cx > 1 else 0)]
            a = d
        if fast == 2 and (code == SIGMOID or code == TANH):
            f32_op(code, regs, d, a, n, s32, bits)
        elif fast and (code == SIGMOID or code == TANH):
            fast_op(code, regs, d, a, n, scratch)
        elif code == SIGMOID:
            for j in range(n):
                u = regs[a, j]
                e = np.exp(-abs(u))
                p = one / (one + e)
                regs[d, j] = p if u >= 0 else e * p
        elif code == TANH:
            for j in range(n):
                regs[d, j] = np.tanh(regs[a, j])
        elif code == EXP:
            for j in range(n):
                regs[d, j] = np.exp(regs[a, j])
        elif code == RELU:
            for j in range(n):
                u = regs[a, j]
                regs[d, j] = u if (u > zero) | (u != u) else zero
        else:  # NEGATIVE
            for j in range(n):
                regs[d, j] = -regs[a, j]

    return unary_step
