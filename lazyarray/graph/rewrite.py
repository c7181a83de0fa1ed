"""Rebuilding a graph node by node: the loop every ``Symbol -> Symbol`` pass shares.

Passes never mutate the nodes of the symbol they are given (symbols are immutable views
and other arrays may still show those nodes); they copy what they keep.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Protocol, TypeVar

from ..gc_scope import gc_paused as gc_paused  # (where graph code has imported it from)
from .node import Entry, Node, copied_node
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
    return copied_node(node, tuple(inputs), node.avals if avals is None else avals)


def rewrite(sym: GraphT, visit: Callable[[Node, list], Node | tuple | None], stop=None,
            share: bool = False) -> GraphT:
    """A new symbol where each node is replaced by ``visit(node, new_inputs)``.

    ``visit`` returns a new ``Node`` (its outputs replace the old ones), a tuple of entries
    (one per output of the old node), or ``None`` to keep a plain copy. ``stop(node)``: nodes
    whose inputs are not visited (``visit`` must replace them). This is the one place graphs
    are copied: passes, ``la.get_symbol`` and ``CachedOp`` inlining all go through it.
    ``share=True``: a node ``visit`` keeps whose inputs are unchanged is kept itself, not copied
    (a pass that changes a few nodes of a large graph allocates only those and what reads them;
    nodes are never mutated, so the result may share them with ``sym``; where nothing changed the
    result is ``sym`` itself).

    >>> import lazyarray as la
    >>> x = la.sym.var("x", shape=(2,))
    >>> y = rewrite(la.sym.exp(x), lambda node, ins: None)
    >>> print(y.list_inputs(), len(y.topo()))
    ['x'] 2
    """
    # id(old node) -> its new node, or the entries replacing its outputs: only nodes replaced by
    # something else (a node kept as it is, or returned by ``visit`` itself, reads as itself), so
    # while nothing upstream was replaced a node's inputs are its own, taken without a lookup each
    moved: dict[int, Node | tuple] = {}
    order = sym.topo() if stop is None else topo_order(list(sym.outputs), stop=stop)
    kept = 0
    for node in order:
        same = True  # every input is the node's own (nothing upstream changed)
        if stop is not None and stop(node):
            ins = []
        elif not moved:
            ins = list(node.inputs)
        else:
            ins = []
            for e in node.inputs:
                r = moved.get(id(e.node))
                if r is None:
                    ins.append(e)
                else:
                    ins.append(r[e.index] if r.__class__ is tuple else Entry(r, e.index))
                    same = False
        new = visit(node, ins)
        if new is None:
            if share and same:
                kept += 1
                continue
            new = copied_node(node, tuple(ins), node.avals)  # (copy_node, inlined: once per copied node)
        if new is not node:
            moved[id(node)] = new if new.__class__ is Node or isinstance(new, Node) else tuple(new)
    if kept == len(order):  # (share: nothing changed; the symbol, and the order it knows, as they are)
        return sym
    outs = []
    for e in sym.outputs:
        r = moved.get(id(e.node))
        outs.append(e if r is None else r[e.index] if r.__class__ is tuple else Entry(r, e.index))
    return type(sym)(outs)


def unchanged(node: Node, ins) -> bool:
    """True when ``ins`` are ``node``'s own input entries (same nodes, same outputs)."""
    for a, e in zip(ins, node.inputs):
        if a is not e and (a.node is not e.node or a.index != e.index):
            return False
    return True


def has_op(sym, *names: str) -> bool:
    """True when a node of ``sym`` runs one of the ops ``names`` (a pass with nothing to rewrite
    returns its symbol as it is, without a copy)."""
    ops = getattr(sym, "op_names", None)  # (a Symbol knows them once; another graph is walked)
    if ops is not None:
        return not ops().isdisjoint(names)
    return any(n.op is not None and n.op.name in names for n in sym.topo())


def use_counts(sym) -> Mapping[int, int]:
    """``id(node) -> how many times it is read``: by other nodes' inputs, and by ``sym``'s outputs
    (a value the caller receives counts as one more reader, so a pass never rewrites it away).
    Read-only: a ``Symbol`` counts once and hands the same dict to every pass that asks (a pass with
    nothing to rewrite returns its symbol as it is, and the next pass asks of the same one)."""
    counts = getattr(sym, "use_counts", None)  # (a Symbol keeps them; another graph is walked)
    if counts is not None:
        return counts()
    return count_uses(sym.topo(), sym.outputs)


def count_uses(order: list[Node], outputs) -> dict[int, int]:
    """``use_counts`` of the graph of nodes ``order`` (each after its inputs) and ``outputs``."""
    uses: dict[int, int] = {}
    get = uses.get
    for node in order:
        for e in node.inputs:
            k = id(e.node)
            uses[k] = get(k, 0) + 1
    for e in outputs:
        uses[id(e.node)] = get(id(e.node), 0) + 1
    return uses
