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

import functools
import math

import numpy as np

from .. import jit
from .impl import Choice, Impl
from .pairwise_sum import BLOCK, with_row_sum
from .runner import Bound, direct, ran

FLOATS = (np.dtype(np.float32), np.dtype(np.float64))


def _ufuncs(xp, x, axis, keepdims, out):
    """``np.mean``'s sum and division without its wrapper; None where they would not give an array."""
    if xp is not np or x.__class__ is not np.ndarray or x.dtype not in FLOATS:
        return None
    axes = _axes(axis, x.ndim)
    if not keepdims and len(axes) == x.ndim:
        return None  # (a 0-d result: np.mean's scalar branch)
    count = 1
    for a in axes:
        count *= x.shape[a]
    if count == 0:
        return None
    s = np.add.reduce(x, axis=axes, keepdims=keepdims)
    return np.true_divide(s, np.intp(count), out=s, casting="unsafe")


@jit.tiered
def _row_means_with(row_sum, squares_sum):
    """The compiled pass of ``compiled``, calling the compiled ``row_sum`` (``pairwise_sum.py``)."""
    def row_means(rows, out, count, zero):
        """out[r] = sum(rows[r]) / count for each row of a 2-D ``rows`` of at most ``BLOCK`` columns: the
        sum as NumPy's ``add.reduce`` makes it, divided in float64 (``count`` a float64, as np.mean's
        ``intp`` count makes NumPy divide) and rounded once into out's dtype."""
        for r in range(rows.shape[0]):
            out[r] = row_sum(rows[r], zero) / count

    return row_means


def _axes(axis, n: int) -> tuple:
    return tuple(range(n)) if axis is None else tuple(a % n for a in axis) if isinstance(axis, (tuple, list)) \
        else (axis % n,)


@functools.lru_cache(maxsize=256)
def _rows_plan(shape: tuple, axis, keepdims: bool, dtype):
    """``(rows, columns, result shape, count as float64, 0 in dtype)`` for ``compiled`` over an array of
    ``shape`` and ``dtype``;
    None where the reduced axes are not the trailing ones, a row is not 1 to ``BLOCK`` values, or the
    result is 0-d."""
    n = len(shape)
    axes = _axes(axis, n)
    k = n - len(axes)
    count = math.prod(shape[k:])
    if sorted(axes) != list(range(k, n)) or (not keepdims and k == 0) or not 0 < count <= BLOCK:
        return None
    lead = shape[:k]
    return math.prod(lead), count, lead + (1,) * len(axes) if keepdims else lead, np.float64(count), dtype.type(0)


def _compiled(xp, x, axis, keepdims, out):
    """Rows of the trailing axes (1 to ``BLOCK`` values each, C-ordered) in one compiled pass; None
    where that does not apply (the caller runs ``ufuncs``)."""
    if xp is not np or x.__class__ is not np.ndarray or x.dtype not in FLOATS or not x.flags.c_contiguous:
        return None
    plan = _rows_plan(x.shape, tuple(axis) if isinstance(axis, list) else axis, keepdims, x.dtype)
    kern = None if plan is None else with_row_sum(_row_means_with)
    if kern is None:
        return None
    rows, count, shape, divisor, zero = plan
    y = np.empty(shape, x.dtype)
    kern(x.reshape(rows, count), y.reshape(-1), divisor, zero)
    return y


def _reference(xp, x, axis, keepdims, out):
    return xp.mean(x, axis=axis, keepdims=keepdims)


REFERENCE = Impl("mean", "reference", _reference, "any: np.mean (the op's kernel)")
UFUNCS = Impl("mean", "ufuncs", _ufuncs, "float32/float64 NumPy array, an array result: np.mean's sum and "
              "division as two calls, without its Python wrapper", fallback=REFERENCE)
COMPILED = Impl("mean", "compiled", _compiled, "a C-ordered float32/float64 NumPy array over its trailing axes, "
               "1 to 128 values a row (a global average pool of up to 8 x 8 ... 11 x 11), numba on: each row's "
               "pairwise sum as NumPy's and the division in one compiled pass", fallback=UFUNCS)
_CHOICES = {impl: Choice(impl) for impl in (COMPILED, UFUNCS, REFERENCE)}


def _fits(xp, x) -> bool:
    return xp is np and x.__class__ is np.ndarray and x.dtype in FLOATS


def _rows_fit(x, axis, keepdims) -> bool:
    """Whether ``compiled`` may run: x C-ordered, the trailing axes reduced, 1 to BLOCK values a row."""
    axis = tuple(axis) if isinstance(axis, list) else axis
    return x.flags.c_contiguous and jit.enabled() and _rows_plan(x.shape, axis, keepdims, x.dtype) is not None


def choose_mean(xp, x, axis=None, keepdims=False, out=None) -> Choice:
    """What runs mean of ``x``."""
    if not _fits(xp, x):
        return _CHOICES[REFERENCE]
    return _CHOICES[COMPILED if _rows_fit(x, axis, keepdims) else UFUNCS]


def run_mean(xp, x, axis=None, keepdims=False, out=None):
    """mean by the implementation ``choose_mean`` picks (its fallbacks where it declines)."""
    choice = choose_mean(xp, x, axis, keepdims)
    args = (xp, x, axis, keepdims, out)
    return ran(choice, choice.impl.run(*args), _CHOICES, args, (x,))


def _bound_rows(x, axis, keepdims, other):
    """``compiled``'s pass with its plan and kernel made once for a compiled step's x: ``fn(x, out=)``
    checks per call x's dtype, shape and C order and takes any other x to ``other(x, out=out)`` (the
    step's generic binding). None where ``compiled`` would not run for x (issue #35: a CNN's global
    average pool, 10 x 3 x 3 values, paid about 5 of its 7 us a call finding its plan)."""
    plan = _rows_plan(x.shape, tuple(axis) if isinstance(axis, list) else axis, keepdims, x.dtype)
    kern = None if plan is None else with_row_sum(_row_means_with)
    if kern is None:
        return None
    rows, count, shape, divisor, zero = plan
    dtype, x_shape = x.dtype, x.shape

    def fn(x, out=None):
        if x.dtype != dtype or x.shape != x_shape or not x.flags.c_contiguous:
            return other(x, out=out)
        y = np.empty(rows, dtype)
        kern(x.reshape(rows, count), y, divisor, zero)
        return y.reshape(shape)

    return fn


def bind_mean(xp, x, out=None, axis=None, keepdims=False) -> Bound:
    """A compiled step's ``Bound`` (``kernels.bind``): ``compiled`` with its plan and kernel made once
    (``_bound_rows``) where it runs for the step's x, else the chosen implementation's run bound to the
    axes (``fixed_binder``'s)."""
    choice = choose_mean(xp, x, axis, keepdims)
    fn = direct(choice, _CHOICES, xp, (axis, keepdims), arity=1)
    if choice.impl is COMPILED:
        fixed = _bound_rows(x, axis, keepdims, fn)
        if fixed is not None:
            return Bound(choice, fixed)
    return Bound(choice, fn)


IMPLS = {"mean": (COMPILED, UFUNCS, REFERENCE)}
RUNNERS = {"mean": run_mean}
CHOOSERS = {"mean": choose_mean}
BINDERS = {"mean": bind_mean}
