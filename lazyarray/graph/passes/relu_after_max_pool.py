"""Inference rewrite: ``max_pool2d(relu(x)) -> relu(max_pool2d(x))``, so relu runs on the pooled
array, ``kh * kw`` times smaller (a 2 x 2 pool: a quarter of the values).

relu is non-decreasing, so the largest relu of a window is the relu of its largest value, and the
two forms compute equal values: a NaN in a window gives NaN both ways (``maximum`` propagates it,
relu keeps it), and the padding of a window that overlaps it (-inf) is never its maximum in either
form (a window always covers some input; shape inference refuses one that does not). Only a
relu that feeds nothing else is moved (else both would run). ``CachedOp`` runs it on inference
graphs, with ``fold_batch_norm``; graphs that train keep the order recorded.
"""
from __future__ import annotations

from ...ops import registry
from ..build import record_node
from ..node import Node
from ..rewrite import has_op, rewrite, use_counts
from ..symbol import Symbol


def relu_after_max_pool(sym: Symbol) -> Symbol:
    """``sym`` with each ``max_pool2d`` of a relu that nothing else reads swapped with that relu.

    >>> import lazyarray as la
    >>> x = la.sym.var("x", shape=(2, 3, 8, 8))
    >>> y = la.sym.nn.max_pool2d(la.sym.relu(x))
    >>> [n.op.name for n in relu_after_max_pool(y).topo() if n.op is not None]
    ['max_pool2d', 'relu']
    """
    if not has_op(sym, "max_pool2d"):
        return sym
    uses = use_counts(sym)
    pool_op, relu_op = registry.get("max_pool2d"), registry.get("relu")

    def visit(node: Node, ins):
        if node.op is None or node.op.name != "max_pool2d":
            return None
        r, old = ins[0].node, node.inputs[0].node
        if old.op is None or old.op.name != "relu" or uses.get(id(old), 0) != 1 \
                or old.avals[0].dtype != old.inputs[0].aval.dtype:  # (relu keeps the dtype: pooled as it is)
            return None
        pooled = record_node(pool_op, [r.inputs[0]], dict(node.params), source=node.source)
        return (record_node(relu_op, [pooled], {}, source=old.source),)

    return rewrite(sym, visit, share=True)
