"""Checks of plain Python arguments (sizes, counts, rates, callbacks) for functions that are not ops.

An op's parameters are checked by their ``ParamType`` (``ops/params.py``); the functions written in
Python around them (``la.linspace``, ``la.diff``, the blocks' constructors, the learning-rate
schedulers, ``la.cond``) check theirs here, so a string, ``None``, NaN or ``2**62`` given as a size
or a rate is one named error with the function, the value and the fix, never a bare ``TypeError``
from a comparison deep inside.

>>> int_arg(3, "la.eye", "n_rows", lo=0)
3
>>> int_arg("3", "la.eye", "n_rows", lo=0)
Traceback (most recent call last):
...
lazyarray.errors.ParamError: la.eye: n_rows must be an int >= 0, got '3' (str)
"""
from __future__ import annotations

import math
import numbers

import numpy as np

from .errors import ParamError, ParamValueError


def _range_text(lo, hi, kind: str, hi_open: bool = False) -> str:
    if lo is not None and hi is not None:
        return f"{kind} in [{lo}, {hi}{')' if hi_open else ']'}"
    if lo is not None:
        return f"{kind} >= {lo}"
    if hi is not None:
        return f"{kind} <{'' if hi_open else '='} {hi}"
    return kind


def _shown(value) -> str:
    return f"{value!r} ({type(value).__name__})"[:200]


def int_arg(value, where: str, name: str, lo: int | None = None, hi: int | None = None) -> int:
    """``value`` as an int (a Python or NumPy int, or a 0-d integer array), in ``[lo, hi]``.

    Wrong type: ``ParamError``; out of range: ``ParamValueError``. Bools are refused (``True`` is
    not a size)."""
    want = _range_text(lo, hi, "an int")
    if isinstance(value, (bool, np.bool_)):
        raise ParamError(f"{where}: {name} must be {want}, got {_shown(value)}")
    if not isinstance(value, (int, np.integer)):
        index = getattr(value, "__index__", None)
        try:
            as_int = index() if index is not None and getattr(value, "ndim", 0) == 0 else None
        except TypeError:  # (a 0-d float array has __index__ but refuses it)
            as_int = None
        if as_int is None:
            raise ParamError(f"{where}: {name} must be {want}, got {_shown(value)}")
        value = as_int
    value = int(value)
    if (lo is not None and value < lo) or (hi is not None and value > hi):
        raise ParamValueError(f"{where}: {name} must be {want}, got {value}")
    return value


def number_arg(value, where: str, name: str, lo: float | None = None, hi: float | None = None,
               hi_open: bool = False, lo_open: bool = False) -> float:
    """``value`` as a finite float in ``[lo, hi]`` (``(lo, ...`` when ``lo_open``, ``..., hi)`` when
    ``hi_open``). Wrong type: ``ParamError``; NaN, inf or out of range: ``ParamValueError``."""
    want = _range_text(lo, hi, "a finite number", hi_open)
    if lo_open and lo is not None:
        want = want.replace(f">= {lo}", f"> {lo}").replace(f"[{lo},", f"({lo},")
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise ParamError(f"{where}: {name} must be {want}, got {_shown(value)}")
    try:
        v = float(value)
    except OverflowError:
        v = math.inf
    bad = (not math.isfinite(v) or (lo is not None and (v <= lo if lo_open else v < lo))
           or (hi is not None and (v >= hi if hi_open else v > hi)))
    if bad:
        raise ParamValueError(f"{where}: {name} must be {want}, got {value!r}")
    return v


def callable_arg(value, where: str, name: str, example: str = "a function"):
    """``value`` when it can be called, else ``ParamError`` naming what was given."""
    if not callable(value):
        raise ParamError(f"{where}: {name} must be {example}, got {_shown(value)}")
    return value


def choice_arg(value, where: str, name: str, choices) -> object:
    """``value`` when it is one of ``choices`` (compared safely: an array or a dict never is)."""
    if not isinstance(value, (str, int, float, type(None))) or value not in choices:
        raise ParamValueError(f"{where}: {name} must be one of {', '.join(map(repr, choices))}, got "
                              f"{_shown(value)}")
    return value


def seq_arg(value, where: str, name: str, example: str = "a list") -> list:
    """``value`` as a list when it is a list or a tuple, else ``ParamError`` naming what was given
    (a string, a dict, a number or an array is never taken for a sequence of items)."""
    if not isinstance(value, (list, tuple)):
        raise ParamError(f"{where}: {name} must be {example}, got {_shown(value)}")
    return list(value)


def dict_arg(value, where: str, name: str, example: str = "a dict") -> dict:
    """``value`` when it is a dict (``None`` reads as ``{}``), else ``ParamError``."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ParamError(f"{where}: {name} must be {example}, got {_shown(value)}")
    return value


def type_arg(value, where: str, name: str, types, example: str):
    """``value`` when it is an instance of ``types``, else ``ParamError`` saying what it should be."""
    if not isinstance(value, types):
        raise ParamError(f"{where}: {name} must be {example}, got {_shown(value)}")
    return value
