"""Inference rewrite: ``add(r, transpose(multiply(gamma, y), axes))`` -> ``nn.layer_scale_residual(y, gamma, r)``.

A ConvNeXt block ends with its layer scale (``gamma * y``, ``y`` the channels-last output of its second dense
layer), the permute back to NCHW and the residual add: a multiply step and an add step reading the product
through a transposed view (ConvNeXt's batch-1 call, issue #35: two steps per block of about 1000 values each,
7.5 us together). ``ops/layer_scale.py`` makes them one op, whose compiled kernel rounds each element as the two
ufuncs round it: the values are equal bit for bit. Only a product that nothing but the transpose reads and a
transpose that nothing but the add reads (neither a graph output) are taken, one dtype throughout, ``y`` of
the product's shape (``gamma`` broadcast to it), the transposed product of the add's shape (``r`` may
broadcast). Either operand order of the multiply and of the add. ``la.config.layer_scale_residual = False``
turns it off.
"""
from __future__ import annotations

from ...ops import registry
from ...tuning_table import current
from ..build import record_node
from ..node import Entry, Node
from ..rewrite import has_op, rewrite, use_counts
from ..symbol import Symbol


def _axes(transpose: Node) -> tuple:
    axes = transpose.params.get("axes")
    n = len(transpose.avals[0].shape)
    return tuple(reversed(range(n))) if axes is None else tuple(int(a) % n for a in axes)


def _operands(mul_new: Node, mul_old: Node) -> tuple | None:
    """``(y, gamma)`` of a multiply (its new inputs): ``y`` of the product's shape, ``gamma`` the other."""
    a, b = mul_new.inputs
    shape = tuple(mul_old.avals[0].shape)
    if tuple(b.aval.shape) == shape and tuple(a.aval.shape) != shape:
        a, b = b, a
    return (a, b) if tuple(a.aval.shape) == shape else None


def _match(node: Node, k: int, ins, uses) -> tuple | None:
    """``(y, gamma, r, axes)`` where the add ``node``'s input ``k`` is the transposed product, else None."""
    t_old, t_new = node.inputs[k].node, ins[k].node
    if t_old.op is None or t_old.op.name != "transpose" or uses.get(id(t_old), 0) != 1 \
            or t_new.op is None or t_new.op.name != "transpose":
        return None
    m_old, m_new = t_old.inputs[0].node, t_new.inputs[0].node
    if m_old.op is None or m_old.op.name != "multiply" or uses.get(id(m_old), 0) != 1 \
            or m_new.op is None or m_new.op.name != "multiply" or m_old.params:
        return None
    found = _operands(m_new, m_old)
    r: Entry = ins[1 - k]
    out = node.avals[0]
    if found is None or tuple(t_old.avals[0].shape) != tuple(out.shape) \
            or any(e.aval.dtype != out.dtype for e in (found[0], found[1], r)) \
            or any(e.aval.stype != "default" for e in (found[0], found[1], r)):
        return None
    return found[0], found[1], r, _axes(t_old)


def layer_scale_residual(sym: Symbol) -> Symbol:
    """``sym`` with each residual add of a transposed product read by nothing else made one
    ``layer_scale_residual`` node.

    >>> import lazyarray as la
    >>> y, g, r = la.sym.var("y", shape=(1, 8, 8, 16)), la.sym.var("g", shape=(16,)), la.sym.var("r", shape=(1, 16, 8, 8))
    >>> z = r + la.sym.transpose(g * y, axes=(0, 3, 1, 2))
    >>> [n.op.name for n in layer_scale_residual(z).topo() if n.op is not None]
    ['layer_scale_residual']
    """
    if not current().layer_scale_residual or not has_op(sym, "transpose") or not has_op(sym, "multiply"):
        return sym
    uses = use_counts(sym)
    op = registry.get("layer_scale_residual")

    def visit(node: Node, ins):
        if node.op is None or node.op.name != "add" or len(ins) != 2 or node.params \
                or node.avals[0].stype != "default":
            return None
        found = _match(node, 1, ins, uses) or _match(node, 0, ins, uses)
        if found is None:
            return None
        y, gamma, r, axes = found
        return (record_node(op, [y, gamma, r], {"axes": axes}, source=node.source),)

    return rewrite(sym, visit, share=True)
