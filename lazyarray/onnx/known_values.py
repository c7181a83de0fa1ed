"""Values an ONNX import knows when loading, held without a graph node until a converter reads one
as a tensor.

Exporters fill a graph with values that only ever serve as sizes or axes: ``Constant`` nodes (a
transformer has a hundred), ``Shape(x)`` of a dynamic input and the integer arithmetic on it, and the
chains that follow once such a size comes out concrete (``Gather -> Squeeze -> Unsqueeze -> Concat``
of a hidden size, then a ``Reshape``'s shape). The loader (``load.Conversion``) keeps each such value
in its table of known values and, in its environment, one of the holders here, whose ``symbol()``
makes the graph node at the first read as a tensor, once:

* ``Sizes``: an object array of ``la.Dim`` expressions (``shape_values.py``), made a ``dim_values``
  node;
* ``Known``: a concrete array (a ``Constant``'s value, a size that came out concrete), made a
  constant node, as the converter would have made it;
* ``Folded``: the concrete output of a small integer node whose inputs are all known (``fold``),
  made by converting that node as it would have been converted (its inputs made in turn);
* ``Missing``: an output a converter cannot produce, an error only when read.

Graph leaves are ordered by the walk from the outputs, not by creation, and a node made later keeps
its inputs' order among the ops, so the graph is the one eager conversion would have made; a value
only read as a size leaves no node at all (eagerly, a dead node recorded through its shape rule and
a fold through the interpreter when a ``Reshape`` read it).
"""
from __future__ import annotations

import numpy as np

from .. import sym as S
from ..errors import GraphFormatError
from ..graph.symbol import Symbol
from .import_ops import constant
from .import_shape import constant_of_shape, expand, reshape, slice_op, squeeze, tile, unsqueeze
from .shape_values import OPS, evaluate

FOLD_MAX = 64  # elements of each input (and of the output) a fold computes: sizes and axes, not data
# the ops ``fold`` computes on known int64 values: ``shape_values``'s exact integer ops, less the
# ones whose rounding, empty-axes or zero handling differs from ONNX's (Div, Mod, the reductions;
# Reshape with a 0) and Cast (it keeps the input's dtype)
FOLD_OPS = OPS - {"Div", "Mod", "Cast", "ReduceProd", "ReduceSum"}
_INT64 = np.dtype(np.int64)
_BOOL = np.dtype(np.bool_)


class Sizes:
    """A value computed from the symbolic dims at load time (``Shape`` of a dynamic input, arithmetic
    on it): most are read only as sizes (``_const_of``: a ``Reshape``'s shape), so the graph node that
    computes it when the model runs (``dim_values``) is made only when a converter reads it as a tensor,
    once (a transformer's import made some 60 such nodes, recording each through its rules, for the
    few its graph keeps)."""

    __slots__ = ("device", "made", "value")

    def __init__(self, value: np.ndarray, device):
        self.value, self.device, self.made = value, device, None

    def symbol(self) -> Symbol:
        if self.made is None:
            v = self.value
            self.made = S.dim_values(values=tuple(v.reshape(-1)), shape=v.shape, device=self.device)
        return self.made


class Known:
    """A concrete value known at load time: its constant node is made at the first read as a tensor.
    ``owned``: the loader made ``value`` for it (not copied into the node)."""

    __slots__ = ("made", "owned", "value")

    def __init__(self, value: np.ndarray, owned: bool = False):
        self.value, self.owned, self.made = value, owned, None

    def symbol(self) -> Symbol:
        if self.made is None:
            self.made = constant(self.value, owned=self.owned)
        return self.made


class Folded:
    """The known output of a node ``fold`` computed: ``convert()`` (the loader's conversion of that
    node, as it would have run) makes its graph node at the first read as a tensor."""

    __slots__ = ("convert", "made", "value")

    def __init__(self, value: np.ndarray, convert):
        self.value, self.convert, self.made = value, convert, None

    def symbol(self) -> Symbol:
        if self.made is None:
            self.made = self.convert()
        return self.made


class Missing:
    """An output a converter cannot produce: an error only when read (``fail``)."""

    def __init__(self, name: str, where: str, index: int):
        self.name, self.where, self.index = name, where, index

    def fail(self):
        raise GraphFormatError(f"{self.where}: output {self.index} ({self.name!r}) is read by the graph, but "
                               "lazyarray does not compute it")


DEFERRED = (Sizes, Known, Folded)  # the holders: a loader's env value of one of these classes has ``symbol()``

# op -> (its converter, the input positions it reads only as values known when loading, through
# ``OnnxNode.ints``/``const``): a holder there is passed as it is, not made a graph node (the
# loader applies an entry only while the op's converter is the one named here)
VALUE_INPUTS = {"Reshape": (reshape, frozenset({1})), "Squeeze": (squeeze, frozenset({1})),
                "Unsqueeze": (unsqueeze, frozenset({1})), "Slice": (slice_op, frozenset({1, 2, 3, 4})),
                "Expand": (expand, frozenset({1})), "Tile": (tile, frozenset({1})),
                "ConstantOfShape": (constant_of_shape, frozenset({0}))}


def _small(v, dtype) -> bool:
    return v.__class__ is np.ndarray and v.size <= FOLD_MAX and v.dtype == dtype


def fold(op: str, values: list, attrs: dict, opset: int) -> np.ndarray | None:
    """The output of the one-output node ``op`` on the known ``values`` (its inputs; None where
    omitted) when every input is a small int64 array (``Where``'s condition: bool) and ``op`` is one ``shape_values``
    computes exactly (the converters' kernels give the same value and dtype); else None."""
    if op not in FOLD_OPS or not values:
        return None
    for k, v in enumerate(values):
        if v is not None and not _small(v, _BOOL if op == "Where" and k == 0 else _INT64):
            return None
    if op == "Reshape" and (values[1].size == 0 or 0 in values[1].reshape(-1)):
        return None  # (a 0 copies a dim in ONNX, not in NumPy)
    outs = evaluate(op, values, attrs, opset)
    if outs is None or len(outs) != 1:
        return None
    out = np.asarray(outs[0])
    if out.dtype == object:
        if not all(isinstance(d, (int, np.integer)) for d in out.reshape(-1)):
            return None
        out = out.astype(np.int64)
    if out.size > FOLD_MAX or (out.dtype != _INT64 and not (op == "Equal" and out.dtype == _BOOL)):
        return None
    return np.array(out)  # (its own copy, never a view of an input: the loader makes it read-only)
