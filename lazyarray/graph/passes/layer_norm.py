"""Inference rewrite: a layer norm written out in ops (ONNX ``LayerNormalization`` as the importer
expands it, or the same ops traced) as one ``nn.layer_norm`` node, and T5's RMS norm as one
``nn.rms_norm`` (``gamma * (c * (1 / sqrt(mean(c * c) + eps)))``, ``c`` the input or its cast to the
same dtype, ``c * c`` or ``square(c)``; ``ops/rms_norm.py``)::

    m = mean(x, axis=-1, keepdims=True);  c = x - m
    inv = 1 / sqrt(mean(square(c), axis=-1, keepdims=True) + eps)
    y = c * inv * gamma + beta

``gamma`` and ``beta`` are vectors along the last axis; ``eps`` and the ``1`` are 0-d constants of
x's dtype; every value in between is read by the pattern alone (``c`` twice: square and product),
x, gamma and beta share one float dtype. Products and the final sum may have their operands in
either order (both are commutative in IEEE arithmetic: equal values). ``nn.layer_norm`` runs these operations in this order (its reference kernel in ``ops/norm.py`` and
``kernels/layer_norm.py``'s ``compiled`` and ``in_place``): the same values, bit for bit.

``CachedOp`` runs this on inference graphs only (a training graph keeps the recorded ops; the op's
gradient exists, but the recorded ops' backward is what such a graph was built for).
``la.config.fuse_layer_norm = False`` turns it off (``benchmarks/real_models.py --ab``).
"""
from __future__ import annotations

from ...ops import registry
from ...tuning_table import current
from ..build import record_node
from ..node import Entry, Node
from ..rewrite import has_op, rewrite, use_counts
from ..symbol import Symbol
from .walk import Walk


def _const(e: Entry, dtype) -> float | None:
    """The value of a 0-d constant of ``dtype``, else None."""
    n = e.node
    if n.kind != "const" or n.value is None or e.aval.shape != () or e.aval.dtype != dtype:
        return None
    return float(n.value)


class _Match(Walk):
    def __init__(self, uses, shape, dtype):
        super().__init__(uses)
        self.shape, self.dtype = shape, dtype
        self.reads = 0  # (``squares``: how many times the squares read their operand)

    def vector(self, e: Entry) -> bool:
        """A (C,) vector of the dtype, C the last dim."""
        return e.aval.shape == (self.shape[-1],) and e.aval.dtype == self.dtype

    def row_mean(self, old: Entry, new: Entry) -> bool:
        """``old`` is a private mean over the last axis, dims kept."""
        if not self.step(old, new, "mean") or not old.node.params.get("keepdims"):
            return False
        axis = old.node.params.get("axis")
        axes = tuple(axis) if isinstance(axis, (tuple, list)) else (axis,)
        nd = len(self.shape)
        return len(axes) == 1 and axes[0] is not None and axes[0] % nd == nd - 1

    def products(self, old: Entry, new: Entry, other):
        """``(pos, kept)`` for each way ``old``, a private multiply, reads ``other`` at input ``1 - pos``
        (``other(old entry)`` true there); ``kept``: its input at ``pos`` (old, new)."""
        if not self.step(old, new, "multiply"):
            return
        for pos in (0, 1):
            if other(old.node.inputs[1 - pos]):
                yield pos, (old.node.inputs[pos], new.node.inputs[pos])

    def inverse_std(self, old: Entry, new: Entry, centered: Entry) -> float | None:
        """eps where ``old`` is ``1 / sqrt(mean(square(centered)) + eps)``, else None."""
        if not self.step(old, new, "divide") or _const(old.node.inputs[0], self.dtype) != 1.0:
            return None
        s_old, s_new = old.node.inputs[1], new.node.inputs[1]
        if not self.step(s_old, s_new, "sqrt"):
            return None
        a_old, a_new = s_old.node.inputs[0], s_new.node.inputs[0]
        if not self.step(a_old, a_new, "add"):
            return None
        for pos in (0, 1):
            eps = _const(a_old.node.inputs[1 - pos], self.dtype)
            v_old, v_new = a_old.node.inputs[pos], a_new.node.inputs[pos]
            if eps is None or eps <= 0 or not self.row_mean(v_old, v_new):
                continue
            if self.squares(v_old.node.inputs[0], v_new.node.inputs[0], centered):
                return eps
        return None

    def squares(self, old: Entry, new: Entry, of: Entry) -> bool:
        """``old`` is a private ``square(of)`` or ``multiply(of, of)`` (``reads``: how many times it reads ``of``)."""
        if self.step(old, new, "square"):
            self.reads = 1
            return old.node.inputs[0] == of
        self.reads = 2
        return self.step(old, new, "multiply") and old.node.inputs[0] == of == old.node.inputs[1]


def _normalized(m: _Match, z_old: Entry, z_new: Entry):
    """``(x new entry, eps)`` where ``z`` is ``(x - mean(x)) * inv``, else None."""
    if not m.step(z_old, z_new, "multiply"):
        return None
    for pos in (0, 1):
        c_old, c_new = z_old.node.inputs[pos], z_new.node.inputs[pos]
        if not m.step(c_old, c_new, "subtract", readers=2) or c_old.aval.shape != m.shape:
            continue
        eps = m.inverse_std(z_old.node.inputs[1 - pos], z_new.node.inputs[1 - pos], c_old)
        x_old, mean_old = c_old.node.inputs
        if eps is None or x_old.aval.shape != m.shape or x_old.aval.dtype != m.dtype \
                or not m.row_mean(mean_old, c_new.node.inputs[1]) or mean_old.node.inputs[0] != x_old:
            continue
        return c_new.node.inputs[0], eps
    return None


def _match(node: Node, ins, uses, op):
    """The ``layer_norm`` node replacing the final sum ``node`` (new inputs ``ins``), or None."""
    a = node.avals[0]
    if a.shape is None or not a.shape or None in a.shape or a.dtype is None or a.dtype.kind != "f":
        return None
    m = _Match(uses, a.shape, a.dtype)
    for pos in (0, 1):
        if not m.vector(node.inputs[1 - pos]):
            continue
        for spos, (z_old, z_new) in m.products(node.inputs[pos], ins[pos], m.vector):
            got = _normalized(m, z_old, z_new)
            if got is not None:
                x, eps = got
                gamma = ins[pos].node.inputs[1 - spos]
                return record_node(op, [x, gamma, ins[1 - pos]], {"axis": -1, "eps": eps}, source=node.source)
    return None


def _rms_match(node: Node, ins, uses, op):
    """The ``rms_norm`` node replacing ``node``, ``gamma * (c * inv)`` with ``inv`` the inverse root of
    ``mean(c * c) + eps`` and ``c`` the input (or its cast to the same dtype, read by the pattern
    alone), operands in either order; else None."""
    a = node.avals[0]
    if a.shape is None or not a.shape or None in a.shape or a.dtype is None or a.dtype.kind != "f":
        return None
    m = _Match(uses, a.shape, a.dtype)
    for gpos in (0, 1):
        if not m.vector(node.inputs[gpos]):
            continue
        for pos, (c_old, c_new) in m.products(node.inputs[1 - gpos], ins[1 - gpos], lambda e: True):
            if c_old.aval.shape != a.shape or c_old.aval.dtype != a.dtype:
                continue
            h_old, h_new = node.inputs[1 - gpos], ins[1 - gpos]
            eps = m.inverse_std(h_old.node.inputs[1 - pos], h_new.node.inputs[1 - pos], c_old)
            if eps is None:
                continue
            x = c_new
            if m.step(c_old, c_new, "cast", readers=1 + m.reads) and c_old.node.inputs[0].aval.dtype == a.dtype:
                x = c_new.node.inputs[0]  # (a cast to its own dtype: a copy)
            return record_node(op, [x, ins[gpos]], {"eps": eps}, source=node.source)
    return None


def fuse_layer_norm(sym: Symbol) -> Symbol:
    """``sym`` with each layer norm written out in ops made one ``nn.layer_norm`` node.

    >>> import lazyarray as la
    >>> x, g, b = la.sym.var("x", shape=(2, 5, 8)), la.sym.var("g", shape=(8,)), la.sym.var("b", shape=(8,))
    >>> c = x - la.sym.mean(x, axis=-1, keepdims=True)
    >>> inv = la.sym.divide(1.0, la.sym.sqrt(la.sym.mean(la.sym.square(c), axis=-1, keepdims=True) + 1e-5))
    >>> y = c * inv * g + b
    >>> [n.op.name for n in fuse_layer_norm(y).topo() if n.op is not None]
    ['layer_norm']
    """
    if not current().fuse_layer_norm or not has_op(sym, "sqrt"):
        return sym
    # layer norms first: their ``(c * inv) * gamma`` would pass for an RMS norm of the centered c
    sym = _rewrite_at(sym, "add", _match, registry.get("layer_norm"))
    return _rewrite_at(sym, "multiply", _rms_match, registry.get("rms_norm"))


def _rewrite_at(sym, name, match, op):
    """``sym`` with each node of op ``name`` that ``match`` replaces, replaced."""
    if not has_op(sym, "sqrt"):
        return sym
    uses = use_counts(sym)

    def visit(node: Node, ins):
        if node.op is None or node.op.name != name:
            return None
        fused = match(node, ins, uses, op)
        return None if fused is None else (fused,)

    return rewrite(sym, visit, share=True)
