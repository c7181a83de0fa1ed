"""Honest export: a model file declares an axis dynamic only if the graph serves every size of it.

A graph whose sizes are symbolic (a model loaded with dynamic axes) computes them when it runs, and
its export writes those computations. A traced graph holds concrete sizes: before anything is
written, its shapes are inferred again at two other sizes of each declared dynamic axis; a shape
rule that meets a size fixed when the graph was traced (a ``reshape`` to ``(1, 10)`` where the rows
are now ``10*batch``) fails the export with a ``ShapeError`` naming the node and its source line. So do a
dynamic axis on an input whose sizes the graph was pinned to (``la.onnx.load(..., input_shapes=)``)
and one the traced ``forward`` read as a Python int (a hybridize guard, ``x.shape[0]``). A block's
default dynamic batch axis is declared only where axis 0 of every input and output is the batch.
"""
from __future__ import annotations

from ..dim import Dim, is_symbolic
from ..errors import LazyArrayError, ShapeError
from ..graph.node import PINNED
from ..graph.passes.infer import bind_env, infer_avals
from ..graph.symbol import Symbol


def size_sources(declared: dict) -> dict:
    """Symbol name -> ``(input name, axis)`` of its first plain occurrence among the inputs' shapes."""
    out: dict = {}
    for name, shape in declared.items():
        for axis, d in enumerate(shape or ()):
            sym = d.as_symbol() if is_symbolic(d) else None
            if sym is not None and sym not in out:
                out[sym] = (name, axis)
    return out


def check_serves(sym: Symbol, data: list, declared: dict, dynamic: dict, baked: dict | None = None) -> None:
    """``ShapeError`` unless the graph computes for every size of the dynamic axes ``declared``
    (input name -> shape with symbols); ``baked``: input name -> {axis: source line} of sizes the
    traced code read as Python ints."""
    for n in data:
        axes = dynamic.get(n.name, {})
        shape = n.avals[0].shape
        if axes and n.params.get(PINNED) and shape is not None:
            raise ShapeError(f"la.onnx.export: input {n.name!r} is pinned to shape {tuple(shape)} (the model was "
                             f"loaded with input_shapes, and its size computations were fixed to it), so axes "
                             f"{sorted(axes)} cannot be exported dynamic; load the model without input_shapes to "
                             "keep its dynamic axes, or export without dynamic_axes")
        for axis, where in (baked or {}).get(n.name, {}).items():
            if axis in axes or axis - len(shape or ()) in axes:
                raise ShapeError(f"la.onnx.export: axis {axis} of input {n.name!r} is declared dynamic "
                                 f"({axes.get(axis, axes.get(axis - len(shape)))!r}), but the traced forward read "
                                 f"its size as a Python int at {where}, so the graph holds that size; compute "
                                 "with x.shape only through ops (la.reshape(x, (-1, ...)), reshape_like) or "
                                 "export without that dynamic axis")
    for given in _samples(sym, declared):
        try:
            infer_avals(sym.topo(), given, bind_env(sym.input_nodes(), given, "la.onnx.export"))
        except LazyArrayError as exc:
            sizes = ", ".join(f"{k}={tuple(a.shape)}" for k, a in given.items())
            raise ShapeError(f"la.onnx.export: the graph does not serve the dynamic axes it would declare: at "
                             f"input shapes {sizes} {exc}. The graph holds a size fixed when it was traced there; "
                             "export with fixed shapes (no dynamic_axes), or compute that size through ops "
                             "(la.reshape(x, (-1, ...)), reshape_like) instead of Python ints") from None


def _samples(sym: Symbol, declared: dict) -> list[dict]:
    """Two sets of input avals at other sizes of the dynamic axes the graph holds concrete (a traced
    graph): each such axis grows from its traced size ``v`` to ``v + 1`` and ``2*v + 3``; axes that
    are symbolic in the graph stay symbolic (their computations are symbolic already)."""
    nodes = {n.name: n for n in sym.input_nodes()}
    traced = {}
    for name, shape in declared.items():
        rec = nodes[name].avals[0].shape if name in nodes else None
        for axis, d in enumerate(shape or ()):
            sym_name = d.as_symbol() if is_symbolic(d) else None
            if sym_name is not None and rec is not None and axis < len(rec) and isinstance(rec[axis], int):
                traced.setdefault(sym_name, rec[axis])
    if not traced:
        return []
    out = []
    for grow in (lambda v: v + 1, lambda v: 2 * v + 3):
        env = {k: grow(v) for k, v in traced.items()}
        given = {}
        for name, shape in declared.items():
            if name in nodes and shape is not None:
                new = tuple(env.get(d.as_symbol(), d) if is_symbolic(d) else d for d in shape)
                given[name] = nodes[name].avals[0]._replace(shape=new)
        out.append(given)
    return out


def default_batch_axes(sym: Symbol, values: dict, baked: dict) -> dict:
    """A block's dynamic axes by default: axis 0 of every data input named ``batch``, where the graph
    computes for other batch sizes and gives each output that batch on its axis 0, and the trace
    never read it as an int; else none (the file then declares the traced sizes)."""
    data = [n for n in sym.input_nodes() if n.name not in values and n.avals[0].shape]
    if not data or any(0 in baked.get(n.name, {}) for n in data):
        return {}
    batch = Dim("batch")
    declared = {n.name: (batch,) + tuple(n.avals[0].shape[1:]) for n in data}
    samples = _samples(sym, declared)
    if not samples:  # symbolic already (a loaded model, a symbolic trace): axis 0 of every input and output
        first = data[0].avals[0].shape[0]
        outs = [e.aval.shape for e in sym.outputs]
        same = is_symbolic(first) and all(n.avals[0].shape[0] == first for n in data)
        if same and all(s and s[0] == first for s in outs):
            return {n.name: {0: str(first)} for n in data}
        return {}
    for given in samples:
        size = next(iter(given.values())).shape[0]
        try:
            avals = infer_avals(sym.topo(), given)
        except LazyArrayError:
            return {}
        outs = [avals[id(e.node)][e.index].shape for e in sym.outputs]
        if not all(s and s[0] == size for s in outs):
            return {}
    return {n.name: {0: "batch"} for n in data}
