"""Slices sink below position-wise ops: a compiled graph computes only the rows it uses.

A BERT-style classifier reads the first token of its last layer (``h[:, 0]``), yet the layer's
feed-forward network, layer norms and output projection run on every position: 63 rows of 64
are computed, and differentiated, for nothing. Eager code cannot know; a compiled graph can.
This pass moves a basic-indexing ``getitem`` that selects along leading axes above the op that
made its operand, when that op works on each position independently:

* elementwise ops (operands that broadcast along an indexed axis are indexed at 0 or kept);
* ``dense`` (acts on the last axis);
* ``layer_norm`` over the last axis;

so ``layer_norm(x + dense(gelu(dense(h))))[:, 0]`` becomes
``layer_norm(x[:, 0] + dense(gelu(dense(h[:, 0]))))``. It repeats while it finds such a pair. An op
is moved past only when **every** consumer of its output is the same slice (else the full
result is needed anyway and nothing is saved), and never past a graph output. Keys of ints and
slices that leave the last axis alone qualify (no ``None``, ``...`` or array indices).

The rows that remain are computed by the same kernels on fewer rows: values are equal up to
the rounding of a matrix product over a different number of rows.
"""
from __future__ import annotations

from ...ops import registry
from ..build import apply_node
from ..node import Entry, Node
from ..rewrite import rewrite
from ..symbol import Symbol

_GETITEM = registry.get("getitem")
_DENSE = registry.get("dense")
_LAYER_NORM = registry.get("layer_norm")
_MAX_ROUNDS = 256  # each round moves at least one slice one op up; a graph is never this deep here


def sink_slices(sym: Symbol) -> Symbol:
    """``sym`` with leading-axis slices moved above position-wise ops (see the module doc).

    >>> import lazyarray as la
    >>> x = la.sym.var("x", shape=(4, 8, 16))
    >>> w = la.sym.var("w", shape=(16, 16))
    >>> y = la.sym.getitem(la.sym.tanh(la.sym.nn.dense(x, w)), key=(slice(None), 0))
    >>> [n.op.name for n in sink_slices(y).topo() if n.op is not None]
    ['getitem', 'dense', 'tanh']
    """
    for _ in range(_MAX_ROUNDS):
        new = _one_round(sym)
        if new is None:
            return sym
        sym = new
    return sym


def _leading(key, ndim: int) -> bool:
    return len(key) < ndim and all(isinstance(k, (int, slice)) for k in key)


def _pushable(y: Node, key) -> bool:
    if y.op is None or len(y.avals) != 1 or y.avals[0].shape is None or None in y.avals[0].shape:
        return False
    nd = len(y.avals[0].shape)
    if not _leading(key, nd):
        return False
    if y.op is _DENSE:
        return y.inputs[0].aval.ndim == nd
    if y.op is _LAYER_NORM:
        return y.params["axis"] % nd == nd - 1
    if y.op.elementwise and not y.op.random and y.op.compose is None and "axis" not in y.params:
        return all(_operand_key(e, key, y.avals[0].shape) is not None for e in y.inputs)
    return False


def _operand_key(e: Entry, key, out_shape):
    """The key that selects an elementwise operand's part of the sliced output (``()``: all of it),
    or None when the operand does not line up (it broadcasts in a way this pass does not follow)."""
    shape = e.aval.shape
    if shape is None or None in shape:
        return None
    offset = len(out_shape) - len(shape)
    comps = []
    for i, k in enumerate(key):
        j = i - offset
        if j < 0:
            continue  # a leading axis the operand does not have: broadcast, nothing to index
        if shape[j] == out_shape[i]:
            comps.append(k)
        elif shape[j] == 1:
            comps.append(0 if isinstance(k, int) else slice(None))
        else:
            return None
    if all(isinstance(c, slice) and c == slice(None) for c in comps):
        return ()
    return tuple(comps)


def _one_round(sym: Symbol) -> Symbol | None:
    order = sym.topo()
    consumers: dict[int, list[Node]] = {}
    for n in order:
        for e in n.inputs:
            consumers.setdefault(id(e.node), []).append(n)
    outputs = {id(e.node) for e in sym.outputs}
    chosen: dict[int, tuple] = {}  # producer -> the key every consumer applies to it
    for n in order:
        if n.op is not _GETITEM:
            continue
        y = n.inputs[0].node
        key = n.params["key"]
        if id(y) in chosen or id(y) in outputs or not _pushable(y, key):
            continue
        if all(c.op is _GETITEM and c.params["key"] == key for c in consumers[id(y)]):
            chosen[id(y)] = key
    if not chosen:
        return None
    made: dict[int, Entry] = {}

    def visit(node: Node, ins):
        if node.op is None:
            return node  # inputs and constants stay themselves
        if node.op is _GETITEM and id(node.inputs[0].node) in chosen:
            y = node.inputs[0].node
            if id(y) not in made:
                made[id(y)] = _moved(y, ins[0].node, chosen[id(y)])
            return (made[id(y)],)
        return None

    # only what reads a moved slice is copied; the result reaches only what its outputs read (no
    # dead nodes: no dce needed)
    return rewrite(sym, visit, share=True)


def _moved(y: Node, y_new: Node, key) -> Entry:
    """``y``'s op applied to its (new) operands sliced by ``key``."""
    ins = list(y_new.inputs)
    if y.op is _DENSE:
        ins[0] = _apply(_GETITEM, y, ins[0], key=key)
        return _apply(_DENSE, y, *ins)
    if y.op is _LAYER_NORM:
        return _apply(_LAYER_NORM, y, _apply(_GETITEM, y, ins[0], key=key), *ins[1:], **dict(y.params, axis=-1))
    out_shape = y.avals[0].shape
    sliced = []
    for e_old, e in zip(y.inputs, ins):
        k = _operand_key(e_old, key, out_shape)
        sliced.append(e if k == () else _apply(_GETITEM, y, e, key=k))
    return _apply(y.op, y, *sliced, **y.params)


def _apply(op, like: Node, *ins, **params) -> Entry:
    """A new node with ``like``'s source line and block (the drawing groups it with its layer)."""
    e = apply_node(op, *ins, source=like.source, **params)
    e.node.block = like.block
    return e
