"""Inference rewrite: ``max_pool2d(batch_norm(x)) -> nn.batch_norm_max_pool2d(x)`` (and with a relu
before the batch norm, ``relu=True``), which pools first when the call's batch-norm scales are all
``>= 0``: the norm (and relu) then run on the pooled array, ``kh * kw`` times smaller, with equal
values (``ops/pool_norm.py`` says why, and falls back to the recorded order otherwise).

Only a batch norm over channel axis 1 that feeds nothing but the pool is taken (else both would
run), likewise a relu that feeds nothing but the batch norm, and only when x and the statistics
share one float dtype. ``CachedOp`` runs it on inference graphs after ``fold_batch_norm`` (a norm
right after a convolution folds into it instead) and before ``relu_after_max_pool``.
"""
from __future__ import annotations

from ...ops import registry
from ..build import record_node
from ..node import Node
from ..rewrite import has_op, rewrite, use_counts
from ..symbol import Symbol


def pool_before_batch_norm(sym: Symbol) -> Symbol:
    """``sym`` with each ``max_pool2d`` of a batch norm nothing else reads made one
    ``batch_norm_max_pool2d`` node.

    >>> import lazyarray as la
    >>> x = la.sym.var("x", shape=(2, 3, 8, 8))
    >>> stats = [la.sym.var(n, shape=(3,)) for n in ("gamma", "beta", "mean", "var")]
    >>> y = la.sym.nn.max_pool2d(la.sym.nn.batch_norm(la.sym.relu(x), *stats))
    >>> [(n.op.name, n.params.get("relu")) for n in pool_before_batch_norm(y).topo() if n.op is not None]
    [('batch_norm_max_pool2d', True)]
    """
    if not has_op(sym, "max_pool2d"):
        return sym
    uses = use_counts(sym)
    fused_op = registry.get("batch_norm_max_pool2d")

    def visit(node: Node, ins):
        if node.op is None or node.op.name != "max_pool2d":
            return None
        bn, bn_new = node.inputs[0].node, ins[0].node
        if bn.op is None or bn.op.name != "batch_norm" or uses.get(id(bn), 0) != 1 \
                or bn.params.get("axis", 1) % 4 != 1:
            return None
        dtypes = {e.aval.dtype for e in bn.inputs} | {bn.avals[0].dtype}
        if len(dtypes) != 1 or next(iter(dtypes)) is None or next(iter(dtypes)).kind != "f":
            return None
        x, old_x = bn_new.inputs[0], bn.inputs[0].node
        relu = old_x.op is not None and old_x.op.name == "relu" and uses.get(id(old_x), 0) == 1 \
            and old_x.inputs[0].aval.dtype == old_x.avals[0].dtype
        if relu:
            x = x.node.inputs[0]
        params = dict(node.params, eps=bn.params.get("eps", 1e-5), relu=relu)
        return (record_node(fused_op, [x, *bn_new.inputs[1:]], params, source=node.source),)

    return rewrite(sym, visit, share=True)
