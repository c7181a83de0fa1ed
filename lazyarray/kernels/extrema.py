"""``max``'s and ``min``'s implementations: ``ufunc`` and the reference (``numpy.max`` / ``numpy.min``).

``numpy.max`` is a Python wrapper (``numpy/_core/fromnumeric._wrapreduction``: the keyword
arguments gathered, the array's type looked at) around ``np.maximum.reduce``; with the reduction's
axes normalized by the op first, a (1, 16, 6) -> (1, 16) maximum over a 1-D net's length axis
(conv1d_net's logits, issue #35) cost 20-25 us a step on the shared development machine. ``ufunc``
is the call the wrapper makes, ``np.maximum.reduce(x, axes, None, None, keepdims)`` (``minimum``
for ``min``), so the values are the same bit for bit (NaN propagation, signed zeros, the error of an
empty reduction); a compiled step binds it with the axes normalized once (``bind_extremum``).
NumPy arrays only; the reference elsewhere.
"""
from __future__ import annotations

import numpy as np

from ..ops import registry
from ..ops.reduce import reduce_axes
from ..tuning_table import current
from . import extrema_rows
from .impl import Choice, Impl
from .runner import Bound, ran

_UFUNCS = {"max": np.maximum, "min": np.minimum}


def _reference(name: str):
    def run(xp, x, axis=None, keepdims=False, out=None):
        return registry.get(name).kernel(xp, x, axis=axis, keepdims=keepdims)

    return run


def _reduced(name: str):
    reduce = _UFUNCS[name].reduce

    def run(xp, x, axis=None, keepdims=False, out=None):
        return reduce(x, reduce_axes(axis, x.ndim, name), None, None, keepdims)

    return run


_WHEN = "a NumPy array, extremum_ufunc on: np.maximum.reduce / np.minimum.reduce, the call numpy.max / min make"
IMPLS = {name: (Impl(name, "ufunc", _reduced(name), _WHEN), Impl(name, "reference", _reference(name), f"numpy.{name}"))
         for name in _UFUNCS}
_CHOICES = {impl: Choice(impl) for impls in IMPLS.values() for impl in impls}


def _rows(name: str):
    reduce = _UFUNCS[name].reduce

    def run(xp, x, axis=None, keepdims=False, out=None):
        axes = reduce_axes(axis, x.ndim, name)
        if not extrema_rows.applies(x, axes, True):
            return reduce(x, axes, None, None, keepdims)
        y = extrema_rows.run(name, x, axes, keepdims)
        return reduce(x, axes, None, None, keepdims) if y is None else y

    return run


ROWS = {name: Impl(name, "rows", _rows(name), "compiled steps: a C-ordered float32/float64 NumPy array over its last "
                   "axis, numba, extremum_rows on: one compiled loop over the rows (kernels/extrema_rows.py)")
        for name in _UFUNCS}
_ROW_CHOICES = {name: Choice(impl) for name, impl in ROWS.items()}
IMPLS = {name: (ROWS[name],) + IMPLS[name] for name in IMPLS}


def _choose(name: str):
    ufunc, reference = (_CHOICES[impl] for impl in IMPLS[name][1:])

    def choose(xp, x, axis=None, keepdims=False, out=None) -> Choice:
        """What runs this reduction of ``x``: ``ufunc`` for NumPy arrays (the tuning table's ``extremum_ufunc``)."""
        return ufunc if xp is np and x.__class__ is np.ndarray and current().extremum_ufunc else reference

    return choose


CHOOSERS = {name: _choose(name) for name in IMPLS}


def _runner(name: str):
    choose = CHOOSERS[name]

    def run(xp, x, axis=None, keepdims=False, out=None):
        """The reduction by the implementation its chooser picks (the op's kernel in every call)."""
        choice = choose(xp, x)
        return ran(choice, choice.impl.run(xp, x, axis, keepdims), _CHOICES, (xp, x, axis, keepdims), (x,))

    return run


RUNNERS = {name: _runner(name) for name in IMPLS}


def _binder(name: str):
    choose, reduce = CHOOSERS[name], _UFUNCS[name].reduce

    def bind_extremum(xp, x, axis=None, keepdims=False, out=None) -> Bound:
        """A compiled step's ``Bound``: ``ufunc`` with the axes normalized once (the step's avals are
        fixed), or the reference bound to the parameters."""
        choice = choose(xp, x)
        if choice.impl.name != "ufunc":
            run = choice.impl.run
            return Bound(choice, lambda x, out=None: run(xp, x, axis, keepdims))
        axes = reduce_axes(axis, x.ndim, name)

        def by_ufunc(x, out=None):
            return reduce(x, axes, None, None, keepdims)

        fn = extrema_rows.bound(name, x, keepdims, by_ufunc) if extrema_rows.applies(x, axes, current().extremum_rows) \
            else None
        return Bound(choice, by_ufunc) if fn is None else Bound(_ROW_CHOICES[name], fn)

    return bind_extremum


BINDERS = {name: _binder(name) for name in IMPLS}
