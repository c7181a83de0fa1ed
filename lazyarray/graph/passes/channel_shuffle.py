"""Inference rewrite: ShuffleNet's concatenation and channel shuffle -> one ``nn.channel_shuffle`` node.

ShuffleNet's units (issue #35) end with ``torch.cat((x1, x2), 1)`` and the channel shuffle
``x.view(b, g, c // g, h, w).transpose(1, 2).reshape(b, -1, h, w)``; imported and simplified (the
reshapes' sizes folded to constants), that is

    reshape(transpose(reshape(v, (N, g, C / g, *rest)), (0, 2, 1, 3, ...)), (N, C, *rest))

with ``v`` (N, C, *rest). The chain becomes one ``channel_shuffle(v, groups=g)``, and where ``v`` is a
``concatenate`` along axis 1 that nothing else reads, ``channel_shuffle(*its inputs, groups=g)``: each
input copied once to its shuffled places (``kernels/channel_shuffle.py``) instead of a concatenation
and a copy of the shuffle; the output is a planned buffer, so the split after it (``getitem``s of
halves) are views made once (``executor/set_views.py``). Only a chain whose inner values feed nothing
but the next op, in one dtype, with every size an int. Data movement only: the values are equal bit for
bit. ``CachedOp`` runs it on inference graphs after simplification (the reshapes' sizes are constants
there); graphs that train keep the recorded ops (``channel_shuffle`` has no gradient).
``la.config.channel_shuffle = False`` turns it off.
"""
from __future__ import annotations

from ...ops import registry
from ...tuning_table import current
from ..build import record_node
from ..node import Entry, Node
from ..rewrite import has_op, rewrite, use_counts
from ..symbol import Symbol


def _sizes(entry) -> tuple | None:
    shape = entry.aval.shape
    return tuple(shape) if shape is not None and all(isinstance(d, int) for d in shape) else None


def _only_user(node: Node, name: str, uses: dict) -> bool:
    return node.op is not None and node.op.name == name and uses.get(id(node), 0) == 1


def _match(node: Node, uses: dict):
    """``(v, groups)`` when ``node`` is the outer reshape of a channel shuffle of the entry ``v``, else None."""
    if node.op is None or node.op.name != "reshape" or len(node.inputs) != 1:
        return None
    t = node.inputs[0].node
    if not _only_user(t, "transpose", uses) or len(t.inputs) != 1:
        return None
    r1 = t.inputs[0].node
    if not _only_user(r1, "reshape", uses) or len(r1.inputs) != 1:
        return None
    v = r1.inputs[0]
    shape, split, y = _sizes(v), _sizes(t.inputs[0]), _sizes(Entry(node))
    if shape is None or split is None or y != shape or len(shape) < 2 or len(split) != len(shape) + 1:
        return None
    n, c, rest, g = shape[0], shape[1], shape[2:], split[1]
    axes = tuple(t.params.get("axes") or ())
    if g < 1 or c % g or split != (n, g, c // g) + rest or axes != (0, 2, 1) + tuple(range(3, len(split))):
        return None
    return v, g


def channel_shuffle(sym: Symbol) -> Symbol:
    """``sym`` with each channel shuffle (of a concatenation read by nothing else: its inputs) one
    ``channel_shuffle`` node.

    >>> import lazyarray as la
    >>> a, b = la.sym.var("a", shape=(1, 4, 3, 3)), la.sym.var("b", shape=(1, 4, 3, 3))
    >>> v = la.sym.concatenate([a, b], axis=1)
    >>> y = la.sym.reshape(la.sym.transpose(la.sym.reshape(v, shape=(1, 2, 4, 3, 3)), axes=(0, 2, 1, 3, 4)),
    ...                    shape=(1, 8, 3, 3))
    >>> [(n.op.name, n.params["groups"], len(n.inputs)) for n in channel_shuffle(y).topo() if n.op is not None]
    [('channel_shuffle', 2, 2)]
    """
    if not current().channel_shuffle or not has_op(sym, "transpose"):
        return sym
    uses = use_counts(sym)
    fused_op = registry.get("channel_shuffle")

    def visit(node: Node, ins):
        got = _match(node, uses)
        if got is None:
            return None
        v, groups = got
        new = ins[0].node.inputs[0].node.inputs[0]  # (v in the rewritten graph)
        parts = [new]
        cat = v.node
        if _only_user(cat, "concatenate", uses) and cat.params.get("axis", 0) % len(v.aval.shape) == 1 \
                and all(e.aval.dtype == v.aval.dtype for e in cat.inputs):
            parts = list(new.node.inputs)
        return (record_node(fused_op, parts, {"groups": groups}, source=node.source),)

    return rewrite(sym, visit, share=True)
