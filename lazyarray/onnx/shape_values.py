"""Shape computations of an ONNX graph, evaluated when loading with symbolic sizes.

Exporters compute sizes at run time: ``Shape(x) -> Gather -> Unsqueeze -> Concat -> Reshape``,
``Shape -> Range -> Gather``, ``ConstantOfShape``, ``Expand``. When a graph input has a dynamic dim
(``batch``), ``Shape`` gives a vector whose entries are ints and ``la.Dim`` expressions; this module
runs the integer ops of such computations on those vectors (NumPy object arrays, so every entry
keeps its exact expression), and the converters then read the results as sizes: a ``Reshape`` to
``(batch, 48, -1)``, an ``iota`` of length ``batch``. The executor binds the symbols to each call's
sizes, so nothing here depends on one batch size.

``evaluate`` returns None for an op or value it does not handle exactly (a float cast of a
symbolic size, a comparison its bounds cannot decide); the loader then treats the value as
unknown when loading, as before.
"""
from __future__ import annotations

import numpy as np

from ..dim import SymbolicDimError, decided_eq, dim_max, dim_min, floordiv, is_symbolic, mod

_INT_TYPES = {2, 3, 4, 5, 6, 7, 12, 13}  # ONNX integer element types


def is_symbolic_array(v) -> bool:
    """True for an object array holding at least one symbolic size."""
    return isinstance(v, np.ndarray) and v.dtype == object and any(is_symbolic(d) for d in v.reshape(-1))


def of_dims(dims) -> np.ndarray:
    """A 1-D vector of sizes (object dtype when some are symbolic, else int64)."""
    if any(is_symbolic(d) for d in dims):
        out = np.empty(len(dims), dtype=object)
        out[:] = list(dims)
        return out
    return np.array([int(d) for d in dims], dtype=np.int64)


def normalized(v: np.ndarray) -> np.ndarray:
    """An object array whose entries all became ints, as int64; others unchanged."""
    if isinstance(v, np.ndarray) and v.dtype == object and not any(is_symbolic(d) for d in v.reshape(-1)):
        return v.astype(np.int64)
    return v


def _objects(fn):
    uf = np.frompyfunc(fn, 2, 1)
    return lambda a, b: uf(a, b)


_BINARY = {
    "Add": lambda a, b: a + b, "Sub": lambda a, b: a - b, "Mul": lambda a, b: a * b,
    "Div": _objects(floordiv), "Mod": _objects(mod),
    "Equal": lambda a, b: np.frompyfunc(decided_eq, 2, 1)(a, b).astype(bool),
}


def evaluate(op: str, values: list, attrs: dict, opset: int) -> list | None:
    """The outputs of ``op`` on ``values`` (arrays; some object arrays of sizes), or None."""
    try:
        return _evaluate(op, values, attrs, opset)
    except (SymbolicDimError, TypeError, ValueError, IndexError):
        return None


def _axes(values, attrs, opset, since=13):
    if opset >= since:
        return None if len(values) < 2 or values[1] is None else [int(a) for a in values[1].reshape(-1)]
    a = attrs.get("axes")
    return None if a is None else [int(x) for x in a]


def _evaluate(op: str, v: list, attrs: dict, opset: int) -> list | None:
    if op in _BINARY:
        if op == "Div" and any(isinstance(x, np.ndarray) and x.dtype.kind == "f" for x in v):
            return None
        return [np.asarray(_BINARY[op](v[0], v[1]))]
    if op in ("Max", "Min"):
        fn = np.frompyfunc(dim_max if op == "Max" else dim_min, 2, 1)
        out = v[0]
        for x in v[1:]:
            out = fn(out, x)
        return [np.asarray(out)]
    if op == "Neg":
        return [-v[0]]
    if op == "Identity":
        return [v[0]]
    if op == "Cast":
        if int(attrs.get("to", 0)) not in _INT_TYPES:
            return None
        return [v[0]]
    if op == "Gather":
        idx = np.asarray(v[1]).astype(np.int64)
        return [np.take(v[0], idx, axis=int(attrs.get("axis", 0)))]
    if op == "Concat":
        return [np.concatenate([np.asarray(x, dtype=object) for x in v], axis=int(attrs["axis"]))]
    if op == "Unsqueeze":
        out = v[0]
        axes = _axes(v, attrs, opset)
        rank = out.ndim + len(axes)
        for a in sorted(a % rank for a in axes):
            out = np.expand_dims(out, a)
        return [out]
    if op == "Squeeze":
        axes = _axes(v, attrs, opset)
        return [np.squeeze(v[0], axis=None if axes is None else tuple(axes))]
    if op == "Reshape":
        return [np.reshape(v[0], [int(d) for d in v[1].reshape(-1)])]
    if op == "Slice":
        starts, ends = ([int(t) for t in x.reshape(-1)] for x in v[1:3])
        axes = [int(t) for t in v[3].reshape(-1)] if len(v) > 3 and v[3] is not None else list(range(len(starts)))
        steps = [int(t) for t in v[4].reshape(-1)] if len(v) > 4 and v[4] is not None else [1] * len(starts)
        key = [slice(None)] * v[0].ndim
        for a, b, e, s in zip(axes, starts, ends, steps):
            key[a] = slice(b, e, s)
        return [v[0][tuple(key)]]
    if op in ("ReduceProd", "ReduceSum"):
        axes = _axes(v, attrs, opset, since=13 if op == "ReduceSum" else 18)
        fn = np.prod if op == "ReduceProd" else np.sum
        out = fn(v[0], axis=None if not axes else tuple(axes), keepdims=bool(attrs.get("keepdims", 1)))
        return [np.asarray(out, dtype=object)]
    if op == "Where":
        return [np.where(np.asarray(v[0]).astype(bool), v[1], v[2])]
    if op == "Expand":
        shape = [int(d) for d in v[1].reshape(-1)]
        return [np.broadcast_to(v[0], np.broadcast_shapes(v[0].shape, tuple(shape))).copy()]
    return None


# the ops ``evaluate`` knows: a node of one of these whose inputs are all known when loading
# (some of them symbolic) is evaluated here instead of converted into graph ops
OPS = frozenset(_BINARY) | {"Max", "Min", "Neg", "Identity", "Cast", "Gather", "Concat", "Unsqueeze", "Squeeze",
                            "Reshape", "Slice", "ReduceProd", "ReduceSum", "Where", "Expand"}
