"""Constant folding: compute now every sub-graph that depends only on constants."""
from __future__ import annotations

import numpy as np

from ...aval import Aval
from ...dim import has_symbols
from ..node import Entry, Node, const_node
from ..rewrite import rewrite
from ..symbol import Symbol

# Folding stores the result with the program; above this size it is cheaper to recompute.
MAX_FOLD_BYTES = 64 << 20
# An op with no inputs (``iota``, ``fill``, ``dim_values``: a mask's positions, a sequence's ids) is
# folded up to this size: a step per run saved, where a large creation costs little next to the
# memory a program would hold for it.
MAX_FOLD_CREATION_BYTES = 64 << 10


def constant_fold(sym: Symbol) -> Symbol:
    """Replace each op whose inputs are all constants by a constant holding its value.

    Random ops are not folded (each run draws anew), nor ops with sparse values or results
    larger than ``MAX_FOLD_BYTES``, nor an op whose kernel fails: it is left to run, so the
    executor raises its error as a named one (``OpIndexError``, ...) naming the op and the line.
    An op without inputs (``iota``, ``fill``) is folded when its sizes are concrete ints and its
    result holds at most ``MAX_FOLD_CREATION_BYTES``.

    >>> import lazyarray as la
    >>> c = la.array([1.0, 2.0])
    >>> with la.deferred():
    ...     y = la.exp(c * 2)          # depends on constants only
    >>> sym = la.get_symbol(y, inputs={})
    >>> [n.kind for n in constant_fold(sym).topo()]
    ['const']
    """

    if not any(_on_constants(node, node.inputs) for node in sym.topo()):
        return sym  # nothing to fold: no walk that copies or keeps each node

    def visit(node: Node, ins):
        if not _on_constants(node, ins):
            return None
        avals = node.avals
        if any(a.shape is None or a.stype != "default" for a in avals):
            return None
        if sum(a.nbytes or 0 for a in avals) > (MAX_FOLD_BYTES if ins else MAX_FOLD_CREATION_BYTES):
            return None
        if not ins and (not all(a.known for a in avals) or has_symbols(tuple(node.params.values()))):
            return None  # (a symbolic size or bound: made per call, from the call's sizes)
        if any(e.aval.stype != "default" for e in ins):
            return None
        xp = avals[0].device.xp
        try:
            with np.errstate(all="ignore"):
                out = node.op.bind(xp)(*[e.node.value for e in ins], **node.params)
        except Exception:  # noqa: BLE001 (left to run: the executor raises it named, with the user's line)
            return None
        outs = list(out) if len(node.avals) > 1 else [out]
        entries = []
        for o, a in zip(outs, avals):
            o = xp.asarray(o)
            c = const_node(o, Aval(tuple(o.shape), o.dtype, a.device, a.stype),
                           name=node.name if len(node.avals) == 1 else None)
            entries.append(Entry(c, 0))
        return tuple(entries)

    return rewrite(sym, visit, share=True)


def _on_constants(node: Node, ins) -> bool:
    """An op node (neither random nor composite) whose inputs ``ins`` are all constants (or that
    has none)."""
    if node.op is None or node.op.random or node.op.compose is not None:
        return False
    for e in ins:
        if e.node.op is not None or e.node.kind != "const":
            return False
    return True
