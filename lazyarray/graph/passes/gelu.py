"""Inference rewrite: the exact (erf) GELU written out in ops as one ``nn.gelu`` node.

ONNX has had no ``Gelu`` before opset 20, so torch exports its exact GELU as
``x * 0.5 * (1 + Erf(x / sqrt(2)))``; the importer writes ``Erf`` out as the Abramowitz & Stegun
7.1.26 polynomial (``mxnet/operators.py``'s ``_erf``: ``abs``, ``sign``, ``exp`` and 21 arithmetic
ops, absolute error below 1.5e-7), so each GELU is 25 ops. This pass finds them, as imported
and as the same ops traced::

    u = x / sqrt(2)                 (or x * sqrt(1/2))
    a = abs(u);  t = 1 / (a * 0.3275911 + 1)
    p = t * (t * (t * (t * (t * 1.061405429 - 1.453152027) + 1.421413741) - 0.284496736) + 0.254829592)
    e = sign(u) * (1 - p * exp(-(a * a)))
    y = x * (0.5 * (e + 1))         (the three factors x, 0.5, e + 1 in any order and grouping)

and makes ``y`` ``nn.gelu(x)`` (``approximation='none'``). Every value between ``x`` and ``y`` must
be read by the pattern alone; the constants are 0-d constants of x's dtype equal to these values
rounded to it; products and sums may have their operands in either order.

**Values.** Not the same bits: ``nn.gelu`` computes erf its own way (``ops/norm.py``: in float32 a
rational approximation within 5e-7 of erf, in float64 SciPy's erf), where the polynomial is within
1.5e-7. Measured over 200,001 float32 values in [-8, 8] against the exact GELU (math.erf in
float64; ``tests/graph/passes/test_fuse_gelu.py``): the rewritten GELU within 1.4e-6 (the rational erf
is 4e-7 under 1 near x / sqrt(2) = 3.9, and x / 2 scales that), the polynomial within 4.7e-7,
onnxruntime's Erf within 4.5e-7; the rewritten values are within 1.5e-6 of onnxruntime's and of
the polynomial's (about 3 float32 ulp of values near 5). In float64 the rewrite is exact to 1e-15
where the polynomial was 2.1e-7 away.

``CachedOp`` runs it on inference graphs only; ``la.config.fuse_gelu = False`` turns it off.
"""
from __future__ import annotations

import itertools
import math

import numpy as np

from ...ops import registry
from ...tuning_table import current
from ..build import record_node
from ..node import Entry, Node
from ..rewrite import has_op, rewrite, use_counts
from ..symbol import Symbol
from .walk import Walk

# the A-S 7.1.26 coefficients as the importer writes them (``mxnet/operators.py``'s ``_erf``)
P = 0.3275911
A1, A2, A3, A4, A5 = 0.254829592, -0.284496736, 1.421413741, -1.453152027, 1.061405429
COMMUTATIVE = frozenset({"add", "multiply"})


class _Match(Walk):
    """One walk back from a candidate GELU's final product (``uses``: the old graph's readers)."""

    def __init__(self, uses, dtype):
        super().__init__(uses)
        self.dtype = dtype

    def const(self, e: Entry, value: float) -> bool:
        """``e`` is a 0-d constant of the dtype equal to ``value`` rounded to it."""
        n = e.node
        if n.kind != "const" or n.value is None or e.aval.shape != () or e.aval.dtype != self.dtype:
            return False
        return bool(np.asarray(n.value, self.dtype) == self.dtype.type(value))

    def operands(self, e: Entry, name: str, readers: int = 1):
        """The two inputs of ``e`` when it is a private output of binary op ``name``, each order for a
        commutative one; nothing otherwise."""
        if not (_op(e) == name and self.private(e, readers) and len(e.node.inputs) == 2):
            return
        a, b = e.node.inputs
        yield a, b
        if name in COMMUTATIVE:
            yield b, a

    def op_of(self, e: Entry, name: str, value: float, readers: int = 1) -> Entry | None:
        """The other input of ``e``, a private ``name`` with the constant ``value`` as one input
        (``subtract`` / ``divide``: as its second), else None."""
        for a, b in self.operands(e, name, readers):
            if self.const(b, value):
                return a
        return None

    def affine(self, e: Entry, t: Entry, coeff: float, inner) -> bool:
        """``e`` is ``t * b +- |coeff|`` (a sum for a positive ``coeff``, else a difference) with
        ``inner(b)``: one level of the Horner form."""
        name, value = ("add", coeff) if coeff > 0 else ("subtract", -coeff)
        m = self.op_of(e, name, value)
        return m is not None and any(a == t and inner(b) for a, b in self.operands(m, "multiply"))

    def poly(self, e: Entry, t: Entry) -> bool:
        """``e`` is ``t * (t * (t * (t * (t * A5 + A4) + A3) + A2) + A1)``, reading ``t`` five times."""
        def q4(b):
            return self.affine(b, t, A4, lambda c: self.const(c, A5))

        def q3(b):
            return self.affine(b, t, A3, q4)

        def q2(b):
            return self.affine(b, t, A2, q3)

        return any(a == t and self.affine(b, t, A1, q2) for a, b in self.operands(e, "multiply"))

    def erf(self, e: Entry) -> Entry | None:
        """``u`` where ``e`` is the A-S erf of ``u`` (reading ``u`` twice: abs and sign), else None."""
        for s, rest in self.operands(e, "multiply"):
            if _op(s) != "sign" or not self.private(s):
                continue
            u = s.node.inputs[0]
            inner = self.one_minus(rest)
            if inner is not None and any(self.tail(p, ex, u) for p, ex in self.operands(inner, "multiply")):
                return u
        return None

    def one_minus(self, e: Entry) -> Entry | None:
        """``b`` where ``e`` is a private ``1 - b``."""
        if _op(e) == "subtract" and self.private(e) and self.const(e.node.inputs[0], 1.0):
            return e.node.inputs[1]
        return None

    def tail(self, p: Entry, ex: Entry, u: Entry) -> bool:
        """``p * ex`` is ``poly(t) * exp(-(a * a))`` with ``a = abs(u)`` read three times and
        ``t = 1 / (a * P + 1)`` five times."""
        if _op(ex) != "exp" or not self.private(ex):
            return False
        neg = ex.node.inputs[0]
        if _op(neg) != "negative" or not self.private(neg):
            return False
        sq = neg.node.inputs[0]
        if _op(sq) != "multiply" or not self.private(sq) or sq.node.inputs[0] != sq.node.inputs[1]:
            return False
        a = sq.node.inputs[0]
        if _op(a) != "abs" or not self.private(a, 3) or a.node.inputs[0] != u or not self.private(u, 2):
            return False
        for t, _ in self.operands(p, "multiply"):
            if _op(t) == "divide" and self.private(t, 5) and self.const(t.node.inputs[0], 1.0) \
                    and self.denominator(t.node.inputs[1], a):
                return self.poly(p, t)
        return False

    def denominator(self, e: Entry, a: Entry) -> bool:
        """``e`` is ``a * P + 1``."""
        m = self.op_of(e, "add", 1.0)
        return m is not None and self.op_of(m, "multiply", P) == a

    def scaled(self, u: Entry) -> Entry | None:
        """``x`` where ``u`` is ``x / sqrt(2)`` or ``x * sqrt(1/2)``, else None."""
        x = self.op_of(u, "divide", math.sqrt(2.0), readers=2)
        return x if x is not None else self.op_of(u, "multiply", math.sqrt(0.5), readers=2)


def _op(e: Entry) -> str | None:
    return None if e.node.op is None else e.node.op.name


def _gelu_input(m: _Match, node: Node) -> Entry | None:
    """The old entry ``x`` where ``node`` (a multiply) is ``x * 0.5 * (erf(x / sqrt(2)) + 1)``, its
    three factors in any order and grouping, else None."""
    for outer, inner in ((node.inputs[0], node.inputs[1]), (node.inputs[1], node.inputs[0])):
        for f1, f2 in m.operands(inner, "multiply"):
            for half, plus, x in itertools.permutations((outer, f1, f2)):
                if not m.const(half, 0.5):
                    continue
                e = m.op_of(plus, "add", 1.0)
                u = None if e is None else m.erf(e)
                if u is not None and m.scaled(u) == x:
                    return x
    return None


def _match(node: Node, ins, uses, op):
    """The ``gelu`` node replacing the product ``node`` (new inputs ``ins``), or None."""
    a = node.avals[0]
    if a.dtype is None or a.dtype.kind != "f" or a.shape is None or len(node.inputs) != 2:
        return None
    m = _Match(uses, a.dtype)
    x = _gelu_input(m, node)
    if x is None or x.aval.shape != a.shape or x.aval.dtype != a.dtype:
        return None
    new_x = _find(node.inputs, ins, x)
    return None if new_x is None else record_node(op, [new_x], {"approximation": "none"}, source=node.source)


def _find(olds, news, x: Entry, depth: int = 1) -> Entry | None:
    """``x``'s entry in the rewritten graph: ``news`` are the new entries of ``olds`` (a node's
    inputs), ``x`` one of them or, ``depth`` levels down, of their inputs (the same op on both
    sides: rewritten nodes keep their inputs' order)."""
    for o, n in zip(olds, news):
        if o == x:
            return n
        if depth and Walk.same(o, n):
            got = _find(o.node.inputs, n.node.inputs, x, depth - 1)
            if got is not None:
                return got
    return None


def fuse_gelu(sym: Symbol) -> Symbol:
    """``sym`` with each exact GELU written out with the A-S erf (as the ONNX importer writes
    ``Erf``) made one ``nn.gelu`` node (``approximation='none'``)."""
    if not current().fuse_gelu or not has_op(sym, "sign"):
        return sym
    uses = use_counts(sym)
    op = registry.get("gelu")

    def visit(node: Node, ins):
        if node.op is None or node.op.name != "multiply":
            return None
        fused = _match(node, ins, uses, op)
        return None if fused is None else (fused,)

    return rewrite(sym, visit, share=True)


# -- the tanh GELU ------------------------------------------------------------------------------------
# ``0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x**3)))`` as torch exports its tanh GELU (GPT-2's
# ``NewGELUActivation``, ``nn.GELU(approximate='tanh')`` written out) and ``simplify`` leaves it (``x**3`` is
# ``(x * x) * x``): nine ops, one of them ``tanh``.
TANH_C, TANH_A = math.sqrt(2.0 / math.pi), 0.044715


def _cube_of(m: _Match, e: Entry) -> Entry | None:
    """``x`` where ``e`` is a private ``(x * x) * x`` (either order), else None."""
    for sq, x in m.operands(e, "multiply"):
        if _op(sq) == "multiply" and m.private(sq) and sq.node.inputs[0] == sq.node.inputs[1] == x:
            return x
    return None


def _tanh_arg(m: _Match, e: Entry) -> Entry | None:
    """``x`` where ``e`` is ``sqrt(2/pi) * (x + 0.044715 * x^3)`` (sums and products either order)."""
    s = m.op_of(e, "multiply", TANH_C)
    for x, q in m.operands(s, "add") if s is not None else ():
        c3 = m.op_of(q, "multiply", TANH_A)
        if c3 is not None and _cube_of(m, c3) == x:
            return x
    return None


def _gelu_tanh_input(m: _Match, node: Node) -> Entry | None:
    """The old entry ``x`` where ``node`` (a multiply) is ``x * 0.5 * (1 + tanh(...))``, its three factors
    in any order and grouping, else None."""
    for outer, inner in ((node.inputs[0], node.inputs[1]), (node.inputs[1], node.inputs[0])):
        for f1, f2 in m.operands(inner, "multiply"):
            for half, plus, x in itertools.permutations((outer, f1, f2)):
                if not m.const(half, 0.5):
                    continue
                t = m.op_of(plus, "add", 1.0)
                if t is not None and _op(t) == "tanh" and m.private(t) and _tanh_arg(m, t.node.inputs[0]) == x:
                    return x
    return None


def fuse_gelu_tanh(sym: Symbol) -> Symbol:
    """``sym`` with each tanh GELU written out in ops (above) made one ``nn.gelu`` node
    (``approximation='tanh'``). The values: ``kernels/gelu.py``'s (float32: ``compiled_tanh``, within
    0.51 ulp of the exact tanh GELU, where the written-out float32 ops lose up to 4.8e-7 to the
    cancellation in ``1 + tanh`` of negative values; float64: the reference's operations, within 1e-15).
    ``la.config.fuse_gelu_tanh = False`` turns it off.

    >>> import lazyarray as la
    >>> x = la.sym.var("x", shape=(4,))
    >>> y = x * 0.5 * (1 + la.sym.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * (x * x * x))))
    >>> [n.op.name for n in fuse_gelu_tanh(y).topo() if n.op is not None]
    ['gelu']
    """
    if not current().fuse_gelu_tanh or not has_op(sym, "tanh"):
        return sym
    uses = use_counts(sym)
    op = registry.get("gelu")

    def visit(node: Node, ins):
        if node.op is None or node.op.name != "multiply":
            return None
        a = node.avals[0]
        if a.dtype is None or a.dtype.kind != "f" or a.shape is None or len(node.inputs) != 2:
            return None
        x = _gelu_tanh_input(_Match(uses, a.dtype), node)
        if x is None or x.aval.shape != a.shape or x.aval.dtype != a.dtype:
            return None
        new_x = _find(node.inputs, ins, x, depth=2)
        return None if new_x is None else (record_node(op, [new_x], {"approximation": "tanh"}, source=node.source),)

    return rewrite(sym, visit, share=True)
