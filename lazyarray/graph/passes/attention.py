"""Inference rewrite: the ops of a scaled dot-product attention as one ``nn.fused_attention`` node.

It finds ``matmul(softmax(chain(matmul(a, b)), axis=-1), v)`` where ``chain`` is a run of
``multiply``, ``divide``, ``add``, ``subtract`` and ``where`` ops on the scores (a scale, an
additive mask, a position bias, ``where(mask, -inf, scores)``), with ``cast`` to the same dtype
allowed between the softmax and the product (HF ViT's exporter writes two), and ``multiply`` /
``divide`` ops on ``a`` and ``b`` (torch's ``scaled_dot_product_attention`` scales q and k by
``sqrt(scale)`` each), and replaces the final product by one node that runs all of it
(``ops/attention.py``; ``kernels/attention.py`` runs it in one buffer). A ``transpose`` then
``reshape`` of its result (the heads merged back into features), read by nothing else, become the
layout the node writes (its ``out_axes``, ``out_shape``): one copy step less.

Equal values: the op runs the same operations on the same operands in the same order (the same
kernels, in place), so it fires only where that holds: every replaced value is read by the next op
of the pattern alone (not by another op, not a graph output), every value in the chain keeps the
scores' shape and dtype (an extra operand broadcasts into it), the mask of a ``where`` is boolean
and other operands are floating, q, k and v share the one float dtype. A fully masked row (every
score ``-inf``) gives what softmax gives there (NaN), as before.

The op has no gradient: ``CachedOp`` runs this on inference graphs only (graphs that train keep the
recorded ops). ``la.config.fuse_attention = False`` turns it off (``benchmarks/real_models.py --ab``).
"""
from __future__ import annotations

from ...ops import registry
from ...ops.attention import code
from ...tuning_table import current
from ..build import record_node
from ..node import Entry, Node
from ..rewrite import has_op, rewrite, use_counts
from ..symbol import Symbol
from .walk import Walk
from .walk import op_name as _op

_SCORE_OPS = ("multiply", "divide", "add", "subtract", "where")
_OPERAND_OPS = ("multiply", "divide")
_MAX_CHAIN = 8  # ops walked back from the softmax (the models seen have 1 or 2)


class _Match(Walk):
    """The walk of one candidate (``walk.py``): the old graph beside the rewritten one."""

    def __init__(self, uses: dict[int, int], dtype):
        super().__init__(uses)
        self.dtype = dtype

    def scores(self, old: Entry, new: Entry, shape, depth: int = 0):
        """``(codes, extras, old product, new product)`` of the chain ending at ``old``, else None."""
        if not self.private(old) or not self.same(old, new) or old.aval.shape != shape \
                or old.aval.dtype != self.dtype:
            return None
        name, n = _op(old), old.node
        if name == "matmul":
            return [], [], old, new
        if name not in _SCORE_OPS or depth >= _MAX_CHAIN:
            return None
        for pos in ((1, 2) if name == "where" else (0, 1)):
            if not self._operands_fit(name, n, pos):
                continue
            got = self.scores(n.inputs[pos], new.node.inputs[pos], shape, depth + 1)
            if got is not None:
                codes, extras, mo, mn = got
                others = [e for i, e in enumerate(new.node.inputs) if i != pos]
                return codes + [code(name, pos)], extras + others, mo, mn
        return None

    def _operands_fit(self, name: str, n: Node, pos: int) -> bool:
        """The other inputs of ``n`` (the running value at ``pos``): a boolean mask first for
        ``where``, floating operands otherwise."""
        for i, e in enumerate(n.inputs):
            if i == pos:
                continue
            kind = e.aval.dtype.kind if e.aval.dtype is not None else None
            if kind != ("b" if name == "where" and i == 0 else "f"):
                return False
        return True

    def operand(self, old: Entry, new: Entry):
        """``(codes, extras, old base, new base)``: the ``multiply`` / ``divide`` ops on an operand of
        the scores' product (each private, keeping its shape and dtype), walked back to its base."""
        codes: list[int] = []
        extras: list[Entry] = []
        while len(codes) < _MAX_CHAIN and _op(old) in _OPERAND_OPS and self.private(old) and self.same(old, new):
            n = old.node
            pos = next((p for p in (0, 1) if n.inputs[p].aval.shape == old.aval.shape
                        and n.inputs[p].aval.dtype == self.dtype and self._operands_fit(_op(old), n, p)), None)
            if pos is None:
                break
            codes.insert(0, code(_op(old), pos))
            extras[:0] = [new.node.inputs[1 - pos]]
            old, new = n.inputs[pos], new.node.inputs[pos]
        return codes, extras, old, new


def _softmax_of(node: Node, ins, m: _Match):
    """The softmax entries (old, new) feeding ``node``'s first input through same-dtype casts."""
    old, new = node.inputs[0], ins[0]
    while _op(old) == "cast" and m.private(old) and m.same(old, new) \
            and old.aval.dtype == old.node.inputs[0].aval.dtype:
        old, new = old.node.inputs[0], new.node.inputs[0]
    if _op(old) != "softmax" or not m.private(old) or not m.same(old, new):
        return None
    nd = len(old.aval.shape)
    return (old, new) if nd >= 2 and old.node.params.get("axis", -1) in (-1, nd - 1) else None


def _match(node: Node, ins, uses, op):
    """The ``fused_attention`` node replacing product ``node`` (new inputs ``ins``), or None."""
    dtype = node.avals[0].dtype
    if dtype is None or dtype.kind != "f" or node.avals[0].shape is None or ins[1].aval.dtype != dtype \
            or len(node.inputs[1].aval.shape or ()) < 2:
        return None
    m = _Match(uses, dtype)
    sm = _softmax_of(node, ins, m)
    if sm is None:
        return None
    got = m.scores(sm[0].node.inputs[0], sm[1].node.inputs[0], sm[0].aval.shape)
    if got is None:
        return None
    score_codes, score_extras, prod_old, prod_new = got
    q_codes, q_extras, _, q = m.operand(prod_old.node.inputs[0], prod_new.node.inputs[0])
    k_codes, k_extras, _, k = m.operand(prod_old.node.inputs[1], prod_new.node.inputs[1])
    if any(e.aval.dtype != dtype or len(e.aval.shape or ()) < 2 for e in (q, k)):
        return None
    params = {"q_ops": tuple(q_codes), "k_ops": tuple(k_codes), "score_ops": tuple(score_codes)}
    fused = record_node(op, [q, k, ins[1], *q_extras, *k_extras, *score_extras], params, source=node.source)
    return fused if fused.aval.shape == node.avals[0].shape and fused.aval.dtype == dtype else None


def _laid_out(node: Node, ins, uses, op):
    """``reshape(transpose(fused_attention(...)))`` (``ins``: the reshape's new input), the two
    private, as one ``fused_attention`` writing that layout (``out_axes``, ``out_shape``), else None."""
    t_old, t_new = node.inputs[0], ins[0]
    w = Walk(uses)
    if not w.step(t_old, t_new, "transpose") or _op(t_new.node.inputs[0]) != "fused_attention":
        return None
    f_new, f_old = t_new.node.inputs[0], t_old.node.inputs[0]
    nd = len(f_new.aval.shape)
    axes = t_old.node.params.get("axes")
    axes = tuple(range(nd - 1, -1, -1)) if axes is None else tuple(a % nd for a in axes)
    shape = node.avals[0].shape
    if not w.private(f_old) or f_new.node.params.get("out_axes") or shape is None \
            or not all(isinstance(d, int) for d in shape):
        return None
    params = dict(f_new.node.params, out_axes=axes, out_shape=tuple(shape))
    fused = record_node(op, list(f_new.node.inputs), params, source=f_new.node.source)
    return fused if fused.aval.shape == shape else None


def fuse_attention(sym: Symbol) -> Symbol:
    """``sym`` with each attention's product, scores ops and softmax made one ``fused_attention``.

    >>> import lazyarray as la
    >>> q, k, v = (la.sym.var(n, shape=(1, 2, 5, 8)) for n in "qkv")
    >>> s = la.sym.multiply(la.sym.matmul(q, la.sym.transpose(k, axes=(0, 1, 3, 2))), 0.35)
    >>> y = la.sym.matmul(la.sym.nn.softmax(s), v)
    >>> [n.op.name for n in fuse_attention(y).topo() if n.op is not None]
    ['transpose', 'fused_attention']
    """
    if not current().fuse_attention or not has_op(sym, "softmax"):
        return sym
    uses = use_counts(sym)
    op = registry.get("fused_attention")

    def visit(node: Node, ins):
        name = None if node.op is None else node.op.name
        if name == "matmul" and len(node.inputs) == 2:
            fused = _match(node, ins, uses, op)
        elif name == "reshape":
            fused = _laid_out(node, ins, uses, op)
        else:
            return None
        return None if fused is None else (fused,)

    return rewrite(sym, visit, share=True)
