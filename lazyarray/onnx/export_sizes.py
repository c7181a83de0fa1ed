"""Symbolic sizes in an exported ONNX graph: each ``la.Dim`` expression a parameter holds
(``reshape(shape=(batch, -1))``, ``iota(bounds=(0, seq, 1))``) becomes the ONNX shape computation
that gives its value when the model runs: ``Shape(x)[axis]`` for a symbol, then ``Add``, ``Mul``,
``Div``, ``Mod``, ``Max``, ``Min``. So a file declaring ``batch`` dynamic computes with the batch it
is given, as torch's exporter writes it, instead of a size baked in when exporting.

``sources`` (symbol name -> ``(graph input name, axis)``) says where each symbol is read; the
exporter fills it from the inputs' dynamic axes. A symbol no input carries cannot be computed, and
exporting refuses it with a ``ShapeError``.
"""
from __future__ import annotations

import numpy as np

from ..dim import DimExpr, OpAtom, SymAtom, is_symbolic
from ..errors import ShapeError


def size_tensor(g, d, sources: dict) -> str:
    """A 1-D int64 ONNX tensor of one element holding the size ``d`` (an int or an expression)."""
    if not is_symbolic(d):
        return g.ints([int(d)])
    cache = g.ctx.sizes
    key = str(d)
    if key in cache:
        return cache[key]
    total = None
    for mono, coeff in d._terms.items():
        term = None if coeff == 1 and mono else g.ints([coeff])
        for atom in mono:
            t = _atom(g, atom, sources)
            term = t if term is None else g.op("Mul", [term, t])
        total = term if total is None else g.op("Add", [total, term])
    cache[key] = total
    return total


def _atom(g, atom, sources: dict) -> str:
    if isinstance(atom, SymAtom):
        where = sources.get(atom.name)
        if where is None:
            raise ShapeError(f"la.onnx.export: the graph computes with the size {atom.name!r}, which no input axis "
                             f"of the exported model carries (inputs' dynamic axes: "
                             f"{', '.join(f'{k}={v[0]}[{v[1]}]' for k, v in sources.items()) or 'none'}); "
                             "declare that axis dynamic (dynamic_shapes={input: {axis: la.Dim(name)}})")
        name, axis = where
        shape = g.op("Shape", [name])
        return g.op("Gather", [shape, g.ints([axis])], axis=0)
    assert isinstance(atom, OpAtom)
    a, b = (size_tensor(g, x, sources) for x in atom.args)
    return g.op({"floordiv": "Div", "mod": "Mod", "max": "Max", "min": "Min"}[atom.kind], [a, b])


def sizes_tensor(g, values, sources: dict, scalar: bool = False) -> str:
    """``values`` (ints and expressions) as a 1-D int64 tensor (0-d with ``scalar``)."""
    parts = [size_tensor(g, v, sources) for v in values]
    t = parts[0] if len(parts) == 1 else g.op("Concat", parts, axis=0)
    return g.op("Squeeze", [t, g.ints([0])]) if scalar else t


def has_symbolic(values) -> bool:
    return any(isinstance(v, DimExpr) for v in values)


# -- the ops whose sizes are parameters -------------------------------------------------------
def _fill(g, node, ins):
    p = node.params
    value = g.tensor(np.asarray([p["value"]], dtype=p["dtype"]))
    return [g.op("ConstantOfShape", [g.ints(list(p["shape"]))], value=value)]


def _iota(g, node, ins):
    p = node.params
    start, stop, step = (g.ints([b], scalar=True) for b in p["bounds"])
    y = g.op("Range", [start, stop, step])
    return [y if np.dtype(p["dtype"]) == np.int64 else g.cast(y, np.int64, p["dtype"])]


def _dim_values(g, node, ins):
    p = node.params
    t = g.ints(list(p["values"])) if p["values"] else g.const(np.zeros((0,), np.int64))
    return [g.op("Reshape", [t, g.ints(list(p["shape"]))])] if tuple(p["shape"]) != (len(p["values"]),) else [t]


CONVERTERS = {"fill": _fill, "iota": _iota, "dim_values": _dim_values}
