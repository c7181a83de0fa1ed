"""Common sub-expression elimination: one node per distinct (op, inputs, params)."""
from __future__ import annotations

from ..node import Node
from ..rewrite import copy_node, rewrite, unchanged
from ..same_graph import params_key
from ..symbol import Symbol

# Constants up to this many elements are compared by value (scalars from ``x * 2`` etc.).
_SMALL_CONST = 16


def cse(sym: Symbol) -> Symbol:
    """Merge nodes that compute the same thing: same op, same input entries, same params.

    Random ops (dropout masks) are never merged; small constants with equal values are.

    >>> import lazyarray as la
    >>> x = la.sym.var("x", shape=(3,))
    >>> y = la.sym.exp(x) + la.sym.exp(x)
    >>> [n.op.name for n in cse(y).topo() if n.op]
    ['exp', 'add']
    """
    seen: dict[tuple, Node] = {}
    # (op, input entries) -> the one node so far that has them, its full key not made yet: a node can
    # only merge with one of the same op and inputs, so the parameters' key (most of the cost) is made
    # only for nodes that share those with another; None once made
    first: dict[tuple, Node | None] = {}

    def visit(node: Node, ins):
        if node.op is not None and not node.op.random:
            near = (id(node.op), tuple([(id(e.node), e.index) for e in ins]))
            if near not in first:
                kept = unchanged(node, ins)
                first[near] = rep = node if kept else copy_node(node, ins)
                return None if kept else rep
            rep = first[near]
            if rep is not None:  # (a second node of these op and inputs: the first one's key now)
                first[near] = None
                rep_key = _key(rep, rep.inputs)
                if rep_key is not None:
                    seen[rep_key] = rep
        key = _key(node, ins)
        if key is None:
            return None
        prev = seen.get(key)
        if prev is not None:
            return prev
        if unchanged(node, ins):  # kept as it is (the rewrite shares it)
            seen[key] = node
            return None
        new = seen[key] = copy_node(node, ins)
        return new

    return rewrite(sym, visit, share=True)


def _key(node: Node, ins) -> tuple | None:
    if node.op is None:
        if node.kind != "const":
            return None
        v, a = node.value, node.avals[0]
        if a.stype != "default" or getattr(v, "size", _SMALL_CONST + 1) > _SMALL_CONST:
            return None
        data = v.tobytes() if hasattr(v, "tobytes") else repr(v)
        return ("const", a.shape, a.dtype, a.device, data)  # (the dtype itself: equal where its text is)
    if node.op.random:
        return None
    inputs = tuple((id(e.node), e.index) for e in ins)
    params = node.params
    # (by value, not by text: two conds or loops whose bodies differ print alike, and so do two large
    # arrays that differ where NumPy's repr elides them)
    key = (node.op.name, id(node.op), inputs, params_key(params) if params else ())
    try:
        hash(key)
    except TypeError:  # a parameter value without a hash: the node is not merged
        return None
    return key
