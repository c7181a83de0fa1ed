"""The networkx view of a graph: for analysis, drawing and editing with networkx's tools.

``to_networkx`` gives a ``DiGraph`` with one node per graph node, keyed by the node's
unique name, with attributes ``op`` (None for variables), ``name``, ``shape``, ``dtype``,
plus what ``from_networkx`` needs to rebuild the symbol (``kind``, ``attrs``, ``avals``,
``value`` for constants, ``order``, ``sbp`` when annotated). One edge per producer/consumer pair carries ``uses``:
the ``(output index, input position)`` pairs (a value read twice, as in ``x * x``, is one
edge with two uses).
"""
from __future__ import annotations

import importlib

import numpy as np

from ..errors import GraphFormatError
from ..ops import registry
from .node import Entry, Node, const_node


def _networkx():
    """networkx, imported on first use: it is only needed for this view, and importing it with
    the package made every full garbage collection of a lazyarray process ~20 ms slower (its
    import creates tens of thousands of long-lived objects), which showed up as stalls while
    recording large graphs."""
    return importlib.import_module("networkx")


def to_networkx(sym):
    """A ``networkx.DiGraph`` view of ``sym`` (see the module docstring)."""
    nx = _networkx()
    g = nx.DiGraph()
    names = sym.names()
    for i, node in enumerate(sym.topo()):
        a0 = node.avals[0]
        g.add_node(
            names[id(node)], op=None if node.op is None else node.op.name, name=names[id(node)],
            shape=a0.shape, dtype=None if a0.dtype is None else str(a0.dtype),
            device=None if a0.device is None else str(a0.device), kind=node.kind,
            attrs=dict(node.params), avals=node.avals, order=i,
            value=node.value if node.kind == "const" else None, source=node.source, sbp=node.sbp,
            block=node.block,
        )
    for node in sym.topo():
        for pos, e in enumerate(node.inputs):
            u, v = names[id(e.node)], names[id(node)]
            if g.has_edge(u, v):
                g.edges[u, v]["uses"].append((e.index, pos))
            else:
                g.add_edge(u, v, uses=[(e.index, pos)])
    g.graph["outputs"] = [(names[id(e.node)], e.index) for e in sym.outputs]
    return g


def from_networkx(g) -> list[Entry]:
    """Output entries of a graph from a DiGraph laid out like ``to_networkx``'s."""
    nx = _networkx()
    if not nx.is_directed_acyclic_graph(g):
        cycle = nx.find_cycle(g)
        raise GraphFormatError(f"the graph has a cycle: {' -> '.join(str(u) for u, _ in cycle)}")
    built: dict = {}
    order = nx.lexicographical_topological_sort(g, key=lambda n: g.nodes[n].get("order", 0))
    for key in order:
        data = g.nodes[key]
        opname = data.get("op")
        if opname is None:
            built[key] = _variable(data, key)
            built[key].sbp = data.get("sbp")
            continue
        try:
            op = registry.get(opname)
        except KeyError as exc:
            raise GraphFormatError(f"node {key!r}: {exc.args[0]}") from None
        slots: dict[int, Entry] = {}
        for u in g.predecessors(key):
            for index, pos in g.edges[u, key]["uses"]:
                slots[pos] = Entry(built[u], index)
        if sorted(slots) != list(range(len(slots))):
            raise GraphFormatError(f"node {key!r}: input positions {sorted(slots)} have gaps")
        built[key] = Node(op, tuple(slots[i] for i in range(len(slots))), op.make_params(data.get("attrs", {})),
                          tuple(data["avals"]), name=data.get("name", key), source=data.get("source"),
                          sbp=data.get("sbp"), block=data.get("block"))
    outs = g.graph.get("outputs")
    if not outs:
        sinks = [n for n in g.nodes if g.out_degree(n) == 0]
        outs = [(n, 0) for n in sorted(sinks, key=lambda n: g.nodes[n].get("order", 0))]
    return [Entry(built[n], i) for n, i in outs]


def _variable(data: dict, key) -> Node:
    """A graph input or a constant from its DiGraph node."""
    kind = data.get("kind", "var")
    avals = tuple(data["avals"])
    if kind == "const":  # the graph's own read-only copy: a view never writes back into ours
        return const_node(np.array(data["value"], copy=True) if isinstance(data["value"], np.ndarray)
                          else data["value"], avals[0], name=data.get("name", key), source=data.get("source"))
    return Node(None, (), {}, avals, name=data.get("name", key), kind=kind, source=data.get("source"))
