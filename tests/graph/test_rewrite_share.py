"""Passes that change nothing copy nothing (``rewrite(share=True)``), and the one-pass JSON writer
gives the text ``json.dumps`` gives of the graph's dict."""
from __future__ import annotations

import json

import numpy as np

import lazyarray as la
from lazyarray.graph import serialize
from lazyarray.graph.passes.algebra import simplify
from lazyarray.graph.passes.constant_fold import constant_fold
from lazyarray.graph.passes.cse import cse
from lazyarray.graph.passes.fold_batch_norm import fold_batch_norm
from lazyarray.graph.passes.relu_after_max_pool import relu_after_max_pool
from lazyarray.graph.rewrite import rewrite


def _chain():
    x = la.sym.var("x", shape=(4, 4), dtype="float32")
    y = x
    for _ in range(5):
        y = la.sym.tanh(y * x) + x  # (no constants: nothing for cse to merge)
    return y


def test_a_pass_with_nothing_to_change_returns_the_symbol_itself():
    sym = _chain()
    for p in (cse, simplify, constant_fold, fold_batch_norm, relu_after_max_pool):
        assert p(sym) is sym
    assert rewrite(sym, lambda node, ins: None, share=True) is sym


def test_sharing_copies_only_what_reads_a_changed_node():
    x = la.sym.var("x", shape=(3,), dtype="float32")
    a = la.sym.exp(x)
    sym = la.sym.sin(a) + la.sym.tanh(a) * 1.0  # ``* 1.0`` simplifies away: only ``add`` changes
    out = simplify(sym)
    old = {n.op.name: n for n in sym.topo() if n.op is not None}
    new = {n.op.name: n for n in out.topo() if n.op is not None}
    assert "multiply" not in new
    assert new["exp"] is old["exp"] and new["sin"] is old["sin"] and new["tanh"] is old["tanh"]
    assert new["add"] is not old["add"]
    v = np.linspace(-1, 1, 3).astype("float32")
    np.testing.assert_array_equal(la.CachedOp(out)(la.array(v)).asnumpy(), la.CachedOp(sym)(la.array(v)).asnumpy())


def test_without_share_every_node_is_copied():
    sym = _chain()
    out = rewrite(sym, lambda node, ins: None)
    assert out is not sym and not ({id(n) for n in out.topo()} & {id(n) for n in sym.topo()})


def test_one_pass_json_equals_json_dumps_of_the_dict():
    x = la.sym.var("x", shape=(la.Dim("n"), 3))
    w = la.sym.var("w", shape=(4, 3))
    y = la.sym.relu(la.sym.nn.dense(x, w)) * 2.0
    for sym in (_chain(), y):
        text = serialize.to_json(sym)
        assert text == json.dumps(serialize.to_dict(sym), allow_nan=False)
        assert serialize.to_json(sym, indent=1) == json.dumps(serialize.to_dict(sym), indent=1)
        assert la.Symbol.from_json(text).to_json() == text
