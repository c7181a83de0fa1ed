"""Inference folding: a batch norm right after a convolution or a dense layer folds into it.

In inference, ``batch_norm(y, gamma, beta, mean, var)`` is a per-channel affine map
``y * s + (beta - mean * s)`` with ``s = gamma / sqrt(var + eps)``. When ``y = conv2d(x, w, b)``
(or ``dense``) and nothing else reads ``y``, the map moves into the layer's weights::

    conv2d(x, w * s[:, None, None, None], (b - mean) * s + beta)

so the activation tensor (N x C x H x W) is no longer read and written a second time; the folding
itself costs a few ops over the weights (C_out x C_in x kh x kw), computed inside the graph
because parameters are graph inputs (a new weight value is folded at the next call, never
stale). So a pair folds only where that pays (``_pays``): a constant weight, or a weight with
fewer elements than the activation. Values equal the unfolded graph within float rounding.
"""
from __future__ import annotations

import math

from ...ops import registry
from ..build import record_node, scalar_const
from ..node import Entry, Node
from ..rewrite import has_op, rewrite, use_counts
from ..symbol import Symbol


def fold_batch_norm(sym: Symbol) -> Symbol:
    """``sym`` with every foldable ``conv2d``/``dense`` -> ``batch_norm`` pair folded.

    >>> import lazyarray as la
    >>> x = la.sym.var("x", shape=(2, 3, 8, 8))
    >>> w = la.sym.var("w", shape=(4, 3, 3, 3))
    >>> g, b, m, v = (la.sym.var(n, shape=(4,)) for n in ("g", "b", "m", "v"))
    >>> y = la.sym.nn.batch_norm(la.sym.nn.conv2d(x, w), g, b, m, v)
    >>> [n.op.name for n in fold_batch_norm(y).topo() if n.op is not None][-1]
    'conv2d'
    """
    if not has_op(sym, "batch_norm"):
        return sym
    uses = use_counts(sym)
    foldable = {id(n) for n in sym.topo() if _foldable(n, uses)}

    def visit(node: Node, ins):
        if id(node) not in foldable:
            return None
        layer = ins[0].node
        return (_folded(layer, ins[1:], node),)

    return rewrite(sym, visit, share=True)


def _foldable(node: Node, uses: dict) -> bool:
    if node.op is None or node.op.name != "batch_norm":
        return False
    y = node.inputs[0]
    layer = y.node
    if layer.op is None or layer.op.name not in ("conv2d", "dense") or uses.get(id(layer), 0) != 1:
        return False
    nd = len(y.aval.shape) if y.aval.shape is not None else None
    if nd is None or node.params["axis"] % nd != (1 if layer.op.name == "conv2d" else nd - 1):
        return False
    if layer.op.name == "dense" and nd != 2:
        return False
    floats = [e.aval.dtype for e in node.inputs] + [e.aval.dtype for e in layer.inputs]
    if not (all(d is not None and d.kind == "f" for d in floats) and len({str(d) for d in floats}) == 1):
        return False
    return _pays(layer.inputs[1], y)


def _pays(w: Entry, y: Entry) -> bool:
    """Folding pays when rescaling the weights costs less than a pass over the activations: always
    for a constant weight (folded once, by constant folding), otherwise only while the weight has
    fewer elements than the activation (a late ResNet layer at batch 1 has 300x more weights than
    activations: folding it there would make every call slower)."""
    if w.node.kind == "const":
        return True
    ws, ys = w.aval.shape, y.aval.shape
    if ws is None or ys is None or None in ws or None in ys:
        return False
    return math.prod(ws) < math.prod(ys)


def _op(name: str, node: Node, *inputs, **params) -> Entry:
    """A new node of op ``name`` carrying the batch norm's source line."""
    op = registry.get(name)
    return record_node(op, list(inputs), op.make_params(params), source=node.source)


def _folded(layer: Node, stats, bn: Node) -> Entry:
    gamma, beta, mean, var = stats
    x, w = layer.inputs[0], layer.inputs[1]
    bias = layer.inputs[2] if len(layer.inputs) > 2 else None
    eps = bn.params["eps"]
    scale = _op("multiply", bn, gamma, _op("power", bn, _op("add", bn, var, _const(eps, var)), _const(-0.5, var)))
    trailing = tuple(range(1, len(w.aval.shape)))
    w2 = _op("multiply", bn, w, _op("expand_dims", bn, scale, axis=trailing))
    shift = mean if bias is None else _op("subtract", bn, mean, bias)  # (mean - b)
    b2 = _op("subtract", bn, beta, _op("multiply", bn, shift, scale))  # (b - mean) * s + beta
    return _op(layer.op.name, bn, x, w2, b2, **layer.params)


def _const(value, like: Entry) -> Entry:
    a = like.aval
    return scalar_const(value, [a.dtype], a.device)
