from pathlib import Path

import numpy as np

import lazyarray as la
from lazyarray.graph.passes.cse import _key, cse
from lazyarray.graph.rewrite import copy_node, rewrite, unchanged
from lazyarray.graph.same_graph import graph_key


def test_cse_merges_equal_subexpressions(run_symbol):
    x = la.sym.var("x", shape=(4,))
    y = (la.sym.exp(x) * 2) + (la.sym.exp(x) * 2) + la.sym.sum(la.sym.exp(x), axis=0)
    out = cse(y).check()
    ops = [n.op.name for n in out.topo() if n.op]
    assert ops.count("exp") == 1 and ops.count("multiply") == 1
    v = np.linspace(-1, 1, 4).astype("float32")
    np.testing.assert_allclose(run_symbol(out, x=v)[0], run_symbol(y, x=v)[0], rtol=1e-6)


def test_cse_respects_params_and_scalars(run_symbol):
    x = la.sym.var("x", shape=(2, 3))
    y = la.sym.sum(x, axis=0) * 2 + la.sym.sum(x, axis=0) * 3 + la.sym.sum(x, axis=None)
    out = cse(y).check()
    ops = [n.op.name for n in out.topo() if n.op]
    assert ops.count("sum") == 2 and ops.count("multiply") == 2  # axis=0 merges; *2 and *3 differ
    v = np.arange(6, dtype="float32").reshape(2, 3)
    np.testing.assert_allclose(run_symbol(out, x=v)[0], run_symbol(y, x=v)[0])


def test_cse_never_merges_random_ops():
    x = la.sym.var("x", shape=(8,))
    y = la.sym.nn.dropout_mask(x, p=0.5) + la.sym.nn.dropout_mask(x, p=0.5)
    out = cse(y).check()
    assert [n.op.name for n in out.topo() if n.op].count("dropout_mask") == 2


def test_conds_whose_branches_differ_are_not_merged():
    # (their params print alike: the bodies are compared by structure, not by their text)
    x = la.array(np.arange(3, dtype="float32"))

    def three():
        return x * 3.0

    def seven():
        return x * 7.0

    with la.deferred():
        a = la.cond(la.sum(x) > 0, lambda: x * 2.0, lambda: x * 5.0)
        b = la.cond(la.sum(x) > 0, three, seven)
        c = la.cond(la.sum(x) > 0, three, seven)
        y = a + b + c
    sym = la.get_symbol(y, inputs={"x": x})
    merged = cse(sym).check()
    assert [n.op.name for n in merged.topo() if n.op].count("cond") == 2  # b and c are one, a stays
    np.testing.assert_array_equal(la.CachedOp(sym)(x).asnumpy(), x.asnumpy() * 8)


def test_large_array_params_that_differ_where_repr_elides_them_are_not_merged():
    from lazyarray.graph.same_graph import params_key
    u, v = np.zeros(5000, np.float32), np.zeros(5000, np.float32)
    v[2500] = 1
    assert repr(u) == repr(v)
    assert params_key({"w": u}) != params_key({"w": v})
    assert params_key({"w": u, "k": 1}) == params_key({"k": 1, "w": u.copy()})
    assert params_key({"k": 1}) != params_key({"k": 1.0}) != params_key({"k": True})


def _reference_cse(sym):
    """cse as it was written first: every node's full key made, one dict (the result ``cse`` must equal)."""
    seen = {}

    def visit(node, ins):
        key = _key(node, ins)
        if key is None:
            return None
        prev = seen.get(key)
        if prev is not None:
            return prev
        if unchanged(node, ins):
            seen[key] = node
            return None
        new = seen[key] = copy_node(node, ins)
        return new

    return rewrite(sym, visit, share=True)


def test_cse_equals_the_full_key_reference_where_nodes_merge_and_differ():
    x = la.sym.var("x", shape=(3, 4))
    a = la.sym.exp(x) + la.sym.exp(x)  # merged (unchanged inputs)
    b = la.sym.sum(a, axis=0) * la.sym.sum(a, axis=0) + la.sym.sum(la.sym.reshape(la.sym.sum(a, axis=1), shape=(3, 1)), axis=0)
    c = la.sym.tanh(x * 2.0) - la.sym.tanh(x * 2.0) + la.sym.tanh(x * 3.0)  # merged after a merge upstream
    d = la.sym.nn.dropout_mask(x, p=0.5) + la.sym.nn.dropout_mask(x, p=0.5)
    sym = la.Symbol([b.outputs[0], c.outputs[0], d.outputs[0]])
    got, want = cse(sym), _reference_cse(sym)
    assert graph_key(got) == graph_key(want)
    ops = [n.op.name for n in got.topo() if n.op]
    assert ops.count("exp") == 1 and ops.count("tanh") == 2 and ops.count("dropout_mask") == 2
    assert len(got.topo()) < len(sym.topo())


def test_cse_of_the_real_models_equals_the_full_key_reference():
    folder = Path(__file__).resolve().parents[2] / "data" / "onnx_dynamic"
    for name in ("hf_bert", "hf_vit", "resnet_mini", "lstm_bidir", "causal_decoder"):
        sym = la.onnx.load(str(folder / f"{name}.onnx"))
        got, want = cse(sym), _reference_cse(sym)
        assert graph_key(got) == graph_key(want), name
        assert len(got.topo()) == len(want.topo()) <= len(sym.topo()), name
