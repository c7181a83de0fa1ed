"""Inference rewrite: ``relu(add(conv2d(x, w[, b]), r))`` -> one ``nn.conv2d_add_relu(x, w, r[, b])``.

A ResNet block's end, as graphs record it (torch's ``out += identity; relu(out)``, ONNX's ``Add`` then
``Relu``): after the convolution (its batch norm folded in by ``fold_batch_norm``) the add and the relu
were steps of their own over the output. Taken where the ``add`` reads the convolution's output and a
residual of exactly that shape and dtype (no broadcasting), in either operand order (where both are
convolutions, a downsampling block's, the one of more taps is fused: ``conv2d[blocked]``'s 3x3, whose
write-out takes the residual; the first operand on a tie), the
convolution and the add each read by nothing else (not graph outputs), every value of one float dtype.
``ops/conv_add_relu.py`` rounds as the three ops round, so the values are the recorded graph's bit for bit
where the convolution runs as it ran. ``CachedOp`` runs it on inference graphs before
``conv_activation``; graphs that train keep the recorded ops (no gradient).
``la.config.conv_residual = False`` turns it off.
"""
from __future__ import annotations

from ...ops import registry
from ...tuning_table import current
from ..build import record_node
from ..node import Node
from ..rewrite import has_op, rewrite, use_counts
from ..symbol import Symbol


def _fixed(aval) -> bool:
    return aval.shape is not None and None not in aval.shape and aval.dtype is not None and aval.dtype.kind == "f"


def _match(node: Node, uses: dict) -> int | None:
    """The operand index of the convolution in the add that ``node`` (a relu) reads, else None."""
    if node.op is None or node.op.name != "relu" or node.params or len(node.inputs) != 1:
        return None
    add = node.inputs[0].node
    if add.op is None or add.op.name != "add" or add.params or len(add.inputs) != 2 or uses.get(id(add), 0) != 1:
        return None
    want = add.avals[0]
    if not _fixed(want) or node.avals[0].dtype != want.dtype:
        return None
    taken = []
    for i in (0, 1):
        c, r = add.inputs[i], add.inputs[1 - i]
        conv = c.node
        if conv.op is None or conv.op.name != "conv2d" or uses.get(id(conv), 0) != 1 or c.aval.shape != want.shape \
                or c.aval.dtype != want.dtype or not _fixed(r.aval) or r.aval.shape != want.shape \
                or r.aval.dtype != want.dtype or any(e.aval.dtype != want.dtype for e in conv.inputs):
            continue
        kernel = conv.inputs[1].aval.shape
        taken.append((-(kernel[2] * kernel[3]) if kernel and None not in kernel[2:] else 0, i))
    return min(taken)[1] if taken else None


def conv_residual(sym: Symbol) -> Symbol:
    """``sym`` with each relu of a convolution plus a residual made one ``conv2d_add_relu`` node.

    >>> import lazyarray as la
    >>> x, w = la.sym.var("x", shape=(1, 4, 8, 8)), la.sym.var("w", shape=(4, 4, 3, 3))
    >>> y = la.sym.relu(la.sym.add(la.sym.nn.conv2d(x, w, padding=(1, 1)), x))
    >>> [n.op.name for n in conv_residual(y).topo() if n.op is not None]
    ['conv2d_add_relu']
    """
    if not current().conv_residual or not has_op(sym, "conv2d") or not has_op(sym, "add"):
        return sym
    uses = use_counts(sym)
    fused_op = registry.get("conv2d_add_relu")

    def visit(node: Node, ins):
        i = _match(node, uses)
        if i is None:
            return None
        add = ins[0].node  # (the rewritten add: its inputs the rewritten convolution and residual)
        conv = add.inputs[i].node
        x, w, *bias = conv.inputs
        return (record_node(fused_op, [x, w, add.inputs[1 - i], *bias], dict(conv.params), source=conv.source),)

    return rewrite(sym, visit, share=True)
