"""SBP inference: annotate every node with the SBP of each output and insert boxing nodes.

Graph inputs take the SBP given (``B`` when not given), constants are ``B``. Each op node then
asks its rule (``ops/sbp_rules.py``) what its inputs' SBPs give. When the rule refuses, the
pass chooses greedily, per node, the input signature the rule accepts that moves the fewest
bytes (``la.sbp.boxing_bytes``: ring collectives over ``pieces`` workers), and boxes each input
whose SBP differs with an explicit ``boxing`` node, one per (source entry, target SBP), just as
placement adds ``copy_to`` nodes: they show in ``print(sym)``, the JSON, the drawing and plans.
Ops without a rule take ``B`` inputs and give ``B`` outputs (a warning once per op).

Why greedy: the choice at one node only looks at the cost of its own inputs' boxing, so a
choice may force a dearer boxing later (e.g. taking a free ``B -> P(sum)`` that an all-reduce
must undo); docs/distributed.md works through the cost model and this limit.
"""
from __future__ import annotations

import itertools
import math
from typing import TypeVar

from ...errors import GraphError
from ...ops import registry
from ...ops.sbp_rules import rule_for, warn_fallback
from ...sbp import SBP, SBPError, boxing_bytes, boxing_kind, broadcast, parse, partial_sum, split
from ..node import Entry, Node
from ..rewrite import Graph, copy_node, rewrite


class _Inputs(Graph):
    """A graph with named inputs (``Symbol``; symbol.py imports this pass for ``Symbol.infer_sbp``)."""

    def list_inputs(self) -> list[str]: ...

    def input_nodes(self) -> list[Node]: ...


SymbolT = TypeVar("SymbolT", bound=_Inputs)

B = broadcast()
_MAX_CANDIDATES = 512


def infer_sbp(sym: SymbolT, given: dict[str, SBP | str], pieces: int = 2) -> SymbolT:
    """``sym`` with every node annotated (``node.sbp``) and boxing nodes inserted.

    >>> import lazyarray as la
    >>> x = la.sym.var("x", shape=(8, 4))
    >>> w = la.sym.var("w", shape=(3, 4))
    >>> y = la.sym.softmax(la.sym.dense(x, w), axis=0)
    >>> print(y.infer_sbp(x=la.sbp.split(0)))
    %x = input : float32[8,4] @cpu(0) sbp=S(0)
    %w = input : float32[3,4] @cpu(0) sbp=B
    %dense0 = nn.dense(%x, %w) : float32[8,3] @cpu(0) sbp=S(0)
    %all_to_all = boxing(%dense0, src=S(0), dst=S(1)) : float32[8,3] @cpu(0) sbp=S(1)
    %softmax0 = nn.softmax(%all_to_all, axis=0) : float32[8,3] @cpu(0) sbp=S(1)
    return %softmax0
    """
    if pieces < 1:
        raise SBPError(f"infer_sbp: pieces must be at least 1, got {pieces}")
    given = {k: parse(v) for k, v in given.items()}
    inputs = set(sym.list_inputs())
    unknown = sorted(set(given) - inputs)
    if unknown:
        raise GraphError(f"infer_sbp: no graph input named {', '.join(map(repr, unknown))}; "
                         f"inputs: {', '.join(sorted(inputs)) or 'none'}")
    unknown_shapes = [n.name for n in sym.input_nodes()
                      if n.avals[0].shape is None or None in n.avals[0].shape]
    if unknown_shapes:
        raise SBPError(f"infer_sbp: the shapes of inputs {unknown_shapes} are not known; SBP rules and boxing "
                       "costs need them: declare them (la.sym.var(name, shape=...)); la.distributed.run takes "
                       "them from its inputs")
    boxing_op = registry.get("boxing")
    boxes: dict[tuple[int, int, SBP], Entry] = {}

    def box(e: Entry, src: SBP, dst: SBP) -> Entry:
        if src == dst:
            return e
        if boxing_kind(src, dst) is None:  # e.g. P(max) -> S: reduce to B first
            return box(box(e, src, B), B, dst)
        key = (id(e.node), e.index, dst)
        c = boxes.get(key)
        if c is None:
            node = Node(boxing_op, (e,), {"src": src, "dst": dst}, (e.aval,), name=boxing_kind(src, dst),
                        source=e.node.source, sbp=(dst,))
            c = boxes[key] = Entry(node, 0)
        return c

    def visit(node: Node, ins: list[Entry]):
        if node.op is None:
            s = given.get(node.name, B) if node.kind == "var" else B
            _check_split(s, node.avals[0].shape, node.name)
            new = copy_node(node, ins)
            new.sbp = (s,)
            return new
        cur = [e.node.sbp[e.index] for e in ins]
        want, out = _choose(node, ins, cur, pieces)
        new = copy_node(node, [box(e, c, w) for e, c, w in zip(ins, cur, want)])
        new.sbp = tuple(out)
        return new

    return rewrite(sym, visit)


def _check_split(s: SBP, shape, name) -> None:
    if s.is_split and shape is not None and s.axis >= len(shape):
        raise SBPError(f"input {name!r}: cannot split axis {s.axis} of an array of {len(shape)} dims "
                       f"(shape {tuple(shape)}); use la.sbp.split(k) with k < {len(shape)}")


def _shapes(ins):
    return [tuple(1 if d is None else d for d in (e.aval.shape or ())) for e in ins]


def _nbytes(e: Entry) -> int:
    a = e.aval
    size = math.prod(1 if d is None else d for d in (a.shape or ()))
    return size * (a.dtype.itemsize if a.dtype is not None else 4)


def _choose(node: Node, ins: list[Entry], cur: list[SBP], pieces: int) -> tuple[list[SBP], list[SBP]]:
    """(SBP each input must have, SBP of each output) for ``node`` given its inputs' ``cur``."""
    nout = len(node.avals)
    if node.op.name == "boxing":  # an annotated graph inferred again: the node keeps its job
        return [node.params["src"]], [node.params["dst"]]
    rule = rule_for(node.op)
    if rule is None:
        warn_fallback(node.op)
        return [B] * len(ins), [B] * nout
    shapes = _shapes(ins)
    out_shapes = [tuple(1 if d is None else d for d in (a.shape or ())) for a in node.avals]
    params = node.params

    def ask(sbps):
        try:
            return rule.infer(list(sbps), shapes, out_shapes, params)
        except (IndexError, ValueError, KeyError, TypeError):
            return None

    out = ask(cur)
    if out is not None:
        return cur, list(out)
    options = [_options(c, len(s)) for c, s in zip(cur, shapes)]
    if math.prod(len(o) for o in options) > _MAX_CANDIDATES:  # many inputs (concatenate): uniform signatures
        common = [o for o in options[0] if all(o in opts for opts in options[1:])]
        candidates = [tuple([o] * len(options)) for o in common]
    else:
        candidates = itertools.product(*options)
    nbytes = [_nbytes(e) for e in ins]
    best = None
    for cand in candidates:
        cost = sum(boxing_bytes(c, w, nb, pieces) if boxing_kind(c, w) or c == w
                   else boxing_bytes(c, B, nb, pieces) + boxing_bytes(B, w, nb, pieces)
                   for c, w, nb in zip(cur, cand, nbytes))
        if best is not None and cost >= best[0]:
            continue
        res = ask(cand)
        if res is not None:
            best = (cost, list(cand), list(res))
    if best is None:
        return [B] * len(ins), [B] * nout
    return best[1], best[2]


def _options(c: SBP, ndim: int) -> list[SBP]:
    opts = [c, B] + [split(k) for k in range(ndim)] + [partial_sum()]
    seen, out = set(), []
    for o in opts:
        if o not in seen:
            seen.add(o)
            out.append(o)
    return out
