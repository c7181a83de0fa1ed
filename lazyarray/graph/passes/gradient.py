"""The gradient pass: build the backward graph from the registry's gradient functions.

Gradients are written with registered ops through the graph emitter, so the backward
pass is itself a graph: eager autograd evaluates it at once, deferred compute keeps it
lazy, and the executor compiles and plans it with the forward graph.
"""
from __future__ import annotations

from ...errors import AutogradError, fmt_shape
from ...ops import registry
from ...ops.registry import OpNamespace
from ..build import apply_node
from ..node import Entry, Node
from ..traverse import topo_order


def gradient(outputs: list[Entry], head_grads: list[Entry | None], wrt: list[Entry]) -> list[Entry | None]:
    """Entries for d(sum of outputs * head_grads)/d(wrt); ``None`` where no path exists.

    A ``None`` head gradient means ones. Gradients of broadcast inputs are summed back to
    the input's shape; several uses of one value add up.
    """
    order = topo_order(outputs)
    # Nodes through which a gradient can reach a ``wrt`` entry.
    targets = {id(e.node) for e in wrt}
    on_path: set[int] = set()
    for node in order:
        if id(node) in targets or any(id(e.node) in on_path for e in node.inputs):
            on_path.add(id(node))
    grads: dict[Entry, Entry] = {}
    F = _Emitter()
    for out, hg in zip(outputs, head_grads):
        if id(out.node) not in on_path:
            continue
        if hg is None:
            hg = apply_node(registry.get("ones_like"), out, source=out.node.source)
        _accumulate(grads, out, hg)
    for node in reversed(order):
        if node.op is None or id(node) not in on_path:
            continue
        F.source = node.source
        outs = [Entry(node, i) for i in range(len(node.avals))]
        gs = [grads.get(o) for o in outs]
        if all(g is None for g in gs):
            continue
        if node.op.grad is None:
            raise AutogradError(
                f"{node.op.name} is not differentiable, but a gradient must flow through it"
                + _where(node) + "; wrap it in la.autograd.pause() or call .detach() on its input"
            )
        if len(node.avals) == 1:
            g = gs[0]
        else:
            g = [gi if gi is not None else F.zeros_like(o) for gi, o in zip(gs, outs)]
        in_grads = node.op.grad(F, list(node.inputs), outs if len(outs) > 1 else outs[0], g, **node.params)
        for inp, gi in zip(node.inputs, in_grads):
            if gi is None or id(inp.node) not in on_path:
                continue
            _accumulate(grads, inp, _fit(gi, inp, node), F)
    return [grads.get(w) for w in wrt]


class _Emitter(OpNamespace):
    """The graph emitter of one gradient pass: a gradient node carries the source line of the
    forward node it differentiates (an error in the backward names the user's line, and no
    frame walk per node)."""

    def __init__(self):
        super().__init__(self._emit)
        self.source = None

    def _emit(self, op, *inputs, **params):
        return apply_node(op, *inputs, source=self.source, **params)


def _fit(g: Entry, inp: Entry, node: Node) -> Entry:
    """Sum a broadcast gradient back to the input's shape and cast it to the input's dtype."""
    want, have = inp.aval, g.aval
    if have.shape != want.shape:
        if None in want.shape or None in have.shape:
            g = apply_node(registry.get("sum_like"), g, inp, source=node.source)
        else:
            g = apply_node(registry.get("sum_to"), g, shape=want.shape, source=node.source)
        if g.aval.shape != want.shape and None not in want.shape:
            raise AutogradError(
                f"gradient of {node.op.name} has shape {fmt_shape(g.aval.shape)}, input has "
                f"{fmt_shape(want.shape)}" + _where(node)
            )
    if g.aval.dtype != want.dtype and want.dtype.kind == "f":
        g = apply_node(registry.get("cast"), g, dtype=want.dtype, source=node.source)
    return g


def _accumulate(grads: dict, key: Entry, g: Entry, F=None) -> None:
    prev = grads.get(key)
    grads[key] = g if prev is None else apply_node(registry.get("add"), prev, g,
                                                   source=None if F is None else F.source)


def _where(node: Node) -> str:
    line = node.source_line()
    return f" (recorded at {line})" if line else ""
