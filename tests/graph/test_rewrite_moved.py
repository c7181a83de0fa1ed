"""``rewrite`` keeps a table of the replaced nodes only (a node kept as it is reads as itself): the
graphs it builds are the ones the table of every node built. A reference copy of that earlier loop
runs every pass of a compile here, on real models' graphs, and their compiled programs (the step
list, kernel names, the memory plan) and values must come out the same; ``use_counts`` of a
``Symbol`` is counted once and equals a fresh count."""
from __future__ import annotations

import sys

import numpy as np
import pytest

import lazyarray as la
from lazyarray.graph import rewrite as rewrite_module
from lazyarray.graph.node import Entry, Node, copied_node
from lazyarray.graph.rewrite import count_uses, rewrite, use_counts
from lazyarray.graph.traverse import topo_order


def _reference_rewrite(sym, visit, stop=None, share=False):
    """The loop as it was: every node's replacement in the table, looked up per input."""
    env = {}
    order = sym.topo() if stop is None else topo_order(list(sym.outputs), stop=stop)
    kept = 0
    for node in order:
        ins = []
        same = True
        if stop is None or not stop(node):
            for e in node.inputs:
                r = env[id(e.node)]
                if r is e.node:
                    ins.append(e)
                else:
                    ins.append(r[e.index] if r.__class__ is tuple else Entry(r, e.index))
                    same = False
        new = visit(node, ins)
        if new is None:
            if share and same:
                env[id(node)] = node
                kept += 1
                continue
            new = copied_node(node, tuple(ins), node.avals)
        env[id(node)] = new if isinstance(new, Node) else tuple(new)
    if kept == len(order):
        return sym
    outs = []
    for e in sym.outputs:
        r = env[id(e.node)]
        outs.append(e if r is e.node else r[e.index] if r.__class__ is tuple else Entry(r, e.index))
    return type(sym)(outs)


def _with_reference(monkeypatch):
    """Every module that imported ``rewrite`` runs the reference loop instead."""
    for name, mod in list(sys.modules.items()):
        if name.startswith("lazyarray") and getattr(mod, "rewrite", None) is rewrite:
            monkeypatch.setattr(mod, "rewrite", _reference_rewrite)


def _shape(sym):
    names = sym.names()
    return [(names[id(n)], n.op.name if n.op is not None else n.kind, n.avals,
             [(names[id(e.node)], e.index) for e in n.inputs]) for n in sym.topo()]


def test_a_pass_that_replaces_a_few_nodes_builds_the_graph_the_full_table_built(monkeypatch):
    x = la.sym.var("x", shape=(3,), dtype="float32")
    a = la.sym.exp(x)
    sym = la.sym.sin(a) * 1.0 + la.sym.tanh(a) + la.sym.sin(a) * 1.0

    def visit(node, ins):  # a node replaced by a tuple, one by itself, the rest kept
        if node.op is not None and node.op.name == "multiply":
            return (ins[0],)
        if node.op is not None and node.op.name == "tanh":
            return node
        return None

    for share in (False, True):
        got, want = rewrite(sym, visit, share=share), _reference_rewrite(sym, visit, share=share)
        assert _shape(got) == _shape(want)
    assert rewrite(sym, lambda node, ins: None, share=True) is sym
    assert rewrite(sym, lambda node, ins: node, share=True) is not sym  # (a node returned: a new symbol)


def test_a_stopped_node_is_visited_without_its_inputs():
    x = la.sym.var("x", shape=(2,), dtype="float32")
    e = la.sym.exp(x)
    y = la.sym.tanh(e)
    cut = la.sym.var("cut", shape=(2,), dtype="float32")
    seen = []

    def visit(node, ins):
        seen.append((node.op.name if node.op is not None else node.name, len(ins)))
        return cut.outputs[0].node if node is e.outputs[0].node else None

    out = rewrite(y, visit, stop=lambda n: n is e.outputs[0].node, share=True)
    assert seen == [("exp", 0), ("tanh", 1)]
    assert out.list_inputs() == ["cut"]


def test_a_symbols_use_counts_are_counted_once_and_equal_a_fresh_count():
    x = la.sym.var("x", shape=(2,), dtype="float32")
    a = la.sym.exp(x)
    sym = a + a * a
    uses = use_counts(sym)
    assert uses is use_counts(sym)  # (kept on the symbol)
    assert uses == count_uses(sym.topo(), sym.outputs)
    assert uses[id(a.outputs[0].node)] == 3
    assert uses[id(sym.outputs[0].node)] == 1  # (the caller reads the output)
    assert rewrite_module.use_counts(sym) is uses
    with pytest.raises(TypeError):  # (read-only: a pass that wrote to the kept counts would corrupt every later pass's)
        uses[id(a.outputs[0].node)] = 0


_MODELS = ["resnet_mini", "hf_bert", "lstm_bidir", "convnext_mini"]


@pytest.mark.parametrize("name", _MODELS)
def test_real_models_compile_to_the_same_programs_as_with_the_reference_loop(name, monkeypatch):
    pytest.importorskip("onnx")
    from benchmarks import real_models as bench
    m = next(m for m in bench.manifest() if m["name"] == name)
    batch, ins, _ = bench.feeds(m)[0]
    path = str(bench.FIXTURES / (name + ".onnx"))

    def compiled():
        net = la.blocks.SymbolBlock.imports(path, m["inputs"])
        net.hybridize()
        xs = [la.array(ins[k]) for k in m["inputs"]]
        ys = [y.asnumpy() for y in bench._listed(net(*xs))]
        prog = next(iter(net.cached_op._cache.values())).program
        parts = [p for p in (getattr(prog, "head", None), getattr(prog, "body", None), prog) if hasattr(p, "plan")]
        return net.explain(*xs), [(str(p.plan), repr(p.plan.values), repr(p.plan.steps)) for p in parts], ys

    text, plans, ys = compiled()
    with monkeypatch.context() as mp:
        _with_reference(mp)
        want_text, want_plans, want_ys = compiled()
    assert str(text) == str(want_text)
    assert plans == want_plans
    for y, w in zip(ys, want_ys):
        np.testing.assert_array_equal(y, w)
