"""guards.Trace._sources_of: the input dims a shape read depends on, learned once per trace.

The memoized walk must find exactly what re-running every shape rule of the whole graph per read
finds (the reference below, the implementation before the memo), and a model's reads must cost
about one walk of the graph per input dim, not one per read."""
import numpy as np
import pytest

import lazyarray as la
from lazyarray import blocks as nn
from lazyarray import guards
from lazyarray.dim import is_symbolic
from lazyarray.errors import LazyArrayError
from lazyarray.graph.traverse import topo_order
from lazyarray.ops import registry


def _reference_sources(trace, entry, k):
    """Every shape rule between the inputs and ``entry`` re-run per (input, dim): no memo."""
    order = topo_order([entry])
    found = []
    for n in [n for n in order if id(n) in trace.inputs]:
        shape = n.avals[0].shape
        for d in range(len(shape)):
            bumped = {id(n): (n.avals[0]._replace(shape=guards._bump(shape, d)),)}
            try:
                for node in order:
                    if id(node) in bumped or node.op is None:
                        continue
                    ins = [bumped.get(id(e.node), e.node.avals)[e.index] for e in node.inputs]
                    if any(id(e.node) in bumped for e in node.inputs):
                        bumped[id(node)] = registry.infer(node.op, ins, node.params)
            except LazyArrayError:
                found.append((trace.inputs[id(n)], d))
                continue
            a = bumped.get(id(entry.node), entry.node.avals)[entry.index]
            if a is None or a.shape is None or a.shape[k] != entry.aval.shape[k]:
                found.append((trace.inputs[id(n)], d))
    return found


class Reads(nn.HybridBlock):
    """Reads of every kind: the batch (as a number), a feature dim, a dim two ops down, a refused size."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Dense(4, in_units=3)

    def forward(self, x, y):
        h = self.fc(x)  # (n, 4)
        z = h.reshape(h.shape[0], 2, 2) * 2  # reads dim 0 of h (from x's dim 0)
        w = la.concatenate([x, y], axis=1)  # (n, 3 + m): dim 1 from both inputs' dim 1
        s = w.sum(axis=1) * w.shape[1]
        return z.sum(axis=(1, 2)) + s + len(y)


@pytest.fixture
def checked(monkeypatch):
    """Every _sources_of answer of the traces run in the test, checked against the reference."""
    calls = []
    memoized = guards.Trace._sources_of

    def both(self, entry, k, concrete=False):
        got = memoized(self, entry, k, concrete)
        want = [(i, d) for i, d in _reference_sources(self, entry, k)
                if not (concrete and is_symbolic(self.input_nodes[i].avals[0].shape[d]))]
        assert got == want, (entry.node.label(), k)
        assert memoized(self, entry, k) == _reference_sources(self, entry, k)  # (and every dim, unfiltered)
        calls.append(got)
        return got

    monkeypatch.setattr(guards.Trace, "_sources_of", both)
    return calls


def test_the_memoized_sources_equal_a_rerun_of_every_rule(checked):
    net = Reads()
    net.initialize()
    net.hybridize()
    x, y = la.array(np.ones((5, 3), np.float32)), la.array(np.ones((5, 2), np.float32))
    out = net(x, y).asnumpy()
    assert checked and any(checked)  # the reads found input dims (the batch and the concatenated dim)
    text = net.guards()
    assert "input 0 dim 1 == 3" in text and "input 1 dim 1 == 2" in text, text
    np.testing.assert_allclose(out, Reads.forward(net, x, y).asnumpy(), rtol=1e-5)


def test_the_zoo_transformer_reads_give_the_reference_sources(checked):
    net = nn.models.transformer_encoder(50, classes=2, units=16, num_layers=2, num_heads=2, max_length=16)
    net.initialize()
    x = la.array(np.random.default_rng(0).integers(0, 50, (3, 8)))
    want = net(x).asnumpy()
    net.hybridize()
    np.testing.assert_allclose(net(x).asnumpy(), want, rtol=1e-5, atol=1e-6)
    assert checked


class Chain(nn.HybridBlock):
    """``layers`` ops, each after a read of the batch: a read per layer."""

    def __init__(self, layers):
        super().__init__()
        self.layers = layers

    def forward(self, x):
        for _ in range(self.layers):
            x = la.tanh(x).reshape(x.shape[0], -1)
        return x


def _infers(layers, monkeypatch) -> int:
    count = [0]
    infer = registry.infer

    def counted(*a, **k):
        count[0] += 1
        return infer(*a, **k)

    monkeypatch.setattr(registry, "infer", counted)
    net = Chain(layers)
    net.hybridize()
    x = la.array(np.ones((4, 3), np.float32))
    net(x).asnumpy()
    monkeypatch.setattr(registry, "infer", infer)
    return count[0]


def test_reads_of_a_deeper_graph_cost_linearly_more_shape_rules(monkeypatch):
    small, large = _infers(20, monkeypatch), _infers(40, monkeypatch)
    # a re-run of the graph per read grows as layers**2 (4x here); the memo keeps it near 2x
    assert large < 2.6 * small, (small, large)
