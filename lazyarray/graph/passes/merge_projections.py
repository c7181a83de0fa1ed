"""Inference rewrite: dense layers that read the same input, made one ``nn.dense`` split by views.

A transformer imported from ONNX (Hugging Face's BERT, ViT, BART: separate ``query``, ``key``,
``value`` Linear layers) computes three projections of one hidden state: three ``dense(x, w_i, b_i)``
steps (``matmul_bias.py`` made them), each a BLAS call plus the bias added, each small at batch 1
(issue #35: most of such a call is the fixed cost per step). When

* two or more ``nn.dense`` nodes read the same entry ``x`` as their input, with no params;
* each weight is 2-D ``(N_i, K)`` of x's float dtype (K = x's last dim) and a weight: a graph
  variable (a parameter), a constant, or a ``transpose`` of one (``matmul_bias``'s ``w.T``), so that
  the concatenated weight is computed once (``executor/param_cache.py``) or is a literal;
* all have a bias (a 1-D variable or constant of ``N_i``) or none do, and all outputs have x's dtype;

the group becomes one ``dense(x, concatenate(w_i), concatenate(b_i))`` of ``sum(N_i)`` units whose
output each old node reads as a ``getitem`` of its units along the last axis (a view: the executor
makes it once, as ``causal_decoder``'s merged in-projection's three views). Consumers that need a
contiguous operand copy it as they would any view.

**Values.** Each output is the same dot products of the same rows plus the same bias, in another
BLAS call (a wider product): equal to the separate layers' within the product's rounding (a BLAS
may block a wider product differently; on OpenBLAS the tested shapes agree bit for bit).

``CachedOp`` runs this on inference graphs after ``matmul_bias``; ``la.config.merge_projections =
False`` turns it off.
"""
from __future__ import annotations

import numpy as np

from ...aval import Aval
from ...ops import registry
from ...tuning_table import current
from ..build import record_node
from ..node import Entry, Node, const_node
from ..rewrite import has_op, rewrite
from ..symbol import Symbol


def _leaf(e: Entry) -> bool:
    """``e`` is a weight-like value: a variable, an unversioned constant or a transpose of one."""
    n = e.node
    if n.op is None:
        return n.kind == "var" or (n.kind == "const" and n.version is None and n.value is not None)
    return n.op.name == "transpose" and len(n.inputs) == 1 and n.inputs[0].node.op is None and _leaf(n.inputs[0])


def _member(node: Node):
    """The key ``(x's node id, index, bias or not)`` when ``node`` is a dense layer this pass may merge."""
    if node.op is None or node.op.name != "dense" or node.params or len(node.inputs) not in (2, 3):
        return None
    x, w = node.inputs[0], node.inputs[1]
    xa, wa, out = x.aval, w.aval, node.avals[0]
    dtype = xa.dtype
    if dtype is None or dtype.kind != "f" or xa.shape is None or not xa.shape or wa.shape is None \
            or len(wa.shape) != 2 or wa.shape[1] != xa.shape[-1] or not isinstance(wa.shape[0], int) \
            or wa.dtype != dtype or out.dtype != dtype or wa.stype != "default" or xa.stype != "default" \
            or not _leaf(w):
        return None
    if len(node.inputs) == 3:
        b = node.inputs[2]
        if b.aval.shape != (wa.shape[0],) or b.aval.dtype != dtype or b.aval.stype != "default" or not _leaf(b):
            return None
    return id(x.node), x.index, len(node.inputs)


def _groups(sym: Symbol) -> dict[int, list[Node]]:
    """``id(dense node) -> its group`` (the dense nodes sharing its key, graph order), groups of 2 or more."""
    by_key: dict = {}
    for node in sym.topo():
        key = _member(node)
        if key is not None:
            by_key.setdefault(key, []).append(node)
    return {id(n): g for g in by_key.values() if len(g) > 1 for n in g}


def _concatenated(entries: list[Entry], source) -> Entry:
    """The entries joined along axis 0: a literal where every one is a constant, else a node."""
    nodes = [e.node for e in entries]
    if all(n.op is None and n.kind == "const" for n in nodes):
        value = np.concatenate([np.asarray(n.value) for n in nodes], axis=0)
        a = entries[0].aval
        return Entry(const_node(value, Aval(value.shape, a.dtype, a.device)))
    op = registry.get("concatenate")
    return record_node(op, list(entries), op.make_params({"axis": 0}), source=source)


def _merged(group: list[Node], x: Entry) -> Entry:
    """One dense of the group's weights and biases (the old graph's leaf entries) on ``x``."""
    first = group[0]
    ins = [x, _concatenated([n.inputs[1] for n in group], first.source)]
    if len(first.inputs) == 3:
        ins.append(_concatenated([n.inputs[2] for n in group], first.source))
    return record_node(registry.get("dense"), ins, {}, source=first.source)


def merge_projections(sym: Symbol) -> Symbol:
    """``sym`` with dense layers reading the same input merged into one dense whose output each
    reads as a view of its units (the conditions in the module's text).

    >>> import lazyarray as la
    >>> x = la.sym.var("x", shape=(2, 5, 3))
    >>> w = [la.sym.var(f"w{i}", shape=(4, 3)) for i in range(3)]
    >>> y = la.sym.concatenate([la.sym.dense(x, wi) for wi in w], axis=-1)
    >>> [n.op.name for n in merge_projections(y).topo() if n.op is not None]
    ['concatenate', 'dense', 'getitem', 'getitem', 'getitem', 'concatenate']
    """
    if not current().merge_projections or not has_op(sym, "dense"):
        return sym
    groups = _groups(sym)
    if not groups:
        return sym
    made: dict[int, Entry] = {}  # id(group's first node) -> the merged dense's output
    getitem = registry.get("getitem")

    def visit(node: Node, ins):
        group = groups.get(id(node))
        if group is None:
            return None
        key = id(group[0])
        if key not in made:
            made[key] = _merged(group, ins[0])
        elif made[key].node.inputs[0] != ins[0]:  # (the input rewritten differently: keep the layer)
            return None
        lo = 0
        for n in group:
            if n is node:
                break
            lo += n.inputs[1].aval.shape[0]
        hi = lo + node.inputs[1].aval.shape[0]
        nd = len(node.avals[0].shape)
        key_ = (slice(None),) * (nd - 1) + (slice(lo, hi),)
        return (record_node(getitem, [made[key]], {"key": key_}, source=node.source),)

    return rewrite(sym, visit, share=True)
