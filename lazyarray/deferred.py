"""The deferred-compute flag and materialization.

While the flag is on (``with la.deferred():``), every op records a node and returns a
lazy array. The flag lives in a ``ContextVar``: each thread and each asyncio task sees
its own, so concurrent code never leaks it.
"""
from __future__ import annotations

import contextlib
import weakref

from . import guards
from .buffer import version
from .errors import DeferredComputeError, ParamError
from .executor.chain import describe_chain
from .executor.recorded import enabled as cache_enabled
from .executor.recorded import run_recorded
from .executor.structure import describe, finish
from .graph.node import Entry, Node
from .mode import DEFERRED, MODE, RECORDING, set_mode_bit  # noqa: F401  (the mode's users import them here)


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
        MODE.reset(token)


def is_deferred() -> bool:
    """True while deferred compute is on in this thread / task."""
    return bool(MODE.get() & DEFERRED)


# -- lazy values --------------------------------------------------------------------------------------
# Runtime state of deferred compute, kept out of the graph's syntax. Each node's ``shown`` slot
# (written and read only here) lists weak references to the live arrays that show its outputs,
# so computing one value fills every live array of the sub-graph and nothing is computed twice;
# a slot instead of a weak table because recording and materializing touch it once per node.
# ``_FIXED`` keeps values that must never be recomputed while their node lives: random draws
# (a second draw would differ) and autograd's saved values that a lazy graph reads.
_FIXED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # Node -> list of values
_ref = _REF = weakref.ref


def show(array, entry: Entry) -> None:
    """Register a lazy ``array`` as showing ``entry`` (dead references are pruned as we go).

    ``node.shown`` is None, a bare weak reference (one array shows output 0: the case of nearly
    every recorded node, which the recording hot path sets itself), or a list of
    ``(weakref(array), output index)``.
    """
    node = entry.node
    refs = node.shown
    if refs is None and entry.index == 0:
        node.shown = _ref(array)
        return
    if refs is None:
        refs = node.shown = []
    elif refs.__class__ is _REF:
        refs = node.shown = [(refs, 0)]
    elif len(refs) >= 4:
        refs[:] = [p for p in refs if p[0]() is not None]
    refs.append((_ref(array), entry.index))


def fix_values(node: Node, values: list, versions: tuple | None = None) -> None:
    """Keep ``values`` as the values of ``node`` for as long as the node lives (``versions``: the
    buffer versions they must still have when read; None for private buffers)."""
    _FIXED[node] = (values, versions)


def _fixed_values(node: Node, fixed) -> list:
    vals, versions = fixed
    if versions is not None and any(version(v) != n for v, n in zip(vals, versions)):
        line = node.source_line()
        raise DeferredComputeError(
            f"{node.label()}: a value autograd saved for this graph ({node.avals[0]}) was written in place "
            f"after it was recorded{' at ' + line if line else ''}; write `x = x + y` instead of "
            "`x += y`, or compute the graph first")
    return vals


def _shown_values(node: Node, refs: list, pending: list | None) -> list | None:
    """The values live arrays show for every output of ``node``, or None; arrays still lazy are
    appended to ``pending`` (when given). A value the user has since written in place no longer
    stands for the node."""
    if refs.__class__ is _REF:
        refs = ((refs, 0),)
    got = None
    for r, i in refs:
        a = r()
        if a is None:
            continue
        v = a._value
        if v is None:
            if pending is not None:
                pending.append(a)
        elif version(v) == 0:
            if got is None:
                got = [None] * len(node.avals)
            if got[i] is None:
                got[i] = v
    return None if got is None or any(v is None for v in got) else got


def known_values(node: Node) -> list | None:
    """The values of ``node`` that are already computed, or None."""
    fixed = _FIXED.get(node)
    if fixed is not None:
        return _fixed_values(node, fixed)
    refs = node.shown
    return None if refs is None else _shown_values(node, refs, None)


def materialize(arrays: list) -> list:
    """Compute lazy ``arrays``: only the needed sub-graph, once.

    Every other live lazy array of that sub-graph is filled too, so asking for it later
    computes nothing. Each array gets a buffer of its own. A computed array keeps its entry
    (``get_symbol`` still sees how it was made), but a graph recorded from it later reads its
    value as a constant, so that graph never holds what it was computed from. One walk
    (``executor/structure.describe``) stops at what is known, finds the live lazy arrays and
    the random nodes of the sub-graph (their draws are kept: see ``_FIXED``); how it runs (node
    by node, or a compiled program reused for graphs of the same structure) is
    ``executor/recorded.py``'s choice.
    """
    todo = [a for a in arrays if a._value is None]
    if not todo:
        return [a._value for a in arrays]
    trace = guards.active()
    if trace is not None:  # a hybridize trace must not bake a value of its inputs into the graph
        trace.check_value_read([a._entry for a in todo])
    fixed = _FIXED if len(_FIXED) else None
    if fixed is None and len(todo) == 1 and todo[0]._entry.node.chain is not None and cache_enabled():
        d = describe_chain(todo[0])  # a chain keyed while it was recorded: no walk with dicts
        if d is not None:
            todo[0]._value = run_recorded(d)[0]
            return [a._value for a in arrays]
    pending: list = []
    random_nodes: list[Node] = []

    def known_or_pending(node: Node) -> list | None:
        refs = node.shown
        if fixed is None and (refs is None or refs.__class__ is _REF and refs() is None) and not node.op.random:
            return None  # (the common case: nothing known, no live array, no draw)
        if fixed is not None:
            f = fixed.get(node)
            if f is not None:
                return _fixed_values(node, f)
        if refs is not None:
            vals = _shown_values(node, refs, pending)
            if vals is not None:
                return vals
        if node.op.random:
            random_nodes.append(node)
        return None

    d = describe([a._entry for a in todo], known_or_pending, cache=cache_enabled(), unshown_unknown=fixed is None)
    want = list({id(a): a for a in todo + pending}.values())
    entries = [a._entry for a in want]
    random_nodes.sort(key=_serial)
    drawn = [Entry(n, i) for n in random_nodes for i in range(len(n.avals))]
    values = run_recorded(finish(d, entries + drawn, random_nodes))
    k = len(entries)
    for n in random_nodes:  # a draw is made once: later graphs read this one
        fix_values(n, values[k:k + len(n.avals)])
        k += len(n.avals)
    for a, v in zip(want, values):
        a._value = v
    return [a._value for a in arrays]


def _serial(node: Node) -> int:
    return node.serial


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
    for i, a in enumerate(arrays):
        if not (hasattr(a, "_entry") and hasattr(a, "_value")):  # (an array: dispatch.ArrayBase's fields)
            shown = " ".join(repr(a).split())  # (one line: a list of arrays prints over several)
            shown = shown if len(shown) <= 60 else shown[:57] + "..."
            raise ParamError(f"compute: argument {i} is {type(a).__name__} {shown}, not a lazyarray array; pass "
                             "arrays, e.g. la.compute(a, b) (la.compute(*arrays) for a list)")
    materialize(list(arrays))
