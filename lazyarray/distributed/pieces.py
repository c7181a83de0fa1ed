"""Physical pieces of global arrays, in NumPy: splitting, combining, boxing, regions, local graphs.

Nothing here imports Dask: the Dask executor (``run.py``) schedules these functions as tasks,
and the tests use them directly as the reference of what the pieces must be.

* ``split_value(v, sbp, n)`` / ``combine(pieces, sbp)``: the logical array <-> its ``n`` pieces.
* ``regions(sym)``: an SBP-annotated symbol cut at its boxing nodes into maximal regions, each
  a symbol run once per piece.
* ``localize(sym, shapes)``: a region's graph for one piece: params that name logical sizes
  (``expand``, ``reshape``) rewritten for the piece's physical shapes, and outputs scaled where
  the rule says (``mean`` over a split axis: local mean x local count / global count).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..args import dict_arg, int_arg, seq_arg, type_arg
from ..aval import Aval, check_alloc, check_shape
from ..errors import GraphError, ParamError, ParamValueError, ShapeError, fmt_shape
from ..graph.build import apply_node
from ..graph.node import Entry, Node
from ..graph.symbol import Symbol
from ..ops import registry
from ..ops.sbp_rules import rule_for
from ..sbp import SBP, SBPError, broadcast, sbp_arg, split_sizes

B = broadcast()
_REDUCE = {"sum": np.add, "max": np.maximum, "min": np.minimum}


def split_value(value, sbp: SBP, n: int) -> list:
    """The ``n`` pieces of the logical ``value`` under ``sbp`` (``P(sum)``: the value on piece 0,
    zeros elsewhere; ``P(max)``/``P(min)`` and ``B``: the value on every piece)."""
    sbp = sbp_arg(sbp, "la.distributed.split_value", "sbp")
    n = int_arg(n, "la.distributed.split_value", "n (the number of pieces)", lo=1)
    value = np.asarray(value)
    # the list of n pieces (and P(sum)'s n - 1 zero pieces) must fit the allocation limit
    check_alloc("la.distributed.split_value", (n,), np.intp, "list of pieces")
    if sbp.is_partial and sbp.reduce == "sum":
        check_alloc("la.distributed.split_value", (n - 1, *value.shape), value.dtype, "zero pieces")
    if sbp.is_split:
        if sbp.axis >= value.ndim:
            raise SBPError(f"cannot split axis {sbp.axis} of an array of shape {value.shape}")
        return np.array_split(value, n, axis=sbp.axis)
    if sbp.is_partial and sbp.reduce == "sum":
        return [value] + [np.zeros_like(value) for _ in range(n - 1)]
    return [value] * n


def combine(pieces, sbp: SBP):
    """The logical array the ``pieces`` make up under ``sbp``."""
    sbp = sbp_arg(sbp, "la.distributed.combine", "sbp")
    pieces = _pieces_arg(pieces, "la.distributed.combine", sbp)
    if sbp.is_partial and len({p.shape for p in pieces}) > 1:
        raise ShapeError(f"la.distributed.combine: {sbp} pieces must all have the logical shape, got "
                         f"{', '.join(fmt_shape(p.shape) for p in pieces)}")
    if sbp.is_split:
        return np.concatenate(pieces, axis=sbp.axis)
    if sbp.is_partial:
        return _REDUCE[sbp.reduce].reduce(np.stack(pieces), axis=0)
    return pieces[0]


def _pieces_arg(pieces, where: str, *sbps: SBP) -> list:
    """``pieces`` as a non-empty list of arrays, each with the axes the split ``sbps`` name."""
    pieces = seq_arg(pieces, where, "pieces", "a list of the pieces' arrays")
    if not pieces:
        raise ParamValueError(f"{where}: got no pieces; pass one array per worker")
    for i, p in enumerate(pieces):
        if not isinstance(getattr(p, "ndim", None), int) or not isinstance(getattr(p, "shape", None), tuple):
            raise ParamError(f"{where}: pieces[{i}] must be an array, got {type(p).__name__} {p!r}"[:200])
        for sbp in sbps:
            if sbp.is_split and sbp.axis >= p.ndim:
                raise SBPError(f"{where}: {sbp} splits axis {sbp.axis}, but pieces[{i}] has shape {fmt_shape(p.shape)}")
    return pieces


def piece_slice(value, axis: int, i: int, n: int):
    """Piece ``i`` of ``n`` of ``value`` along ``axis`` (``numpy.array_split`` sizes)."""
    sizes = split_sizes(value.shape[axis], n)
    start = sum(sizes[:i])
    key = (slice(None),) * axis + (slice(start, start + sizes[i]),)
    return value[key]


def concat(pieces, axis: int):
    return np.concatenate(pieces, axis=axis)


def reduce(pieces, how: str):
    out = np.array(pieces[0], copy=True)
    for p in pieces[1:]:
        _REDUCE[how](out, p, out=out)
    return out


def box(pieces: list, src: SBP, dst: SBP) -> list:
    """Pieces of ``dst`` from pieces of ``src`` (the NumPy reference of the boxing collectives)."""
    src, dst = sbp_arg(src, "la.distributed.box", "src"), sbp_arg(dst, "la.distributed.box", "dst")
    pieces = _pieces_arg(pieces, "la.distributed.box", src, dst)
    n = len(pieces)
    if src == dst:
        return list(pieces)
    if src.is_broadcast:
        if dst.is_split:
            return [piece_slice(p, dst.axis, i, n) for i, p in enumerate(pieces)]
        if dst.reduce == "sum":
            return [pieces[0]] + [np.zeros_like(p) for p in pieces[1:]]
        return list(pieces)
    if src.is_split and dst.is_split:  # all-to-all: piece i gets its slice along dst of every piece
        return [concat([piece_slice(p, dst.axis, i, n) for p in pieces], src.axis) for i in range(n)]
    full = combine(pieces, src)
    return box([full] * n, B, dst) if not dst.is_broadcast else [full] * n


def physical_shape(shape, sbp: SBP, i: int, n: int) -> tuple:
    """The shape of piece ``i`` of ``n`` of a logical array of ``shape``."""
    shape = tuple(shape)
    if sbp.is_split:
        return shape[:sbp.axis] + (split_sizes(shape[sbp.axis], n)[i],) + shape[sbp.axis + 1:]
    return shape


# -- regions -----------------------------------------------------------------------------------------------
@dataclass
class Region:
    """Op nodes run together on each piece: ``symbol`` has inputs ``in0..`` reading ``inputs``
    (entries of the global graph) and outputs that are the global entries ``outputs``."""

    symbol: Symbol
    inputs: list[Entry]
    outputs: list[Entry]


def regions(sym: Symbol) -> list[tuple[str, object]]:
    """The run order of an SBP-annotated ``sym``: ``("region", Region)`` and ``("boxing", node)``.

    A node's level is the number of boxing nodes on the longest path from the graph inputs; the
    op nodes of one level form one region (no boxing inside, so each piece runs it alone).
    """
    type_arg(sym, "la.distributed.regions", "sym", Symbol, "a Symbol annotated with SBP signatures")
    order = sym.topo()
    level: dict[int, int] = {}
    for node in order:
        lv = max((level[id(e.node)] + (e.node.op is not None and e.node.op.name == "boxing")
                  for e in node.inputs), default=0)
        level[id(node)] = lv
    users: dict[tuple[int, int], bool] = {}
    for node in order:
        for e in node.inputs:
            if not _in_region(node) or level[id(node)] != level[id(e.node)]:
                users[(id(e.node), e.index)] = True
    for e in sym.outputs:
        users[(id(e.node), e.index)] = True
    steps: list[tuple[str, object]] = []
    levels = sorted({level[id(n)] for n in order if n.op is not None})
    for lv in levels:
        members = [n for n in order if _in_region(n) and level[id(n)] == lv]
        if members:
            steps.append(("region", _region(members, users)))
        steps.extend(("boxing", n) for n in order if n.op is not None and n.op.name == "boxing"
                     and level[id(n)] == lv)
    return steps


def _in_region(node: Node) -> bool:
    return node.op is not None and node.op.name != "boxing"


def _region(members: list[Node], users) -> Region:
    env: dict[tuple[int, int], Entry] = {}
    inputs: list[Entry] = []
    outputs: list[Entry] = []
    for node in members:
        ins = []
        for e in node.inputs:
            key = (id(e.node), e.index)
            if key not in env:
                if e.node.op is None and e.node.kind == "const":
                    env[key] = e  # (nodes are immutable: the region shares the constant)
                else:
                    var = Node(None, (), {}, (e.aval,), name=f"in{len(inputs)}", kind="var",
                               sbp=(e.node.sbp[e.index],))
                    env[key] = Entry(var, 0)
                    inputs.append(e)
            ins.append(env[key])
        new = Node(node.op, tuple(ins), dict(node.params), node.avals, name=node.name, source=node.source,
                   sbp=node.sbp)
        for i in range(len(node.avals)):
            env[(id(node), i)] = Entry(new, i)
            if (id(node), i) in users:
                outputs.append(Entry(node, i))
    return Region(Symbol([env[(id(e.node), e.index)] for e in outputs]), inputs, outputs)


# -- one piece's graph -------------------------------------------------------------------------------------
def localize(sym: Symbol, shapes: dict[str, tuple]) -> Symbol:
    """``sym`` (a region, annotated) for a piece whose inputs have the physical ``shapes`` (by name)."""
    type_arg(sym, "la.distributed.localize", "sym", Symbol, "a Symbol (a region's Region.symbol)")
    shapes = dict_arg(shapes, "la.distributed.localize", "shapes", "a dict of input name -> shape")
    shapes = {k: check_shape(f"la.distributed.localize: shapes[{k!r}]", seq_arg(
        v, "la.distributed.localize", f"shapes[{k!r}]", "a tuple of ints"), what="piece") for k, v in shapes.items()}
    names = sym.list_inputs()
    missing, unknown = [n for n in names if n not in shapes], [n for n in shapes if n not in names]
    if missing or unknown:
        got = ", ".join(map(repr, shapes)) or "none"
        raise GraphError(f"localize: a region's inputs are {', '.join(map(repr, names)) or 'none'}, got shapes "
                         f"for {got}; name the pieces as the region's inputs (Region.symbol.list_inputs())")
    env: dict[tuple[int, int], Entry] = {}
    multiply = registry.get("multiply")
    for node in sym.topo():
        if node.op is None:
            if node.kind == "var":
                a = node.avals[0]
                new = Node(None, (), {}, (Aval(tuple(shapes[node.name]), a.dtype, a.device, a.stype),),
                           name=node.name, kind="var", sbp=node.sbp)
            else:
                new = node
            env[(id(node), 0)] = Entry(new, 0)
            continue
        ins = [env[(id(e.node), e.index)] for e in node.inputs]
        params, scale = dict(node.params), None
        rule = rule_for(node.op)
        if rule is not None and rule.local is not None and all(e.node.sbp is not None for e in node.inputs):
            sbps = [e.node.sbp[e.index] for e in node.inputs]
            params, scale = rule.local(params, sbps, [e.aval.shape for e in ins],
                                       [e.aval.shape for e in node.inputs], [a.shape for a in node.avals])
        avals = registry.infer(node.op, [e.aval for e in ins], params)
        new = Node(node.op, tuple(ins), params, avals, name=node.name, source=node.source, sbp=node.sbp)
        outs = [Entry(new, i) for i in range(len(avals))]
        if scale == 0:  # an empty piece (more pieces than rows): its share is zero (not run: 0/0 is nan)
            outs = [_zeros(ins[0], a) for a in avals]
        elif scale is not None and scale != 1:
            outs = [_scaled(e, scale, multiply) for e in outs]
        for i, e in enumerate(outs):
            env[(id(node), i)] = e
    return Symbol([env[(id(e.node), e.index)] for e in sym.outputs])


def _zeros(like: Entry, aval: Aval) -> Entry:
    """Zeros of ``aval`` computed from ``like`` (so the piece's graph still reads its input)."""
    z = apply_node(registry.get("sum"), apply_node(registry.get("zeros_like"), like))
    z = apply_node(registry.get("cast"), z, dtype=aval.dtype)
    return apply_node(registry.get("broadcast_to"), z, shape=aval.shape)


def _scaled(e: Entry, scale: float, multiply) -> Entry:
    return apply_node(multiply, e, np.asarray(scale, dtype=e.aval.dtype)[()].item())


def nbytes(aval: Aval) -> int:
    return math.prod(aval.shape) * aval.dtype.itemsize
