"""GELU's derivative computed by the forward: one erf instead of two in a compiled training step.

The gradient pass turns ``y = gelu(x)`` into ``gelu_grad(g, x)`` in the backward graph, which
recomputes ``erf(x / sqrt(2))`` (a dozen passes over memory) to get ``Phi(x) + x phi(x)``.
When a forward and its backward are compiled together (``CachedOp``'s training signatures),
this pass rewrites the pair on the joint graph:

* forward: ``gelu(x)`` -> ``y, d = gelu_with_grad(x)`` (one erf gives the value and the slope);
* backward: ``gelu_grad(g, x)`` -> ``g * d``.

The backward then saves ``d`` instead of ``x`` (the same bytes) and multiplies once. Values are
equal: ``gelu_with_grad`` runs the same operations as ``gelu`` and ``gelu_grad``.

It applies only where a forward ``gelu`` and a backward ``gelu_grad`` read the same ``x`` with the
same ``approximation``, and ``g`` has ``x``'s shape and dtype; other graphs come back unchanged.
"""
from __future__ import annotations

from ...ops import registry
from ..node import Entry, Node
from ..rewrite import rewrite
from ..symbol import Symbol
from ..traverse import topo_order

_GELU = registry.get("gelu")
_GELU_GRAD = registry.get("gelu_grad")
_BOTH = registry.get("gelu_with_grad")
_MULTIPLY = registry.get("multiply")


def gelu_slope(forward: list[Entry], backward: list[Entry | None]) -> tuple[list[Entry], list[Entry | None]]:
    """``(forward, backward)`` outputs with each matching gelu / gelu_grad pair rewritten (see the
    module doc); ``None`` entries of ``backward`` stay ``None``.

    >>> import lazyarray as la
    >>> from lazyarray.graph.passes.gradient import gradient
    >>> x = la.sym.var("x", shape=(4,))
    >>> y = la.sym.nn.gelu(x)
    >>> head = la.sym.var("g", shape=(4,))
    >>> fwd, bwd = gelu_slope(list(y.outputs), gradient(list(y.outputs), list(head.outputs), list(x.outputs)))
    >>> fwd[0].node.op.name, bwd[0].node.op.name
    ('gelu_with_grad', 'multiply')
    """
    live = [e for e in backward if e is not None]
    fwd_nodes = topo_order(list(forward))
    gelus = {_key(n.inputs[0], n.params): n for n in fwd_nodes if n.op is _GELU}
    if not gelus or not live:
        return list(forward), list(backward)
    fwd_ids = {id(n) for n in fwd_nodes}
    wanted = set()
    for n in topo_order(live, stop=lambda n: id(n) in fwd_ids):
        if n.op is _GELU_GRAD and id(n) not in fwd_ids:
            g, x = n.inputs
            k = _key(x, n.params)
            if k in gelus and g.aval.shape == x.aval.shape and g.aval.dtype == x.aval.dtype:
                wanted.add(k)
    if not wanted:
        return list(forward), list(backward)
    both: dict[tuple, Node] = {}

    def pair(k, x_new: Entry, like: Node) -> Node:
        n = both.get(k)
        if n is None:
            a = x_new.aval
            n = both[k] = Node(_BOTH, (x_new,), dict(like.params), (a, a), name=f"{like.label()}_with_grad",
                               source=like.source, block=like.block)
        return n

    def visit(node: Node, ins):
        if node.op is None:  # inputs and constants stay themselves (a program binds its inputs by node)
            return node
        if node.op is _GELU:
            k = _key(node.inputs[0], node.params)
            if k in wanted:
                return (Entry(pair(k, ins[0], gelus[k]), 0),)
        elif node.op is _GELU_GRAD:
            g, x = node.inputs
            k = _key(x, node.params)
            if k in wanted and id(node) not in fwd_ids:
                d = Entry(pair(k, ins[1], gelus[k]), 1)
                return Node(_MULTIPLY, (ins[0], d), {}, node.avals, name=node.name, source=node.source,
                            block=node.block)
        return None

    joint = rewrite(Symbol(list(forward) + live), visit).outputs
    new_fwd = list(joint[:len(forward)])
    rest = iter(joint[len(forward):])
    return new_fwd, [None if e is None else next(rest) for e in backward]


def _key(x: Entry, params: dict) -> tuple:
    return id(x.node), x.index, params.get("approximation", "none")
