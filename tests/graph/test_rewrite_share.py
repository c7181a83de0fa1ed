"""Passes that change nothing copy nothing (``rewrite(share=True)``), and the one-pass JSON writer
gives the text ``json.dumps`` gives of the graph's dict."""
from __future__ import annotations

import gc
import json

import numpy as np

import lazyarray as la
from lazyarray.executor import cached_op
from lazyarray.graph import serialize
from lazyarray.graph.passes.algebra import simplify
from lazyarray.graph.passes.constant_fold import constant_fold
from lazyarray.graph.passes.cse import cse
from lazyarray.graph.passes.fold_batch_norm import fold_batch_norm
from lazyarray.graph.passes.relu_after_max_pool import relu_after_max_pool
from lazyarray.graph.rewrite import gc_paused, rewrite


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


def test_the_json_writer_escapes_names_and_encodes_each_op_once_as_json_dumps_does():
    x = la.sym.var("x\u00e9\"q", shape=(2,))
    y = la.sym.exp(x) + la.sym.exp(x * 2.0)
    sym = la.Symbol([y.outputs[0], la.sym.sin(x).outputs[0]])
    assert serialize.to_json(sym) == json.dumps(serialize.to_dict(sym), allow_nan=False)
    assert '"x\\u00e9\\"q"' in sym.to_json()
    assert la.Symbol.from_json(sym.to_json()).list_inputs() == [x.list_inputs()[0]]


def test_gc_paused_turns_the_collector_back_on_only_when_it_was_on():
    assert gc.isenabled()
    with gc_paused():
        assert not gc.isenabled()
        with gc_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()  # (the inner pause found it off: it leaves it off)
    assert gc.isenabled()
    gc.disable()
    try:
        with gc_paused():
            pass
        assert not gc.isenabled()  # a user's gc.disable() stands
    finally:
        gc.enable()


def test_a_compile_runs_with_the_collector_paused_and_leaves_it_on():
    seen = []
    real = cse

    def spy(sym):
        seen.append(gc.isenabled())
        return real(sym)

    cached_op.cse, saved = spy, cached_op.cse
    try:
        v = np.ones((4, 4), np.float32)
        la.CachedOp(_chain())(la.array(v))
    finally:
        cached_op.cse = saved
    assert seen and not any(seen)
    assert gc.isenabled()


def test_constant_fold_with_nothing_to_fold_returns_the_symbol_itself():
    x = la.sym.var("x", shape=(3,))
    sym = la.sym.exp(x) * 2.0  # a constant operand, but also a variable one: nothing folds
    assert constant_fold(sym) is sym


def test_copy_node_keeps_every_field_of_the_syntax_and_takes_a_new_serial():
    from lazyarray.graph.node import Node
    from lazyarray.graph.rewrite import copy_node
    x = la.sym.var("x", shape=(2, 3))
    node = la.sym.sum(la.sym.exp(x), axis=1).outputs[0].node
    node.shown = ["bookkeeping"]  # (not syntax: a copy starts without it)
    other = (la.sym.var("z", shape=(2, 3)).outputs[0],)
    c = copy_node(node, list(other))
    assert type(c) is Node and c.inputs == other and c.serial > node.serial and c.shown is None and c.chain is None
    for f in ("op", "params", "name", "kind", "avals", "source", "value", "version", "sbp", "block"):
        assert getattr(c, f) == getattr(node, f), f
    assert c.params is not node.params  # (its own dict)
    avals = (la.Aval((2,), node.avals[0].dtype, la.cpu()),)
    assert copy_node(node, list(other), avals).avals == avals
    node.shown = None
