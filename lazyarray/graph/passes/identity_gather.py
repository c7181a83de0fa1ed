"""Inference rewrite: an ``advanced_index`` whose constant index arrays pick every value in order -> ``reshape``.

torch's exporter writes an attention mask's ``mask[:, None, None, :]`` (BART's ``_expand_mask``) as a gather
by index arrays made from the shape: ``advanced_index(mask, i0, i1)`` with ``i0`` the batch rows and ``i1``
``arange(seq)``, broadcast to (batch, 1, 1, seq). Once a program is specialized to its input shapes those
arrays are constants (``constant_fold``), and the gather is the mask itself in a new shape: each output
value is the input value at the same flat position. This pass tests exactly that, with the op's own kernel
on the flat positions ``arange(x.size).reshape(x.shape)``, and where it holds (and every index array is a
frozen constant, every size an int, at most ``MAX_VALUES`` values) writes ``reshape(x)``: a view of x's
buffer that the executor makes once (``executor/set_views.py``) instead of a gather step each call. The
values are x's, bit for bit. ``CachedOp`` runs it on inference graphs; ``la.config.identity_gathers = False``
turns it off.
"""
from __future__ import annotations

import math

import numpy as np

from ...ops import registry
from ...tuning_table import current
from ..build import record_node
from ..node import Entry, Node
from ..rewrite import has_op, rewrite
from ..symbol import Symbol

MAX_VALUES = 1 << 16  # (the test runs the gather on as many positions, at compile time)


def _sizes(entry) -> tuple | None:
    shape = entry.aval.shape
    return tuple(shape) if shape is not None and all(isinstance(d, int) for d in shape) else None


def is_identity(node: Node) -> bool:
    """Whether the ``advanced_index`` ``node`` reads its input's values in order: every index a frozen
    constant, and the gather of the flat positions is ``arange`` in the output's shape."""
    x, out = _sizes(node.inputs[0]), _sizes(Entry(node))
    indices = node.inputs[1:]
    if x is None or out is None or not indices or math.prod(x) != math.prod(out) or math.prod(x) > MAX_VALUES:
        return False
    if any(e.node.kind != "const" or e.node.version is not None or e.node.value is None for e in indices):
        return False
    n = math.prod(x)
    try:
        got = np.asarray(node.op.kernel(np, np.arange(n).reshape(x), *[np.asarray(e.node.value) for e in indices],
                                        **node.params))
    except (IndexError, ValueError, TypeError):  # (an index out of range: the program's own run raises it)
        return False
    return got.shape == out and bool(np.array_equal(got.reshape(-1), np.arange(n)))


def identity_gathers(sym: Symbol) -> Symbol:
    """``sym`` with each ``advanced_index`` that reads its input in order a ``reshape`` of it.

    >>> import numpy as np, lazyarray as la
    >>> from lazyarray.graph.node import Entry, const_node
    >>> m = la.sym.var("m", shape=(2, 5), dtype="bool")
    >>> rows = np.arange(2).reshape(2, 1, 1, 1) + np.zeros((1, 1, 1, 5), np.int64)
    >>> cols = np.broadcast_to(np.arange(5).reshape(1, 1, 1, 5), (2, 1, 1, 5)).copy()
    >>> i0, i1 = (la.sym.Symbol([Entry(const_node(a, la.Aval(a.shape, a.dtype, la.cpu())))]) for a in (rows, cols))
    >>> y = la.sym.advanced_index(m, [i0, i1], key=(0, 0), positions=(0, 1))
    >>> [(n.op.name, n.params) for n in identity_gathers(y).topo() if n.op is not None]
    [('reshape', {'shape': (2, 1, 1, 5)})]
    """
    if not current().identity_gathers or not has_op(sym, "advanced_index"):
        return sym
    reshape = registry.get("reshape")

    def visit(node: Node, ins):
        if node.op is None or node.op.name != "advanced_index" or len(node.avals) != 1 or not is_identity(node):
            return None
        new = record_node(reshape, [ins[0]], {"shape": _sizes(Entry(node))}, source=node.source)
        return (new,) if new.aval == node.avals[0] else None

    return rewrite(sym, visit, share=True)
