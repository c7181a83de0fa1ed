"""Inference rewrite: ``relu(batch_norm(x))`` -> one ``nn.batch_norm_relu`` node.

DenseNet's pre-activation layers (issue #35) begin with a batch norm and a relu on the features a
concatenation gathered: no convolution precedes the norm, so ``fold_batch_norm`` leaves it, and the
norm and the relu were two steps per layer. ``ops/batch_norm_relu.py`` computes the same operations
in the same order and dtype, so the values are equal bit for bit.

Only a batch norm that nothing but the relu reads (not a graph output) is taken, and only when x, the
statistics and the result share one float dtype (relu keeps it). ``CachedOp`` runs it on inference
graphs after ``fold_batch_norm`` and ``pool_before_batch_norm`` (a norm they take is gone by then);
graphs that train keep the recorded ops (``batch_norm_relu`` has no gradient).
``la.config.fuse_batch_norm_relu = False`` turns it off.
"""
from __future__ import annotations

from ...ops import registry
from ...tuning_table import current
from ..build import record_node
from ..node import Node
from ..rewrite import has_op, rewrite, use_counts
from ..symbol import Symbol


def _fits(relu: Node, uses: dict) -> bool:
    """Whether ``relu`` is the relu of a batch norm it alone reads, all in one float dtype."""
    if relu.op is None or relu.op.name != "relu" or relu.params:
        return False
    bn = relu.inputs[0].node
    if bn.op is None or bn.op.name != "batch_norm" or uses.get(id(bn), 0) != 1:
        return False
    dtypes = {e.aval.dtype for e in bn.inputs} | {bn.avals[0].dtype, relu.avals[0].dtype}
    dtype = next(iter(dtypes))
    return len(dtypes) == 1 and dtype is not None and dtype.kind == "f"


def batch_norm_relu(sym: Symbol) -> Symbol:
    """``sym`` with each relu of a batch norm that nothing else reads made one ``batch_norm_relu`` node.

    >>> import lazyarray as la
    >>> x = la.sym.var("x", shape=(1, 3, 8, 8))
    >>> stats = [la.sym.var(n, shape=(3,)) for n in ("gamma", "beta", "mean", "var")]
    >>> y = la.sym.relu(la.sym.nn.batch_norm(x, *stats))
    >>> [n.op.name for n in batch_norm_relu(y).topo() if n.op is not None]
    ['batch_norm_relu']
    """
    if not current().fuse_batch_norm_relu or not has_op(sym, "batch_norm"):
        return sym
    uses = use_counts(sym)
    fused_op = registry.get("batch_norm_relu")

    def visit(node: Node, ins):
        if not _fits(node, uses):
            return None
        bn_new = ins[0].node
        return (record_node(fused_op, list(bn_new.inputs), dict(bn_new.params), source=bn_new.source),)

    return rewrite(sym, visit, share=True)
