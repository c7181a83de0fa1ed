"""layer_scale_residual: add(r, transpose(multiply(gamma, y), axes)) -> nn.layer_scale_residual in inference
graphs, the recorded values bit for bit (float32/float64, either operand order, empty batches), only where the
product and the transpose feed nothing but the next op; ConvNeXt's fixture equal to the pass switched off and
to onnxruntime, its three blocks' multiply and add one step each; graphs that train keep the ops."""
from __future__ import annotations

import numpy as np
import pytest

import lazyarray as la
from lazyarray.graph.passes.layer_scale import layer_scale_residual
from lazyarray.graph.symbol import Symbol

RNG = np.random.default_rng(5)
pytestmark = pytest.mark.usefixtures("kernel_path")
S = la.sym


def _ops(sym):
    return [n.op.name for n in sym.topo() if n.op is not None]


def _block(shape, dtype, flip_mul=False, flip_add=False, axes=(0, 3, 1, 2)):
    n, h, w, c = shape
    y, g = S.var("y", shape=shape, dtype=dtype), S.var("g", shape=(c,), dtype=dtype)
    r = S.var("r", shape=tuple(shape[a] for a in axes), dtype=dtype)
    t = S.transpose(y * g if flip_mul else g * y, axes=axes)
    return (t + r) if flip_add else (r + t)


@pytest.mark.parametrize("shape", [(1, 8, 8, 16), (2, 3, 5, 4), (0, 4, 4, 8)], ids=["convnext", "odd", "empty-batch"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("flip", [(False, False), (True, True)], ids=["as-recorded", "operands-swapped"])
def test_one_node_and_values_equal_bit_for_bit(shape, dtype, flip, run_symbol):
    sym = _block(shape, dtype, *flip)
    out = layer_scale_residual(sym).check()
    assert _ops(out) == ["layer_scale_residual"]
    n, h, w, c = shape
    values = {"y": RNG.standard_normal(shape).astype(dtype), "g": RNG.standard_normal(c).astype(dtype),
              "r": RNG.standard_normal((n, c, h, w)).astype(dtype)}
    np.testing.assert_array_equal(run_symbol(out, **values)[0], run_symbol(sym, **values)[0])
    compiled = la.CachedOp(sym)  # (the compiled program: the bound kernel's values, bit for bit)
    with la.tuning(layer_scale_residual=False):
        off = compiled(**{k: la.array(v) for k, v in values.items()}).asnumpy()
    fused = la.CachedOp(sym)
    for _ in range(2):  # (a program's first run, and a later one: the compiled tier)
        np.testing.assert_array_equal(fused(**{k: la.array(v) for k, v in values.items()}).asnumpy(), off)


def test_other_axes_take_the_reference_and_equal_the_recorded_ops(run_symbol):
    sym = _block((2, 3, 4, 5), "float32", axes=(0, 3, 2, 1))
    out = layer_scale_residual(sym)
    assert _ops(out) == ["layer_scale_residual"]
    values = {"y": RNG.standard_normal((2, 3, 4, 5)).astype("float32"), "g": RNG.standard_normal(5).astype("float32"),
              "r": RNG.standard_normal((2, 5, 4, 3)).astype("float32")}
    np.testing.assert_array_equal(run_symbol(out, **values)[0], run_symbol(sym, **values)[0])


def test_what_it_leaves_alone():
    y, g = S.var("y", shape=(1, 2, 2, 4)), S.var("g", shape=(4,))
    r = S.var("r", shape=(1, 4, 2, 2))
    prod = g * y
    t = S.transpose(prod, axes=(0, 3, 1, 2))
    cases = {
        "the product read twice": Symbol([(r + t).outputs[0], prod.outputs[0]]),
        "the transpose read twice": Symbol([(r + t).outputs[0], t.outputs[0]]),
        "a subtract": r - t,
        "no transpose": S.var("q", shape=(1, 2, 2, 4)) + prod,
        "mixed dtypes": S.var("r64", shape=(1, 4, 2, 2), dtype="float64") + t,
        "a broadcast transposed product": S.var("big", shape=(3, 4, 2, 2)) + t,
    }
    for what, sym in cases.items():
        assert "layer_scale_residual" not in _ops(layer_scale_residual(sym)), what


def test_the_tuning_switch_turns_it_off():
    sym = _block((1, 2, 2, 4), "float32")
    with la.tuning(layer_scale_residual=False):
        assert layer_scale_residual(sym) is sym
    assert _ops(layer_scale_residual(sym)) == ["layer_scale_residual"]


def test_convnext_equals_the_pass_switched_off_and_onnxruntime(pass_on_off):
    """The fixture at every size: each block's layer scale, permute back and residual add one node (a multiply
    and an add before), the values bit for bit those of the recorded ops, and onnxruntime's."""
    run = pass_on_off("convnext_mini", "layer_scale_residual", runs=2)
    for case, on, off, refs in run.cases:
        for a, b, r in zip(on, off, refs):
            np.testing.assert_array_equal(a, b, err_msg=case)
            np.testing.assert_allclose(a, r, rtol=1e-3, atol=1e-4, err_msg=case)
    on = run.on_ops
    assert on.count("layer_scale_residual") == 3 and "multiply" not in on, on
    assert len(on) == len(run.off_ops) - 3 * 2, (on, run.off_ops)  # (multiply, transpose, add -> one, three times)


def test_graphs_that_train_keep_the_recorded_ops():
    sym = _block((2, 2, 2, 4), "float32")
    op = la.CachedOp(sym)
    arrays = {"y": la.array(RNG.standard_normal((2, 2, 2, 4)).astype("float32")),
              "g": la.array(RNG.standard_normal(4).astype("float32")),
              "r": la.array(RNG.standard_normal((2, 4, 2, 2)).astype("float32"))}
    for x in arrays.values():
        x.attach_grad()
    with la.autograd.record():
        z = op(**arrays)
    z.backward()
    assert arrays["y"].grad is not None
    compiled = [c for c in op._cache.values() if c.backward is not None]
    assert compiled and all("layer_scale_residual" not in _ops(c.sym) for c in compiled)
