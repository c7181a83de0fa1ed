"""A dense layer and the residual add after it run as one step (lazyarray/executor/epilogue.py,
kernels/dense.py: dense_residual): the two kernels in one closure, the values of the two steps bit for
bit (float32, float64, views, empty dims, either operand order, whichever buffer the add writes);
nothing merges where the residual broadcasts or the switch is off."""
from __future__ import annotations

import numpy as np
import pytest

import lazyarray as la
from lazyarray.executor.program import compile_program

S = la.sym


def _graph(shape, units, dtype, swap=False, residual_shape=None):
    x = S.var("x", shape=shape, dtype=dtype)
    w = S.var("w", shape=(units, shape[-1]), dtype=dtype)
    b = S.var("b", shape=(units,), dtype=dtype)
    r = S.var("r", shape=residual_shape or shape[:-1] + (units,), dtype=dtype)
    d = S.nn.dense(x, w, b)
    y = S.tanh((r + d) if swap else (d + r))  # (the sum read by a later step, as a layer norm reads it)
    return [v.outputs[0].node for v in (x, w, b, r)], y.outputs[0]


def _both(ins, out):
    """The program with the pair merged, and the same graph compiled with the switch off."""
    merged = compile_program([out], ins)
    with la.tuning(dense_residual=False):
        plain = compile_program([out], ins)
    return merged, plain


def _values(rng, shape, units, dtype, residual_shape=None):
    x = rng.standard_normal(shape).astype(dtype)
    w = rng.standard_normal((units, shape[-1])).astype(dtype)
    b = rng.standard_normal(units).astype(dtype)
    r = rng.standard_normal(residual_shape or shape[:-1] + (units,)).astype(dtype)
    return [x, w, b, r]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape,units", [((1, 7, 32), 32), ((2, 5, 16), 40), ((0, 7, 32), 32), ((3, 0, 8), 8)])
@pytest.mark.parametrize("swap", [False, True])
def test_merged_step_gives_the_two_steps_values_bit_for_bit(dtype, shape, units, swap):
    rng = np.random.default_rng(sum(shape) + units)
    ins, out = _graph(shape, units, dtype, swap)
    merged, plain = _both(ins, out)
    assert len(merged.steps) == len(plain.steps) - 1 == len(merged.plan.steps) - 1
    vals = _values(rng, shape, units, dtype)
    for _ in range(3):  # (the steps bind their kernels at the second run)
        got, want = merged.run(vals)[0], plain.run(vals)[0]
        np.testing.assert_array_equal(got, want)
    x, w, b, r = vals
    np.testing.assert_allclose(got, np.tanh(x @ w.T + b + r), rtol=1e-4, atol=1e-4)
    # the add has no binder: the merged step binds its dense kernel alone (as the dense step did)
    assert [b.choice.impl.op for b in merged.bindings.chosen().values()].count("dense") == 1


def test_views_as_inputs():
    rng = np.random.default_rng(2)
    ins, out = _graph((2, 6, 16), 16, "float32")
    merged, plain = _both(ins, out)
    x = rng.standard_normal((2, 12, 32)).astype(np.float32)[:, ::2, ::2]  # strided views
    w = rng.standard_normal((16, 32)).astype(np.float32)[:, ::2]
    b = rng.standard_normal(32).astype(np.float32)[::2]
    r = rng.standard_normal((6, 2, 16)).astype(np.float32).transpose(1, 0, 2)
    for _ in range(3):
        np.testing.assert_array_equal(merged.run([x, w, b, r])[0], plain.run([x, w, b, r])[0])
    assert len(merged.steps) == len(plain.steps) - 1


def test_what_is_not_merged():
    # a residual that broadcasts (a bias-like vector): the add is not a residual connection
    ins, out = _graph((2, 5, 8), 8, "float32", residual_shape=(8,))
    merged, plain = _both(ins, out)
    assert len(merged.steps) == len(plain.steps)
    # the dense value read by another op too: still merged (the two kernels into their own buffers)
    x, w, b, r = (S.var("x", shape=(1, 4, 8)), S.var("w", shape=(8, 8)), S.var("b", shape=(8,)),
                  S.var("r", shape=(1, 4, 8)))
    d = S.nn.dense(x, w, b)
    outs = [S.tanh(d + r).outputs[0], S.sum(d).outputs[0]]
    prog = compile_program(outs, [v.outputs[0].node for v in (x, w, b, r)])
    assert len(prog.steps) == len(prog.plan.steps) - 1
    rng = np.random.default_rng(4)
    xv, wv, bv, rv = (rng.standard_normal(s).astype("float32") for s in ((1, 4, 8), (8, 8), (8,), (1, 4, 8)))
    for _ in range(3):
        t, s = prog.run([xv, wv, bv, rv])
    np.testing.assert_allclose(t, np.tanh(xv @ wv.T + bv + rv), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(s, (xv @ wv.T + bv).sum(), rtol=1e-4, atol=1e-4)


def test_the_sum_handed_to_the_caller_or_written_over_the_residual():
    """The add's output a graph output (its own buffer), and the add in place on the residual (a value
    the plan frees there, as a pre-norm block's residual stream): merged, the two steps' values."""
    x, w, b = S.var("x", shape=(2, 3, 8)), S.var("w", shape=(8, 8)), S.var("b", shape=(8,))
    h = S.tanh(x)  # (a planned value that dies at the add: the add may write over it)
    y = S.nn.dense(x, w, b) + h
    for out in (y, S.tanh(y)):
        ins = [v.outputs[0].node for v in (x, w, b)]
        merged = compile_program([out.outputs[0]], ins)
        with la.tuning(dense_residual=False):
            plain = compile_program([out.outputs[0]], ins)
        assert len(merged.steps) == len(plain.steps) - 1
        rng = np.random.default_rng(6)
        vals = [rng.standard_normal(s).astype("float32") for s in ((2, 3, 8), (8, 8), (8,))]
        for _ in range(3):
            np.testing.assert_array_equal(merged.run(vals)[0], plain.run(vals)[0])


def test_explain_names_it():
    ins, out = _graph((1, 7, 32), 32, "float32")
    op = la.CachedOp(la.Symbol([out]))
    rng = np.random.default_rng(3)
    args = [la.array(v) for v in _values(rng, (1, 7, 32), 32, "float32")]
    for _ in range(3):
        op(*args)
    assert "nn.dense+add[stack, residual]" in str(op.explain(*args))
