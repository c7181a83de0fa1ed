"""Aval inference: output avals of every node for given graph-input avals, without computing."""
from __future__ import annotations

from ...aval import Aval
from ...errors import GraphError, LazyArrayError
from ...ops import registry
from ..node import Node


def infer_avals(order: list[Node], given: dict[str, Aval]) -> dict[int, tuple[Aval, ...]]:
    """Avals of every node in ``order`` (a topological order), keyed by ``id(node)``.

    Variables named in ``given`` take that aval; other variables keep their own. Nodes with an
    unknown-rank input (shape ``None``) stay unknown. Errors name the node and its source line.
    """
    out: dict[int, tuple[Aval, ...]] = {}
    for node in order:
        if node.op is None:
            out[id(node)] = (given[node.name],) if node.name in given else node.avals
            continue
        ins = [out[id(e.node)][e.index] for e in node.inputs]
        if any(a.shape is None or a.dtype is None for a in ins):
            dev = next((a.device for a in ins if a.device is not None), None)
            out[id(node)] = tuple(Aval(None, None, dev) for _ in range(len(node.avals)))
            continue
        try:
            out[id(node)] = registry.infer(node.op, ins, node.params)
        except LazyArrayError as exc:
            where = node.source_line()
            msg = f"{exc} (node {node.label()!r}" + (f", recorded at {where})" if where else ")")
            raise type(exc)(msg) from None
    return out


def check_known(order: list[Node], avals: dict[int, tuple[Aval, ...]]) -> None:
    """Raise ``GraphError`` naming the first node whose aval is still unknown."""
    for node in order:
        for a in avals[id(node)]:
            if a.shape is None:
                raise GraphError(f"the shape of {node.label()!r} is unknown; give the shapes of the "
                                 "graph inputs, e.g. sym.infer_shape(data=(64, 784))")
