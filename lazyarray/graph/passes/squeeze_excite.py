"""Inference rewrite: a squeeze-excitation block -> one ``nn.squeeze_excite`` node.

MobileNetV3's blocks (issue #35) scale their channels by a gate: ONNX's ``GlobalAveragePool -> Conv
-> Relu -> Conv -> HardSigmoid -> Mul`` imports as ``mean`` and two convolutions whose activations
``graph/passes/conv_activation.py`` makes ``conv2d_act`` steps, so the pattern taken here is

    multiply(x, conv2d_act(conv2d_act(mean(x, axis=(2, 3), keepdims=True), w1, b1, act="relu"),
                           w2, b2, act="hardsigmoid"))

(either operand order of the product), with both convolutions 1 x 1 with biases, stride 1, no
padding, dilation 1, one group; the mean, the first and the second convolution each read by nothing
but the next (not graph outputs), x 4-D, and one float dtype throughout. Four steps become one; the
compiled kernel's gate agrees with the recorded ops' within float rounding (``kernels/squeeze_excite.py``:
its two dot products sum in channel order, not BLAS's). ``CachedOp`` runs it on inference graphs after
``conv_activation``; graphs that train keep the recorded ops (``squeeze_excite`` has no gradient).
``la.config.squeeze_excite = False`` turns it off.
"""
from __future__ import annotations

from ...ops import registry
from ...tuning_table import current
from ..build import record_node
from ..node import Node
from ..rewrite import has_op, rewrite, use_counts
from ..symbol import Symbol


def _conv_1x1(node: Node, act: str, uses: dict) -> bool:
    """Whether ``node`` is a ``conv2d_act`` with activation ``act``, a 1 x 1 weight and a bias, stride 1,
    no padding, dilation 1, one group, read by one node only."""
    if node.op is None or node.op.name != "conv2d_act" or len(node.inputs) != 3 or uses.get(id(node), 0) != 1:
        return False
    p = node.params
    return p.get("act", "relu") == act and tuple(p.get("stride", (1, 1))) == (1, 1) \
        and tuple(p.get("padding", (0, 0))) == (0, 0) and tuple(p.get("dilation", (1, 1))) == (1, 1) \
        and p.get("groups", 1) == 1 and tuple(node.inputs[1].aval.shape[2:]) == (1, 1)


def _global_mean_of(node: Node, x, uses: dict) -> bool:
    """Whether ``node`` is ``mean(x, axis=(2, 3), keepdims=True)`` of the 4-D ``x``, read by one node only."""
    if node.op is None or node.op.name != "mean" or uses.get(id(node), 0) != 1 or node.inputs[0] != x:
        return False
    axis, nd = node.params.get("axis"), len(x.aval.shape)
    axes = (axis,) if isinstance(axis, int) else tuple(axis or ())
    return nd == 4 and node.params.get("keepdims", False) and sorted(a % nd for a in axes) == [2, 3]


def _match(node: Node, uses: dict):
    """``(x operand index, gate operand index)`` when ``node`` is a squeeze-excitation block's product, else None."""
    if node.op is None or node.op.name != "multiply" or len(node.inputs) != 2 or node.params:
        return None
    dtype = node.avals[0].dtype
    if dtype is None or dtype.kind != "f":
        return None
    for xi in (0, 1):
        x, gate = node.inputs[xi], node.inputs[1 - xi].node
        if not _conv_1x1(gate, "hardsigmoid", uses):
            continue
        hidden = gate.inputs[0].node
        if not _conv_1x1(hidden, "relu", uses) or not _global_mean_of(hidden.inputs[0].node, x, uses):
            continue
        entries = (x, *gate.inputs, *hidden.inputs)
        if all(e.aval.dtype == dtype for e in entries) and tuple(node.avals[0].shape) == tuple(x.aval.shape):
            return xi, 1 - xi
    return None


def squeeze_excite(sym: Symbol) -> Symbol:
    """``sym`` with each squeeze-excitation block (after ``conv_activation``) made one ``squeeze_excite`` node.

    >>> import lazyarray as la
    >>> from lazyarray.graph.passes.conv_activation import conv_activation
    >>> x = la.sym.var("x", shape=(1, 8, 4, 4))
    >>> w1, b1 = la.sym.var("w1", shape=(2, 8, 1, 1)), la.sym.var("b1", shape=(2,))
    >>> w2, b2 = la.sym.var("w2", shape=(8, 2, 1, 1)), la.sym.var("b2", shape=(8,))
    >>> h = la.sym.relu(la.sym.nn.conv2d(la.sym.mean(x, axis=(2, 3), keepdims=True), w1, b1))
    >>> g = la.sym.maximum(la.sym.minimum(la.sym.nn.conv2d(h, w2, b2) * 0.2 + 0.5, 1.0), 0.0)
    >>> [n.op.name for n in squeeze_excite(conv_activation(x * g)).topo() if n.op is not None]
    ['squeeze_excite']
    """
    if not current().squeeze_excite or not has_op(sym, "conv2d_act"):
        return sym
    uses = use_counts(sym)
    fused_op = registry.get("squeeze_excite")

    def visit(node: Node, ins):
        got = _match(node, uses)
        if got is None:
            return None
        xi, gi = got
        gate = ins[gi].node
        hidden = gate.inputs[0].node
        params = {"alpha": gate.params.get("alpha", 0.2), "beta": gate.params.get("beta", 0.5)}
        entries = [ins[xi], *hidden.inputs[1:], *gate.inputs[1:]]
        return (record_node(fused_op, entries, params, source=node.source),)

    return rewrite(sym, visit, share=True)
