"""A dense layer and the relu working in place on its output run as one step
(lazyarray/executor/epilogue.py, ops/nn.py: dense_relu): the bias add and the relu in one compiled
pass after the product, with the values of the two ops bit for bit; nothing merges where another
op reads the dense value or the caller receives it."""
from __future__ import annotations

import numpy as np
import pytest

import lazyarray as la
from lazyarray.executor.program import compile_program
from lazyarray.kernels.dense import dense_relu
from lazyarray.ops.registry import get

S = la.sym


def _layer(rows, units=300, features=100, dtype="float32"):
    x = S.var("x", shape=(rows, features), dtype=dtype)
    w = S.var("w", shape=(units, features), dtype=dtype)
    b = S.var("b", shape=(units,), dtype=dtype)
    return (x, w, b), S.relu(S.nn.dense(x, w, b))


def _values(rng, rows, units=300, features=100, dtype="float32"):
    x, w = rng.standard_normal((rows, features)), rng.standard_normal((units, features))
    b = rng.standard_normal(units)
    x[0, :3] = [np.nan, np.inf, -np.inf]  # NaN and infinities reach the epilogue
    b[:2] = [-0.0, 0.0]
    return [v.astype(dtype) for v in (x, w, b)]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("rows", [64, 4, 300], ids=["units-major", "few-rows", "row-major"])
def test_the_merged_step_gives_the_two_ops_values_bit_for_bit(rows, dtype, both_paths):
    """Two layers (the relu read by the next dense, as in an MLP): units-major (64 rows) and
    row-major buffers, NaN, infinities and signed zeros. The compiled epilogue and the two NumPy
    kernels give the same bits, and the values of x @ w.T + b then relu."""
    rng = np.random.default_rng(rows)
    ins, r = _layer(rows, dtype=dtype)
    w2 = S.var("w2", shape=(256, 300), dtype=dtype)
    y = S.nn.dense(r, w2)
    prog = compile_program([y.outputs[0]], [v.outputs[0].node for v in ins + (w2,)])
    vals = _values(rng, rows, dtype=dtype) + [rng.standard_normal((256, 300)).astype(dtype)]

    def run():  # (twice: a weight's packed copy, weight_pack.py, is made at its second call)
        prog.run(vals)
        return prog.run(vals)[0]

    got, want = both_paths(run)
    np.testing.assert_array_equal(got, want)
    x, w, b, w2v = vals
    with np.errstate(invalid="ignore"):
        ref = np.maximum(x @ w.T + b, 0) @ w2v.T
    ok = np.isfinite(ref)
    np.testing.assert_allclose(got[ok], ref[ok], rtol=1e-3 if dtype == "float32" else 1e-10, atol=1e-2)
    assert len(prog.steps) == len(prog.plan.steps) - 1  # (dense and relu: one step)


def test_a_dense_value_read_by_another_op_is_not_merged():
    ins = (S.var("x", shape=(64, 100)), S.var("w", shape=(300, 100)), S.var("b", shape=(300,)))
    dense = S.nn.dense(*ins)
    both = [S.relu(dense).outputs[0], S.sum(dense, axis=0).outputs[0]]  # the dense value has two readers
    prog = compile_program(both, [v.outputs[0].node for v in ins])
    assert len(prog.steps) == len(prog.plan.steps)
    rng = np.random.default_rng(0)
    xv, wv, bv = (rng.standard_normal(s).astype("float32") for s in ((64, 100), (300, 100), (300,)))
    rv, sv = prog.run([xv, wv, bv])
    np.testing.assert_allclose(rv, np.maximum(xv @ wv.T + bv, 0), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(sv, (xv @ wv.T + bv).sum(0), rtol=1e-4, atol=1e-3)


def test_a_relu_handed_to_the_caller_merges_only_where_the_plan_puts_it_in_place():
    """What the caller receives is the relu's value, in an exact-size buffer of its own: the pair
    merges only if the plan puts the relu in place on the dense value (here it does not), and the
    value is C-contiguous and right either way."""
    rng = np.random.default_rng(1)
    ins, r = _layer(64)
    prog = compile_program([r.outputs[0]], [v.outputs[0].node for v in ins])
    relu_in_place = any(k == 1 for k, _, _ in prog.plan.inplace)
    assert len(prog.steps) == len(prog.plan.steps) - relu_in_place
    xv, wv, bv = (rng.standard_normal(s).astype("float32") for s in ((64, 100), (300, 100), (300,)))
    got = prog.run([xv, wv, bv])[0]
    assert got.flags.c_contiguous
    np.testing.assert_allclose(got, np.maximum(xv @ wv.T + bv, 0), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("order", ["C", "units-major"])
def test_dense_relu_kernel_matches_the_two_kernels(order, both_paths):
    """The helper itself, into a C-ordered or a units-major ``out``: the two kernels' bits."""
    dense, relu = get("dense").bind(np), get("relu").bind(np)
    rng = np.random.default_rng(2)
    x, w, b = _values(rng, 32)

    def run():  # (twice: the weight's packed copy, weight_pack.py, is made at its second call)
        for _ in range(2):
            out = np.empty((32, 300), np.float32) if order == "C" else np.empty((300, 32), np.float32).T
            with np.errstate(invalid="ignore"):
                res = dense_relu(dense, relu, x, w, b, out)
            assert res is out
        return out.copy()

    got, want = both_paths(run)
    np.testing.assert_array_equal(got, want)
