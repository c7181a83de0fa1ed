"""``topo_order`` gives the order its definition says (leaves in the order a recursive depth-first
walk from the outputs meets them, then the ops in creation order), whatever walk computes it: checked
against that walk written out plainly, on random graphs (with and without ``stop``) and on every walk
an ONNX import and a compile of real-model fixtures make, whose outputs stay torch's."""
from __future__ import annotations

import importlib
import random
from pathlib import Path

import numpy as np
import pytest

import lazyarray as la
from lazyarray.executor import param_cache
from lazyarray.graph import traverse
from lazyarray.graph.node import Entry

FIXTURES = Path(__file__).resolve().parents[1] / "data" / "onnx_dynamic"


def _reference(outputs, stop=None) -> list:
    """The definition: a recursive walk's meetings for the leaves, creation order for the ops."""
    met: list = []
    seen: set = set()

    def walk(node):
        seen.add(id(node))
        met.append(node)
        if stop is not None and stop(node):
            return
        for e in node.inputs:
            if id(e.node) not in seen:
                walk(e.node)

    for e in outputs:
        if id(e.node) not in seen:
            walk(e.node)
    return [n for n in met if n.op is None] + sorted((n for n in met if n.op is not None), key=lambda n: n.serial)


def _random_graph(rng: random.Random, n: int) -> list[Entry]:
    """Vars, constants, unary and binary ops, a two-output split, read at random from what exists."""
    have = [la.sym.var(f"x{k}", shape=(4,), dtype="float32") for k in range(3)]
    for _ in range(n):
        pick = rng.random()
        a, b = rng.choice(have), rng.choice(have)
        if pick < 0.3:
            have.append(la.sym.exp(a))
        elif pick < 0.5:
            have.append(a * float(rng.randint(2, 5)))  # (a constant leaf, met late in the walk)
        elif pick < 0.6:
            parts = la.sym.split(la.sym.concatenate([a, b], axis=0), indices_or_sections=2, axis=0)
            have.extend([parts[0], parts[1]])
        else:
            have.append(a + b)
    outs = rng.sample(have, min(4, len(have)))
    return [e for s in outs for e in s.outputs]


@pytest.mark.parametrize("seed", range(8))
def test_the_order_is_the_definitions_on_random_graphs(seed):
    rng = random.Random(seed)
    outs = _random_graph(rng, 40)
    got = traverse.topo_order(outs)
    assert [id(n) for n in got] == [id(n) for n in _reference(outs)]
    assert len({id(n) for n in got}) == len(got)
    cut = {id(n) for n in got if n.op is not None and n.serial % 3 == 0}
    stop = lambda n: id(n) in cut  # noqa: E731
    assert [id(n) for n in traverse.topo_order(outs, stop)] == [id(n) for n in _reference(outs, stop)]


def test_inputs_come_before_their_readers_and_outputs_may_repeat():
    x = la.sym.var("x", shape=(2,), dtype="float32")
    y = la.sym.exp(x) + x
    outs = list(y.outputs) * 2 + list(x.outputs)
    got = traverse.topo_order(outs)
    pos = {id(n): k for k, n in enumerate(got)}
    assert all(pos[id(e.node)] < pos[id(n)] for n in got for e in n.inputs)
    assert [n.op.name if n.op else n.name for n in got] == ["x", "exp", "add"]
    assert traverse.topo_order([]) == []


@pytest.mark.parametrize("name", ["hf_gpt2", "convnext_mini"])
def test_imports_and_compiles_of_real_models_walk_in_the_definitions_order(name, monkeypatch):
    pytest.importorskip("onnx")
    walks = []

    def checked(outputs, stop=None):
        got = traverse.topo_order(outputs, stop)
        walks.append([id(n) for n in got] == [id(n) for n in _reference(outputs, stop)])
        return got

    for mod in (importlib.import_module("lazyarray.graph.symbol"), importlib.import_module("lazyarray.graph.rewrite"),
                param_cache):
        monkeypatch.setattr(mod, "topo_order", checked)
    bench = pytest.importorskip("benchmarks.real_models")
    m = next(m for m in bench.manifest() if m["name"] == name)
    _, ins, want = bench.feeds(m)[0]
    net = la.blocks.SymbolBlock.imports(str(FIXTURES / f"{name}.onnx"), m["inputs"])
    net.hybridize()
    outs = net(*[la.array(ins[k]) for k in m["inputs"]])
    assert len(walks) >= 5 and all(walks)
    for ours, theirs in zip(outs if isinstance(outs, (list, tuple)) else [outs], want):
        np.testing.assert_allclose(ours.asnumpy(), theirs, **bench.TOL)
