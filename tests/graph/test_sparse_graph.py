"""Storage types in graphs: inferred through a traced graph, kept by the JSON round trip and
by ``la.sym``, part of the CachedOp signature, listed by the memory plan as run-time
allocations; compiled runs (forward and backward) give the eager values."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import lazyarray as la

RNG = np.random.default_rng(7)
X = (RNG.standard_normal((6, 5)) * (RNG.random((6, 5)) < 0.4)).astype(np.float32)
X[2] = 0  # an empty row
W = RNG.standard_normal((5, 3)).astype(np.float32)
G = RNG.standard_normal((6, 3)).astype(np.float32)


pytestmark = pytest.mark.usefixtures("fresh_fallback_warnings")


def _net(x, w, g):
    h = la.relu(x * 2.0)              # csr
    y = la.dot(h, w)                  # dense
    r = la.dot(h, g, transpose_a=True)  # row_sparse
    s = la.sum(h, axis=1)             # dense
    top = h[1:4]                      # csr
    return [y, r, s, top, h]


STYPES = ["default", "row_sparse", "default", "csr", "csr"]


def _inputs():
    return la.array(X).tostype("csr"), la.array(W), la.array(G)


def _symbol():
    x, w, g = _inputs()
    with la.deferred():
        outs = _net(x, w, g)
        assert [o.stype for o in outs] == STYPES  # inferred while recording, nothing computed
        assert all(o.is_lazy for o in outs)
    return la.get_symbol(outs, inputs={"x": x, "w": w, "g": g}), outs


def _eager():
    with warnings.catch_warnings():
        warnings.simplefilter("error", la.StorageFallbackWarning)
        return _net(*_inputs())


def test_storage_types_are_inferred_through_a_traced_graph():
    sym, outs = _symbol()
    assert [e.aval.stype for e in sym.outputs] == STYPES
    by_op = {n.op.name: n.avals[0].stype for n in sym.topo() if n.op is not None}
    assert by_op["multiply"] == by_op["relu"] == by_op["getitem"] == "csr"
    assert by_op["sum"] == "default"
    text = str(sym)
    assert "<csr>" in text and "<row_sparse>" in text
    for lazy, eager in zip(outs, _eager()):
        assert lazy.stype == eager.stype
        np.testing.assert_allclose(lazy.asnumpy(), eager.asnumpy(), rtol=1e-6)


def test_infer_shape_with_sparse_inputs():
    sym, _ = _symbol()
    _, out_shapes = sym.infer_shape(x=(6, 5), w=(5, 3), g=(6, 3))
    assert out_shapes == [(6, 3), (5, 3), (6,), (3, 5), (6, 5)]


def test_json_round_trip_keeps_storage_types_and_values():
    sym, _ = _symbol()
    back = la.Symbol.from_json(sym.to_json())
    assert [e.aval.stype for e in back.outputs] == STYPES
    assert {n.name: n.avals[0].stype for n in back.input_nodes()} == {"x": "csr", "w": "default", "g": "default"}
    assert back.to_json() == sym.to_json()
    got = la.CachedOp(back)(*_inputs())
    for a, b in zip(got, _eager()):
        assert a.stype == b.stype
        np.testing.assert_allclose(a.asnumpy(), b.asnumpy(), rtol=1e-6)


def test_sym_api_builds_the_same_storage_types():
    x = la.sym.var("x", shape=(6, 5), stype="csr")
    w = la.sym.var("w", shape=(5, 3))
    h = la.sym.relu(la.sym.multiply(x, 2.0))
    y = la.sym.dot(h, w)
    r = la.sym.dot(h, w, transpose_a=False)
    assert h.outputs[0].aval.stype == "csr" and y.outputs[0].aval.stype == "default"
    assert r.outputs[0].aval.stype == "default"
    t = la.sym.dot(x, la.sym.var("g", shape=(6, 3)), transpose_a=True)
    assert t.outputs[0].aval.stype == "row_sparse" and t.outputs[0].aval.shape == (5, 3)


def test_cached_op_equals_eager_and_keys_on_the_storage_type():
    sym, _ = _symbol()
    op = la.CachedOp(sym)
    eager = _eager()
    for _ in range(2):
        got = op(*_inputs())
        for a, b in zip(got, eager):
            assert a.stype == b.stype
            np.testing.assert_allclose(a.asnumpy(), b.asnumpy(), rtol=1e-6)
    assert op.num_compiles == 1
    # the same shapes with a dense x: another signature, dense fallbacks, the same values
    x, w, g = _inputs()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", la.StorageFallbackWarning)
        dense = op(x.tostype("default"), w, g)
    assert op.num_compiles == 2
    for a, b in zip(dense, eager):
        np.testing.assert_allclose(a.asnumpy(), b.asnumpy(), rtol=1e-6)


def test_memory_plan_says_sparse_outputs_are_allocated_at_run_time():
    sym, _ = _symbol()
    plan = la.CachedOp(sym).memory_plan(x=(6, 5), w=(5, 3), g=(6, 3))
    runtime = dict(plan.runtime_values)
    assert runtime["multiply0"] == "csr" and runtime["relu0"] == "csr"
    assert "row_sparse" in runtime.values()
    text = str(plan)
    assert "run time" in text and "allocated by its kernel" in text
    # only the dense outputs have planned buffers: dot (6x3) and sum (6)
    assert plan.peak_bytes == (6 * 3 + 6) * 4


def test_fallback_inside_a_compiled_graph_warns_once_and_computes():
    x = _inputs()[0]
    with la.deferred():
        y = la.exp(x)
    op = la.CachedOp(la.get_symbol(y, inputs={"x": x}))
    with pytest.warns(la.StorageFallbackWarning, match=r"exp: no kernel for storage types \(csr\)"):
        got = op(x)
    np.testing.assert_allclose(got.asnumpy(), np.exp(X), rtol=1e-6)
    with warnings.catch_warnings():
        warnings.simplefilter("error", la.StorageFallbackWarning)
        op(x)


def test_row_sparse_gradient_through_cached_op_equals_eager():
    x, w, _ = _inputs()
    with la.deferred():
        loss = (la.dot(la.relu(x), w) ** 2).sum()
    op = la.CachedOp(la.get_symbol(loss, inputs={"x": x, "w": w}))
    grads = []
    for run in ("eager", "cached"):  # no dense fallback anywhere, backward included
        w2 = la.array(W)
        w2.attach_grad(stype="row_sparse")
        with warnings.catch_warnings():
            warnings.simplefilter("error", la.StorageFallbackWarning)
            with la.autograd.record():
                out = (la.dot(la.relu(x), w2) ** 2).sum() if run == "eager" else op(x, w2)
            out.backward()
        assert w2.grad.stype == "row_sparse"
        grads.append(w2.grad.asnumpy())
    np.testing.assert_allclose(grads[1], grads[0], rtol=1e-5)
    want = np.maximum(X, 0).T @ (2 * np.maximum(X, 0) @ W)
    np.testing.assert_allclose(grads[0], want, rtol=1e-5)
