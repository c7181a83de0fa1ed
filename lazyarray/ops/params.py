"""Typed operator parameters: conversion, validation and JSON form, one small class each.

Every op parameter has a ``ParamType`` that turns what the user passed into one
canonical Python value (so equal params compare equal and hash the same in cache
keys) and back and forth to JSON (so serialized graphs carry typed attributes).
"""
from __future__ import annotations

import operator
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..aval import as_dtype
from ..device import Device
from ..dim import Dim, DimExpr, parse
from ..errors import ParamError, ParamValueError

REQUIRED = object()


class ParamType:
    """Base: ``convert`` validates/normalizes, ``to_json``/``from_json`` map to JSON values."""

    name = "any"
    # What users may pass, as Python type text: the signatures, docstrings and stubs of the public
    # functions read it (``ops/signature.py``).
    annotation = "Any"

    def convert(self, value, op: str, param: str):
        return value

    def to_json(self, value):
        return value

    def from_json(self, value, op: str, param: str):
        return self.convert(value, op, param)

    def _bad(self, value, op, param, want):
        return ParamError(
            f"{op}: parameter {param!r} must be {want}, got {value!r} ({type(value).__name__})"
        )


class _Float(ParamType):
    name = "float"
    annotation = "float"

    def convert(self, value, op, param):
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.number)):
            raise self._bad(value, op, param, "a number")
        return float(value)


class _Scalar(ParamType):
    """A real Python scalar kept as its type: bool, int or float (fill values)."""

    name = "scalar"
    annotation = "bool | int | float"

    def convert(self, value, op, param):
        if isinstance(value, (bool, np.bool_)):
            return bool(value)
        if isinstance(value, (int, np.integer)):
            return int(value)
        if isinstance(value, (float, np.floating)):
            return float(value)
        raise self._bad(value, op, param, "a real number or a bool")


class _Int(ParamType):
    name = "int"
    annotation = "int"

    def convert(self, value, op, param):
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
            raise self._bad(value, op, param, "an int")
        return int(value)


class _OptInt(_Int):
    name = "int?"
    annotation = "int | None"

    def convert(self, value, op, param):
        return None if value is None else super().convert(value, op, param)


class _OptFloat(_Float):
    name = "float?"
    annotation = "float | None"

    def convert(self, value, op, param):
        return None if value is None else super().convert(value, op, param)


class _Bool(ParamType):
    name = "bool"
    annotation = "bool"

    def convert(self, value, op, param):
        if not isinstance(value, (bool, np.bool_)):
            raise self._bad(value, op, param, "True or False")
        return bool(value)


class _OptBool(_Bool):
    name = "bool?"
    annotation = "bool | None"

    def convert(self, value, op, param):
        return None if value is None else super().convert(value, op, param)


class _Ints(ParamType):
    """A tuple of ints (shapes, sizes, axes lists). A single int is accepted as a 1-tuple."""

    name = "ints"
    annotation = "int | Sequence[int]"

    def convert(self, value, op, param):
        if isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_)):
            return (int(value),)
        if not isinstance(value, (tuple, list)):
            raise self._bad(value, op, param, "a tuple of ints")
        out = []
        for v in value:
            if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)):
                if isinstance(v, DimExpr):  # a symbolic size (la.Dim): bound when the graph is specialized
                    out.append(plain_dim(v))
                    continue
                raise self._bad(value, op, param, "a tuple of ints")
            out.append(int(v))
        return tuple(out)

    def to_json(self, value):
        return [dim_to_json(v) for v in value]

    def from_json(self, value, op, param):
        if isinstance(value, list):
            value = [dim_from_json(v) for v in value]
        return self.convert(value, op, param)


class _OptInts(_Ints):
    name = "ints?"
    annotation = "int | Sequence[int] | None"

    def convert(self, value, op, param):
        return None if value is None else super().convert(value, op, param)

    def to_json(self, value):
        return None if value is None else list(value)


class _Axis(ParamType):
    """``None``, an int, or a tuple of ints (reductions)."""

    name = "axis"
    annotation = "int | Sequence[int] | None"

    def convert(self, value, op, param):
        if value is None:
            return None
        if isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_)):
            return int(value)
        return _Ints.convert(self, value, op, param)

    def to_json(self, value):
        return list(value) if isinstance(value, tuple) else value

    def from_json(self, value, op, param):
        return self.convert(tuple(value) if isinstance(value, list) else value, op, param)


class _DType(ParamType):
    name = "dtype"
    annotation = "DTypeLike"

    def convert(self, value, op, param):
        return as_dtype(value, op)

    def to_json(self, value):
        return str(value)


class _OptDType(_DType):
    name = "dtype?"
    annotation = "DTypeLike | None"

    def convert(self, value, op, param):
        return None if value is None else as_dtype(value, op)

    def to_json(self, value):
        return None if value is None else str(value)


class _Device(ParamType):
    name = "device"
    annotation = "Device | str"

    def convert(self, value, op, param):
        if isinstance(value, Device):
            return value
        if isinstance(value, str):
            return Device.parse(value)
        raise self._bad(value, op, param, "a device such as la.cpu(1)")

    def to_json(self, value):
        return str(value)


class _Key(ParamType):
    """A basic index: a tuple of ints, slices, None (new axis) and Ellipsis."""

    name = "key"
    annotation = "Any"

    def convert(self, value, op, param):
        key = value if isinstance(value, tuple) else (value,)
        out = []
        for k in key:
            if k is None or k is Ellipsis:
                out.append(k)
            elif isinstance(k, slice):
                k = slice(*(_index(p) for p in (k.start, k.stop, k.step)))  # 0-d integer arrays count
                if any(isinstance(p, DimExpr) for p in (k.start, k.stop)):  # symbolic bounds
                    if k.step == 0:
                        raise ParamValueError(f"{op}: slice step cannot be zero in {k!r}")
                    out.append(slice(plain_dim(k.start), plain_dim(k.stop), k.step))
                    continue
                for part in (k.start, k.stop, k.step):
                    if part is not None and (
                        isinstance(part, (bool, np.bool_)) or not isinstance(part, (int, np.integer))
                    ):
                        raise ParamError(
                            f"{op}: slice bounds must be ints or None, got {k!r}; "
                            "index with ints, slices, None and ..."
                        )
                if k.step == 0:
                    raise ParamValueError(f"{op}: slice step cannot be zero in {k!r}")
                out.append(slice(*(None if p is None else int(p) for p in (k.start, k.stop, k.step))))
            elif isinstance(_index(k), (int, np.integer)) and not isinstance(k, (bool, np.bool_)):
                out.append(int(_index(k)))
            else:
                raise ParamError(
                    f"{op}: cannot index with {k!r} ({type(k).__name__}); basic indexing takes "
                    "ints, slices, None and ...; use a boolean lazyarray mask for masking"
                )
        return tuple(out)

    def to_json(self, value):
        def enc(k):
            if k is None:
                return None
            if k is Ellipsis:
                return "..."
            if isinstance(k, slice):
                return {"slice": [dim_to_json(k.start), dim_to_json(k.stop), k.step]}
            return k

        return [enc(k) for k in value]

    def from_json(self, value, op, param):
        if not isinstance(value, list):
            raise ParamError(f"{op}: parameter {param!r} must be a JSON list, got {value!r}")

        def dec(k):
            if k == "...":
                return Ellipsis
            if isinstance(k, dict) and "slice" in k:
                return slice(*(dim_from_json(p) for p in k["slice"]))
            return k

        return self.convert(tuple(dec(k) for k in value), op, param)


def plain_dim(v):
    """A size as op parameters keep it: a ``TracedSize`` (a trace's ``x.shape[0]``) as the plain
    expression, anything else as is."""
    return DimExpr(v._terms) if isinstance(v, DimExpr) and v.__class__ not in (DimExpr, Dim) else v


def dim_to_json(v):
    """A size for JSON: ints as is, a symbolic one as ``{"dim": "2*batch"}`` (plus ``"bounds":
    {"batch": [min, max]}`` for symbols whose bounds are not the default ``[1, null]``)."""
    if not isinstance(v, DimExpr):
        return v
    out: dict = {"dim": str(v)}
    bounds = {k: [s.min, s.max] for k, s in v.symbols().items() if (s.min, s.max) != (1, None)}
    if bounds:
        out["bounds"] = bounds
    return out


def dim_from_json(v):
    """``dim_to_json`` read back (the text is parsed, never evaluated)."""
    if isinstance(v, dict) and "dim" in v and set(v) <= {"dim", "bounds"}:
        bounds = v.get("bounds") or {}
        if not isinstance(bounds, dict) or not all(
                isinstance(b, list) and len(b) == 2 and isinstance(b[0], int) and (b[1] is None or isinstance(b[1], int))
                for b in bounds.values()):
            raise ParamError(f"a symbolic size's bounds must map names to [min, max], got {bounds!r}")
        if not isinstance(v["dim"], str) or len(v["dim"]) > 1000:
            raise ParamError(f"a symbolic size must be a short text such as '2*batch', got {v['dim']!r}")
        return parse(v["dim"], bounds)
    return v


def _is_int(v) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))


class _PadWidth(ParamType):
    """``numpy.pad``'s ``pad_width``: an int, ``(before, after)``, or one pair per axis.

    Kept as NumPy reads it, a tuple of rows of ints (``3`` -> ``((3,),)``, ``(1, 2)`` ->
    ``((1, 2),)``, ``((1, 2), (0, 3))`` as given), so the meaning needs no rank here: the shape
    rule broadcasts the rows to ``(ndim, 2)`` exactly as ``numpy.pad`` does (``ops/shape.py:
    pad_pairs``). JSON: a list of lists of ints.
    """

    name = "pad_width"
    annotation = "int | Sequence[int] | Sequence[Sequence[int]]"

    def convert(self, value, op, param):
        want = "an int, a (before, after) pair, or one (before, after) pair per axis"
        if isinstance(value, np.ndarray):
            value = value.tolist()
        if _is_int(value):
            return ((int(value),),)
        if not isinstance(value, (tuple, list)) or not value:
            raise self._bad(value, op, param, want)
        if all(_is_int(v) for v in value):
            return (tuple(int(v) for v in value),)
        rows = []
        for row in value:
            if isinstance(row, np.ndarray):
                row = row.tolist()
            if not isinstance(row, (tuple, list)) or not row or not all(_is_int(v) for v in row):
                raise self._bad(value, op, param, want)
            rows.append(tuple(int(v) for v in row))
        if len({len(r) for r in rows}) != 1:
            raise self._bad(value, op, param, want + " (all pairs of the same length)")
        return tuple(rows)

    def to_json(self, value):
        return [list(r) for r in value]


class _Choice(ParamType):
    def __init__(self, *choices):
        self.choices = choices
        self.name = "choice"
        self.annotation = f"Literal[{', '.join(repr(c) for c in choices)}]"

    def convert(self, value, op, param):
        if value not in self.choices:
            raise ParamValueError(f"{op}: parameter {param!r} must be one of {self.choices}, got {value!r}")
        return value


class _Ord(ParamType):
    """A norm order: a number (``inf`` / ``-inf`` allowed, written ``"inf"`` / ``"-inf"`` in JSON)
    or one of ``"fro"``, ``"nuc"``."""

    name = "ord"
    annotation = "int | float | str"

    def convert(self, value, op, param):
        if value in ("fro", "nuc"):
            return value
        if isinstance(value, str) and value in ("inf", "-inf"):
            return float(value)
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.number)):
            raise self._bad(value, op, param, "a number, inf, -inf, 'fro' or 'nuc'")
        return int(value) if float(value).is_integer() else float(value)

    def to_json(self, value):
        return ("inf" if value > 0 else "-inf") if isinstance(value, float) and np.isinf(value) else value


FLOAT, INT, BOOL, OPT_BOOL = _Float(), _Int(), _Bool(), _OptBool()
ORD = _Ord()
INTS, OPT_INTS, AXIS, DTYPE, DEVICE, KEY = _Ints(), _OptInts(), _Axis(), _DType(), _Device(), _Key()
OPT_DTYPE, SCALAR, OPT_INT, OPT_FLOAT = _OptDType(), _Scalar(), _OptInt(), _OptFloat()
PAD_WIDTH = _PadWidth()
choice = _Choice


@dataclass(frozen=True)
class Param:
    """One typed op parameter. ``check`` validates a converted value (raise ``ParamValueError``)."""

    name: str
    type: ParamType
    default: Any = REQUIRED
    check: Callable[[Any, str], None] | None = None
    doc: str = ""


def _index(v):
    """An object with ``__index__`` (a 0-d integer array) as the int it stands for; others unchanged."""
    if v is None or isinstance(v, (bool, np.bool_, int, np.integer, slice, DimExpr)) or not hasattr(v, "__index__"):
        return v
    try:
        return operator.index(v)
    except TypeError:
        return v
