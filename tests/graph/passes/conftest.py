"""Shared helpers for the pass tests: run a symbol node by node with the reference interpreter; run a
fixture model with a pass switched on and off."""
from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np
import pytest

import lazyarray as la
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


def _training_graph_ops(net, x) -> list:
    """Hybridize ``net``, record one forward and backward on ``x``; the op names of each compiled
    program that trains (has a backward), one list per program."""
    net.hybridize()
    with la.autograd.record():
        loss = net(x).sum()
    loss.backward()
    op = next(iter(net._by_sig.values())).run
    return [_op_names(c.sym) for c in op._cache.values() if c.backward is not None]


@pytest.fixture
def training_graph_ops():
    """``training_graph_ops(net, x)`` -> [op names of each compiled training program]: for the check
    that a pass leaves graphs that train as recorded."""
    return _training_graph_ops


FIXTURES = os.path.join(os.path.dirname(__file__), "..", "..", "data", "onnx_dynamic")


@dataclass
class OnOff:
    """A fixture model run case by case by two programs, the second with a pass's tuning switch off."""
    cases: list  # (case name, outputs with the pass, without it, onnxruntime's): NumPy arrays
    on_ops: list  # op names of the program compiled for the first case's shapes, with the pass
    off_ops: list  # the same without it
    program: object  # the la.CachedOp with the pass
    first: dict  # the first case's inputs, by name


def _listed(y):
    return list(y) if isinstance(y, (list, tuple)) else [y]


def _op_names(sym):
    return [n.op.name for n in sym.topo() if n.op is not None]


def _on_off(name: str, switch: str, runs: int = 1) -> OnOff:
    ort = pytest.importorskip("onnxruntime")
    path = os.path.join(FIXTURES, name + ".onnx")
    data = np.load(os.path.join(FIXTURES, name + ".npz"))
    sym = la.onnx.load(path)
    ops = {True: la.CachedOp(sym), False: la.CachedOp(sym)}
    sess = ort.InferenceSession(path)
    names = sorted({k.split("/")[0] for k in data.files})
    cases = []
    for case in names:
        ins = {k.split("/")[-1]: data[k] for k in data.files if k.startswith(case + "/in/")}
        for _ in range(runs):  # (a compiled program's first run, and later ones)
            with la.tuning(**{switch: False}):
                off = _listed(ops[False](**{k: la.array(v) for k, v in ins.items()}))
            on = _listed(ops[True](**{k: la.array(v) for k, v in ins.items()}))
        refs = sess.run(None, ins)
        assert len(on) == len(off) == len(refs)
        cases.append((case, [a.asnumpy() for a in on], [b.asnumpy() for b in off], refs))
    first = {k.split("/")[-1]: data[k] for k in data.files if k.startswith(names[0] + "/in/")}
    shape = {k: v.shape for k, v in first.items()}
    with la.tuning(**{switch: False}):
        off_ops = _op_names(ops[False].compiled(**shape))
    return OnOff(cases, _op_names(ops[True].compiled(**shape)), off_ops, ops[True], first)


@pytest.fixture
def pass_on_off():
    """``pass_on_off(fixture name, tuning switch, runs=1)`` -> ``OnOff``: the torch-exported fixture
    (tests/data/onnx_dynamic) at each of its sizes with the pass and without, and onnxruntime's values."""
    return _on_off
