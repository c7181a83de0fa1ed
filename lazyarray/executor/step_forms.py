"""The forms of a compiled step's closure (``program._step_closure``): each binds the kernel, its slots
and its parameters, so the run loop is ``for step in steps: step(slots)`` and a step costs its kernel
call plus a few slot reads.

A form is chosen by the step's kind and arity (``program._form``): ``ufunc1``/``ufunc2`` (a NumPy ufunc,
``out`` positionally), ``out1``..``out3`` (a kernel writing into its planned buffer, no parameters), ``out_any``
and ``outs`` (any arity, parameters, one or several planned outputs), ``fresh1``/``fresh_any`` (a kernel
that allocates its result), ``fresh_scalar`` (a 0-d result kept an array), ``multi`` (several outputs,
allocated). One closure per step, with its ``try`` (free in Python 3.11 until something raises: a
failure is re-raised as ``step_error``, naming the node) and, for the heavier forms, the dropping of
the slots whose last reader the step is (``FREEING``); the inputs of any arity are gathered by
``operator.itemgetter`` (no comprehension's frame per call), the parameters passed as ``**kw``.
"""
from __future__ import annotations

import operator
from types import MappingProxyType

import numpy as np

from ..error_context import from_node
from ..errors import LazyArrayError
from ..graph.node import Node
from .interpret import kernel_error


def _gather(slots: tuple):
    """``s -> (s[k] for k in slots)`` as a tuple, without a comprehension's frame per call where
    ``operator.itemgetter`` makes the tuple itself (two slots or more)."""
    if len(slots) > 1:
        return operator.itemgetter(*slots)
    if slots:
        k = slots[0]
        return lambda s: (s[k],)
    return lambda s: ()


def _ufunc1(fn, ins, outs, kw, node):
    a, o = ins[0], outs[0]

    def step(s):
        try:
            fn(s[a], s[o])
        except Exception as exc:
            raise step_error(node, exc) from exc

    return step


def _ufunc2(fn, ins, outs, kw, node):
    a, b, o = ins[0], ins[1], outs[0]

    def step(s):
        try:
            fn(s[a], s[b], s[o])
        except Exception as exc:
            raise step_error(node, exc) from exc

    return step


def _out1(fn, ins, outs, kw, node):
    a, o = ins[0], outs[0]

    def step(s):
        try:
            fn(s[a], out=s[o])
        except Exception as exc:
            raise step_error(node, exc) from exc

    return step


def _out2(fn, ins, outs, kw, node):
    a, b, o = ins[0], ins[1], outs[0]

    def step(s):
        try:
            fn(s[a], s[b], out=s[o])
        except Exception as exc:
            raise step_error(node, exc) from exc

    return step


def _out3(fn, ins, outs, kw, node):
    a, b, c, o = ins[0], ins[1], ins[2], outs[0]

    def step(s):
        try:
            fn(s[a], s[b], s[c], out=s[o])
        except Exception as exc:
            raise step_error(node, exc) from exc

    return step


def _out_any(fn, ins, outs, kw, node, frees=()):
    if not kw:  # (a bound choice: its parameters bound in, no dict merged per call)
        return BARE_OUT.get(len(ins), _out_n)(fn, ins, outs[0], node, frees)
    o, get = outs[0], _gather(ins)

    def step(s):
        try:
            fn(*get(s), out=s[o], **kw)
        except Exception as exc:
            raise step_error(node, exc) from exc
        for k in frees:
            s[k] = None

    return step


def _outs(fn, ins, outs, kw, node, frees=()):
    get, put = _gather(ins), _gather(outs)  # (several outputs: ``put`` gives their buffers as a tuple)
    if not kw:
        def bare(s):
            try:
                fn(*get(s), out=put(s))
            except Exception as exc:
                raise step_error(node, exc) from exc
            for k in frees:
                s[k] = None

        return bare

    def step(s):
        try:
            fn(*get(s), out=put(s), **kw)
        except Exception as exc:
            raise step_error(node, exc) from exc
        for k in frees:
            s[k] = None

    return step


def _fresh1(fn, ins, outs, kw, node, frees=()):
    if not kw:
        return BARE_FRESH.get(1, _fresh_n)(fn, ins, outs[0], node, frees)
    a, o = ins[0], outs[0]

    def step(s):
        try:
            s[o] = fn(s[a], **kw)
        except Exception as exc:
            raise step_error(node, exc) from exc
        for k in frees:
            s[k] = None

    return step


def _fresh_any(fn, ins, outs, kw, node, frees=()):
    if not kw:
        return BARE_FRESH.get(len(ins), _fresh_n)(fn, ins, outs[0], node, frees)
    o, get = outs[0], _gather(ins)

    def step(s):
        try:
            s[o] = fn(*get(s), **kw)
        except Exception as exc:
            raise step_error(node, exc) from exc
        for k in frees:
            s[k] = None

    return step


def _fresh_scalar(fn, ins, outs, kw, node, frees=()):
    o, get = outs[0], _gather(ins)

    def step(s):
        try:
            r = fn(*get(s), **kw)
        except Exception as exc:
            raise step_error(node, exc) from exc
        s[o] = np.asarray(r) if isinstance(r, np.generic) else r
        for k in frees:
            s[k] = None

    return step


def _multi(fn, ins, outs, kw, node, frees=()):
    get = _gather(ins)

    def step(s):
        try:
            res = fn(*get(s), **kw)
            for k, r in zip(outs, res):
                s[k] = np.asarray(r) if isinstance(r, np.generic) else r
        except Exception as exc:
            raise step_error(node, exc) from exc
        for k in frees:
            s[k] = None

    return step


# -- bare forms: a bound choice's step (its parameters bound in: ``kw`` empty), called without ``**kw``
# (merging even an empty dict costs a bound batch-1 step about as much as the call itself), its
# inputs read one by one where there are few (no argument tuple built)

def _out4(fn, ins, o, node, frees):
    a, b, c, d = ins

    def step(s):
        try:
            fn(s[a], s[b], s[c], s[d], out=s[o])
        except Exception as exc:
            raise step_error(node, exc) from exc
        for k in frees:
            s[k] = None

    return step


def _out5(fn, ins, o, node, frees):
    a, b, c, d, e = ins

    def step(s):
        try:
            fn(s[a], s[b], s[c], s[d], s[e], out=s[o])
        except Exception as exc:
            raise step_error(node, exc) from exc
        for k in frees:
            s[k] = None

    return step


def _out_n(fn, ins, o, node, frees):
    get = _gather(ins)

    def step(s):
        try:
            fn(*get(s), out=s[o])
        except Exception as exc:
            raise step_error(node, exc) from exc
        for k in frees:
            s[k] = None

    return step


def _fresh_1(fn, ins, o, node, frees):
    a = ins[0]

    def step(s):
        try:
            s[o] = fn(s[a])
        except Exception as exc:
            raise step_error(node, exc) from exc
        for k in frees:
            s[k] = None

    return step


def _fresh_2(fn, ins, o, node, frees):
    a, b = ins

    def step(s):
        try:
            s[o] = fn(s[a], s[b])
        except Exception as exc:
            raise step_error(node, exc) from exc
        for k in frees:
            s[k] = None

    return step


def _fresh_n(fn, ins, o, node, frees):
    get = _gather(ins)

    def step(s):
        try:
            s[o] = fn(*get(s))
        except Exception as exc:
            raise step_error(node, exc) from exc
        for k in frees:
            s[k] = None

    return step


# by arity: the bare forms of ``out_any`` (``_out_n`` past five inputs) and of ``fresh1`` / ``fresh_any``
BARE_OUT = MappingProxyType({4: _out4, 5: _out5})
BARE_FRESH = MappingProxyType({1: _fresh_1, 2: _fresh_2})


# the makers of the forms' closures that also drop the slots whose last reader the step is (one
# closure per step), then all of them by the form's name (``program._form``)
FREEING = MappingProxyType({"out_any": _out_any, "outs": _outs, "fresh1": _fresh1, "fresh_any": _fresh_any,
                            "fresh_scalar": _fresh_scalar, "multi": _multi})
FORMS = MappingProxyType({"ufunc1": _ufunc1, "ufunc2": _ufunc2, "out1": _out1, "out2": _out2, "out3": _out3, **FREEING})


def step_error(node: Node, exc: Exception) -> Exception:
    """``exc``, raised by ``node``'s kernel in a compiled step, as the error to raise: naming the op, its
    input avals and the user's source line."""
    if isinstance(exc, LazyArrayError):
        return from_node(exc, node.block)
    return kernel_error(node, [e.aval for e in node.inputs], exc, where="in a compiled graph")
