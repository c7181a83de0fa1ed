"""``kernels/scan_jit.py``: the compiled time loop's float32 sigmoid and tanh (``unary_fast``, a
float64 exp of loops that vectorize) are within one float32 rounding of the exact values over the
whole range (zero, tiny, the series' edge, large, infinite values, NaN kept), and a written LSTM
cell run with them equals the reference kernel, and equals the loop with them switched off
(``foreach_cell_fast_exp``) within the float32 tolerance; float64 never takes them. Their float32
arithmetic (``unary_f32``, ``foreach_cell_f32_math``) is within 3 ulps of the exact values, NaN and
the sign of zero kept."""
from __future__ import annotations

import numpy as np
import pytest

import lazyarray as la
from lazyarray import jit
from lazyarray.kernels import foreach as kforeach
from lazyarray.kernels import scan_jit as sj
from lazyarray.ops import registry

pytest.importorskip("numba")

RNG = np.random.default_rng(7)


def _values():
    edges = [0.0, -0.0, 1e-30, -1e-30, 1e-7, 0.0999999, 0.1, 0.1000001, -0.1, 0.5, 1.0, -1.0, 8.0, 9.5, 20.0,
             -20.0, 54.9, 55.1, 87.0, -87.0, 103.0, -103.0, 104.0, -104.0, 109.9, -110.5, 500.0, -500.0,
             3.4e38, -3.4e38, np.inf, -np.inf]
    spread = np.concatenate([RNG.standard_normal(2000) * s for s in (0.05, 1.0, 6.0, 40.0)])
    return np.concatenate([np.array(edges), spread]).astype(np.float32)


def _exact(code, x):
    x = x.astype(np.float64)
    if code == sj.TANH:
        return np.tanh(x)
    with np.errstate(over="ignore"):
        return np.where(x >= 0, 1 / (1 + np.exp(-np.abs(x))), np.exp(-np.abs(x)) / (1 + np.exp(-np.abs(x))))


@pytest.mark.parametrize("code", [sj.SIGMOID, sj.TANH], ids=["sigmoid", "tanh"])
def test_fast_sigmoid_and_tanh_are_within_one_float32_rounding(code):
    fn = jit.compiled(sj.unary_fast)
    if fn is None:
        pytest.skip("numba is off")
    x = _values()
    out = np.full_like(x, np.nan)
    regs = np.stack([x, out])
    fn(code, regs, 1, 0, x.size, np.empty((2, x.size)))
    out = regs[1]
    exact = _exact(code, x)
    # within one rounding: the float32 neighbours of the exact value bound the result
    lo = np.nextafter(exact.astype(np.float32), np.float32(-np.inf))
    hi = np.nextafter(exact.astype(np.float32), np.float32(np.inf))
    assert np.all((out >= lo) & (out <= hi)), x[(out < lo) | (out > hi)]
    assert np.array_equal(np.signbit(out[:2]), np.signbit(x[:2])) or code == sj.SIGMOID  # (tanh(-0) is -0)
    nan = np.array([np.nan, -np.nan, 1.0], np.float32)
    regs = np.stack([nan, nan])
    fn(code, regs, 1, 0, 3, np.empty((2, 3)))
    out = regs[1]
    assert np.isnan(out[:2]).all() and not np.isnan(out[2])


def _dense_values():
    """``_values`` and dense sweeps: every range of the reduction, tiny values, the results below
    float32's normal range."""
    powers = np.float32(10.0) ** np.arange(-38, 1, 0.01).astype(np.float32)
    return np.concatenate([_values(), np.linspace(-110, 110, 20001).astype(np.float32), powers, -powers])


@pytest.mark.parametrize("code", [sj.SIGMOID, sj.TANH], ids=["sigmoid", "tanh"])
def test_float32_sigmoid_and_tanh_are_within_three_ulps(code):
    """``unary_f32`` (float32 arithmetic) is within 3 ulps of the exact value (the spacing of floats
    at the exact value, the smallest subnormal below the normal range), keeps NaN and tanh's sign of zero."""
    fn = jit.compiled(sj.unary_f32)
    if fn is None:
        pytest.skip("numba is off")
    x = _dense_values()
    regs = np.stack([x, np.full_like(x, np.nan)])
    s32 = np.empty((2, x.size), np.float32)
    fn(code, regs, 1, 0, x.size, s32, s32.view(np.int32))
    out, exact = regs[1], _exact(code, x)
    spacing = np.maximum(np.spacing(np.abs(exact.astype(np.float32))).astype(np.float64), 2.0 ** -149)
    ulps = np.abs(out.astype(np.float64) - exact) / spacing
    assert ulps.max() <= 3, (x[np.argmax(ulps)], ulps.max())
    if code == sj.TANH:
        assert np.array_equal(np.signbit(out[:2]), np.signbit(x[:2]))
    nan = np.array([np.nan, -np.nan, 1.0], np.float32)
    regs = np.stack([nan, nan])
    fn(code, regs, 1, 0, 3, s32, s32.view(np.int32))
    assert np.isnan(regs[1, :2]).all() and abs(regs[1, 2] - _exact(code, nan[2:])[0]) < 3e-7


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("rows,k_in,n_out,a_rows", [(1, 32, 64, True), (3, 5, 13, True), (2, 7, 8, False), (2, 3, 5, True),
                                                     (1, 1, 4, True), (2, 0, 4, True), (0, 4, 4, True)])
def test_a_product_four_rows_a_pass_sums_in_index_order(dtype, rows, k_in, n_out, a_rows):
    """``matmul`` (four matrix rows per pass over the output row, then the rest one by one) equals the
    product summed one term at a time in index order bit for bit (NumPy's rounding of each product and
    sum), from a column slice of a wider matrix (rows ``ld`` apart), an operand broadcast over the rows
    or not, and with no rows or an empty inner size."""
    fn = jit.compiled(sj.matmul)
    if fn is None:
        pytest.skip("numba is off")
    ld, off = n_out + 3, 2
    pack = RNG.standard_normal(off + max(k_in, 1) * ld).astype(dtype)
    x = RNG.standard_normal((rows if a_rows else 1, k_in)).astype(dtype)
    regs = np.full((2, max(rows * max(n_out, k_in), 1)), np.nan, dtype)
    regs[0, :x.size] = x.ravel()
    fn(regs, 1, 0, pack, off, ld, rows, k_in, n_out, a_rows)
    want = np.zeros((rows, n_out), dtype)
    mat = pack[off:off + k_in * ld].reshape(k_in, ld)[:, :n_out] if k_in else np.zeros((0, n_out), dtype)
    for k in range(k_in):
        want = want + x[:, k:k + 1] * mat[k]
    np.testing.assert_array_equal(regs[1, :rows * n_out].reshape(rows, n_out), want)


def _lstm(xt, states, w, u, b):
    h, c = states
    z = la.matmul(xt, w) + la.matmul(h, u) + b
    n = h.shape[-1]
    i, f, g, o = (z[..., k * n:(k + 1) * n] for k in range(4))
    c2 = la.sigmoid(f) * c + la.sigmoid(i) * la.tanh(g)
    return la.sigmoid(o) * la.tanh(c2), [la.sigmoid(o) * la.tanh(c2), c2]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("steps,batch", [(6, 4), (3, 1), (1, 5), (0, 3)])
def test_a_cell_with_fast_exp_equals_the_reference_and_the_loop_without_it(dtype, steps, batch):
    shapes = [(steps, batch, 5), (batch, 7), (batch, 7), (5, 28), (7, 28), (28,)]
    arrays = [(RNG.standard_normal(s) * 4).astype(dtype) for s in shapes]
    w, u, b = (la.array(a) for a in arrays[3:])
    with la.deferred():
        ys, _ = la.foreach(lambda xt, s: _lstm(xt, s, w, u, b), la.array(arrays[0]),
                           [la.array(a) for a in arrays[1:3]])
    node = next(n for n in la.get_symbol(ys).topo() if n.kind == "op" and n.op.name == "foreach")
    by_shape = {a.shape: a for a in arrays[3:]}
    values = arrays[:3] + [by_shape[e.aval.shape] for e in node.inputs[3:]]
    params = {**node.params, "save_states": False}
    want = registry.get("foreach").kernel(np, *values, **params)
    tol = {"rtol": 1e-5, "atol": 1e-6} if dtype == "float32" else {"rtol": 1e-12, "atol": 1e-13}
    got = {}
    for fast, f32 in ((True, True), (True, False), (False, True)):
        with la.tuning(foreach_jit_after=0, foreach_cell_fast_exp=fast, foreach_cell_f32_math=f32):
            got[fast, f32] = kforeach.run_compiled_cell(np, *values, **params)
        assert got[fast, f32] is not None
        for g, ref in zip(got[fast, f32], want):
            assert g.shape == ref.shape and g.dtype == ref.dtype
            np.testing.assert_allclose(g, ref, **tol)
    if dtype == "float64":  # (float64 never takes the fast paths: the same loop each time)
        for a, b, c in zip(got[True, True], got[True, False], got[False, True]):
            np.testing.assert_array_equal(a, b)
            np.testing.assert_array_equal(a, c)


def _trading(xt, states, w):
    """Three states handed among each other (the first two written by the loop, the third after it)."""
    a, b, c = states
    z = la.tanh(la.matmul(xt, w))
    return z * a, [b + z, la.sigmoid(c), a - z]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("n_states", [0, 1, 3])
def test_zero_one_and_three_states_equal_the_reference(dtype, n_states):
    arrays = [RNG.standard_normal(s).astype(dtype) for s in [(4, 3, 5)] + [(3, 6)] * 3 + [(5, 6)]]
    w = la.array(arrays[-1])
    if n_states == 3:
        def cell(xt, s):
            return _trading(xt, s, w)
    elif n_states == 1:
        def cell(xt, s):
            h2 = la.tanh(la.matmul(xt, w)) + s[0]
            return h2, [h2]
    else:
        def cell(xt, s):
            return la.sigmoid(la.matmul(xt, w)), []
    with la.deferred():
        ys, _ = la.foreach(cell, la.array(arrays[0]), [la.array(a) for a in arrays[1:1 + n_states]])
    node = next(n for n in la.get_symbol(ys).topo() if n.kind == "op" and n.op.name == "foreach")
    values = arrays[:1 + n_states] + [arrays[-1]] * (len(node.inputs) - 1 - n_states)
    params = {**node.params, "save_states": False}
    want = registry.get("foreach").kernel(np, *values, **params)
    with la.tuning(foreach_jit_after=0):
        got = kforeach.run_compiled_cell(np, *values, **params)
    assert got is not None
    want, got = (list(v) if isinstance(v, tuple) else [v] for v in (want, got))
    assert len(got) == len(want) == 1 + n_states
    tol = {"rtol": 1e-5, "atol": 1e-6} if dtype == "float32" else {"rtol": 1e-12, "atol": 1e-13}
    for g, ref in zip(got, want):
        np.testing.assert_allclose(g, ref, **tol)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("batch", [1, 4])
def test_row_broadcasts_on_either_side_equal_the_reference(dtype, batch):
    """A bias row on the left and on the right of add, subtract and multiply (run in the step), a
    one-column value and a scalar (through ``binary``), and a negative of a bias row (``unary``)."""
    arrays = [RNG.standard_normal(s).astype(dtype) for s in [(5, batch, 3), (batch, 6), (3, 6), (6,)]]
    w, b = la.array(arrays[2]), la.array(arrays[3])

    def cell(xt, s):
        h, = s
        z = la.matmul(xt, w)
        h2 = la.tanh((b - z) * h + (z * b - (-b)) - h[:, 0:1] * 0.5 + (b + h) * (z - b))
        return h2, [h2]

    with la.deferred():
        ys, _ = la.foreach(cell, la.array(arrays[0]), [la.array(arrays[1])])
    node = next(n for n in la.get_symbol(ys).topo() if n.kind == "op" and n.op.name == "foreach")
    by_shape = {a.shape: a for a in arrays[2:]}
    values = arrays[:2] + [by_shape[e.aval.shape] for e in node.inputs[2:]]
    params = {**node.params, "save_states": False}
    want = registry.get("foreach").kernel(np, *values, **params)
    with la.tuning(foreach_jit_after=0):
        got = kforeach.run_compiled_cell(np, *values, **params)
    assert got is not None
    tol = {"rtol": 1e-5, "atol": 1e-6} if dtype == "float32" else {"rtol": 1e-12, "atol": 1e-13}
    for g, ref in zip(got, want):
        np.testing.assert_allclose(g, ref, **tol)
