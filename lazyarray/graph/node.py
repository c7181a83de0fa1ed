"""Graph nodes and entries: the single IR every feature produces or consumes.

A ``Node`` is one op application (``op`` is an ``OpDef``) or, when ``op`` is None, a
variable: a named graph input (``kind="var"``) or a constant whose value it holds
(``kind="const"``). ``Entry(node, index)`` names one output of a node.

The lazy value of an array lives here, in ``Node.values``, so materialization fills
nodes and never needs the ``NDArray`` type.
"""
from __future__ import annotations

import linecache
import os
import sys
import weakref

from ..aval import Aval

_PKG_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class Entry:
    """Output ``index`` of ``node``. Hashable and cheap; compares by identity of the node."""

    __slots__ = ("node", "index")

    def __init__(self, node: Node, index: int = 0):
        self.node = node
        self.index = index

    @property
    def aval(self) -> Aval:
        return self.node.avals[self.index]

    @property
    def value(self):
        """The computed backend value, or None while lazy."""
        vals = self.node.values
        return None if vals is None else vals[self.index]

    def __eq__(self, other) -> bool:
        return type(other) is Entry and other.node is self.node and other.index == self.index

    def __hash__(self) -> int:
        return hash((id(self.node), self.index))

    def __repr__(self) -> str:
        return f"Entry({self.node.label()}, {self.index})"


class Node:
    """One op application or one variable of the graph.

    ``avals`` holds one ``Aval`` per output; ``values`` the computed outputs (or None);
    ``source`` the ``(file, line)`` of the user's code that created it;
    ``requires_grad`` is True when a gradient can flow to it from a leaf that asked for one.
    """

    __slots__ = (
        "op", "inputs", "params", "name", "kind", "avals", "values", "source",
        "requires_grad", "grad_req", "grad_stype", "grad", "handles", "__weakref__",
    )

    def __init__(self, op, inputs, params, avals, *, name=None, kind="op", values=None, source=None):
        self.op = op
        self.inputs = inputs  # tuple[Entry, ...]
        self.params = params  # dict[str, Any], validated
        self.name = name
        self.kind = kind  # "op" | "var" | "const"
        self.avals = avals  # tuple[Aval, ...]
        self.values = values  # list of backend values or None
        self.source = source
        self.requires_grad = False
        self.grad_req = "null"  # for leaves: "write" | "add" | "null"
        self.grad_stype = "default"  # for leaves: the storage type asked of the gradient
        self.grad = None  # for leaves: the gradient value (eager) or Entry (lazy)
        self.handles = None  # weakrefs to arrays viewing this node's outputs

    @property
    def is_variable(self) -> bool:
        return self.op is None

    def label(self) -> str:
        if self.name:
            return self.name
        return self.op.name if self.op is not None else self.kind

    def add_handle(self, array) -> None:
        """Remember a live array that shows an output, so materialization keeps that value."""
        if self.handles is None:
            self.handles = [weakref.ref(array)]
        else:
            self.handles.append(weakref.ref(array))

    def has_live_handle(self) -> bool:
        return self.handles is not None and any(r() is not None for r in self.handles)

    def source_line(self) -> str:
        """``file.py:12: y = x * 2`` for messages, or ``""`` when unknown."""
        if not self.source:
            return ""
        filename, lineno = self.source
        text = linecache.getline(filename, lineno).strip()
        return f"{os.path.basename(filename)}:{lineno}" + (f": {text}" if text else "")

    def __repr__(self) -> str:
        shapes = ", ".join(str(a) for a in self.avals)
        return f"<Node {self.label()} : {shapes}>"


_IN_PACKAGE: dict = {}  # code object -> is it lazyarray's own code


def user_source():
    """The ``(file, line)`` of the first frame outside the lazyarray package."""
    frame = sys._getframe(1)
    inside = _IN_PACKAGE
    while frame is not None:
        code = frame.f_code
        flag = inside.get(code)
        if flag is None:
            flag = inside[code] = code.co_filename.startswith(_PKG_DIR)
        if not flag:
            return (code.co_filename, frame.f_lineno)
        frame = frame.f_back
    return None


def unique_names(order: list[Node], given: dict[int, str] | None = None) -> dict[int, str]:
    """A unique display name per node, ``id(node) -> name``, deterministic in ``order``.

    Names from ``given`` or the nodes' own names come first (so generated names never collide
    with them); the rest are ``<op>`` + a counter (``relu0``, ``relu1``) or the variable kind.
    """
    names: dict[int, str] = {}
    used: set[str] = set()
    for node in order:
        nm = (given.get(id(node)) if given else None) or node.name
        if nm and nm not in used:
            names[id(node)] = nm
            used.add(nm)
    counters: dict[str, int] = {}
    for node in order:
        if id(node) in names:
            continue
        base = node.name or (node.op.name if node.op is not None else node.kind)
        k = counters.get(base, 0)
        while f"{base}{k}" in used:
            k += 1
        counters[base] = k + 1
        names[id(node)] = f"{base}{k}"
        used.add(f"{base}{k}")
    return names


def const_node(value, aval: Aval, name=None) -> Node:
    """A constant: a variable that holds its value."""
    return Node(None, (), {}, (aval,), name=name, kind="const", values=[value])


def var_node(name: str, aval: Aval) -> Node:
    """A graph input: a named variable with no value."""
    return Node(None, (), {}, (aval,), name=name, kind="var")
