"""Rebuilding a graph node by node: the loop every ``Symbol -> Symbol`` pass shares.

Passes never mutate the nodes of the symbol they are given (symbols are immutable views
and other arrays may still show those nodes); they copy what they keep.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol, TypeVar

from .node import Entry, Node
from .traverse import topo_order


class Graph(Protocol):
    """What a rewrite reads of a graph: its output entries and its nodes in order. ``Symbol`` is
    one; symbol.py runs passes, so passes below it name this shape rather than import the class
    (imports point one way: symbol -> passes -> rewrite). The result is built as ``type(sym)``."""

    @property
    def outputs(self) -> Sequence[Entry]: ...

    def topo(self) -> list[Node]: ...


GraphT = TypeVar("GraphT", bound=Graph)


def copy_node(node: Node, inputs, avals=None) -> Node:
    """A copy of ``node`` reading ``inputs`` (and with ``avals`` when given)."""
    return Node(node.op, tuple(inputs), dict(node.params), node.avals if avals is None else avals,
                name=node.name, kind=node.kind,
                value=node.value, version=node.version, source=node.source, sbp=node.sbp,
                block=node.block)


def rewrite(sym: GraphT, visit: Callable[[Node, list], Node | tuple | None], stop=None) -> GraphT:
    """A new symbol where each node is replaced by ``visit(node, new_inputs)``.

    ``visit`` returns a new ``Node`` (its outputs replace the old ones), a tuple of entries
    (one per output of the old node), or ``None`` to keep a plain copy. ``stop(node)``: nodes
    whose inputs are not visited (``visit`` must replace them). This is the one place graphs
    are copied: passes, ``la.get_symbol`` and ``CachedOp`` inlining all go through it.

    >>> import lazyarray as la
    >>> x = la.sym.var("x", shape=(2,))
    >>> y = rewrite(la.sym.exp(x), lambda node, ins: None)
    >>> print(y.list_inputs(), len(y.topo()))
    ['x'] 2
    """
    env: dict[tuple[int, int], Entry] = {}
    order = sym.topo() if stop is None else topo_order(list(sym.outputs), stop=stop)
    for node in order:
        ins = [] if stop is not None and stop(node) else [env[(id(e.node), e.index)] for e in node.inputs]
        new = visit(node, ins)
        if new is None:
            new = copy_node(node, ins)
        if isinstance(new, Node):
            k = len(node.avals) or 1
            for i in range(k):
                env[(id(node), i)] = Entry(new, i)
        else:
            for i, e in enumerate(new):
                env[(id(node), i)] = e
    return type(sym)([env[(id(e.node), e.index)] for e in sym.outputs])


def use_counts(sym) -> dict[int, int]:
    """``id(node) -> how many times it is read``: by other nodes' inputs, and by ``sym``'s outputs
    (a value the caller receives counts as one more reader, so a pass never rewrites it away)."""
    uses: dict[int, int] = {}
    for node in sym.topo():
        for e in node.inputs:
            uses[id(e.node)] = uses.get(id(e.node), 0) + 1
    for e in sym.outputs:
        uses[id(e.node)] = uses.get(id(e.node), 0) + 1
    return uses
