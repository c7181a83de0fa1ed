"""The structure of a recorded sub-graph: numbered value slots and a hashable key.

``describe(ops, outputs, known)`` numbers every value the sub-graph reads or makes (one slot
per leaf output it reads, then the outputs of each op in order) and builds the **structural
key**: per op its ``OpDef``, its params (typed, see ``params_key``), the slots it reads and its
output avals; the avals of the leaves (constants, captured arrays, known values: the program's
inputs); the output slots. Values are never part of the key, so two recordings of the same
code on new data share one key; anything that changes what runs (a shape, a dtype, a device,
an op, a param, a connection, a constant's dtype) changes it. Ops the key cannot describe
safely (an op outside the registry, a param that is not plain data) make the key None: such a
graph is never cached.

The same description drives both ways of running it (``oneshot.py`` node by node, a cached
``Program`` in ``recorded.py``), so they read the same inputs in the same order.
"""
from __future__ import annotations

import numpy as np

from ..device import Device
from ..errors import DeferredComputeError
from ..graph.node import Entry, Node, check_capture
from ..ops import registry

_SCALAR_TYPES = frozenset({str, bytes, int, bool, type(None), type(Ellipsis)})


class Uncacheable(Exception):
    """A param the structural key cannot describe by value (an object, a dict, ...)."""


def freeze(v):
    """A hashable, typed stand-in for a param value: equal only for values that run the same
    (``1``, ``1.0`` and ``True`` differ; ``0.0`` and ``-0.0`` differ; NaN equals NaN)."""
    t = v.__class__
    if t in _SCALAR_TYPES:
        return (t, v)
    if t is float:
        return (t, v.hex())
    if t is tuple or t is list:
        return (t, tuple(freeze(x) for x in v))
    if t is slice:
        return (t, freeze(v.start), freeze(v.stop), freeze(v.step))
    if isinstance(v, np.dtype) or t is Device:
        return (t, v)
    if isinstance(v, np.generic):
        return (t, freeze(v.item()))
    raise Uncacheable(t.__name__)


def params_key(params: dict):
    """The params as a hashable tuple of ``(name, freeze(value))``; raises ``Uncacheable``."""
    if not params:
        return ()
    return tuple((k, freeze(v)) for k, v in params.items())


class Described:
    """A sub-graph as numbered slots (see the module docstring).

    ``ops``: the op nodes in run order, ``ins``: per op the slots it reads, ``firsts``: per op
    its first output slot; ``inputs``: per leaf slot ``(node, output index)``, in slot order
    (``in_slots``); ``out_slots``: one per requested output; ``key``: the structural key or
    None. ``steps`` and ``dense`` are derived when a run needs them (a cached program does not).
    """

    __slots__ = ("ops", "ins", "firsts", "inputs", "in_slots", "out_slots", "n_slots", "key")

    def __init__(self, ops, ins, firsts, inputs, in_slots, out_slots, n_slots, key):
        self.ops, self.ins, self.firsts = ops, ins, firsts
        self.inputs, self.in_slots, self.out_slots, self.n_slots, self.key = inputs, in_slots, out_slots, n_slots, key

    @property
    def steps(self):
        """``(node, input slots, first output slot)`` per op, in run order."""
        return zip(self.ops, self.ins, self.firsts)

    @property
    def dense(self) -> bool:
        """True when every value has default storage (no sparse input, output or leaf)."""
        return all(node.avals[i].stype == "default" for node, i in self.inputs) and \
            all(a.stype == "default" for node in self.ops for a in node.avals)


def describe(ops: list[Node], outputs: list[Entry], cache: bool = True) -> Described:
    """Number the slots of the sub-graph ``ops`` (in run order) computing ``outputs``; every
    input of an op that is not in ``ops`` is a leaf. ``cache=False`` skips building the key."""
    first: dict[int, int] = {}  # id(op node) -> its first output slot
    leaf_slot: dict[tuple[int, int], int] = {}
    inputs: list[tuple[Node, int]] = []
    in_slots: list[int] = []
    leaf_avals: list = []
    all_ins = []
    firsts = []
    parts = [] if cache else None
    checked: set = set()  # ops known to be the registry's
    n = 0
    for node in ops:
        ins = []
        for e in node.inputs:
            src = e.node
            b = first.get(id(src))
            if b is not None:
                ins.append(b + e.index)
                continue
            at = (id(src), e.index)
            s = leaf_slot.get(at)
            if s is None:
                s = leaf_slot[at] = n
                n += 1
                inputs.append((src, e.index))
                in_slots.append(s)
                leaf_avals.append(src.avals[e.index])
            ins.append(s)
        ins = tuple(ins)
        all_ins.append(ins)
        first[id(node)] = n
        firsts.append(n)
        avals = node.avals
        n += len(avals)
        if parts is not None:
            op = node.op
            params = node.params
            try:
                if op not in checked:
                    if not registry.is_registered(op):
                        raise Uncacheable(op.name)
                    checked.add(op)
                parts.append((op, params_key(params) if params else (), ins, avals))
            except Uncacheable:
                parts = None
    out_slots = []
    for e in outputs:
        b = first.get(id(e.node))
        if b is None:  # an output that is a leaf (a known value): the program copies it
            at = (id(e.node), e.index)
            b = leaf_slot.get(at)
            if b is None:
                b = leaf_slot[at] = n
                n += 1
                inputs.append((e.node, e.index))
                in_slots.append(b)
                leaf_avals.append(e.node.avals[e.index])
            out_slots.append(b)
        else:
            out_slots.append(b + e.index)
    key = None if parts is None else (tuple(parts), tuple(leaf_avals), tuple(out_slots))
    return Described(ops, all_ins, firsts, inputs, in_slots, out_slots, n, key)


def max_bytes(d: Described) -> int | None:
    """The largest value an op of ``d`` makes, None when a dim is unknown."""
    most = 0
    seen: set = set()
    for node, _, _ in d.steps:
        for a in node.avals:
            if a in seen:
                continue
            seen.add(a)
            if a.shape is None or a.dtype is None or None in a.shape:
                return None
            most = max(most, a.nbytes)
    return most


def input_values(d: Described, known: dict) -> list:
    """The values of the leaves, in slot order: known values, constants (a captured user array is
    checked for writes since it was recorded); a graph input with no value raises."""
    args = []
    for node, i in d.inputs:
        vals = known.get(id(node))
        if vals is not None:
            args.append(vals[i])
        elif node.op is None and node.kind == "const":
            if node.version is not None:
                check_capture(node)
            args.append(node.value)
        elif node.op is None:
            raise DeferredComputeError(
                f"cannot compute: graph input {node.name!r} ({node.avals[0]}) has no value; "
                "bind it by calling the symbol through la.CachedOp(sym)(...)")
        else:  # (an op node is a leaf only when its values are known)
            raise AssertionError(f"{node.label()}: an op node with no known value read as a leaf")
    return args
