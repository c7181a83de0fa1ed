"""The fusion pass ends groups with a reduction over the last axis (executor/fusion.py's
``ends_group``): which reductions join a group and which stay out, the full-size intermediate
gone from the memory plan, gradients, layer-norm-like and softmax-like row groups, the JSON
format."""
from __future__ import annotations

import numpy as np
import pytest

import lazyarray as la
from lazyarray.graph.symbol import Symbol

RNG = np.random.default_rng(0)


def _fused_names(sym) -> list[str]:
    return [n.name for n in la.CachedOp(sym).compiled().topo() if n.op is not None and n.op.name == "fused"]


def _same(sym, **arrays):
    ins = {k: la.array(v) for k, v in arrays.items()}
    on, off = la.CachedOp(sym)(**ins), la.CachedOp(sym, fuse=False)(**ins)
    for a, b in zip(on if isinstance(on, list) else [on], off if isinstance(off, list) else [off]):
        np.testing.assert_array_equal(a.asnumpy(), b.asnumpy())


@pytest.mark.parametrize("red", ["sum", "mean", "max", "min"])
@pytest.mark.parametrize("axis", [-1, 2, (2,)])
def test_a_reduction_over_the_last_axis_ends_the_group(red, axis):
    x = la.sym.var("x", shape=(2, 5, 7))
    m = la.sym.var("m", shape=(2, 5, 1))
    sym = getattr(la.sym, red)(la.sym.square(x - m) * 0.5, axis=axis)
    assert _fused_names(sym) == [f"fused[subtract,square,multiply,{red}]"]
    _same(sym, x=RNG.standard_normal((2, 5, 7)).astype("float32"), m=RNG.standard_normal((2, 5, 1)).astype("float32"))


@pytest.mark.parametrize("why, make", [
    ("another axis", lambda x: la.sym.sum(la.sym.exp(x) * 2 + 1, axis=0)),
    ("every axis", lambda x: la.sym.sum(la.sym.exp(x) * 2 + 1)),
    ("two axes", lambda x: la.sym.sum(la.sym.exp(x) * 2 + 1, axis=(0, 1))),
    ("not sum/mean/max/min", lambda x: la.sym.prod(la.sym.exp(x) * 2 + 1, axis=-1)),
    ("an int result", lambda x: la.sym.sum(la.sym.cast(la.sym.exp(x) * 2 + 1, dtype="int32"), axis=-1)),
])
def test_other_reductions_stay_out_and_the_elementwise_group_forms_alone(why, make):
    x = la.sym.var("x", shape=(6, 8))
    sym = make(x)
    names = _fused_names(sym)
    assert names and not any(n.endswith(("sum]", "prod]")) for n in names), why
    _same(sym, x=RNG.standard_normal((6, 8)).astype("float32"))


def test_one_dim_and_float16_values_are_not_reduced_in_a_group():
    v = la.sym.var("v", shape=(50,))
    assert _fused_names(la.sym.sum(la.sym.exp(v) * 2 + 1, axis=-1)) == ["fused[exp,multiply,add]"]
    h = la.sym.var("h", shape=(5, 10), dtype="float16")
    assert _fused_names(la.sym.mean(la.sym.exp(h) * 2 + 1, axis=-1)) == ["fused[exp,multiply,add]"]


def test_a_reduced_value_used_elsewhere_is_not_swallowed():
    x = la.sym.var("x", shape=(6, 8))
    h = la.sym.tanh(x * 2 + 1)
    sym = Symbol([la.sym.sum(h, axis=-1).outputs[0], (h * 3).outputs[0]])
    assert _fused_names(sym) == ["fused[multiply,add,tanh]"]
    _same(sym, x=RNG.standard_normal((6, 8)).astype("float32"))


def test_a_group_of_one_op_and_its_reduction_is_too_small():
    x = la.sym.var("x", shape=(6, 8))
    assert _fused_names(la.sym.sum(x * x, axis=-1)) == []


def test_the_memory_plan_holds_no_full_size_intermediate():
    x = la.sym.var("x", shape=(256, 1024))
    m = la.sym.var("m", shape=(256, 1))
    sym = la.sym.mean(la.sym.square(x - m) * 0.5, axis=-1, keepdims=True)
    fused = la.CachedOp(sym).memory_plan()
    assert "fused[subtract,square,multiply,mean]" in str(fused)
    assert fused.peak_bytes == 256 * 4  # the output only
    assert la.CachedOp(sym, fuse=False).memory_plan().peak_bytes >= 256 * 1024 * 4


def test_layer_norm_and_softmax_like_rows_equal_the_unfused_run():
    x = la.sym.var("x", shape=(12, 96), dtype="float64")
    g = la.sym.var("g", shape=(96,), dtype="float64")
    m = la.sym.mean(x, axis=-1, keepdims=True)
    var = la.sym.mean(la.sym.square(x - m) * 1.0, axis=-1, keepdims=True)  # (x - m) read twice: CSE
    ln = (x - m) / la.sym.sqrt(var + 1e-5) * g
    e = la.sym.exp(x - la.sym.max(x, axis=-1, keepdims=True))
    sm = e / la.sym.sum(e, axis=-1, keepdims=True)
    sq = la.sym.sum(la.sym.square(x * g - 1.0), axis=-1)
    sym = Symbol([ln.outputs[0], sm.outputs[0], sq.outputs[0]])
    assert "fused[multiply,subtract,square,sum]" in _fused_names(sym)
    _same(sym, x=RNG.standard_normal((12, 96)), g=RNG.standard_normal(96))


def test_gradients_through_a_group_ending_in_a_reduction_equal_eager():
    v, mv = RNG.standard_normal((20, 30)), RNG.standard_normal((20, 1))
    x = la.sym.var("x", shape=(20, 30), dtype="float64")
    m = la.sym.var("m", shape=(20, 1), dtype="float64")
    op = la.CachedOp(la.sym.max(la.sym.tanh(x - m) * x, axis=-1))
    xa, ma = la.array(v), la.array(mv)
    xa.attach_grad()
    ma.attach_grad()
    with la.autograd.record():
        y = op(xa, ma)
    y.backward()
    xe, me = la.array(v), la.array(mv)
    xe.attach_grad()
    me.attach_grad()
    with la.autograd.record():
        ye = la.max(la.tanh(xe - me) * xe, axis=-1)
    ye.backward()
    np.testing.assert_allclose(xa.grad.asnumpy(), xe.grad.asnumpy(), rtol=1e-12)
    np.testing.assert_allclose(ma.grad.asnumpy(), me.grad.asnumpy(), rtol=1e-12)


def test_a_group_ending_in_a_reduction_round_trips_through_json(tmp_path):
    x = la.sym.var("x", shape=(4, 5))
    compiled = la.CachedOp(la.sym.sum(la.sym.tanh(x * 2) + 1, axis=-1, keepdims=True)).compiled()
    compiled.save(str(tmp_path / "fused.json"))
    back = la.load_symbol(str(tmp_path / "fused.json"))
    assert [n.label() for n in back.topo() if n.op is not None] == ["fused[multiply,tanh,add,sum]"]
    v = RNG.standard_normal((4, 5)).astype("float32")
    np.testing.assert_array_equal(la.CachedOp(back)(la.array(v)).asnumpy(),
                                  np.sum(np.tanh(v * np.float32(2)) + np.float32(1), axis=-1, keepdims=True))
