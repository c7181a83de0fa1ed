"""The forward computes what the backward would recompute: rewrites of a joint training graph.

The gradient pass writes each op's backward from the op's inputs alone, so some backward ops
recompute what the forward already had in hand:

* ``gelu_grad(g, x)`` recomputes ``erf(x / sqrt(2))`` (a dozen passes over memory) for the slope
  ``Phi(x) + x phi(x)``;
* ``layer_norm_grad(g, x, gamma)`` recomputes each row's mean and variance and the normalized
  input.

When a forward and its backward are compiled together (``CachedOp``'s training signatures,
``_split_backward``), this pass rewrites each such pair on the joint graph:

* ``gelu(x)`` -> ``y, d = gelu_with_grad(x)`` (one erf gives value and slope), and
  ``gelu_grad(g, x)`` -> ``g * d``;
* ``layer_norm(x, gamma, beta)`` -> ``y, xhat, rstd = layer_norm_with_stats(...)``, and
  ``layer_norm_grad(g, x, gamma)`` -> ``layer_norm_grad_saved(g, xhat, rstd, gamma)``;
* ``softmax_cross_entropy_rows(z, labels)`` -> ``loss, p = ..._with_probs(z, labels)``, and
  ``softmax_cross_entropy_rows_grad(z, labels, g)`` -> ``..._grad_saved(p, labels, g)`` (the
  integer labels make this pair's dtypes mixed: logits, gradients and probabilities share one).

The backward then saves ``d`` / ``xhat`` (and a ``rstd`` per row) instead of ``x``: the same bytes.
Values are equal: the new kernels run the same operations as the ones they replace.

A pair is rewritten only where a forward op and a backward op read the same entries with the same
parameters, all in one floating dtype, with a head gradient of the input's shape; other graphs
come back unchanged (the same entries).
"""
from __future__ import annotations

from ...aval import Aval
from ...ops import registry
from ..node import Entry, Node
from ..rewrite import copy_node, rewrite
from ..symbol import Symbol
from ..traverse import topo_order

_OP = registry.get


class _Rule:
    """One forward op, its backward op, and how the pair is rewritten (``dtypes_ok(node)``: the
    node's dtypes allow it; by default all one floating dtype)."""

    def __init__(self, fwd, bwd, fwd_key, bwd_key, pair, backward, dtypes_ok=None):
        self.dtypes_ok = _same_dtype if dtypes_ok is None else dtypes_ok
        self.fwd, self.bwd = _OP(fwd), _OP(bwd)
        self.fwd_key, self.bwd_key = fwd_key, bwd_key  # node -> what must match between the two
        self.pair = pair  # (forward node, its new inputs) -> the node computing value and saves
        self.backward = backward  # (backward node, its new inputs, pair node) -> its replacement


def _entry_key(e: Entry) -> tuple:
    return id(e.node), e.index


def _same_dtype(node: Node) -> bool:
    dts = {e.aval.dtype for e in node.inputs} | {a.dtype for a in node.avals}
    return len(dts) == 1 and next(iter(dts)) is not None and next(iter(dts)).kind == "f"


def _gelu_pair(node, ins):
    a = node.avals[0]
    return Node(_OP("gelu_with_grad"), (ins[0],), dict(node.params), (a, a), name=f"{node.label()}_with_grad",
                source=node.source, block=node.block)


def _gelu_backward(node, ins, pair):
    return Node(_OP("multiply"), (ins[0], Entry(pair, 1)), {}, node.avals, name=node.name, source=node.source,
                block=node.block)


def _ln_pair(node, ins):
    a = node.avals[0]
    ax = node.params["axis"] % len(a.shape)
    rstd = Aval(tuple(1 if i == ax else d for i, d in enumerate(a.shape)), a.dtype, a.device, a.stype)
    return Node(_OP("layer_norm_with_stats"), tuple(ins), dict(node.params), (a, a, rstd),
                name=f"{node.label()}_with_stats", source=node.source, block=node.block)


def _ln_backward(node, ins, pair):
    g, _, gamma = ins
    return Node(_OP("layer_norm_grad_saved"), (g, Entry(pair, 1), Entry(pair, 2), gamma),
                {"axis": node.params["axis"]}, node.avals, name=node.name, source=node.source, block=node.block)


def _sce_pair(node, ins):
    loss, = node.avals
    probs = ins[0].aval
    return Node(_OP("softmax_cross_entropy_rows_with_probs"), tuple(ins), {}, (loss, probs),
                name=f"{node.label()}_with_probs", source=node.source, block=node.block)


def _sce_backward(node, ins, pair):
    _, labels, g = ins
    return Node(_OP("softmax_cross_entropy_rows_grad_saved"), (Entry(pair, 1), labels, g), {}, node.avals,
                name=node.name, source=node.source, block=node.block)


def _sce_dtypes(node):  # float logits, (loss,) gradients and probabilities of their dtype; integer labels
    dt = node.inputs[0].aval.dtype
    others = [e.aval.dtype for e in node.inputs[2:]] + [a.dtype for a in node.avals]
    return dt is not None and dt.kind == "f" and all(d == dt for d in others)


def _gelu_ok(node):  # gelu_grad(g, x): g shaped like x
    return node.inputs[0].aval.shape == node.inputs[1].aval.shape


def _ln_ok(node):  # layer_norm_grad(g, x, gamma): g shaped like x
    return node.inputs[0].aval.shape == node.inputs[1].aval.shape


_RULES = (
    _Rule("gelu", "gelu_grad",
          lambda n: (_entry_key(n.inputs[0]), n.params["approximation"]),
          lambda n: (_entry_key(n.inputs[1]), n.params["approximation"]) if _gelu_ok(n) else None,
          _gelu_pair, _gelu_backward),
    _Rule("layer_norm", "layer_norm_grad",
          lambda n: (_entry_key(n.inputs[0]), _entry_key(n.inputs[1]), n.params["axis"], n.params["eps"]),
          lambda n: (_entry_key(n.inputs[1]), _entry_key(n.inputs[2]), n.params["axis"], n.params["eps"])
          if _ln_ok(n) else None,
          _ln_pair, _ln_backward),
    _Rule("softmax_cross_entropy_rows", "softmax_cross_entropy_rows_grad",
          lambda n: (_entry_key(n.inputs[0]), _entry_key(n.inputs[1])),
          lambda n: (_entry_key(n.inputs[0]), _entry_key(n.inputs[1]))
          if n.inputs[2].aval.shape == n.inputs[1].aval.shape else None,
          _sce_pair, _sce_backward, _sce_dtypes),
)
_BY_FWD = {id(r.fwd): r for r in _RULES}
_BY_BWD = {id(r.bwd): r for r in _RULES}


def _matches(forward: list[Entry], live: list[Entry]) -> dict[int, Node]:
    """``id(backward node) -> its forward partner``: the pairs some rule rewrites together."""
    fwd_nodes = topo_order(list(forward))
    fwd_ids = {id(n) for n in fwd_nodes}
    candidates: dict[tuple, Node] = {}  # (rule, key) -> the forward node
    for n in fwd_nodes:
        r = _BY_FWD.get(id(n.op)) if n.op is not None else None
        if r is not None and r.dtypes_ok(n):
            candidates.setdefault((id(r), r.fwd_key(n)), n)
    match: dict[int, Node] = {}
    if candidates and live:
        for n in topo_order(live, stop=lambda n: id(n) in fwd_ids):
            r = _BY_BWD.get(id(n.op)) if n.op is not None and id(n) not in fwd_ids else None
            if r is not None and r.dtypes_ok(n):
                k = r.bwd_key(n)
                partner = candidates.get((id(r), k)) if k is not None else None
                if partner is not None:
                    match[id(n)] = partner
    return match


def forward_saves(forward: list[Entry], backward: list[Entry | None]) -> tuple[list[Entry], list[Entry | None]]:
    """``(forward, backward)`` outputs with each matching pair rewritten (see the module doc);
    ``None`` entries of ``backward`` stay ``None``.

    >>> import lazyarray as la
    >>> from lazyarray.graph.passes.gradient import gradient
    >>> x = la.sym.var("x", shape=(4,))
    >>> y = la.sym.nn.gelu(x)
    >>> head = la.sym.var("g", shape=(4,))
    >>> fwd, bwd = forward_saves(list(y.outputs), gradient(list(y.outputs), list(head.outputs), list(x.outputs)))
    >>> fwd[0].node.op.name, bwd[0].node.op.name
    ('gelu_with_grad', 'multiply')
    """
    live = [e for e in backward if e is not None]
    match = _matches(forward, live)
    if not match:
        return list(forward), list(backward)
    paired = {id(p) for p in match.values()}
    mapped: dict[int, Node | tuple] = {}  # forward node -> what replaces it
    pairs: dict[int, Node] = {}

    def visit_forward(node: Node, ins):
        if node.op is None:  # inputs and constants stay themselves (a program binds its inputs by node)
            new = node
        elif id(node) in paired:
            pairs[id(node)] = p = _BY_FWD[id(node.op)].pair(node, ins)
            new = (Entry(p, 0),)
        else:
            new = copy_node(node, ins)
        mapped[id(node)] = new
        return new

    new_fwd = list(rewrite(Symbol(list(forward)), visit_forward).outputs)

    def visit_backward(node: Node, ins):
        if id(node) in mapped:
            return mapped[id(node)]
        if node.op is None:
            return node
        partner = match.get(id(node))
        if partner is not None:
            return _BY_BWD[id(node.op)].backward(node, ins, pairs[id(partner)])
        return None

    new_live = iter(rewrite(Symbol(live), visit_backward, stop=lambda n: id(n) in mapped).outputs)
    return new_fwd, [None if e is None else next(new_live) for e in backward]
