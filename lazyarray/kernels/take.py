"""take's implementations: ``gather`` for NumPy arrays, and the reference (``ops/shape.py``).

The reference checks its indices with two reductions (``indices.max()``, ``indices.min()``: about
1.5 us each however few the indices) before ``numpy.take``, which checks them again itself
(``mode='raise'``). An imported transformer's batch-1 call runs a few such takes on a handful of
indices (the token embedding, the position ids, the first token's row): ``gather`` leaves the
bounds to ``numpy.take``'s own check (the same rule: an index in ``[-n, n)`` is taken, anything
else raises, with the reference's message) and takes a 0-d index of an array of two or more dims
as a basic index and one copy. Other takes call the array's ``take`` method, the call ``numpy.take``'s
Python wrapper makes (arange_gather's two takes at batch 8: about 1 us each of a 3-5 us step). The values are the reference's bit for bit (the same elements,
copied), in a C-ordered array of their own.
"""
from __future__ import annotations

import numpy as np

from ..ops import registry
from ..tuning_table import current
from .impl import Choice, Impl
from .runner import fixed_binder, ran


def _reference(xp, x, indices, axis=0, sparse_grad=False, out=None):
    return registry.get("take").kernel(xp, x, indices, axis=axis, sparse_grad=sparse_grad)


def _out_of_range(axis, n) -> IndexError:
    return IndexError(f"take: index out of range for axis {axis} of size {n}")  # (the reference's words)


def take_gather(xp, x, indices, axis=0, sparse_grad=False, out=None):
    """``take`` of NumPy arrays by ``numpy.take``'s own bounds check (None where it does not apply)."""
    if xp is not np or x.__class__ is not np.ndarray or indices.__class__ is not np.ndarray:
        return None
    ax = axis + x.ndim if axis < 0 else axis
    if indices.ndim == 0 and x.ndim > 1:  # one slice along the axis: a basic index and a copy
        i, n = int(indices), x.shape[ax]
        if not -n <= i < n:
            raise _out_of_range(axis, n)
        return x[(slice(None),) * ax + (i,)].copy()
    try:  # (the method numpy.take's Python wrapper calls, without the wrapper: ~1 us a call)
        return x.take(indices, ax)
    except IndexError:
        raise _out_of_range(axis, x.shape[ax]) from None


REFERENCE = Impl("take", "reference", _reference, "two reductions check the indices, then the array "
                 "module's take (every array module)")
GATHER = Impl("take", "gather", take_gather,
              "NumPy arrays, take_gather on: numpy.take's own bounds check (no reductions over the indices); a "
              "0-d index of an array of 2 or more dims as a basic index and a copy", fallback=REFERENCE)
_CHOICES = {impl: Choice(impl) for impl in (GATHER, REFERENCE)}


def choose_take(xp, x, indices, axis=0, sparse_grad=False, out=None) -> Choice:
    """What runs take of ``x`` at ``indices``."""
    fits = xp is np and x.__class__ is np.ndarray and indices.__class__ is np.ndarray and current().take_gather
    return _CHOICES[GATHER if fits else REFERENCE]


def run_take(xp, x, indices, axis=0, sparse_grad=False, out=None):
    """take by the implementation ``choose_take`` picks (the op's kernel in every call)."""
    choice = choose_take(xp, x, indices, axis)
    args = (xp, x, indices, axis, sparse_grad, out)
    return ran(choice, choice.impl.run(*args), _CHOICES, args, (x, indices))


IMPLS = {"take": (GATHER, REFERENCE)}
RUNNERS = {"take": run_take}
CHOOSERS = {"take": choose_take}
BINDERS = {"take": fixed_binder(choose_take, _CHOICES, ("axis", "sparse_grad"))}
