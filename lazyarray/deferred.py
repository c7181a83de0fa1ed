"""The deferred-compute flag and materialization.

While the flag is on (``with la.deferred():``), every op records a node and returns a
lazy array. The flag lives in a ``ContextVar``: each thread and each asyncio task sees
its own, so concurrent code never leaks it.
"""
from __future__ import annotations

import contextlib
import contextvars

from .executor.program import evaluate
from .graph.node import Entry

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


def materialize(entries: list[Entry]) -> list:
    """Compute the backend values of ``entries``: only the needed sub-graph, once.

    Every other node of that sub-graph that a live lazy array shows keeps its value too,
    so asking for it later computes nothing. The sub-graph runs as one compiled, memory-
    planned program (``executor/program.py``).
    """
    return evaluate(entries, keep=lambda node: node.has_live_handle())
