"""Inference rewrite: a ``reshape`` (or ``flatten``, ``squeeze``) that only drops the unit axes a
``mean(..., keepdims=True)`` kept -> that ``mean`` with ``keepdims=False``: one step instead of two.

A global average pool imported from ONNX is ``mean`` over (2, 3) with ``keepdims=True`` (ONNX's
``GlobalAveragePool``), and a classifier's head then flattens it: ``[1, 10, 1, 1] -> [1, 10]``
(SqueezeNet's tail, issue #35). The reshape is a view, but a value handed to the caller is not one
the executor makes once (``executor/set_views.py``), so it was a step of its own each call. Without
``keepdims`` the mean's values are the same sums divided by the same count (``keepdims`` only shapes
the result), so they are equal bit for bit. Only a mean that nothing but the reshape reads (not a
graph output) is taken, and only where the reshape's output shape is the mean's without the reduced
axes. ``la.config.drop_kept_dims = False`` turns it off.
"""
from __future__ import annotations

from ...ops import registry
from ...tuning_table import current
from ..build import record_node
from ..node import Node
from ..rewrite import has_op, rewrite, use_counts
from ..symbol import Symbol

VIEWS = ("reshape", "flatten", "squeeze")  # (ops whose output is their input's values in a new shape)


def _axes(axis, rank: int) -> set[int] | None:
    if axis is None:
        return set(range(rank))
    parts = tuple(axis) if isinstance(axis, (tuple, list)) else (axis,)
    return {int(a) % rank for a in parts} if rank else None


def _dropped(mean: Node, shape) -> bool:
    """Whether ``shape`` is ``mean``'s kept-dims output without its reduced axes."""
    kept = tuple(mean.avals[0].shape)
    axes = _axes(mean.params.get("axis"), len(kept))
    if axes is None or len(axes) == len(kept):
        return False  # (a 0-d mean: another kernel path)
    return tuple(shape) == tuple(d for i, d in enumerate(kept) if i not in axes)


def drop_kept_dims(sym: Symbol) -> Symbol:
    """``sym`` with each reshape of a kept-dims mean that only drops its unit axes made the mean without them.

    >>> import lazyarray as la
    >>> x = la.sym.var("x", shape=(1, 10, 3, 3))
    >>> y = la.sym.reshape(la.sym.mean(x, axis=(2, 3), keepdims=True), shape=(1, 10))
    >>> [(n.op.name, n.params["keepdims"]) for n in drop_kept_dims(y).topo() if n.op is not None]
    [('mean', False)]
    """
    if not current().drop_kept_dims or not has_op(sym, "mean"):
        return sym
    uses = use_counts(sym)
    mean_op = registry.get("mean")

    def visit(node: Node, ins):
        if node.op is None or node.op.name not in VIEWS:
            return None
        mean, new = node.inputs[0].node, ins[0].node
        if mean.op is None or mean.op.name != "mean" or not mean.params.get("keepdims", False) \
                or uses.get(id(mean), 0) != 1 or node.avals[0].dtype != mean.avals[0].dtype \
                or not _dropped(mean, node.avals[0].shape):
            return None
        return (record_node(mean_op, list(new.inputs), dict(mean.params, keepdims=False), source=mean.source),)

    return rewrite(sym, visit, share=True)
