"""Inference rewrite: a convolution whose windows tile its input (a ViT's patch embedding) -> one ``dense``.

A vision transformer cuts its image into patches with ``conv2d(x, w, b, stride=(kh, kw))``, ``w`` of
(O, C, kh, kw): windows that neither overlap nor leave a gap. Such a convolution is a matrix product of
the patches laid out as rows, which the graph can say with views and one copy::

    cols = reshape(transpose(reshape(x, (N, C, Ho, kh, Wo, kw)), (0, 2, 4, 1, 3, 5)), (N, Ho * Wo, C * kh * kw))
    y = transpose(reshape(dense(cols, reshape(w, (O, C * kh * kw)), b), (N, Ho, Wo, O)), (0, 3, 1, 2))

(the ``transpose``/``reshape`` into ``cols`` is the one copy; the rest are views, and ViT's own
``flatten(2).transpose(1, 2)`` after it reads the product's rows back as they are). ``conv2d[blocked]``
ran hf_vit's (1, 3, 32, 32) by (32, 3, 8, 8) patches in about 2.8x the time of the copy and the product
(one thread, shared machine). Only for ``groups == 1``, no padding, no dilation, stride equal to the
kernel's size of at least ``MIN_PATCH_VALUES`` pixels, H and W multiples of it, float32 / float64 operands of one dtype and every size an int.

**Values.** The product's sums are the reference's (im2col, ``ops/conv.py``) in the same (C, kh, kw)
order of a row, but BLAS may add them in another order than the convolution's kernels: within float
rounding of the reference (tests: relative 1e-5 in float32, 1e-12 in float64). ``CachedOp`` runs it on
inference graphs; ``la.config.patch_embedding_dense = False`` turns it off.
"""
from __future__ import annotations

import numpy as np

from ...ops import registry
from ...tuning_table import current
from ..build import record_node
from ..node import Entry, Node
from ..rewrite import has_op, rewrite
from ..symbol import Symbol

FLOATS = (np.dtype(np.float32), np.dtype(np.float64))
# Patches of fewer pixels are a CNN's layers (1 x 1 pointwise convolutions, ConvNeXt's 2 x 2 downsampling
# and 4 x 4 stem), which the convolution kernels own (kernels/conv2d.py's chooser): ViT's are 8 x 8 to 32 x 32.
MIN_PATCH_VALUES = 36


def _sizes(entry) -> tuple | None:
    shape = entry.aval.shape
    return tuple(shape) if shape is not None and all(isinstance(d, int) for d in shape) else None


def tiles(node: Node) -> bool:
    """Whether the ``conv2d`` ``node``'s windows tile its input (see the module doc)."""
    p = node.params
    if len(node.inputs) not in (2, 3) or p.get("groups", 1) != 1 or tuple(p.get("dilation", (1, 1))) != (1, 1) \
            or tuple(p.get("padding", (0, 0))) != (0, 0):
        return False
    x, w = _sizes(node.inputs[0]), _sizes(node.inputs[1])
    if x is None or w is None or len(x) != 4 or len(w) != 4 or x[1] != w[1] or min(w[2:]) < 1:
        return False
    if any(e.aval.dtype != node.inputs[0].aval.dtype for e in node.inputs) or node.inputs[0].aval.dtype not in FLOATS:
        return False
    return tuple(p.get("stride", (1, 1))) == w[2:] and x[2] % w[2] == 0 and x[3] % w[3] == 0 and min(x) > 0 \
        and w[2] * w[3] >= MIN_PATCH_VALUES


def _rewritten(node: Node, ins: list) -> Entry:
    (n, c, h, wd), (o, _, kh, kw) = _sizes(node.inputs[0]), _sizes(node.inputs[1])
    ho, wo = h // kh, wd // kw
    reshape, transpose = registry.get("reshape"), registry.get("transpose")
    src = node.source

    def op(fn, inputs, **params):
        return record_node(fn, inputs, params, source=src)

    grid = op(reshape, [ins[0]], shape=(n, c, ho, kh, wo, kw))
    cols = op(reshape, [op(transpose, [grid], axes=(0, 2, 4, 1, 3, 5))], shape=(n, ho * wo, c * kh * kw))
    weight = op(reshape, [ins[1]], shape=(o, c * kh * kw))
    y = op(registry.get("dense"), [cols, weight] + list(ins[2:]))
    return op(transpose, [op(reshape, [y], shape=(n, ho, wo, o))], axes=(0, 3, 1, 2))


def patch_embeddings(sym: Symbol) -> Symbol:
    """``sym`` with each convolution whose windows tile its input a ``dense`` of its patches.

    >>> import lazyarray as la
    >>> x, w = la.sym.var("x", shape=(1, 3, 16, 16)), la.sym.var("w", shape=(4, 3, 8, 8))
    >>> y = la.sym.nn.conv2d(x, w, stride=(8, 8))
    >>> [n.op.name for n in patch_embeddings(y).topo() if n.op is not None]
    ['reshape', 'transpose', 'reshape', 'reshape', 'dense', 'reshape', 'transpose']
    """
    if not current().patch_embedding_dense or not has_op(sym, "conv2d"):
        return sym

    def visit(node: Node, ins):
        if node.op is None or node.op.name != "conv2d" or len(node.avals) != 1 or not tiles(node):
            return None
        new = _rewritten(node, ins)
        return (new,) if new.aval == node.avals[0] else None

    return rewrite(sym, visit, share=True)
