"""Elementwise fusion (executor/fusion.py): groups, values equal to unfused runs, gradients,
dtypes, broadcasting, threads, the switch, and what users see (print, drawing, plan, JSON)."""
from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import lazyarray as la
from lazyarray import threads
from lazyarray.executor.fusion import fuse
from lazyarray.kernels import fused_chunked

RNG = np.random.default_rng(0)


def _fused_nodes(sym):
    return [n for n in sym.topo() if n.op is not None and n.op.name == "fused"]


def _both(sym, **inputs):
    """Outputs of ``sym`` compiled with and without fusion."""
    arrays = {k: la.array(v) for k, v in inputs.items() if k in sym.list_inputs()}
    on = la.CachedOp(sym, fuse=True)(**arrays)
    off = la.CachedOp(sym, fuse=False)(**arrays)
    return on, off


def test_a_chain_becomes_one_named_node_and_equals_the_unfused_run():
    x = la.sym.var("x", shape=(300, 700))
    b = la.sym.var("b", shape=(700,))
    sym = la.sym.relu(la.sym.tanh(x * 2 + b) - 0.5)
    compiled = la.CachedOp(sym).compiled()
    (node,) = _fused_nodes(compiled)
    assert node.name == "fused[multiply,add,tanh,subtract,relu]"
    assert "fused[multiply,add,tanh,subtract,relu]" in str(compiled)
    on, off = _both(sym, x=RNG.standard_normal((300, 700)).astype("float32"),
                    b=RNG.standard_normal(700).astype("float32"))
    np.testing.assert_allclose(on.asnumpy(), off.asnumpy(), rtol=1e-6, atol=1e-7)


def test_a_value_used_outside_the_group_is_not_swallowed():
    x = la.sym.var("x", shape=(50, 40))
    h = la.sym.sin(la.sym.exp(x) * 2)  # used by the group below and by the sum
    from lazyarray.graph.symbol import Symbol

    sym = Symbol([(la.sym.abs(la.sym.tanh(h + 1))).outputs[0], la.sym.sum(h).outputs[0]])
    groups = _fused_nodes(la.CachedOp(sym).compiled())
    assert sorted(n.name for n in groups) == ["fused[add,tanh,abs]", "fused[exp,multiply,sin]"]
    v = RNG.standard_normal((50, 40)).astype("float32")
    on, off = _both(sym, x=v)
    for a, b in zip(on, off):
        np.testing.assert_allclose(a.asnumpy(), b.asnumpy(), rtol=1e-5)


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64", "int32", "int64"])
def test_dtypes_are_kept(dtype):
    x = la.sym.var("x", shape=(64, 33), dtype=dtype)
    y = la.sym.var("y", shape=(33,), dtype=dtype)
    sym = la.sym.maximum(x * y + x, y - x) * 3
    vx = RNG.integers(-20, 20, (64, 33)).astype(dtype)
    vy = RNG.integers(-20, 20, 33).astype(dtype)
    assert _fused_nodes(la.CachedOp(sym).compiled())
    on, off = _both(sym, x=vx, y=vy)
    assert on.dtype == off.dtype == np.dtype(dtype)
    ref = np.maximum(vx * vy + vx, vy - vx) * np.array(3, dtype)
    np.testing.assert_array_equal(on.asnumpy(), off.asnumpy())
    np.testing.assert_allclose(on.asnumpy().astype("float64"), ref.astype("float64"), rtol=1e-3)


@pytest.mark.parametrize("xshape, bshape", [((6, 5, 4), (5, 1)), ((6, 5, 4), (6, 1, 4)), ((1000,), ()),
                                            ((3, 1000), (3, 1)), ((2, 3), (2, 3))])
def test_broadcast_operands_inside_a_group(xshape, bshape):
    x = la.sym.var("x", shape=xshape, dtype="float64")
    b = la.sym.var("b", shape=bshape, dtype="float64")
    sym = la.sym.sigmoid(x * b) + la.sym.exp(-x)
    vx, vb = RNG.standard_normal(xshape), RNG.standard_normal(bshape)
    on, off = _both(sym, x=vx, b=vb)
    ref = 1 / (1 + np.exp(-(vx * vb))) + np.exp(-vx)
    np.testing.assert_allclose(on.asnumpy(), ref, rtol=1e-12)
    np.testing.assert_allclose(off.asnumpy(), ref, rtol=1e-12)


@pytest.mark.parametrize("n_threads", [1, 2, 3])
def test_chunks_spread_over_threads_give_the_same_result(n_threads, monkeypatch):
    monkeypatch.setattr(fused_chunked, "CHUNK_BYTES", 4096)  # many chunks
    monkeypatch.setattr(threads, "MIN_PARALLEL_BYTES", 0)
    la.set_num_threads(n_threads)
    try:
        x = la.sym.var("x", shape=(257, 129), dtype="float64")
        sym = la.sym.tanh(x * 0.3) * x + 1
        v = RNG.standard_normal((257, 129))
        out = la.CachedOp(sym)(la.array(v)).asnumpy()
        np.testing.assert_allclose(out, np.tanh(v * 0.3) * v + 1, rtol=1e-12)
    finally:
        la.set_num_threads(os.cpu_count() or 1)


def test_set_num_threads_refuses_nonsense():
    with pytest.raises(ValueError, match="n must be >= 1"):
        la.set_num_threads(0)


def test_gradients_through_fused_graphs_equal_eager():
    v = RNG.standard_normal((20, 30))
    bv = RNG.standard_normal(30)
    x = la.sym.var("x", shape=(20, 30), dtype="float64")
    b = la.sym.var("b", shape=(30,), dtype="float64")
    op = la.CachedOp(la.sym.sum(la.sym.tanh(x * b + 1) * x))
    xa, ba = la.array(v), la.array(bv)
    xa.attach_grad()
    ba.attach_grad()
    with la.autograd.record():
        y = op(xa, ba)
    y.backward()
    xe, be = la.array(v), la.array(bv)
    xe.attach_grad()
    be.attach_grad()
    with la.autograd.record():
        ye = la.sum(la.tanh(xe * be + 1) * xe)
    ye.backward()
    np.testing.assert_allclose(xa.grad.asnumpy(), xe.grad.asnumpy(), rtol=1e-12)
    np.testing.assert_allclose(ba.grad.asnumpy(), be.grad.asnumpy(), rtol=1e-12)
    compiled = op._cache[op._last_key]
    assert _fused_nodes(compiled.call["backward"].sym)  # the backward graph is fused too


def test_fusion_can_be_turned_off(monkeypatch):
    x = la.sym.var("x", shape=(8,))
    sym = la.sym.exp(x) * 2 + 1
    assert _fused_nodes(la.CachedOp(sym).compiled())
    assert not _fused_nodes(la.CachedOp(sym, fuse=False).compiled())
    monkeypatch.setattr(la.config, "fuse", False)  # (LAZYARRAY_FUSE=0 at import)
    assert not _fused_nodes(la.CachedOp(sym).compiled())
    assert _fused_nodes(la.CachedOp(sym, fuse=True).compiled())


def test_fused_graph_round_trips_through_json_and_draws_its_name(tmp_path):
    x = la.sym.var("x", shape=(4, 5))
    compiled = la.CachedOp(la.sym.tanh(x * 2) + 1).compiled()
    compiled.save(str(tmp_path / "fused.json"))
    back = la.load_symbol(str(tmp_path / "fused.json"))
    assert [n.label() for n in back.topo() if n.op is not None] == ["fused[multiply,tanh,add]"]
    v = RNG.standard_normal((4, 5)).astype("float32")
    np.testing.assert_allclose(la.CachedOp(back)(la.array(v)).asnumpy(), np.tanh(v * 2) + 1, rtol=1e-6)
    assert "fused[multiply,tanh,add]" in compiled._repr_svg_()


def test_memory_plan_names_the_fused_step():
    x = la.sym.var("x", shape=(256, 1024))
    plan = la.CachedOp(la.sym.relu(la.sym.exp(x) * 2)).memory_plan()
    assert "fused[exp,multiply,relu]" in str(plan)
    assert plan.peak_bytes == 256 * 1024 * 4  # one output buffer, no intermediates


def test_pairs_are_not_fused():
    x = la.sym.var("x", shape=(10,))
    assert not _fused_nodes(la.CachedOp(la.sym.exp(x) + 1).compiled())


def test_an_op_that_cannot_write_into_a_buffer_is_left_alone():
    x = la.sym.var("x", shape=(10,))
    sym = la.sym.smooth_l1(la.sym.exp(x), scalar=1.0) + 1  # smooth_l1's kernel allocates
    names = [n.label() for n in la.CachedOp(sym).compiled().topo() if n.op is not None]
    assert "smooth_l1" in names


_UNARY = ["exp", "tanh", "negative", "abs", "sigmoid", "relu", "sin"]
_BINARY = ["add", "subtract", "multiply", "maximum", "minimum"]


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(_UNARY + _BINARY), st.integers(0, 100), st.integers(0, 100)),
                min_size=1, max_size=12),
       st.sampled_from([(7, 9), (300,), (2, 3, 5)]))
def test_random_elementwise_dags_equal_unfused_results(prog, shape):
    x = la.sym.var("x", shape=shape, dtype="float64")
    row = la.sym.var("row", shape=shape[-1:], dtype="float64")
    vals = [x, row]
    for name, i, j in prog:
        f = getattr(la.sym, name)
        a = vals[i % len(vals)]
        vals.append(f(a) if name in _UNARY else f(a, vals[j % len(vals)]))
    from lazyarray.graph.symbol import Symbol
    sym = Symbol([v.outputs[0] for v in vals[-2:]])
    vx = RNG.standard_normal(shape) * 0.5
    vr = RNG.standard_normal(shape[-1:]) * 0.5
    on, off = _both(sym, x=vx, row=vr)
    for a, b in zip(on, off):
        np.testing.assert_allclose(a.asnumpy(), b.asnumpy(), rtol=1e-12, atol=1e-12)
    plan = la.CachedOp(sym).memory_plan()
    assert plan.peak_bytes >= plan.lower_bound_bytes


def test_fuse_keeps_graph_inputs():
    x = la.sym.var("x", shape=(3,))
    outs = list((la.sym.exp(x) * 2 + 1).outputs)
    (e,) = fuse(outs)
    assert [i.node for i in e.node.inputs if i.node.kind == "var"] == [x.outputs[0].node]


def test_set_num_threads_limits_blas_too():
    threadpoolctl = pytest.importorskip("threadpoolctl")
    try:
        la.set_num_threads(1)
        blas = [i for i in threadpoolctl.threadpool_info() if i["user_api"] == "blas"]
        assert blas and all(i["num_threads"] == 1 for i in blas)
        assert threads.num_threads() == 1
    finally:
        la.set_num_threads(os.cpu_count() or 1)
