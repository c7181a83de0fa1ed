"""Graph nodes and entries: the single IR every feature produces or consumes.

A ``Node`` is one op application (``op`` is an ``OpDef``) or, when ``op`` is None, a
variable: a named graph input (``kind="var"``) or a constant (``kind="const"``).
``Entry(node, index)`` names one output of a node.

Nodes are immutable syntax: op, inputs, params, avals, name, source line. They hold no
computed values, no gradients and no strong references to arrays: lazy values live with the
arrays that show them (``deferred.py``; a node's one runtime slot, ``shown``, only holds weak
references to those arrays, so materializing finds them without a table lookup per node),
autograd's saved values in its records (``autograd.py``). The one datum a node carries is a constant's literal: a read-only
array, or a captured user array together with the buffer version it had when it was
captured (``buffer.py``), which is checked before the constant is read.
"""
from __future__ import annotations

import itertools
import linecache
import os
import sys
from contextvars import ContextVar

from ..aval import Aval
from ..buffer import freeze, version
from ..errors import DeferredComputeError

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

    def __eq__(self, other) -> bool:
        return type(other) is Entry and other.node is self.node and other.index == self.index

    def __hash__(self) -> int:
        return hash((id(self.node), self.index))

    def __repr__(self) -> str:
        return f"Entry({self.node.label()}, {self.index})"


class Node:
    """One op application or one variable of the graph (treat it as immutable).

    ``avals`` holds one ``Aval`` per output; ``source`` the ``(file, line)`` of the user's
    code that created it. A constant keeps its literal in ``value``; ``version`` is None for
    a read-only literal, else the buffer version of a captured user array.
    """

    __slots__ = ("op", "inputs", "params", "name", "kind", "avals", "source", "value", "version", "serial",
                 "sbp", "block", "shown", "chain", "__weakref__")

    def __init__(self, op, inputs, params, avals, *, name=None, kind="op", value=None, version=None, source=None,
                 sbp=None, block=None):
        self.op = op
        self.inputs = inputs  # tuple[Entry, ...]
        self.params = params  # dict[str, Any], validated
        self.name = name
        self.kind = kind  # "op" | "var" | "const"
        self.avals = avals  # tuple[Aval, ...]
        self.source = source
        self.value = value  # constants only
        self.version = version  # constants capturing a user array: its buffer version then
        # Creation order (inputs exist before a node, so it is a topological order): graphs run
        # in it, so random draws happen in the order the user's code made them, as eagerly.
        self.serial = next(SERIAL)
        # SBP per output (``la.sbp``) once ``Symbol.infer_sbp`` annotated the node, else None.
        self.sbp = sbp
        # The block that created the node: ``((child name, block type), ...)`` from the traced
        # (root) block down, e.g. ``(("0", "ResBlock"), ("body", "HybridSequential"), ("1", "Conv2D"))``
        # for ``0.body.1``; None outside blocks (or directly in the root block's forward).
        self.block = block
        # Deferred compute's bookkeeping (``deferred.py``; the dispatcher's recording hot path sets it
        # on the node it just made): weak references
        # to the live lazy arrays that show this node's outputs (see ``deferred.show``), or None. Weak: a node never keeps an array alive; it is not part of the graph's syntax
        # (copies, JSON and equality ignore it).
        self.shown = None
        # The structural key of the chain this node ends (``executor/chain.py``), set by the
        # dispatcher's recording hot path; None for any other node (not part of the syntax either).
        self.chain = None

    @property
    def block_path(self) -> str:
        """The dotted path of the block that created the node (``"0.body.1.conv"``), ``""`` if none."""
        return ".".join(name for name, _ in self.block) if self.block else ""

    @property
    def is_variable(self) -> bool:
        return self.op is None

    def label(self) -> str:
        if self.name:
            return self.name
        return self.op.name if self.op is not None else self.kind

    def source_line(self) -> str:
        """``file.py:12: y = x * 2`` for messages, or ``""`` when unknown."""
        return source_text(self.source)

    def __repr__(self) -> str:
        shapes = ", ".join(str(a) for a in self.avals)
        return f"<Node {self.label()} : {shapes}>"


SERIAL = itertools.count()
_new = object.__new__


def op_node(op, inputs: tuple, params: dict, avals: tuple, source, block) -> Node:
    """``Node(op, inputs, params, avals, source=source, block=block)`` for the recording hot path:
    the same node, built without parsing keywords (half the cost per recorded op)."""
    n = _new(Node)
    n.op, n.inputs, n.params, n.name, n.kind, n.avals = op, inputs, params, None, "op", avals
    n.source, n.value, n.version, n.serial, n.sbp, n.block, n.shown, n.chain = \
        source, None, None, next(SERIAL), None, block, None, None
    return n


def copied_node(node: Node, inputs: tuple, avals: tuple) -> Node:
    """A copy of ``node`` reading ``inputs`` with ``avals`` (a new serial, no bookkeeping), built as
    ``op_node`` builds: the passes' copies (``rewrite.copy_node``) without parsing keywords."""
    n = _new(Node)
    n.op, n.inputs, n.params, n.name, n.kind, n.avals = node.op, inputs, dict(node.params), node.name, node.kind, avals
    n.source, n.value, n.version, n.serial, n.sbp, n.block, n.shown, n.chain = \
        node.source, node.value, node.version, next(SERIAL), node.sbp, node.block, None, None
    return n


# The block whose forward is running while a graph is recorded: ``(block, path)`` where ``path`` is
# the ``Node.block`` tuple given to the nodes made meanwhile. Set by ``blocks/block.py`` (a context
# variable: per thread and asyncio task, like the deferred-compute flag).
BLOCK_SCOPE: ContextVar = ContextVar("lazyarray_block_scope", default=None)

# The user's ``(file, line)`` for the nodes built meanwhile where one line made them all: an importer
# converting a file (``onnx/load.py``) sets the line that called it, once, instead of each node's
# ``user_source`` walking the same thirty frames of the package up to it. None: walk the stack.
RECORD_SOURCE: ContextVar = ContextVar("lazyarray_record_source", default=None)


def current_block():
    """The ``Node.block`` path for nodes recorded now (None outside a block's forward)."""
    scope = BLOCK_SCOPE.get()
    return scope[1] or None if scope is not None else None


# code object -> is it lazyarray's own code (its file is under the package): read on every node
# recorded, so a dict lookup. Bounded: code made at run time (``exec``, ``compile``, generated
# lambdas) would otherwise keep every code object that ever recorded a node alive. At the bound
# the oldest entry goes (an evicted one is looked up again: one ``startswith``).
IN_PACKAGE_CACHE_SIZE = 4096
IN_PACKAGE: dict = {}


def user_source(skip: int = 1):
    """The ``(file, line)`` of the first frame outside the lazyarray package.

    ``skip``: how many frames to step over first (1: start at the caller); a hot path that knows
    its own frames are the package's starts closer to the user's code (frames it skips must all
    be the package's, never the user's).
    """
    frame = sys._getframe(skip)
    inside = IN_PACKAGE
    while frame is not None:
        code = frame.f_code
        flag = inside.get(code)
        if flag is None:
            flag = code.co_filename.startswith(_PKG_DIR)
            if len(inside) >= IN_PACKAGE_CACHE_SIZE:
                try:
                    del inside[next(iter(inside))]
                except (KeyError, RuntimeError, StopIteration):  # (another thread changed it meanwhile)
                    pass
            inside[code] = flag
        if not flag:
            return (code.co_filename, frame.f_lineno)
        frame = frame.f_back
    return None


def source_text(source) -> str:
    """``file.py:12: y = x * 2`` for a ``(file, line)`` pair, or ``""`` when unknown."""
    if not source:
        return ""
    filename, lineno = source
    text = linecache.getline(filename, lineno).strip()
    return f"{os.path.basename(filename)}:{lineno}" + (f": {text}" if text else "")


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


def const_node(value, aval: Aval, name=None, version=None, source=None) -> Node:
    """A constant: a variable that holds its literal.

    With ``version=None`` the literal is frozen (read-only) and owned by the graph; with a
    version, ``value`` is a user's array captured as it was at that buffer version.
    """
    if version is None:
        freeze(value)
    return Node(None, (), {}, (aval,), name=name, kind="const", value=value, version=version, source=source)


def capture_node(value, aval: Aval, at_version: int | None = None) -> Node:
    """A constant standing for a user's array as it is now (its version, ``at_version`` when the
    caller just read it, is checked when the constant is read)."""
    return Node(None, (), {}, (aval,), kind="const", value=value,
                version=version(value) if at_version is None else at_version)


def check_capture(node: Node) -> None:
    """Raise when the user's array a constant captured was written in place since."""
    if node.version is not None and version(node.value) != node.version:
        where = node.source_line()
        raise DeferredComputeError(
            f"an array {node.avals[0]} captured by a recorded graph was written in place after it was "
            f"recorded (buffer version {node.version} -> {version(node.value)})"
            + (f" at {where}" if where else "")
            + "; compute the graph before writing the array, or write `x = x + y` instead of `x += y`")


# A graph input's one param: its concrete dims hold for every call (``la.sym.var(..., pinned=True)``)
PINNED = "pinned"


def var_node(name: str, aval: Aval) -> Node:
    """A graph input: a named variable with no value."""
    return Node(None, (), {}, (aval,), name=name, kind="var")


def clear() -> None:
    """Forget which code objects are the package's (``IN_PACKAGE``, at most ``IN_PACKAGE_CACHE_SIZE``)."""
    IN_PACKAGE.clear()
