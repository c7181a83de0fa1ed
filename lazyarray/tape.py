"""Autograd's runtime state: a ``Record`` per recorded op, a ``Leaf`` per ``attach_grad()`` array.

The graph nodes stay pure syntax; what a backward needs beyond them (the values an op produced
with their buffer versions, the records or leaves of its inputs, how a gradient is kept) lives
here. ``autograd.py`` (recording, ``backward``) and ``backward_cache.py`` (the compiled backward
it calls) both read these, so they sit below both and imports point one way.
"""
from __future__ import annotations

from .buffer import version
from .errors import AutogradError
from .graph.node import Entry, Node, capture_node


class Leaf:
    """What ``attach_grad()`` gives an array: how its gradient is kept, and the gradient itself.

    ``entry``: the graph entry that stands for the array (a constant capturing its buffer at
    a version, renewed when the buffer changes; or the array's own lazy entry).
    ``grad``: the gradient array (None before the first backward: no memory until needed).
    ``fresh``: written by a backward since the optimizer last consumed it.
    """

    __slots__ = ("entry", "grad_req", "stype", "grad", "fresh", "name")

    def __init__(self, entry: Entry, grad_req: str, stype: str):
        self.entry, self.grad_req, self.stype = entry, grad_req, stype
        self.grad = None
        self.fresh = False
        self.name = None  # a parameter's name (``"0.weight"``), for messages; None for a user's array

    def entry_for(self, value) -> Entry:
        """The entry standing for the array whose value is ``value`` now (renewed after writes)."""
        e = self.entry
        node = e.node
        if node.kind == "const":
            now = version(value)
            if node.value is not value or node.version != now:
                e = self.entry = Entry(capture_node(value, node.avals[0], now))
        return e


class Record:
    """One op application recorded for ``backward``: the graph node, the values it produced with
    their buffer versions (None while lazy, and after a backward freed them), and the records or
    leaves of its inputs (aligned with ``node.inputs``; None for inputs no gradient reaches).

    Only the first ``shown`` values were handed to the user (all by default); the rest (a
    compiled call's values saved for its backward) are fresh buffers only the record holds, so
    nobody can write them and their versions are not kept (``versions`` may be shorter).
    """

    __slots__ = ("node", "values", "versions", "parents", "freed")

    def __init__(self, node: Node, values, parents: tuple, shown: int | None = None):
        self.node = node
        self.values = values
        self.versions = None if values is None else tuple([version(v) for v in values[:shown]])
        self.parents = parents
        self.freed = False


def tracked_nodes(arrays) -> dict:
    """``id(node) -> record or leaf`` for the arrays autograd tracks (by the node standing for each)."""
    by_node = {}
    for a in arrays:
        ag = a._ag
        if ag is not None and a._entry is not None:
            by_node[id(ag.entry.node if ag.__class__ is Leaf else a._entry.node)] = ag
    return by_node


def parents_of(entries, arrays) -> tuple:
    """The record or leaf behind each input entry of a new record (None where no gradient flows)."""
    by_node = tracked_nodes(arrays)
    return tuple(by_node.get(id(e.node)) for e in entries)


def saved_value_written(r: Record, i: int) -> AutogradError:
    """The error for output ``i`` of record ``r`` written in place after autograd saved it."""
    return AutogradError(
        f"backward: the output {r.node.avals[i]} of {r.node.label()}{recorded_at(r.node)} was written in place "
        f"after autograd saved it for the gradient (buffer version {r.versions[i]} -> {version(r.values[i])}); "
        "write `y = y + 1` instead of `y += 1`, or call backward() before changing it")


def captured_input_written(node: Node, name: str | None = None) -> AutogradError:
    """The error for an array a recorded op read (a captured constant or a leaf) written since;
    ``name``: the parameter it is the value of, if one is."""
    if name:
        return AutogradError(
            f"backward: parameter {name!r} ({node.avals[0]}) was written in place after the recorded forward "
            f"read it (buffer version {node.version} -> {version(node.value)}), and its gradient needs the value "
            f"the forward read; call backward() (then trainer.step(), which updates {name!r} for you) before "
            f"changing {name!r}, or change it before the forward that autograd.record() records")
    return AutogradError(
        f"backward: an array {node.avals[0]} read by the recorded computation was written in place "
        f"after it was recorded (buffer version {node.version} -> {version(node.value)}); "
        "write `x = x + 1` instead of `x += 1`, or call backward() before changing it")


def recorded_at(node: Node) -> str:
    line = node.source_line()
    return f" (recorded at {line})" if line else ""
