"""Graph traversal: topological order of the nodes that reach a set of entries.

Iterative (no recursion limit for 10,000-node chains) and deterministic: nodes come in the
order they were created (every node is created after its inputs), so random draws run in
the order the user's code made them, eagerly or compiled. networkx offers the
same algorithms on its own graph type; converting for every materialization would
cost more than the walk itself, so the hot path walks our nodes directly and the
networkx view (``Symbol.to_networkx``) serves analysis.
"""
from __future__ import annotations

import operator

from .node import Entry, Node


def topo_order(outputs: list[Entry], stop=None) -> list[Node]:
    """Nodes reachable from ``outputs``, each after its inputs.

    ``stop(node) -> bool`` cuts the walk: a stopped node is listed but its inputs are not
    visited (used to treat already-computed nodes as leaves).
    """
    # Variables and constants first, in the order a depth-first walk from the outputs (inputs in
    # order) meets them (graph inputs keep their order); then the ops in creation order:
    # topological too, and the order eager code ran them. (One stack of entries, each node marked
    # when taken from it: a recursive walk's first meetings, without an iterator per node; the
    # nodes themselves in the set, hashed by identity in C.)
    leaves: list[Node] = []
    ops: list[Node] = []
    seen: set[Node] = set()
    stack = list(outputs)
    stack.reverse()
    pop, push, mark, leaf, op = stack.pop, stack.extend, seen.add, leaves.append, ops.append
    while stack:
        node = pop().node
        if node in seen:
            continue
        mark(node)
        if node.op is None:
            leaf(node)
        else:
            op(node)
        if stop is None or not stop(node):
            push(node.inputs[::-1])  # (a reversed copy, made in C: faster to extend by than an iterator)
    if not ops:
        return leaves
    ops.sort(key=_SERIAL)
    return leaves + ops


_SERIAL = operator.attrgetter("serial")
