"""``zeros_like`` / ``ones_like`` / ``full_like`` of a value whose shape is known: a ``fill``.

These ops read only their input's shape and dtype, but as written they wait for the input's value
and run as a step every call. Once a graph is specialized to concrete shapes (``CachedOp``), each
is a ``fill`` with that shape: no input, so ``constant_fold`` computes it once (within its size
bound) together with whatever depends only on it. An average pool imported from ONNX with
``count_include_pad=0`` divides by the count of each window (``ones_like`` of the input, padded,
summed per window): that count becomes a constant and its four steps go. The values are equal bit
for bit (``numpy.full`` with the same value and dtype).
"""
from __future__ import annotations

from ...ops import registry
from ..build import record_node
from ..node import Node
from ..rewrite import has_op, rewrite
from ..symbol import Symbol

VALUES = {"zeros_like": 0, "ones_like": 1}  # (full_like: its fill_value)


def shape_fills(sym: Symbol) -> Symbol:
    """``sym`` with each ``zeros_like`` / ``ones_like`` / ``full_like`` of a concrete dense shape as a ``fill``.

    >>> import lazyarray as la
    >>> x = la.sym.var("x", shape=(2, 3))
    >>> y = la.sym.add(x, la.sym.ones_like(x))
    >>> [n.op.name for n in shape_fills(y).topo() if n.op is not None]
    ['fill', 'add']
    """
    if not has_op(sym, "zeros_like", "ones_like", "full_like"):
        return sym
    fill = registry.get("fill")

    def visit(node: Node, ins):
        if node.op is None or node.op.name not in ("zeros_like", "ones_like", "full_like"):
            return None
        a = node.avals[0]
        if ins[0].aval.stype != "default" or a.stype != "default" or a.shape is None \
                or not all(isinstance(d, int) for d in a.shape) or a.device is None:
            return None
        value = node.params["fill_value"] if node.op.name == "full_like" else VALUES[node.op.name]
        params = {"shape": tuple(a.shape), "value": value, "dtype": a.dtype, "device": a.device}
        return (record_node(fill, [], fill.make_params(params), source=node.source),)

    return rewrite(sym, visit, share=True)
