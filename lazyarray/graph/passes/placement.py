"""Device placement: decide where each node runs and make every device change explicit.

A node runs where its inputs live (the first input that is not a constant decides;
constants follow their readers), unless the graph pins it: copy ops (``copy_to``) run
on their target device, and ``pins`` can name nodes explicitly. Every edge whose source
lives on another device than its reader gets an explicit ``copy_to`` node, one per
(source entry, target device), so the copies show in ``print(sym)``, in the JSON and in
the memory plan. Graph inputs take the avals given (the executor's call signature), and
every aval downstream is inferred again.
"""
from __future__ import annotations

from ...aval import Aval
from ...device import Device
from ...dim import has_symbols, substitute
from ...errors import LazyArrayError
from ...ops import registry
from ..node import Entry, Node, var_node
from ..rewrite import copy_node, rewrite, unchanged
from ..symbol import Symbol


def placement(sym: Symbol, given: dict[str, Aval] | None = None,
              pins: dict[str, Device] | None = None, dims: dict | None = None) -> Symbol:
    """``sym`` with graph inputs of avals ``given``, every node placed, copy nodes inserted.

    ``pins``: node name -> device, for nodes that must run on a given device.
    ``dims``: symbolic sizes -> values (``infer.bind_env`` of ``given``), bound in the same walk:
    ``placement(bind_dims(sym, given, avals=False), given)`` without copying the graph twice.

    >>> import lazyarray as la
    >>> x = la.sym.var("x", shape=(2,))
    >>> y = la.sym.exp(x)
    >>> moved = placement(y, {"x": la.Aval((2,), la.zeros(1).dtype, la.cpu(1))})
    >>> print(moved)
    %x = input : float32[2] @cpu(1)
    %exp0 = exp(%x) : float32[2] @cpu(1)
    return %exp0
    """
    given = given or {}
    pins = pins or {}
    copy_op = registry.get("copy_to")
    names = sym.names() if pins else None  # (display names: only pins need them)
    copies: dict[tuple[int, int, Device], Entry] = {}

    def moved(e: Entry, device: Device) -> Entry:
        if e.aval.device is device or e.aval.device is None:
            return e
        key = (id(e.node), e.index, device)
        c = copies.get(key)
        if c is None:
            a = e.aval
            node = Node(copy_op, (e,), {"device": device}, (Aval(a.shape, a.dtype, device, a.stype),),
                        source=e.node.source)
            c = copies[key] = Entry(node, 0)
        return c

    def visit(node: Node, ins: list[Entry]):
        if node.op is None:
            if node.kind == "var" and node.name in given and node.avals[0] != given[node.name]:
                return var_node(node.name, given[node.name])
            return _leaf_bound(node, dims) if dims else None
        if names is not None and names[id(node)] in pins:
            device = pins[names[id(node)]]
        elif node.op.device is not None:
            device = None  # the op places itself (copy_to: its target)
        else:
            device = _home(ins, node)
        if device is not None:
            ins = [moved(e, device) for e in ins]
        params = _bound_params(node, dims) if dims else None  # (None: the node's own)
        avals = _infer(node, ins, params)
        if device is not None and node.op.device is None and any(a.device is not device for a in avals):
            avals = tuple(Aval(a.shape, a.dtype, device, a.stype) for a in avals)
        if params is not None:
            return _with_params(copy_node(node, ins, avals), params)
        # (a node whose inputs and avals are its own is kept: a graph traced at the call's signature
        # comes back as itself, its order already known)
        return None if unchanged(node, ins) and avals == node.avals else copy_node(node, ins, avals)

    return rewrite(sym, visit, share=True)


def _with_params(node: Node, params: dict) -> Node:
    """``node`` (a copy just made, not yet in any graph) given ``params``."""
    node.params = params
    return node


def _leaf_bound(node: Node, dims: dict) -> Node | None:
    """A variable or constant whose avals hold sizes of ``dims``, with them substituted (else None)."""
    if not any(has_symbols(a.shape) for a in node.avals):
        return None
    return copy_node(node, (), tuple(a._replace(shape=substitute(a.shape, dims, True)) if has_symbols(a.shape)
                                     else a for a in node.avals))


def _bound_params(node: Node, dims: dict) -> dict | None:
    """``node``'s params with ``dims``' values in its size parameters (as ``bind_dims`` substitutes
    them), or None where none is symbolic."""
    if not has_symbols(tuple(node.params.values())):
        return None
    return {k: substitute(v, dims, True) for k, v in node.params.items()}


def _home(ins: list[Entry], node: Node) -> Device | None:
    """The device of the first non-constant input, else of the first input, else the node's own."""
    for e in ins:
        if not (e.node.op is None and e.node.kind == "const") and e.aval.device is not None:
            return e.aval.device
    for e in ins:
        if e.aval.device is not None:
            return e.aval.device
    return node.avals[0].device if node.avals else None


def _infer(node: Node, ins: list[Entry], params: dict | None = None):
    avals = [e.aval for e in ins]
    if any(a.shape is None or a.dtype is None for a in avals):
        dev = next((a.device for a in avals if a.device is not None), None)
        return tuple(Aval(None, None, dev) for _ in node.avals)
    try:
        return registry.infer(node.op, avals, node.params if params is None else params)
    except LazyArrayError as exc:
        where = node.source_line()
        raise type(exc)(f"{exc} (node {node.label()!r}" + (f", recorded at {where})" if where else ")")) from None
