"""Inference rewrite: a ``conv2d`` and the activation that alone reads it -> one ``nn.conv2d_act``.

Three activations, as graphs record them (ONNX's ``Relu``, ``HardSigmoid`` and ``HardSwish`` import as
these; torch's MobileNetV3 exports all three after convolutions):

* ``relu(c)``, or ``relu(v)`` with ``v`` a ``reshape``, ``squeeze`` or ``expand_dims`` of c that
  nothing else reads (a 1-D net's ``squeeze`` between its convolution and its relu: issue #35): then
  the reshape of the ``conv2d_act``, relu applying to each value wherever it lies;
* hardsigmoid ``maximum(minimum(add(multiply(c, alpha), beta), 1), 0)`` (either operand order of each
  op), ``alpha`` and ``beta`` 0-d constants of c's dtype;
* hardswish ``multiply(c, hardsigmoid(c))`` (c read by exactly these two).

where ``c`` is a ``conv2d``'s output that nothing else reads (not a graph output) and every op keeps
c's float dtype. ``ops/conv_act.py`` computes the same ops in the same order, so the values are
equal bit for bit; the graph loses one step per activation (five for a hard-swish's fused group).
``CachedOp`` runs it on inference graphs after ``relu_after_max_pool``; graphs that train keep the
ops recorded (``conv2d_act`` has no gradient). ``la.config.conv_activation = False`` turns it off
(``benchmarks/real_models.py --ab-cnn``).
"""
from __future__ import annotations

import numpy as np

from ...ops import registry
from ...tuning_table import current
from ..build import record_node
from ..node import Node
from ..rewrite import has_op, rewrite, use_counts
from ..symbol import Symbol

VIEWS = ("reshape", "squeeze", "expand_dims")  # (ops that only regroup the values: relu commutes with them)


def _const(node: Node, dtype) -> float | None:
    """The value of a frozen 0-d constant of ``dtype``, else None."""
    if node.op is not None or node.kind != "const" or node.version is not None or node.value is None:
        return None
    v = node.value
    if getattr(v, "shape", None) != () or getattr(v, "dtype", None) != dtype:
        return None
    return float(v)


def _binary(node: Node, name: str, dtype):
    """``(operand index, constant value)`` when ``node`` is ``name(a, k)`` or ``name(k, a)`` with ``k`` a
    0-d constant of ``dtype`` and the other operand of ``dtype``; else None."""
    if node.op is None or node.op.name != name or len(node.inputs) != 2 or node.params \
            or node.avals[0].dtype != dtype:
        return None
    for i in (0, 1):
        k = _const(node.inputs[1 - i].node, dtype)
        if k is not None and node.inputs[i].aval.dtype == dtype:
            return i, k
    return None


def _hard_sigmoid(node: Node, uses: dict, dtype):
    """``(path, conv node, alpha, beta)`` when ``node`` is hardsigmoid of a value whose chain of ops
    each feed only the next; ``path``: the operand indices from ``node`` down to the convolution."""
    path, consts = [], []
    for name, want in (("maximum", 0.0), ("minimum", 1.0), ("add", None), ("multiply", None)):
        got = _binary(node, name, dtype)
        if got is None or (want is not None and (got[1] != want or np.signbit(got[1]))):
            return None
        if path and uses.get(id(node), 0) != 1:
            return None
        path.append(got[0])
        consts.append(got[1])
        node = node.inputs[got[0]].node
    if node.op is None or node.op.name != "conv2d" or node.avals[0].dtype != dtype:
        return None
    return path, node, consts[3], consts[2]


def _match(node: Node, uses: dict):
    """``(path, conv node, params of conv2d_act)`` for an activation of a convolution, else None."""
    if node.op is None or not node.avals or node.avals[0].dtype is None or node.avals[0].dtype.kind != "f":
        return None
    dtype, name = node.avals[0].dtype, node.op.name
    if name == "relu":
        c, path = node.inputs[0].node, [0]
        if c.op is not None and c.op.name in VIEWS and len(c.inputs) == 1 and uses.get(id(c), 0) == 1:
            c, path = c.inputs[0].node, [0, 0]  # (relu of a reshaped convolution: the reshape of its relu)
        if node.params or c.op is None or c.op.name != "conv2d" or c.avals[0].dtype != dtype \
                or uses.get(id(c), 0) != 1:
            return None
        return path, c, {"act": "relu"}
    if name == "maximum":
        got = _hard_sigmoid(node, uses, dtype)
        if got is None or uses.get(id(got[1]), 0) != 1:
            return None
        return got[0], got[1], {"act": "hardsigmoid", "alpha": got[2], "beta": got[3]}
    if name == "multiply" and len(node.inputs) == 2 and not node.params:
        for i in (0, 1):
            c, h = node.inputs[i].node, node.inputs[1 - i].node
            got = None if uses.get(id(h), 0) != 1 else _hard_sigmoid(h, uses, dtype)
            if got is not None and got[1] is c and uses.get(id(c), 0) == 2:
                return [i], c, {"act": "hardswish", "alpha": got[2], "beta": got[3]}
    return None


def conv_activation(sym: Symbol) -> Symbol:
    """``sym`` with each activation of a convolution that nothing else reads made one ``conv2d_act`` node.

    >>> import lazyarray as la
    >>> x, w = la.sym.var("x", shape=(1, 3, 8, 8)), la.sym.var("w", shape=(4, 3, 3, 3))
    >>> y = la.sym.relu(la.sym.nn.conv2d(x, w, padding=(1, 1)))
    >>> [(n.op.name, n.params["act"]) for n in conv_activation(y).topo() if n.op is not None]
    [('conv2d_act', 'relu')]
    """
    if not current().conv_activation or not has_op(sym, "conv2d"):
        return sym
    uses = use_counts(sym)
    fused_op = registry.get("conv2d_act")

    def visit(node: Node, ins):
        got = _match(node, uses)
        if got is None:
            return None
        path, conv, act = got
        new = ins[path[0]].node
        if new.op is not None and new.op.name in VIEWS and act["act"] == "relu":  # (relu of a reshape)
            fused = record_node(fused_op, list(new.inputs[0].node.inputs), {**conv.params, **act}, source=conv.source)
            return (record_node(new.op, [fused], new.params, source=new.source),)
        for i in path[1:]:
            new = new.inputs[i].node  # (the rewritten chain down to the convolution, as the old one)
        return (record_node(fused_op, list(new.inputs), {**conv.params, **act}, source=conv.source),)

    return rewrite(sym, visit, share=True)
