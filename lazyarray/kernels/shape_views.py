"""expand_dims's and squeeze's implementations: ``reshape`` and the reference (``numpy.expand_dims``,
``numpy.squeeze``); reshape's: ``method`` (``ndarray.reshape``) and the reference (``numpy.reshape``).

A 1-D layer imported from ONNX runs as conv2d / pooling on a unit-height view: an ``expand_dims``
before and a ``squeeze`` after. Inside a program the executor makes most of these views once, with
the buffers (``executor/set_views.py``); those of a program input and of an output handed to the
caller are remade every call, and ``numpy.expand_dims`` / ``numpy.squeeze`` normalize their axes
in Python each time (conv1d_net, issue #35: 13-18 us a step on the shared development machine,
against well under 1 us for a reshape). Inserting or dropping unit axes never needs a copy, so
``reshape`` to the output's shape is the same view; a compiled step binds it with the shape computed
once (``bind_view``), so a call is one ``ndarray.reshape``. Eager calls compute the shape per call
(the op's shape rule): the same values, the same view.
"""
from __future__ import annotations

import numpy as np

from ..ops import registry
from ..tuning_table import current
from .impl import Choice, Impl
from .runner import Bound, ran


def _reference(name: str):
    def run(xp, x, axis=None, out=None):
        return registry.get(name).kernel(xp, x, axis)

    return run


def _reshaped(name: str):
    def run(xp, x, axis=None, out=None):
        return x.reshape(registry.get(name).shape((x.shape,), axis=axis))

    return run


_WHEN = "a NumPy array, shape_views on: one reshape to the output's shape (a view: unit axes never need a copy)"
IMPLS = {name: (Impl(name, "reshape", _reshaped(name), _WHEN),
                Impl(name, "reference", _reference(name), f"numpy.{name}")) for name in ("expand_dims", "squeeze")}
_CHOICES = {impl: Choice(impl) for impls in IMPLS.values() for impl in impls}


def _choose(name: str):
    reshape, reference = (_CHOICES[impl] for impl in IMPLS[name])

    def choose(xp, x, axis=None, out=None) -> Choice:
        """What runs this op of ``x``: ``reshape`` for NumPy arrays (the tuning table's ``shape_views``)."""
        return reshape if xp is np and current().shape_views else reference

    return choose


CHOOSERS = {name: _choose(name) for name in IMPLS}


def _runner(name: str):
    choose = CHOOSERS[name]

    def run(xp, x, axis=None, out=None):
        """The op by the implementation its chooser picks (the op's kernel in every call)."""
        choice = choose(xp, x, axis)
        return ran(choice, choice.impl.run(xp, x, axis), _CHOICES, (xp, x, axis), (x,))

    return run


RUNNERS = {name: _runner(name) for name in IMPLS}


def _binder(name: str):
    choose = CHOOSERS[name]

    def bind_view(xp, x, axis=None, out=None) -> Bound:
        """A compiled step's ``Bound``: ``reshape`` with the output's shape computed once (the step's
        avals are fixed), or the reference bound to ``axis``."""
        choice = choose(xp, x, axis)
        run = choice.impl.run
        if choice.impl.name != "reshape":
            return Bound(choice, lambda x, out=None: run(xp, x, axis))
        shape = run(xp, x, axis).shape
        return Bound(choice, lambda x, out=None: x.reshape(shape))

    return bind_view


BINDERS = {name: _binder(name) for name in IMPLS}

# -- reshape: ``ndarray.reshape`` (the reference is ``numpy.reshape``: 2.3 against 0.5 us a call for a head's
# [1, 32, 1, 1] -> [32], ConvNeXt's tail, the function's dispatch and its -1 resolved per call) -------------------


def _reshape_method(xp, x, shape, out=None):
    return x.reshape(shape)  # (numpy.reshape's own call: the same view, or the same copy of a strided x)


def _reshape_reference(xp, x, shape, out=None):
    return registry.get("reshape").kernel(xp, x, shape)


RESHAPE = Impl("reshape", "method", _reshape_method, "a NumPy array, shape_views on: ndarray.reshape (numpy.reshape "
               "calls it: the same view, or copy); a compiled step binds it with the output's shape found once")
RESHAPE_REFERENCE = Impl("reshape", "reference", _reshape_reference, "numpy.reshape (every array module)")
IMPLS["reshape"] = (RESHAPE, RESHAPE_REFERENCE)
_CHOICES.update({impl: Choice(impl) for impl in IMPLS["reshape"]})


def choose_reshape(xp, x, shape=(), out=None) -> Choice:
    """What runs reshape of ``x``: ``method`` for NumPy arrays (the tuning table's ``shape_views``)."""
    return _CHOICES[RESHAPE if xp is np and x.__class__ is np.ndarray and current().shape_views else RESHAPE_REFERENCE]


def run_reshape(xp, x, shape=(), out=None):
    """reshape by the implementation ``choose_reshape`` picks (the op's kernel in every call)."""
    choice = choose_reshape(xp, x, shape)
    return ran(choice, choice.impl.run(xp, x, shape), _CHOICES, (xp, x, shape), (x,))


def bind_reshape(xp, x, out=None, shape=()) -> Bound:
    """A compiled step's ``Bound``: ``method`` with the output's shape computed once (the step's avals are fixed:
    no -1 to resolve per call), or the reference bound to ``shape``."""
    choice = choose_reshape(xp, x, shape)
    if choice.impl is not RESHAPE:
        return Bound(choice, lambda x, out=None: _reshape_reference(xp, x, shape))
    fixed = x.reshape(shape).shape
    return Bound(choice, lambda x, out=None: x.reshape(fixed))


CHOOSERS["reshape"] = choose_reshape
RUNNERS["reshape"] = run_reshape
BINDERS["reshape"] = bind_reshape
