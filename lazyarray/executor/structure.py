"""The structure of a recorded sub-graph: numbered value slots and a hashable key.

``describe(entries, known_values)`` walks once from the outputs over the ops that compute
them, stopping at known values, and numbers every value as it meets it (the outputs of each op
to run, each leaf output an op reads); ``finish(d, outputs, random_nodes)`` adds the outputs.
The **structural key** (``StructureKey``: a tuple that keeps its hash) lists, column by column
with one entry per op in walk order (which depends only on the structure), each op's first
slot, ``OpDef``, params (typed, see ``params_key``; by op position), the slots it reads and its
output avals; then the leaves' slots and avals (constants, captured arrays, known values: the
program's inputs), the output slots and the order of the random draws. Values are never part
of the key, so two recordings of the same code on new data share one key; anything that
changes what runs (a shape, a dtype, a device, an op, a param, a connection, a constant's
dtype) changes it. Ops the key cannot describe safely (an op outside the registry, a param
that is not plain data) make the key None: such a graph is never cached.

The same description drives both ways of running it (``oneshot.py`` node by node, a cached
``Program`` in ``recorded.py``), so they read the same inputs in the same order.
"""
from __future__ import annotations

import weakref
from operator import attrgetter

import numpy as np

from ..device import Device
from ..errors import DeferredComputeError
from ..graph.node import Entry, Node, check_capture
from ..ops import registry

_REF = weakref.ref
_OP, _PARAMS, _AVALS = attrgetter("op"), attrgetter("params"), attrgetter("avals")
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


class StructureKey:
    """The structural key: a tuple of parts (see the module docstring) with its hash computed once
    (a tuple does not keep its hash, and the cache hashes a key several times: look-up, LRU
    move, the seen-once set). Equal only to a key with equal parts."""

    __slots__ = ("parts", "_hash")

    def __init__(self, parts: tuple):
        self.parts = parts
        self._hash = hash(parts)

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other) -> bool:
        return other.__class__ is StructureKey and (
            other is self or other._hash == self._hash and other.parts == self.parts)

    def __repr__(self) -> str:
        return f"StructureKey({len(self.parts[0])} ops)"


class Described:
    """A sub-graph as numbered slots (see the module docstring).

    ``ops``: the op nodes in walk order, ``ins``: per op the slots it reads, ``firsts``: per op
    its first output slot; ``inputs``: per leaf slot ``(node, output index)``, in slot order
    (``in_slots``); ``out_slots``: one per requested output; ``known``: ``id(node) -> values``
    of the known nodes met; ``key``: the structural key (None until ``finish``, or when the graph
    cannot be cached). ``steps`` and ``dense`` are derived when a run needs them (a cached
    program does not).
    """

    __slots__ = ("ops", "ins", "firsts", "inputs", "in_slots", "out_slots", "n_slots", "known", "key",
                 "_cache", "_slot", "_leaf_slot", "_leaf_avals")

    @property
    def steps(self) -> list:
        """``(node, input slots, first output slot)`` per op, in run order: creation order, so
        random draws happen in the order the user's code made them (any order is topological)."""
        ops = self.ops
        order = sorted(range(len(ops)), key=lambda i: ops[i].serial)
        return [(ops[i], self.ins[i], self.firsts[i]) for i in order]

    @property
    def dense(self) -> bool:
        """True when every value has default storage (no sparse input, output or leaf)."""
        return all(node.avals[i].stype == "default" for node, i in self.inputs) and \
            all(a.stype == "default" for node in self.ops for a in node.avals)

    def _leaf(self, node: Node, index: int) -> int:
        at = id(node) if index == 0 else (id(node), index)
        s = self._leaf_slot.get(at)
        if s is None:
            s = self._leaf_slot[at] = self.n_slots
            self.n_slots += 1
            self.inputs.append((node, index))
            self.in_slots.append(s)
            self._leaf_avals.append(node.avals[index])
        return s


def describe(entries: list[Entry], known_values, cache: bool = True, unshown_unknown: bool = False) -> Described:
    """One walk from ``entries`` over the ops that compute them, numbering slots as it meets
    values and building the key's parts. ``known_values(node)`` is asked once per op node met:
    its values when they are known (the node is then a leaf), else None. With
    ``unshown_unknown`` the caller vouches that an op node no live array shows (``shown`` None or
    a dead weak reference) and that draws no random numbers has no known value, so it is not
    asked about such nodes (most nodes of a recorded chain). Call ``finish`` with the outputs to
    complete the description."""
    d = Described()
    d.ops, d.ins, d.firsts, d.inputs, d.in_slots, d.out_slots = [], [], [], [], [], []
    d.known, d.key, d._leaf_slot, d._leaf_avals = {}, None, {}, []
    known = d.known
    slot, stack, n = _output_slots(entries, known_values, known)
    ops, all_ins, firsts = d.ops, d.ins, d.firsts
    leaf_slot, inputs, in_slots, leaf_avals = d._leaf_slot, d.inputs, d.in_slots, d._leaf_avals
    # (a parallel stack of first slots: no look-up of the node's own slot when it is popped)
    starts = [slot[id(node)] for node in stack]
    pop, push, get, pop_first, push_first = stack.pop, stack.append, slot.get, starts.pop, starts.append
    add_op, add_ins, add_first = ops.append, all_ins.append, firsts.append
    ref = _REF
    quick = unshown_unknown
    while stack:
        node = pop()
        first = pop_first()
        ins = []
        for e in node.inputs:
            src = e.node
            b = get(id(src))
            if b is None:  # met for the first time: an op to run, or a leaf
                op = src.op
                if op is not None and (
                        quick and not op.random and ((refs := src.shown) is None or refs.__class__ is ref and refs() is None)
                        or (vals := known_values(src)) is None):
                    b = slot[id(src)] = n
                    n += len(src.avals)
                    push(src)
                    push_first(b)
                else:
                    b = slot[id(src)] = -1
                    if op is not None:
                        known[id(src)] = vals
            if b >= 0:
                ins.append(b + e.index)
                continue
            i = e.index  # a leaf: one slot per output read (keyed by the node's id alone for output 0)
            at = id(src) if i == 0 else (id(src), i)
            b = leaf_slot.get(at)
            if b is None:
                b = leaf_slot[at] = n
                n += 1
                inputs.append((src, i))
                in_slots.append(b)
                leaf_avals.append(src.avals[i])
            ins.append(b)
        add_op(node)
        add_ins(tuple(ins))
        add_first(first)
    d._cache, d._slot, d.n_slots = cache, slot, n
    return d


def _output_slots(entries: list[Entry], known_values, known: dict) -> tuple:
    """``describe``'s start: ``(slot, stack, n)`` after the outputs' nodes (met before anything
    they read): ``slot`` maps id(node) to its first output slot (op nodes to run) or -1 (leaves,
    their ``known`` values noted); ``stack``: the op nodes to walk from; ``n``: slots so far."""
    slot: dict[int, int] = {}
    stack = []
    n = 0
    for e in entries:
        node = e.node
        if id(node) in slot:
            continue
        vals = known_values(node) if node.op is not None else None
        if node.op is None or vals is not None:
            slot[id(node)] = -1
            if vals is not None:
                known[id(node)] = vals
        else:
            slot[id(node)] = n
            n += len(node.avals)
            stack.append(node)
    return slot, stack, n


def _op_parts(d: Described):
    """The ops' part of the key, column by column (one entry per op in walk order): first slots,
    ``OpDef``s, typed params ``(op position, params_key)`` of the ops that have any, input slots,
    output avals; None when an op is not the registry's or a param is not plain data."""
    ops = d.ops
    defs = tuple(map(_OP, ops))
    for op in set(defs):
        if not registry.is_registered(op):
            return None
    params = ()
    if any(map(_PARAMS, ops)):
        try:
            params = tuple([(i, params_key(node.params)) for i, node in enumerate(ops) if node.params])
        except Uncacheable:
            return None
    return tuple(d.firsts), defs, params, tuple(d.ins), tuple(map(_AVALS, ops))


def finish(d: Described, outputs: list[Entry], random_nodes: list[Node]) -> Described:
    """Number ``outputs`` (entries of nodes the walk met) and complete the key: the parts in walk
    order, the leaves' slots and avals, the output slots, and the order of the random draws."""
    slot = d._slot
    for e in outputs:
        b = slot[id(e.node)]
        d.out_slots.append(b + e.index if b >= 0 else d._leaf(e.node, e.index))
    parts = _op_parts(d) if d._cache else None
    if parts is not None:
        draws = tuple(slot[id(n)] for n in sorted(random_nodes, key=_serial)) if random_nodes else ()
        d.key = StructureKey((parts, tuple(zip(d.in_slots, d._leaf_avals)), tuple(d.out_slots), draws))
    d._slot = d._leaf_slot = None
    return d


def _serial(node: Node) -> int:
    return node.serial


def max_bytes(d: Described) -> int | None:
    """The largest value an op of ``d`` makes, None when a dim is unknown."""
    most = 0
    seen: set[int] = set()  # (nodes of one signature share their avals tuple: the rule memo's)
    for node in d.ops:
        avals = node.avals
        if id(avals) in seen:
            continue
        seen.add(id(avals))
        for a in avals:
            if a.shape is None or a.dtype is None or None in a.shape:
                return None
            most = max(most, a.nbytes)
    return most


def input_values(d: Described) -> list:
    """The values of the leaves, in slot order: known values, constants (a captured user array is
    checked for writes since it was recorded); a graph input with no value raises."""
    args = []
    known = d.known
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
