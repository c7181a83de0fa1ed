"""Graph traversal: topological order of the nodes that reach a set of entries.

Iterative (no recursion limit for 10,000-node chains) and deterministic: nodes come in the
order they were created (every node is created after its inputs), so random draws run in
the order the user's code made them, eagerly or compiled. networkx offers the
same algorithms on its own graph type; converting for every materialization would
cost more than the walk itself, so the hot path walks our nodes directly and the
networkx view (``Symbol.to_networkx``) serves analysis.
"""
from __future__ import annotations

from .node import Entry, Node


def topo_order(outputs: list[Entry], stop=None) -> list[Node]:
    """Nodes reachable from ``outputs``, each after its inputs.

    ``stop(node) -> bool`` cuts the walk: a stopped node is listed but its inputs are not
    visited (used to treat already-computed nodes as leaves).
    """
    order: list[Node] = []
    seen: set[int] = set()
    for out in outputs:
        root = out.node
        if id(root) in seen:
            continue
        seen.add(id(root))
        stack = [(root, iter(() if stop is not None and stop(root) else root.inputs))]
        while stack:
            node, it = stack[-1]
            for e in it:
                child = e.node
                if id(child) not in seen:
                    seen.add(id(child))
                    stack.append((child, iter(() if stop is not None and stop(child) else child.inputs)))
                    break
            else:
                stack.pop()
                order.append(node)
    # Variables and constants first, in the order the walk met them (graph inputs keep their
    # order); then the ops in creation order: topological too, and the order eager code ran them.
    leaves = [n for n in order if n.op is None]
    if len(leaves) == len(order):
        return order
    ops = [n for n in order if n.op is not None]
    ops.sort(key=_serial)
    return leaves + ops


def _serial(node: Node) -> int:
    return node.serial
