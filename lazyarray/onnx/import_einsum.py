"""ONNX ``Einsum`` -> registry ops: diagonals, broadcast products and sums.

The equation is parsed at load time. Each operand's ``...`` becomes placeholder labels (aligned from
the right, so ellipsis dims broadcast as NumPy's do); a label repeated within one operand takes that
diagonal (``linalg.diagonal`` of the two axes moved last). Then every operand is transposed to one
common label order with size-1 axes for the labels it lacks, the operands are multiplied
(broadcasting), the labels absent from the output summed away, and the rest put in the output's
order. Without ``->`` the output is the ellipsis labels, then the labels used once, sorted (NumPy's
implicit mode). Correct for any equation; it materializes the full broadcast product, where a
dedicated kernel would contract pairwise.
"""
from __future__ import annotations

from .. import sym as S
from .import_ops import OnnxNode

_PLACEHOLDERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"  # ONNX einsum labels are lower case


def _terms(n: OnnxNode, eq: str):
    eq = eq.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(n.inputs):
        n.fail(f"equation {eq!r} has {len(terms)} operands, the node {len(n.inputs)} inputs")
    return terms, (rhs if arrow else None)


def _expand(n: OnnxNode, term: str, rank: int, width: int) -> str:
    """``term`` with ``...`` replaced by the last ``rank - letters`` of ``width`` placeholders."""
    if "..." not in term:
        if len(term) != rank:
            n.fail(f"operand {term!r} names {len(term)} axes of a rank-{rank} input")
        return term
    k = rank - (len(term) - 3)
    return term.replace("...", _PLACEHOLDERS[width - k:width])


def einsum(n: OnnxNode) -> list:
    terms, out = _terms(n, str(n.attr("equation")))
    ranks = [n.rank(i, "Einsum") for i in range(len(terms))]
    width = max([r - (len(t) - 3) for t, r in zip(terms, ranks) if "..." in t], default=0)
    labels = [_expand(n, t, r, width) for t, r in zip(terms, ranks)]
    ops = list(n.inputs)
    for i, lab in enumerate(labels):  # repeated labels: their diagonal
        while len(set(lab)) < len(lab):
            c = next(c for c in lab if lab.count(c) > 1)
            a, b = lab.index(c), lab.index(c, lab.index(c) + 1)
            rest = [k for k in range(len(lab)) if k not in (a, b)]
            ops[i] = S.linalg.diagonal(S.transpose(ops[i], axes=(*rest, a, b)))
            lab = "".join(lab[k] for k in rest) + c
        labels[i] = lab
    ell = _PLACEHOLDERS[:width]
    if out is None:
        once = sorted(c for c in set("".join(labels)) if c not in ell and "".join(labels).count(c) == 1)
        out = ell + "".join(once)
    else:
        out = out.replace("...", ell)
    order = list(dict.fromkeys("".join(labels)))  # every label, first seen first
    if set(out) - set(order):
        n.fail(f"output labels {sorted(set(out) - set(order))} appear in no operand")
    y = None
    for op, lab in zip(ops, labels):
        present = [c for c in order if c in lab]
        t = S.transpose(op, axes=tuple(lab.index(c) for c in present)) if present != list(lab) else op
        missing = tuple(k for k, c in enumerate(order) if c not in lab)
        if missing:
            t = S.expand_dims(t, axis=missing)
        y = t if y is None else S.multiply(y, t)
    summed = tuple(k for k, c in enumerate(order) if c not in out)
    if summed:
        y = S.sum(y, axis=summed)
    kept = [c for c in order if c in out]
    if kept != list(out):
        y = S.transpose(y, axes=tuple(kept.index(c) for c in out))
    return [y if summed or kept != list(out) or len(ops) > 1 else S.copy(y)]


EINSUM_CONVERTERS = {"Einsum": einsum}
