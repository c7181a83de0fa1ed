"""Chains: the structural key of a recorded chain built while it is recorded.

Most recorded graphs that are materialized again and again are chains: each op reads the
previous op's output and, perhaps, one leaf (a scalar constant, a captured array):
``y = la.tanh(y); y = y * 1.0001; ...``. For those, the dispatcher's recording hot path
(``dispatch._lazy_node``) gives every node a ``chain`` key as it records it, and materializing
the chain's end skips ``structure.describe``'s walk with its dicts and the key's hashing.

A ``ChainKey`` is **hash-consed**: one object per structure, found among the successors of the
previous op's key (``prev``). A key is made only from its ``prev`` (the same object),
the op (the same ``OpDef``), the output avals (the same tuple: the rule memo's), the position
of the chain's input among the op's inputs and the leaf's aval (equal by value); the first op
of a chain (``prev`` None) is found in a table of roots by its op and its inputs' avals (by
value). So two nodes have the same key object only when the whole chains behind them have the
same ops, avals (shapes, dtypes, devices, storage), wiring and leaf avals: the key's identity
*is* the structure, and the graph cache (``recorded.py``) compares keys by identity. Only
param-free registry ops that draw no random numbers, with one output, get a key; anything else
(``None``) leaves the node and everything recorded from it to ``describe``.

``describe_chain(array)`` walks the chain from the array's node back to its first op by the
nodes' inputs, checking at every step that the node met carries its key's ``prev`` and that
no live array shows it (a live intermediate is computed with the end, and a computed one is
read: ``describe``'s job). It numbers the slots by position (op ``i`` from the end is slot
``i``; the leaves follow, one slot per leaf *read*, so the key needs no sharing pattern) and
gives a ``Described`` that ``run_recorded`` runs like any other.

Tables are bounded: the roots live in one generation (``KEYS``, a one-entry named cache); past
``MAX_KEYS`` keys made in it, a new generation starts with no roots and new recordings start new keys
(a cache miss, never a wrong hit). ``KEYS.clear()`` starts one now.
"""
from __future__ import annotations

import weakref

from ..caches import NamedCache
from ..graph.node import Node
from ..ops import registry
from .program import SMALL_GRAPH
from .structure import Described

MAX_KEYS = 1 << 16
_REF = weakref.ref


class _Generation:
    """The chain keys made since the last fresh start: the first ops' keys by ``(op, input avals)``,
    and how many keys (first ops and successors) were made, at most ``MAX_KEYS``."""

    __slots__ = ("roots", "made")

    def __init__(self):
        self.roots: dict = {}  # (op, input avals) -> ChainKey
        self.made = 0


KEYS = NamedCache("chain keys", 1)  # None -> the current _Generation


class ChainKey:
    """One chain structure (see the module docstring); equal only to itself."""

    __slots__ = ("prev", "op", "avals", "pos", "leaf", "n", "succ", "more", "site_code", "site_lasti",
                 "site_source", "__weakref__")

    def __init__(self, prev, op, avals: tuple, pos, leaf):
        self.prev = prev  # the key of the op whose output this op reads (None: the first op)
        self.op = op
        self.avals = avals  # the output avals (the rule memo's tuple)
        self.pos = pos  # the position of the chain's input (None: the first op, every input a leaf)
        self.leaf = leaf  # the other input's aval (one leaf read), the inputs' avals (first op), or None
        self.n = 1 if prev is None else prev.n + 1  # ops in the chain
        # The successors: ``succ``, the key of the last op made reading this chain first (most keys
        # have one successor: no table), and ``more``, a table made for the others, by op (or
        # ``(op, position)`` for a chain read at another position).
        self.succ = None
        self.more = None
        # Where the user's code last recorded a node with this key (code, bytecode offset, (file,
        # line)): the dispatcher's memo of call sites, not part of the structure.
        self.site_code = self.site_lasti = self.site_source = None

    def _add(self, k: ChainKey) -> None:
        if k.pos == 0 and (self.succ is None or self.succ.op is k.op):
            self.succ = k
        else:
            if self.more is None:
                self.more = {}
            self.more[k.op if k.pos == 0 else (k.op, k.pos)] = k

    def __repr__(self) -> str:
        return f"ChainKey({self.n} ops, last {self.op.name})"


def _chainable(op) -> bool:
    """A registry op that draws no random numbers."""
    return not op.random and registry.is_registered(op)


def _count_made(gen: _Generation) -> None:
    """Count a key made; past ``MAX_KEYS``, a new generation (new recordings start new keys)."""
    gen.made += 1
    if gen.made > MAX_KEYS:
        KEYS.put(None, _Generation())


def root(op, entries: tuple, avals: tuple):
    """The key of a first op: every input is a leaf (a node with no op); else None."""
    for e in entries:
        if e.node.op is not None:
            return None
    ins = tuple([e.node.avals[e.index] for e in entries])
    at = (op, ins)
    gen = KEYS.peek(None) or KEYS.get_or_make(None, _Generation)
    k = gen.roots.get(at)
    if k is None or k.avals is not avals:
        if not _chainable(op):
            return None
        k = gen.roots[at] = ChainKey(None, op, avals, None, ins)
        _count_made(gen)
    return k


def grow(prev: ChainKey, op, avals: tuple, pos: int, leaf):
    """The successor of ``prev``: ``op`` reading the chain at input ``pos`` (and ``leaf``, the
    aval of its other input, when it has two), with output ``avals``. (Called once per node of a
    chain never recorded before: the successor look-up is inlined.)"""
    k = prev.succ
    if pos != 0 or k is None or k.op is not op:
        more = prev.more
        k = None if more is None else more.get(op if pos == 0 else (op, pos))
    if k is not None and k.avals is avals and (k.leaf is leaf or k.leaf == leaf):
        return k
    if not _chainable(op):
        return None
    k = ChainKey(prev, op, avals, pos, leaf)
    prev._add(k)
    _count_made(KEYS.get_or_make(None, _Generation))
    return k


def key_of(op, entries: tuple, avals: tuple):
    """The chain key of a node the recording hot path makes (None: not a chain)."""
    if len(entries) == 1:
        prev = entries[0].node.chain
        if prev is None:
            return root(op, entries, avals)
        return grow(prev, op, avals, 0, None)
    e, f = entries
    pe, pf = e.node.chain, f.node.chain
    if pe is not None and pf is None and f.node.op is None:
        return grow(pe, op, avals, 0, f.node.avals[f.index])
    if pf is not None and pe is None and e.node.op is None:
        return grow(pf, op, avals, 1, e.node.avals[e.index])
    if pe is None and pf is None:
        return root(op, entries, avals)
    return None


class ChainDescribed(Described):
    """A chain as numbered slots: op ``i`` of ``ops`` (from the end) is slot ``i``, the leaves
    (one per read) follow in walk order. ``ins`` and ``firsts`` are derived on demand (a run of
    a cached program does not read them)."""

    __slots__ = ()

    @property
    def steps(self) -> list:
        """``(node, input slots, first output slot)`` per op, first op first (creation order)."""
        ins = self.ins
        return [(node, ins[i], i) for i, node in reversed(list(enumerate(self.ops)))]

    @property
    def firsts(self) -> list:
        return list(range(len(self.ops)))

    @property
    def ins(self) -> list:
        n_ops = len(self.ops)
        leaf = n_ops
        out = []
        for i, node in enumerate(self.ops):
            k = node.chain
            if k.prev is None:
                out.append(tuple(range(leaf, leaf + len(node.inputs))))
                leaf += len(node.inputs)
            elif len(node.inputs) == 1:
                out.append((i + 1,))
            else:
                out.append((i + 1, leaf) if k.pos == 0 else (leaf, i + 1))
                leaf += 1
        return out


def describe_chain(array) -> ChainDescribed | None:
    """``array``'s graph as a ``ChainDescribed`` when it is a chain no other live array shows a
    part of (see the module docstring), else None."""
    node: Node = array._entry.node
    k = node.chain
    if k is None or k.n <= SMALL_GRAPH or array._entry.index != 0:
        return None
    refs = node.shown
    if refs.__class__ is not _REF or refs() is not array:
        return None
    ops = [node]
    inputs = []
    add_op, add_leaf = ops.append, inputs.append
    ref = _REF
    n = node
    while True:
        ins = n.inputs
        prev = k.prev
        if prev is None:
            for e in ins:
                add_leaf((e.node, e.index))
            break
        if len(ins) == 2:
            e = ins[1 - k.pos]
            add_leaf((e.node, e.index))
            n = ins[k.pos].node
        else:
            n = ins[0].node
        if n.chain is not prev:
            return None
        refs = n.shown
        if refs is not None and (refs.__class__ is not ref or refs() is not None):
            return None
        add_op(n)
        k = prev
    d = ChainDescribed()
    n_ops = len(ops)
    d.ops, d.inputs = ops, inputs
    d.in_slots = list(range(n_ops, n_ops + len(inputs)))
    d.out_slots, d.n_slots, d.known, d.key = [0], n_ops + len(inputs), {}, node.chain
    return d
