"""The deferred-compute flag and materialization.

While the flag is on (``with la.deferred():``), every op records a node and returns a
lazy array. The flag lives in a ``ContextVar``: each thread and each asyncio task sees
its own, so concurrent code never leaks it.
"""
from __future__ import annotations

import contextlib
import contextvars
import weakref

from . import guards
from .buffer import version
from .errors import DeferredComputeError
from .executor.program import evaluate
from .graph.node import Entry, Node
from .graph.traverse import topo_order

# One context variable holds both recording flags, so the dispatcher's hot path reads one
# value: bit DEFERRED (ops record nodes) and bit RECORDING (autograd.record() is active).
_MODE: contextvars.ContextVar[int] = contextvars.ContextVar("lazyarray_mode", default=0)
DEFERRED, RECORDING = 1, 2


def set_mode_bit(bit: int, on: bool) -> contextvars.Token:
    """Turn one flag of the mode on or off for this context; returns the token to reset it."""
    mode = _MODE.get()
    return _MODE.set(mode | bit if on else mode & ~bit)


@contextlib.contextmanager
def deferred(active: bool = True):
    """Record ops instead of computing them, for this thread / task. Nesting is fine.

    >>> import lazyarray as la
    >>> x = la.ones((2, 3))
    >>> with la.deferred():
    ...     y = x * 2
    >>> y.is_lazy, y.static_shape
    (True, (2, 3))
    >>> y.asnumpy().tolist()
    [[2.0, 2.0, 2.0], [2.0, 2.0, 2.0]]
    """
    token = set_mode_bit(DEFERRED, active)
    try:
        yield
    finally:
        _MODE.reset(token)


def is_deferred() -> bool:
    """True while deferred compute is on in this thread / task."""
    return bool(_MODE.get() & DEFERRED)


# -- lazy values --------------------------------------------------------------------------------------
# Runtime state of deferred compute, kept out of the graph. ``_SHOWN`` maps a node to the live
# arrays that show its outputs (weakly both ways: it never keeps a node or an array alive), so
# computing one value fills every live array of the sub-graph and nothing is computed twice.
# ``_FIXED`` keeps values that must never be recomputed while their node lives: random draws
# (a second draw would differ) and autograd's saved values that a lazy graph reads.
_SHOWN: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # Node -> {index: [weakref(array)]}
_FIXED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # Node -> list of values


def show(array, entry: Entry) -> None:
    """Register a lazy ``array`` as showing ``entry`` (dead references are pruned as we go)."""
    by_index = _SHOWN.get(entry.node)
    if by_index is None:
        _SHOWN[entry.node] = {entry.index: [weakref.ref(array)]}
        return
    refs = by_index.get(entry.index)
    if refs is None:
        by_index[entry.index] = [weakref.ref(array)]
    else:
        refs[:] = [r for r in refs if r() is not None]
        refs.append(weakref.ref(array))


def fix_values(node: Node, values: list, versions: tuple | None = None) -> None:
    """Keep ``values`` as the values of ``node`` for as long as the node lives (``versions``: the
    buffer versions they must still have when read; None for private buffers)."""
    _FIXED[node] = (values, versions)


def known_values(node: Node) -> list | None:
    """The values of ``node`` that are already computed, or None."""
    fixed = _FIXED.get(node)
    if fixed is not None:
        vals, versions = fixed
        if versions is not None and any(version(v) != n for v, n in zip(vals, versions)):
            line = node.source_line()
            raise DeferredComputeError(
                f"{node.label()}: a value autograd saved for this graph ({node.avals[0]}) was written in place "
                f"after it was recorded{' at ' + line if line else ''}; write `x = x + y` instead of "
                "`x += y`, or compute the graph first")
        return vals
    by_index = _SHOWN.get(node)
    if by_index is None:
        return None
    out = []
    for i in range(len(node.avals)):
        v = None
        for r in by_index.get(i, ()):
            a = r()
            if a is not None and a._value is not None and version(a._value) == 0:
                v = a._value  # (a value the user has since written in place no longer stands for the node)
                break
        if v is None:
            return None
        out.append(v)
    return out


def _pending(entries: list[Entry]) -> tuple[list, list[Node]]:
    """Live lazy arrays showing a node of the sub-graph behind ``entries`` (computed with them),
    and the random nodes of that sub-graph (their draws are kept: see ``_FIXED``)."""
    found, random_nodes = [], []
    for node in topo_order(entries, stop=lambda n: n.op is None or known_values(n) is not None):
        if node.op is not None and node.op.random:
            random_nodes.append(node)
        by_index = _SHOWN.get(node)
        if by_index is None:
            continue
        for i, refs in by_index.items():
            for r in refs:
                a = r()
                if a is not None and a._value is None:
                    found.append(a)
    return found, random_nodes


def materialize(arrays: list) -> list:
    """Compute lazy ``arrays``: only the needed sub-graph, once, as one planned program.

    Every other live lazy array of that sub-graph is filled too, so asking for it later
    computes nothing. Each array gets a buffer of its own. A computed array keeps its entry
    (``get_symbol`` still sees how it was made), but a graph recorded from it later reads its
    value as a constant, so that graph never holds what it was computed from.
    """
    todo = [a for a in arrays if a._value is None]
    if not todo:
        return [a._value for a in arrays]
    trace = guards.active()
    if trace is not None:  # a hybridize trace must not bake a value of its inputs into the graph
        trace.check_value_read([a._entry for a in todo])
    extra, random_nodes = _pending([a._entry for a in todo])
    want = list({id(a): a for a in todo + extra}.values())
    entries = [a._entry for a in want]
    drawn = [Entry(n, i) for n in random_nodes for i in range(len(n.avals))]
    values = evaluate(entries + drawn, known_values)
    k = len(entries)
    for n in random_nodes:  # a draw is made once: later graphs read this one
        fix_values(n, values[k:k + len(n.avals)])
        k += len(n.avals)
    for a, v in zip(want, values):
        a._value = v
    return [a._value for a in arrays]


def compute(*arrays) -> None:
    """Compute several lazy arrays at once: one plan, shared work done once.

    >>> import lazyarray as la
    >>> x = la.ones((3,))
    >>> with la.deferred():
    ...     h = x * 2
    ...     a, b = h + 1, h - 1
    >>> la.compute(a, b)
    >>> a.is_lazy, b.asnumpy().tolist()
    (False, [1.0, 1.0, 1.0])
    """
    materialize(list(arrays))
