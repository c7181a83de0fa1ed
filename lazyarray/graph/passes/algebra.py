"""Algebraic simplification: rewrite ops into cheaper equal ones.

A compiled graph runs one kernel per node, so what the user wrote is what runs: ``x**3`` is
NumPy's general ``pow`` (about 17x slower than ``x*x*x`` on float32). This pass rewrites,
node by node on the specialized graph (concrete shapes and dtypes):

* powers by a scalar constant: ``x**2 -> x*x``, ``x**3 -> x*x*x``, ``x**0.5 -> sqrt(x)``,
  ``x**-1 -> 1/x``, ``x**1 -> x``;
* identities: ``x*1``, ``1*x``, ``x+0``, ``0+x``, ``x-0``, ``x/1``, ``-(-x)``;
* chains: ``transpose(transpose(x))`` becomes one transpose (or none),
  ``reshape(reshape(x))`` one reshape (or none), as ``broadcast_to(broadcast_to(x))``, and scalar constants along a chain of the
  same operation fold: ``(x * 2) * 3 -> x * 6``, ``(x + 1) + 2 -> x + 3``;
* copies that move nothing (the attention-mask chains exporters write): ``cast`` to the dtype the
  input has is the input, ``take`` along an axis by a constant index that is ``0, 1, ..., n-1`` in
  order (the whole axis) is a ``reshape`` (a view), ``logical_and`` with an all-true constant is the
  other operand (broadcast to the result's shape: a view).

A rewrite applies only where the result keeps the node's dtype and shape (``int_array / 1``
stays a division: it gives floats; ``x * ones`` that broadcasts stays). Integer rewrites are
exact (integer ``+``/``*`` are associative even when they wrap); float rewrites may round
differently in the last place (``(x*2)*3`` vs ``x*6``), as every optimizing compiler's do.
``x + 0 -> x`` keeps ``-0.0`` where the sum would give ``+0.0``.
"""
from __future__ import annotations

import numpy as np

from ...aval import Aval
from ...ops import registry
from ..build import record_node
from ..node import Entry, Node, const_node
from ..rewrite import rewrite
from ..symbol import Symbol


def simplify(sym: Symbol) -> Symbol:
    """``sym`` with the rewrites above applied (a new symbol; ``sym`` is unchanged).

    >>> import lazyarray as la
    >>> x = la.sym.var("x", shape=(4,), dtype="float32")
    >>> print([n.op.name for n in simplify(x ** 3 * 1.0).topo() if n.op is not None])
    ['multiply', 'multiply']
    """

    def visit(node: Node, ins: list[Entry]):
        if node.op is None or len(node.avals) != 1:
            return None
        rule = _RULES.get(node.op.name)
        if rule is None:
            return None
        out = rule(node, ins)
        if out is None:
            return None
        if out.aval.dtype != node.avals[0].dtype or out.aval.shape != node.avals[0].shape:
            return None  # a rewrite never changes what the node gives
        return (out,)

    return rewrite(sym, visit, share=True)


# -- helpers ---------------------------------------------------------------------------------------
def _scalar(e: Entry):
    """The value of a 0-d (or one-element) constant, else None."""
    n = e.node
    if n.op is not None or n.kind != "const" or n.value is None or getattr(n.value, "size", 0) != 1:
        return None
    if n.version is not None:  # a captured user array: its value may still change
        return None
    return n.value.reshape(()).item()


def _is(e: Entry, value) -> bool:
    v = _scalar(e)
    return v is not None and not isinstance(v, complex) and v == value


def _same(e: Entry, node: Node) -> bool:
    """``e`` can stand for ``node``'s output as it is (same dtype and shape)."""
    return e.aval.dtype == node.avals[0].dtype and e.aval.shape == node.avals[0].shape


def _apply(name: str, node: Node, *inputs: Entry, **params) -> Entry:
    """A new node of op ``name`` carrying ``node``'s source line."""
    op = registry.get(name)
    return record_node(op, list(inputs), op.make_params(params), source=node.source)


def _const_like(value, like: Entry) -> Entry:
    a = like.aval
    arr = a.device.xp.asarray(value, dtype=a.dtype)
    return Entry(const_node(arr, Aval((), a.dtype, a.device)))


# -- rules (node, new inputs) -> Entry | None --------------------------------------------------------
def _power(node, ins):
    x, p = ins
    c = _scalar(p)
    if c is None or isinstance(c, complex) or x.aval.dtype != node.avals[0].dtype:
        return None
    if c == 1:
        return x
    if c == 2:
        return _apply("multiply", node, x, x)
    if c == 3:
        return _apply("multiply", node, _apply("multiply", node, x, x), x)
    if x.aval.dtype.kind != "f":  # integer powers stay (negative exponents raise, 0.5 is a float op)
        return None
    if c == 0.5:
        return _apply("sqrt", node, x)
    if c == -1:
        return _apply("divide", node, _const_like(1, x), x)
    return None


def _identity(node, ins, unit, commutes: bool):
    """The operand that ``x op unit`` (and, when ``commutes``, ``unit op x``) leaves as it is."""
    a, b = ins
    if _is(b, unit) and _same(a, node):
        return a
    if commutes and _is(a, unit) and _same(b, node):
        return b
    return None


def _multiply(node, ins):
    return _identity(node, ins, 1, True) or _fold_chain(node, ins, "multiply", np.multiply)


def _add(node, ins):
    return _identity(node, ins, 0, True) or _fold_chain(node, ins, "add", np.add)


def _subtract(node, ins):
    return _identity(node, ins, 0, False)


def _divide(node, ins):
    return _identity(node, ins, 1, False)


def _negative(node, ins):
    (x,) = ins
    inner = x.node
    if inner.op is not None and inner.op.name == "negative" and _same(inner.inputs[0], node):
        return inner.inputs[0]
    return None


def _fold_chain(node, ins, name, combine):
    """``(x op c1) op c2 -> x op (c1 op c2)`` for scalar constants of one dtype."""
    a, b = ins
    if _scalar(b) is None:
        a, b = b, a
    c2 = _scalar(b)
    inner = a.node
    if c2 is None or inner.op is None or inner.op.name != name:
        return None
    x, c1e = inner.inputs
    if _scalar(c1e) is None:
        x, c1e = c1e, x
    if _scalar(c1e) is None or c1e.aval.dtype != b.aval.dtype or not _same(x, node):
        return None
    with np.errstate(all="ignore"):
        folded = combine(c1e.node.value.reshape(()), b.node.value.reshape(()))
    return _apply(name, node, x, _const_like(folded, b))


def _transpose(node, ins):
    (x,) = ins
    inner = x.node
    if inner.op is None or inner.op.name != "transpose":
        return None
    src = inner.inputs[0]
    nd = len(src.aval.shape)
    first = inner.params.get("axes") or tuple(reversed(range(nd)))
    second = node.params.get("axes") or tuple(reversed(range(nd)))
    axes = tuple(first[i] for i in second)
    if axes == tuple(range(nd)):
        return src
    return _apply("transpose", node, src, axes=axes)


def _reshape(node, ins):
    (x,) = ins
    return _reshaped(node, x, "reshape")


def _reshaped(node, x: Entry, op: str):
    """``x`` given ``node``'s shape by one ``op`` (reshape, broadcast_to) whose input is not one
    more of the same; None where that would be ``node`` as it is."""
    inner = x.node
    src = inner.inputs[0] if inner.op is not None and inner.op.name == op else x
    if src.aval.shape == node.avals[0].shape:
        return src
    if src is x and node.op.name == op:
        return None
    return _apply(op, node, src, shape=node.avals[0].shape)


def _broadcast_to(node, ins):
    (x,) = ins
    return _reshaped(node, x, "broadcast_to")


def _const_array(e: Entry):
    """The value of a constant that cannot change (not a captured user array), else None."""
    n = e.node
    if n.op is not None or n.kind != "const" or n.value is None or n.version is not None:
        return None
    return n.value


def _cast(node, ins):
    (x,) = ins
    return x if _same(x, node) else None


def _take(node, ins):
    """``take(x, [0..n-1] shaped s, axis)`` takes every row in order: ``x`` with ``axis`` split into ``s``."""
    x, idx = ins
    value = _const_array(idx)
    if value is None or node.params.get("sparse_grad") or x.aval.shape is None or value.dtype.kind not in "iu":
        return None
    axis = node.params.get("axis", 0) % max(len(x.aval.shape), 1)
    if len(x.aval.shape) == 0 or value.size != x.aval.shape[axis] or value.size == 0:
        return None
    if not np.array_equal(np.asarray(value).reshape(-1), np.arange(value.size)):
        return None
    return _reshaped(node, x, "reshape")


def _logical_and(node, ins):
    """``x & True`` (a constant all true, any shape) is ``x`` broadcast to the result's shape."""
    a, b = ins
    for c, x in ((a, b), (b, a)):
        value = _const_array(c)
        if value is None or c.aval.dtype != np.bool_ or x.aval.dtype != np.bool_ or not np.all(value):
            continue
        return _reshaped(node, x, "broadcast_to")
    return None


_RULES = {
    "power": _power, "multiply": _multiply, "add": _add, "subtract": _subtract, "divide": _divide,
    "negative": _negative, "transpose": _transpose, "reshape": _reshape,
    "cast": _cast, "take": _take, "logical_and": _logical_and, "broadcast_to": _broadcast_to,
}
