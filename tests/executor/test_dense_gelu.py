"""A dense layer and the exact GELU after it run as one step (lazyarray/executor/epilogue.py,
kernels/dense_gelu.py): the bias added in the GELU's compiled loop, the two steps' values bit for bit
(float32; views as inputs; empty dims), the reference's within float rounding; float64, the tanh GELU, a
dense value read by another op and the switch off: the two steps as they were."""
from __future__ import annotations

import numpy as np
import pytest

import lazyarray as la
from lazyarray.executor.program import compile_program
from lazyarray.ops import registry

S = la.sym


def _graph(shape, units, dtype, approximation="none", also_sum=False):
    x = S.var("x", shape=shape, dtype=dtype)
    w = S.var("w", shape=(units, shape[-1]), dtype=dtype)
    b = S.var("b", shape=(units,), dtype=dtype)
    d = S.nn.dense(x, w, b)
    y = S.tanh(S.nn.gelu(d, approximation=approximation))  # (a later step reads the GELU)
    outs = [y.outputs[0]] + ([S.sum(d).outputs[0]] if also_sum else [])
    return [v.outputs[0].node for v in (x, w, b)], outs


def _both(ins, outs):
    merged = compile_program(outs, ins)
    with la.tuning(dense_gelu=False):
        plain = compile_program(outs, ins)
    return merged, plain


def _values(rng, shape, units, dtype):
    return [rng.standard_normal(shape).astype(dtype) * 2, rng.standard_normal((units, shape[-1])).astype(dtype),
            rng.standard_normal(units).astype(dtype)]


def _reference(x, w, b):
    dense, gelu = registry.get("dense").kernel, registry.get("gelu").kernel
    return np.tanh(gelu(np, dense(np, x, w, b)))


@pytest.mark.parametrize("shape,units", [((1, 8, 8, 16), 64), ((1, 17, 32), 128), ((2, 5, 16), 40),
                                         ((3, 24), 8), ((0, 7, 32), 32), ((3, 0, 8), 8)])
def test_merged_step_gives_the_two_steps_values_bit_for_bit(shape, units):
    rng = np.random.default_rng(sum(shape) + units)
    ins, outs = _graph(shape, units, "float32")
    merged, plain = _both(ins, outs)
    assert len(merged.steps) == len(plain.steps) - 1
    vals = _values(rng, shape, units, "float32")
    for _ in range(3):  # (the steps bind their kernels at the second run)
        got, want = merged.run(vals)[0], plain.run(vals)[0]
        np.testing.assert_array_equal(got, want)
    np.testing.assert_allclose(got, _reference(*vals), rtol=2e-6, atol=2e-6)


def test_float64_runs_the_two_steps():
    ins, outs = _graph((2, 5, 16), 40, "float64")
    merged, plain = _both(ins, outs)
    assert len(merged.steps) == len(plain.steps)
    vals = _values(np.random.default_rng(1), (2, 5, 16), 40, "float64")
    for _ in range(3):
        got = merged.run(vals)[0]
        np.testing.assert_array_equal(got, plain.run(vals)[0])
    np.testing.assert_allclose(got, _reference(*vals), rtol=1e-12, atol=1e-12)


def test_views_as_inputs():
    rng = np.random.default_rng(2)
    ins, outs = _graph((2, 6, 16), 48, "float32")
    merged, plain = _both(ins, outs)
    x = (rng.standard_normal((2, 12, 32)).astype(np.float32) * 2)[:, ::2, ::2]  # strided views
    w = rng.standard_normal((48, 32)).astype(np.float32)[:, ::2]
    b = rng.standard_normal(96).astype(np.float32)[::2]
    for _ in range(3):
        got = merged.run([x, w, b])[0]
        np.testing.assert_array_equal(got, plain.run([x, w, b])[0])
    np.testing.assert_allclose(got, _reference(x, w, b), rtol=2e-6, atol=2e-6)
    assert len(merged.steps) == len(plain.steps) - 1


def test_what_is_not_merged():
    # the tanh GELU: its own kernel
    ins, outs = _graph((2, 5, 16), 40, "float32", approximation="tanh")
    merged, plain = _both(ins, outs)
    assert len(merged.steps) == len(plain.steps)
    # the dense value read by another op too (dense_gelu leaves the product without its bias there)
    ins, outs = _graph((2, 5, 16), 40, "float32", also_sum=True)
    merged, plain = _both(ins, outs)
    assert len(merged.steps) == len(plain.steps)
    vals = _values(np.random.default_rng(5), (2, 5, 16), 40, "float32")
    for _ in range(3):
        for g, p in zip(merged.run(vals), plain.run(vals)):
            np.testing.assert_array_equal(g, p)


def test_gelu_erf_float64_constants():
    ins, outs = _graph((1, 7, 32), 128, "float32")
    vals = _values(np.random.default_rng(7), (1, 7, 32), 128, "float32")
    with la.tuning(gelu_erf_float64=True):
        merged, plain = _both(ins, outs)
        for _ in range(3):
            np.testing.assert_array_equal(merged.run(vals)[0], plain.run(vals)[0])
    assert len(merged.steps) == len(plain.steps) - 1


def test_explain_names_it():
    ins, outs = _graph((1, 7, 32), 128, "float32")
    op = la.CachedOp(la.Symbol(outs))
    args = [la.array(v) for v in _values(np.random.default_rng(3), (1, 7, 32), 128, "float32")]
    for _ in range(3):
        op(*args)
    text = str(op.explain(*args))
    assert "nn.dense+nn.gelu[stack]" in text and "nn.gelu[compiled]" not in text
    with la.tuning(dense_gelu=False):
        off = la.CachedOp(la.Symbol(outs))
        text = str(off.explain(*args))
        assert "nn.dense+nn.gelu" not in text and "nn.gelu[compiled]" in text
