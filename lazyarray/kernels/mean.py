"""``mean``'s implementations and chooser: a global average pool (MobileNetV3's squeeze-excitation
gates, DenseNet's head: issue #35) is a ``mean`` step of a few thousand values, where ``np.mean``'s
Python wrapper (``numpy/_core/_methods._mean``: counting the items, choosing the sum's dtype, then
its sum and division) costs more than the sum itself.

``ufuncs`` (float32/float64 NumPy arrays, an array result): the two calls ``np.mean`` makes, written
out: ``np.add.reduce(x, axis, keepdims=)`` and ``np.true_divide(sum, np.intp(count), out=sum,
casting="unsafe")``, so the values are ``np.mean``'s bit for bit, in any memory order. ``reference``
(the op's kernel, ``np.mean``) elsewhere: other dtypes (float16 sums in float32, integers in
float64), a 0-d result, an empty reduction (NumPy's warning).
"""
from __future__ import annotations

import numpy as np

from ..mode import MODE, PROFILING
from ..tuning_table import current
from .impl import Choice, Impl
from .runner import fixed_binder, noted

FLOATS = (np.dtype(np.float32), np.dtype(np.float64))


def _ufuncs(xp, x, axis, keepdims, out):
    """``np.mean``'s sum and division without its wrapper; None where they would not give an array."""
    if xp is not np or x.__class__ is not np.ndarray or x.dtype not in FLOATS:
        return None
    n = x.ndim
    axes = tuple(range(n)) if axis is None else tuple(a % n for a in axis) if isinstance(axis, (tuple, list)) \
        else (axis % n,)
    if not keepdims and len(axes) == x.ndim:
        return None  # (a 0-d result: np.mean's scalar branch)
    count = 1
    for a in axes:
        count *= x.shape[a]
    if count == 0:
        return None
    s = np.add.reduce(x, axis=axes, keepdims=keepdims)
    return np.true_divide(s, np.intp(count), out=s, casting="unsafe")


def _reference(xp, x, axis, keepdims, out):
    return xp.mean(x, axis=axis, keepdims=keepdims)


REFERENCE = Impl("mean", "reference", _reference, "any: np.mean (the op's kernel)")
UFUNCS = Impl("mean", "ufuncs", _ufuncs, "float32/float64 NumPy array, an array result: np.mean's sum and "
              "division as two calls, without its Python wrapper", fallback=REFERENCE)
_CHOICES = {impl: Choice(impl) for impl in (UFUNCS, REFERENCE)}


def _fits(xp, x) -> bool:
    return xp is np and x.__class__ is np.ndarray and x.dtype in FLOATS


def choose_mean(xp, x, axis=None, keepdims=False, out=None) -> Choice:
    """What runs mean of ``x``."""
    return _CHOICES[UFUNCS if _fits(xp, x) else REFERENCE]


def run_mean(xp, x, axis=None, keepdims=False, out=None):
    """mean by the implementation ``choose_mean`` picks (the reference where ``ufuncs`` declines)."""
    y = _ufuncs(xp, x, axis, keepdims, out) if _fits(xp, x) else None
    choice = _CHOICES[UFUNCS]
    if y is None:
        y, choice = _reference(xp, x, axis, keepdims, out), _CHOICES[REFERENCE]
    if MODE.get() & PROFILING or current().log_kernels:
        noted(choice, x)
    return y


IMPLS = {"mean": (UFUNCS, REFERENCE)}
RUNNERS = {"mean": run_mean}
CHOOSERS = {"mean": choose_mean}
BINDERS = {"mean": fixed_binder(choose_mean, _CHOICES, ("axis", "keepdims"))}
