"""Inference rewrite: a layer norm written out as ops -> one ``nn.layer_norm``.

Models exported with their layer norm as elementwise ops (ConvNeXt's channels-last norms, issue #35:
ten ops, six steps after fusion, about 50 us a norm at batch 1) arrive as::

    m = mean(x, axis=(a,), keepdims=True);  d = subtract(x, m)
    v = mean(square(d), axis=(a,), keepdims=True)
    n = multiply(d, divide(1, sqrt(add(v, eps))))      # or divide(d, sqrt(add(v, eps)))
    y = add(multiply(n, gamma), beta)

with ``a`` the last axis, ``eps`` a positive 0-d constant, ``gamma`` and ``beta`` vectors along ``a``
and every intermediate read only inside the pattern (``d`` by the square and the product). That is
``nn.layer_norm(x, gamma, beta, axis=a, eps=eps)``, one step. The values agree within float rounding,
not bit for bit (the norm's kernel sums the squares by ``einsum`` and multiplies by ``1 / n``), as
``fold_batch_norm``'s do. ``CachedOp`` runs it on inference graphs; graphs that train keep the ops.
"""
from __future__ import annotations

from ...ops import registry
from ..build import record_node
from ..node import Node
from ..rewrite import has_op, rewrite, use_counts
from ..symbol import Symbol


def _op(node: Node, name: str) -> bool:
    return node.op is not None and node.op.name == name


def _const(node: Node) -> float | None:
    """The value of a frozen 0-d constant, else None."""
    if node.op is not None or node.kind != "const" or node.version is not None or node.value is None \
            or getattr(node.value, "shape", None) != ():
        return None
    return float(node.value)


def _other(node: Node, name: str, uses: dict):
    """``(operands of node)`` as ``(entry, other entry)`` pairs for a binary ``name`` node read once."""
    if not _op(node, name) or len(node.inputs) != 2 or node.params or uses.get(id(node), 0) != 1:
        return ()
    return ((node.inputs[0], node.inputs[1]), (node.inputs[1], node.inputs[0]))


def _mean_axis(node: Node, ndim: int):
    """The one axis a keepdims ``mean`` node reduces (normalized), else None."""
    if not _op(node, "mean") or not node.params.get("keepdims", False):
        return None
    axis = node.params.get("axis")
    axis = (axis,) if isinstance(axis, int) else tuple(axis or ())
    return axis[0] % ndim if len(axis) == 1 else None


def _normalized(n: Node, uses: dict):
    """``(d, var mean node, eps)`` where ``n`` is ``d * (1 / sqrt(v + eps))`` or ``d / sqrt(v + eps)``."""
    cands = [(d, r.node.inputs[1].node) for d, r in _other(n, "multiply", uses)
             if _op(r.node, "divide") and uses.get(id(r.node), 0) == 1 and _const(r.node.inputs[0].node) == 1.0]
    if _op(n, "divide") and uses.get(id(n), 0) == 1 and not n.params:
        cands.append((n.inputs[0], n.inputs[1].node))
    for d, s in cands:
        if not _op(s, "sqrt") or uses.get(id(s), 0) != 1:
            continue
        for v, e in _other(s.inputs[0].node, "add", uses):
            eps = _const(e.node)
            if eps is not None and eps > 0:
                return d, v.node, eps
    return None


def _match(node: Node, uses: dict):
    """``(x entry, gamma entry, beta entry, axis, eps, path)`` for a written-out layer norm ending at ``node``."""
    if not _op(node, "add") or len(node.inputs) != 2 or node.params:
        return None
    for g, beta in ((node.inputs[0], node.inputs[1]), (node.inputs[1], node.inputs[0])):
        for nn_, gamma in _other(g.node, "multiply", uses):
            got = _normalized(nn_.node, uses)
            if got is None:
                continue
            d, v, eps = got
            dn, sq = d.node, v.inputs[0].node if v.inputs else None
            if not (_op(dn, "subtract") and sq is not None and _op(sq, "square") and sq.inputs[0].node is dn
                    and uses.get(id(dn), 0) == 2 and uses.get(id(sq), 0) == 1 and uses.get(id(v), 0) == 1):
                continue
            x, m = dn.inputs[0], dn.inputs[1].node
            if x.aval.shape is None:
                continue
            ndim = len(x.aval.shape)
            ax = _mean_axis(m, ndim)
            if ax is None or ax != ndim - 1 or _mean_axis(v, ndim) != ax or m.inputs[0] != x \
                    or uses.get(id(m), 0) != 1:
                continue
            c = x.aval.shape[ax]
            dtypes = {e.aval.dtype for e in (x, gamma, beta)} | {node.avals[0].dtype}
            if tuple(gamma.aval.shape) != (c,) or tuple(beta.aval.shape) != (c,) or len(dtypes) != 1 \
                    or next(iter(dtypes)).kind != "f" or tuple(node.avals[0].shape) != tuple(x.aval.shape):
                continue
            return x, gamma, beta, ax, eps
    return None


def layer_norm_ops(sym: Symbol) -> Symbol:
    """``sym`` with each layer norm written out as ops (the module's pattern) made one ``nn.layer_norm``.

    >>> import lazyarray as la
    >>> S = la.sym
    >>> x, g, b = S.var("x", shape=(2, 5, 8)), S.var("g", shape=(8,)), S.var("b", shape=(8,))
    >>> d = x - S.mean(x, axis=-1, keepdims=True)
    >>> v = S.mean(S.square(d), axis=-1, keepdims=True)
    >>> y = d * S.divide(1.0, S.sqrt(v + 1e-6)) * g + b
    >>> [n.op.name for n in layer_norm_ops(y).topo() if n.op is not None]
    ['layer_norm']
    """
    if not has_op(sym, "mean"):
        return sym
    uses = use_counts(sym)
    ln = registry.get("layer_norm")
    entries = {}  # (old entry -> its place in the rewritten graph, filled as visit sees nodes)

    def visit(node: Node, ins):
        for k, e in enumerate(node.inputs):
            entries[e] = ins[k]
        got = _match(node, uses)
        if got is None:
            return None
        x, gamma, beta, ax, eps = got
        new = [entries[e] for e in (x, gamma, beta)]
        return (record_node(ln, new, {"axis": ax, "eps": eps}, source=node.source),)

    return rewrite(sym, visit, share=True)
