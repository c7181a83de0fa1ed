"""Inference rewrite: ``relu(max_pool2d(x))`` -> ``nn.max_pool2d_relu(x)``, one step instead of two.

SqueezeNet's stem records ``conv -> relu -> max_pool2d``; ``relu_after_max_pool`` moves the relu
after the pool, and at batch 1 the relu is then a step of its own over a few hundred values (issue
#35). Here it becomes the pool's epilogue: ``ops/pool_relu.py`` computes ``maximum(y, 0)`` of each
pooled value in its dtype, as the recorded relu does, so the values are equal bit for bit. Only a
pool that nothing but the relu reads (not a graph output) is taken, and only where the relu keeps
the pool's dtype. ``CachedOp`` runs it on inference graphs after ``relu_after_max_pool``; graphs
that train keep the recorded ops (``max_pool2d_relu`` has no gradient). ``la.config.pool_relu =
False`` turns it off.
"""
from __future__ import annotations

from ...ops import registry
from ...tuning_table import current
from ..build import record_node
from ..node import Node
from ..rewrite import has_op, rewrite, use_counts
from ..symbol import Symbol


def pool_relu(sym: Symbol) -> Symbol:
    """``sym`` with each relu of a max pool that nothing else reads made one ``max_pool2d_relu`` node.

    >>> import lazyarray as la
    >>> x = la.sym.var("x", shape=(1, 3, 8, 8))
    >>> y = la.sym.relu(la.sym.nn.max_pool2d(x, kernel=(3, 3), stride=(2, 2)))
    >>> [n.op.name for n in pool_relu(y).topo() if n.op is not None]
    ['max_pool2d_relu']
    """
    if not current().pool_relu or not has_op(sym, "max_pool2d"):
        return sym
    uses = use_counts(sym)
    fused_op = registry.get("max_pool2d_relu")

    def visit(node: Node, ins):
        if node.op is None or node.op.name != "relu":
            return None
        pool, new = node.inputs[0].node, ins[0].node
        if pool.op is None or pool.op.name != "max_pool2d" or uses.get(id(pool), 0) != 1 \
                or node.avals[0].dtype != pool.avals[0].dtype:
            return None
        return (record_node(fused_op, list(new.inputs), dict(pool.params), source=pool.source),)

    return rewrite(sym, visit, share=True)
