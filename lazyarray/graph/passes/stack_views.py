"""Stacks that only rearrange: the glue an exported recurrent layer puts between its cells.

An ONNX LSTM or GRU returns its step outputs as ``[time, directions, batch, hidden]``; torch's
exporter then stacks the directions (``stack``), moves them next to the hidden axis
(``transpose``) and merges the two (``reshape``), or squeezes the one direction away again, and
the final states of two layers are stacked and then concatenated. Each of those is a step that
copies. This pass writes the same values with fewer steps:

* ``reshape(transpose(stack(xs, k), perm))`` (or without the transpose), where the reshape merges
  the stacked axis with the axis after it and the transpose keeps the other axes in order:
  ``concatenate(xs, axis)`` (one copy instead of two or three);
* ``concatenate(stack(a.., k), stack(b.., k), axis=k)``: ``stack(a.., b.., k)``;
* ``stack([x], k)``: ``expand_dims(x, k)`` (a view);
* a ``reshape`` / ``squeeze`` / ``expand_dims`` of one of those (or of a one-input stack):
  one ``reshape`` of the first value (nothing at all where the shapes are equal);
* a ``getitem`` whose slices select every element (an imported pool's crop to the size it has):
  its input;
* what is left, a ``stack`` of two to ``MAX_STACKED`` values along axis ``k``:
  ``concatenate([expand_dims(x, k) ...], k)`` (``np.stack``'s own values: it is written so, in
  Python, with a check of the shapes per call: 12 us for an exported LSTM's four final states,
  where the executor makes the views of planned buffers once and the concatenate step costs 5 us).

Only a value nobody else reads is folded into the next (else both would run), only concrete
dense shapes; the values are equal bit for bit (the same elements moved, no arithmetic).
``CachedOp`` runs it with the other simplifications.
"""
from __future__ import annotations

from ...ops import registry
from ..build import record_node
from ..node import Node
from ..rewrite import has_op, rewrite, use_counts
from ..symbol import Symbol

RESHAPES = ("reshape", "squeeze", "expand_dims")  # one input, the same elements in the same order
# most values of a stack written as a concatenate of views (a view of a value that is not a planned
# buffer is a step of its own, about as dear as np.stack's Python per value)
MAX_STACKED = 8


def _concrete(shape) -> bool:
    return shape is not None and all(isinstance(d, int) for d in shape)


def _axis(node: Node) -> int:
    """The normalized new axis of a ``stack`` node."""
    axis = node.params.get("axis", 0)
    return axis + len(node.avals[0].shape) if axis < 0 else axis


def _is(node: Node, *names: str) -> bool:
    return node.op is not None and node.op.name in names


def _merged_axis(stack: Node, perm, shape) -> int | None:
    """The axis ``p`` such that ``shape`` is the stack's inputs' shape with axis ``p`` times as long,
    the stacked values one after another along it (``perm``: the transpose between, or None); else None."""
    k = _axis(stack)
    src = tuple(stack.inputs[0].aval.shape)
    n = len(stack.inputs)
    if perm is None:
        perm = tuple(range(len(src) + 1))
    p = perm.index(k)
    rest = [a for a in perm if a != k]
    if rest != sorted(rest) or p >= len(src):
        return None
    want = src[:p] + (n * src[p],) + src[p + 1:]
    return p if tuple(shape) == want else None


def _perm_of(node: Node):
    axes = node.params.get("axes")
    nd = len(node.avals[0].shape)
    return tuple(reversed(range(nd))) if axes is None else tuple(a + nd if a < 0 else a for a in axes)


def _as_concatenate(node: Node, ins, uses) -> tuple | None:
    """``reshape([transpose](stack(xs)))`` as ``concatenate(xs)`` where it merges the stacked axis."""
    old, new, perm = node.inputs[0].node, ins[0].node, None
    if _is(old, "transpose"):
        if uses.get(id(old), 0) != 1:
            return None
        perm, old, new = _perm_of(old), old.inputs[0].node, new.inputs[0].node
    if not _is(old, "stack") or not _is(new, "stack") or len(new.inputs) < 2 or uses.get(id(old), 0) != 1 \
            or not _concrete(new.inputs[0].aval.shape):
        return None
    p = _merged_axis(new, perm, node.avals[0].shape)
    if p is None:
        return None
    return (record_node(registry.get("concatenate"), list(new.inputs), {"axis": p}, source=node.source),)


def _as_one_stack(node: Node, ins, uses) -> tuple | None:
    """``concatenate`` of stacks along their stacked axis as one ``stack``."""
    axis = node.params.get("axis", 0)
    axis = axis + len(node.avals[0].shape) if axis < 0 else axis
    xs = []
    for was, e in zip(node.inputs, ins):
        old, new = was.node, e.node
        if not _is(old, "stack") or not _is(new, "stack") or uses.get(id(old), 0) != 1 \
                or _axis(new) != axis:
            return None
        xs += new.inputs
    if any(x.aval.shape != xs[0].aval.shape or x.aval.dtype != node.avals[0].dtype for x in xs):
        return None
    return (record_node(registry.get("stack"), xs, {"axis": axis}, source=node.source),)


def _as_one_reshape(node: Node, ins, uses) -> tuple | None:
    """A reshape-like op of a reshape-like op (or a one-input stack) as one reshape of the first value."""
    old, new = node.inputs[0].node, ins[0].node
    if uses.get(id(old), 0) != 1 or not (_is(new, *RESHAPES) or (_is(new, "stack") and len(new.inputs) == 1)):
        return None
    base, shape = new.inputs[0], tuple(node.avals[0].shape)
    if tuple(base.aval.shape) == shape:
        return (base,)
    return (record_node(registry.get("reshape"), [base], {"shape": shape}, source=node.source),)


def _selects_all(node: Node) -> bool:
    """Whether a ``getitem``'s key is slices (or an Ellipsis) that keep every element in order."""
    key, shape = node.params.get("key"), tuple(node.inputs[0].aval.shape)
    key = key if isinstance(key, tuple) else (key,)
    if tuple(node.avals[0].shape) != shape or not _concrete(shape) or sum(k is Ellipsis for k in key) > 1:
        return False
    if any(k is not Ellipsis and not isinstance(k, slice) for k in key) or len(key) - (Ellipsis in key) > len(shape):
        return False
    at = 0
    for k in key:
        if k is Ellipsis:
            at += len(shape) - (len(key) - 1)
            continue
        if k.indices(shape[at]) != (0, shape[at], 1):
            return False
        at += 1
    return True


def stack_views(sym: Symbol) -> Symbol:
    """``sym`` with stacks that only rearrange values written as one concatenate, stack or view.

    >>> import lazyarray as la
    >>> a, b = la.sym.var("a", shape=(7, 1, 16)), la.sym.var("b", shape=(7, 1, 16))
    >>> y = la.sym.reshape(la.sym.transpose(la.sym.stack([a, b], axis=1), axes=(0, 2, 1, 3)), shape=(7, 1, 32))
    >>> [n.op.name for n in stack_views(y).topo() if n.op is not None]
    ['concatenate']
    """
    if not has_op(sym, "stack", "getitem"):
        return sym
    uses = use_counts(sym)

    def visit(node: Node, ins):
        if node.op is None or node.avals[0].stype != "default" or not _concrete(node.avals[0].shape):
            return None
        name = node.op.name
        if name == "reshape":
            return _as_concatenate(node, ins, uses) or _as_one_reshape(node, ins, uses)
        if name in RESHAPES:
            return _as_one_reshape(node, ins, uses)
        if name == "concatenate":
            return _as_one_stack(node, ins, uses)
        if name == "getitem" and _selects_all(node):
            return (ins[0],)
        if name == "stack" and len(ins) == 1:
            return (record_node(registry.get("expand_dims"), list(ins), {"axis": _axis(node)}, source=node.source),)
        return None

    return stacks_as_concatenates(rewrite(sym, visit, share=True))


def stacks_as_concatenates(sym: Symbol) -> Symbol:
    """The stacks the rules above left, each of two or more values, written as
    a ``concatenate`` along it of each value's ``expand_dims`` (views; after those rules: they read
    the stacks).

    >>> import lazyarray as la
    >>> a, b = la.sym.var("a", shape=(1, 16)), la.sym.var("b", shape=(1, 16))
    >>> [n.op.name for n in stacks_as_concatenates(la.sym.stack([a, b], axis=0)).topo() if n.op is not None]
    ['expand_dims', 'expand_dims', 'concatenate']
    """
    if not has_op(sym, "stack"):
        return sym

    def visit(node: Node, ins):
        if not _is(node, "stack") or not 2 <= len(ins) <= MAX_STACKED or node.avals[0].stype != "default" \
                or not _concrete(node.avals[0].shape):
            return None
        k, expand = _axis(node), registry.get("expand_dims")
        xs = [record_node(expand, [x], {"axis": k}, source=node.source) for x in ins]
        return (record_node(registry.get("concatenate"), xs, {"axis": k}, source=node.source),)

    return rewrite(sym, visit, share=True)
