"""Shared helper for the pass tests: run a symbol node by node with the reference interpreter."""
from __future__ import annotations

import numpy as np
import pytest

from lazyarray.executor.interpret import interpret as evaluate
from lazyarray.graph.node import const_node
from lazyarray.graph.rewrite import rewrite


def _run(sym, **values):
    bound = rewrite(sym, lambda node, ins: const_node(np.asarray(values[node.name]), node.avals[0])
                    if node.op is None and node.kind == "var" else None)
    return [np.asarray(v) for v in evaluate(list(bound.outputs))]


@pytest.fixture
def run_symbol():
    """``run_symbol(sym, x=array, ...)`` -> list of NumPy outputs (reference interpreter)."""
    return _run


def _train_tiny_transformer(hybrid: bool, x, y):
    """One recorded step of a 2-layer, 16-unit transformer classifier (seeded): (net, logits, grads)."""
    import lazyarray as la
    from lazyarray import blocks as B

    la.random.seed(0)
    net = B.models.transformer_encoder(50, classes=3, units=16, num_layers=2, num_heads=2, max_length=16)
    net.initialize()
    net(x)
    if hybrid:
        net.hybridize()
    with la.autograd.record():
        out = net(x)
        loss = B.SoftmaxCrossEntropyLoss()(out, y).mean()
    loss.backward()
    return net, out.asnumpy(), {k: p.grad().asnumpy() for k, p in net.collect_params().items()}


@pytest.fixture
def train_tiny_transformer():
    """``train_tiny_transformer(hybrid, x, y)`` -> (net, logits, {param name: gradient})."""
    return _train_tiny_transformer
