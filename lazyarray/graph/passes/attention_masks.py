"""Inference rewrite: an attention's mask read at its own size, not broadcast to the scores' first.

An imported transformer's padding mask (BART's, T5's) reaches the scores as a float bias made from the
boolean mask of its input: ``where(broadcast_to(c, S), 0.0, min)``, ``c`` (batch, 1, 1, seq) broadcast to
(batch, 1, seq, seq) before the ``where``. ``nn.fused_attention`` (``ops/attention.py``) broadcasts each
extra input against the scores itself, so an extra that is

* ``broadcast_to(v, S)`` becomes ``v``;
* ``where(broadcast_to(c, S), x, y)`` becomes ``where(c, x, y)``, where ``c``, ``x`` and ``y`` broadcast
  to a shape that broadcasts to ``S`` (the ``where`` then runs over ``c``'s values: seq, not seq x seq);

only where every reader of the replaced value is an extra input of a fused attention (so nothing else
reads it broadcast), every size is an int, and the attention's output aval is unchanged. The
broadcast step leaves the program (BART's ``broadcast_to`` ran each call: its input is the ``advanced_index``
of the mask, a new array each run, so no view of it is made once). Each score is the same operation
on the same values: the same bits. ``CachedOp`` runs it on inference graphs after ``fuse_attention``;
``la.config.attention_masks_narrow = False`` turns it off.
"""
from __future__ import annotations

from ...ops.registry import broadcast_shapes
from ...tuning_table import current
from ..build import record_node
from ..node import Entry, Node
from ..rewrite import has_op, rewrite
from ..symbol import Symbol

EXTRAS_FROM = 3  # (q, k, v, then the extras)


def _sizes(entry) -> tuple | None:
    shape = entry.aval.shape
    return tuple(shape) if shape is not None and all(isinstance(d, int) for d in shape) else None


def _extras_only(sym: Symbol) -> set[int]:
    """ids of the nodes whose every read is an extra input of a ``fused_attention`` (and not an output)."""
    other, extra = {id(e.node) for e in sym.outputs}, set()
    for node in sym.topo():
        attention = node.op is not None and node.op.name == "fused_attention"
        for j, e in enumerate(node.inputs):
            (extra if attention and j >= EXTRAS_FROM else other).add(id(e.node))
    return extra - other


def _is(node: Node, name: str) -> bool:
    return node.op is not None and node.op.name == name and len(node.inputs) >= 1


def _narrow(old: Entry, new: Entry, only: set[int], made: dict) -> Entry | None:
    """The entry to read in place of the extra ``new`` (``old`` in the original graph), or None."""
    node, was = new.node, old.node
    if id(was) not in only or new.index != 0 or _sizes(new) is None:
        return None
    if _is(node, "broadcast_to") and _sizes(node.inputs[0]) is not None:
        return node.inputs[0]
    if not _is(node, "where") or len(node.inputs) != 3 or not _is(node.inputs[0].node, "broadcast_to"):
        return None
    got = made.get(id(was))
    if got is None:
        c, x, y = node.inputs[0].node.inputs[0], node.inputs[1], node.inputs[2]
        shapes = [_sizes(c), _sizes(x), _sizes(y)]
        if None in shapes:
            return None
        full = _sizes(new)
        try:
            narrow = tuple(broadcast_shapes(*shapes))
            fits = tuple(broadcast_shapes(narrow, full)) == full
        except Exception:  # noqa: BLE001  (shapes that do not broadcast: keep the graph as it is)
            return None
        if not fits:
            return None
        got = made[id(was)] = record_node(node.op, [c, x, y], dict(node.params), source=node.source)
    return got


def narrow_attention_masks(sym: Symbol) -> Symbol:
    """``sym`` with each fused attention's broadcast mask read at its own size (see the module doc).

    >>> import numpy as np, lazyarray as la
    >>> from lazyarray.graph.passes.attention import fuse_attention
    >>> q = la.sym.var("q", shape=(1, 2, 5, 4)); k = la.sym.var("k", shape=(1, 2, 4, 5))
    >>> v = la.sym.var("v", shape=(1, 2, 5, 4)); m = la.sym.var("m", shape=(1, 1, 1, 5), dtype="bool")
    >>> bias = la.sym.where(la.sym.broadcast_to(m, shape=(1, 1, 5, 5)), np.float32(0), np.float32(-1e9))
    >>> y = la.sym.matmul(la.sym.nn.softmax(la.sym.add(la.sym.matmul(q, k), bias), axis=-1), v)
    >>> [n.op.name for n in narrow_attention_masks(fuse_attention(y)).topo() if n.op is not None]
    ['where', 'fused_attention']
    """
    if not current().attention_masks_narrow or not has_op(sym, "fused_attention"):
        return sym
    only, made = _extras_only(sym), {}

    def visit(node: Node, ins):
        if node.op is None or node.op.name != "fused_attention":
            return None
        new_ins, changed = list(ins), False
        for j in range(EXTRAS_FROM, len(ins)):
            got = _narrow(node.inputs[j], ins[j], only, made)
            if got is not None:
                new_ins[j], changed = got, True
        if not changed:
            return None
        fused = record_node(node.op, new_ins, dict(node.params), source=node.source)
        return (fused,) if len(node.avals) == 1 and fused.aval == node.avals[0] else None

    return rewrite(sym, visit, share=True)

