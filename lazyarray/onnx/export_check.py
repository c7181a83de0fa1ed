"""Honest export: a model file declares an axis dynamic only if the graph serves every size of it.

Before anything is written, the graph's shapes are inferred again with each declared dynamic axis
a symbol (``la.Dim``), strictly: a shape rule that meets a size fixed when the graph was traced or
loaded (a ``reshape`` to ``(1, 10)`` where the rows are ``10*batch``) raises instead of guessing,
and the export fails with a ``ShapeError`` that names the node and its source line. So do a
dynamic axis on an input whose sizes the graph was pinned to (``la.onnx.load(..., input_shapes=)``)
and one the traced ``forward`` read as a Python int (a hybridize guard, ``x.shape[0]``). A block's
default dynamic batch axis is declared only where axis 0 of every input and output is the batch.
"""
from __future__ import annotations

from ..dim import Dim, is_symbolic
from ..errors import LazyArrayError, ShapeError
from ..graph.node import PINNED
from ..graph.passes.infer import infer_avals
from ..graph.symbol import Symbol
from ..ops.registry import strict_dims


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
    if not any(is_symbolic(d) for s in declared.values() for d in s or ()):
        return
    try:
        served_avals(sym, declared)
    except ShapeError as exc:
        axes = ", ".join(f"{k}[{a}]={v!r}" for k, ax in dynamic.items() for a, v in ax.items()) or "symbolic dims"
        raise ShapeError(f"la.onnx.export: the graph cannot serve every size of the dynamic axes ({axes}): {exc}. "
                         "A size fixed when the graph was traced or loaded meets a dynamic one there; export "
                         "with fixed shapes (no dynamic_axes), or build that node from sizes read through "
                         "ops") from None


def served_avals(sym: Symbol, declared: dict) -> dict:
    """Every node's avals with the inputs' ``declared`` shapes (symbols for dynamic axes), inferred
    strictly: a rule that cannot decide raises ``ShapeError``."""
    given = {n.name: n.avals[0]._replace(shape=declared[n.name]) for n in sym.input_nodes() if n.name in declared}
    with strict_dims():
        return infer_avals(sym.topo(), given)


def default_batch_axes(sym: Symbol, values: dict, baked: dict) -> dict:
    """A block's dynamic axes by default: axis 0 of every data input named ``batch``, where the
    outputs' axis 0 is that batch too and the trace never read it as an int; else none."""
    data = [n for n in sym.input_nodes() if n.name not in values and n.avals[0].shape]
    if not data or any(0 in baked.get(n.name, {}) for n in data):
        return {}
    batch = Dim("batch")
    declared = {n.name: (batch,) + tuple(n.avals[0].shape[1:]) for n in data}
    try:
        avals = served_avals(sym, declared)
    except LazyArrayError:
        return {}
    outs = [avals[id(e.node)][e.index].shape for e in sym.outputs]
    if not all(s and s[0] == batch for s in outs):
        return {}
    return {n.name: {0: "batch"} for n in data}
