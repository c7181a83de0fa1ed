"""Aval inference: output avals of every node for given graph-input avals, without computing."""
from __future__ import annotations

from ...aval import Aval
from ...dim import bind, has_symbols, is_symbolic, substitute
from ...errors import GraphError, LazyArrayError
from ...ops import registry
from ...ops.params import plain_dim
from ..node import PINNED, Node


def declared_shapes(inputs: list[Node]) -> dict:
    """Input name -> the sizes every call must match: symbolic dims (bound per call), and the
    concrete dims of pinned inputs; other dims ``None`` (free)."""
    out = {}
    for n in inputs:
        shape = n.avals[0].shape
        if shape is not None and (n.params.get(PINNED) or has_symbols(shape)):
            out[n.name] = shape if n.params.get(PINNED) else tuple(d if has_symbols((d,)) else None for d in shape)
    return out


def bind_env(inputs: list[Node], given: dict[str, Aval], what: str) -> dict:
    """The value of each symbolic dim of ``inputs`` at the avals ``given`` (``{}`` when there are
    none); ``ShapeError`` when the given shapes do not fit the declared ones."""
    declared = declared_shapes(inputs)
    if not declared:
        return {}
    return bind(declared, {k: a.shape for k, a in given.items()
                           if a.shape is not None and None not in a.shape and not has_symbols(a.shape)}, what)


def inline_env(inputs: list[Node], given: dict[str, Aval], what: str) -> dict:
    """``bind_env`` for a graph inlined where its inputs' shapes may be symbolic themselves (a
    ``CachedOp`` called inside a symbolic hybridize trace): its plain symbols map to the caller's
    sizes, expressions or ints; concrete shapes are bound and checked as ``bind_env`` does."""
    declared = declared_shapes(inputs)
    env: dict = {}
    concrete = {}
    for name, shape in declared.items():
        a = given.get(name)
        if a is None or a.shape is None or len(a.shape) != len(shape):
            continue
        if None in a.shape or has_symbols(a.shape):
            for d, n in zip(shape, a.shape):
                sym = d.as_symbol() if is_symbolic(d) else None
                if sym is not None and n is not None:
                    env.setdefault(sym, plain_dim(n))
        else:
            concrete[name] = a.shape
    if concrete:
        env.update(bind({k: declared[k] for k in concrete}, concrete, what))
    return env


def infer_avals(order: list[Node], given: dict[str, Aval], env: dict | None = None) -> dict[int, tuple[Aval, ...]]:
    """Avals of every node in ``order`` (a topological order), keyed by ``id(node)``.

    Variables named in ``given`` take that aval; other variables keep their own. Nodes with an
    unknown-rank input (shape ``None``) stay unknown. ``env`` (symbol name -> int) gives symbolic
    size parameters their values. Errors name the node and its source line.
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
            params = node.params
            if env and has_symbols(tuple(params.values())):
                params = {k: substitute(v, env) for k, v in params.items()}
            out[id(node)] = registry.infer(node.op, ins, params)
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
