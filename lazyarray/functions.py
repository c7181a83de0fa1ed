"""The op library as Python functions (``la.add``, ``la.sum``, ``la.nn.dense``, ...).

Every function is built from its registry entry by ``op_function``: inputs first, then
params (positionally in declared order or by name), and ``out=`` to write into an
existing normal array. Nothing here is written per op.
"""
from __future__ import annotations

from collections.abc import Callable

import numpy as np

from .buffer import bump
from .deferred import is_deferred
from .device import current_device
from .dispatch import apply, operator_method
from .errors import DeferredComputeError, DTypeError, ParamError, ShapeError, fmt_shape
from .ndarray import NDArray, make_array
from .ops import registry
from .ops.registry import OpDef
from .ops.signature import VARARG_PARAMS, bind_inputs, docstring, passed_twice, signature


def op_function(op: OpDef) -> Callable:
    """The public function of ``op``: ``f(*inputs, *params, out=None, **params)``."""
    n_in = len(op.inputs)
    pnames = [p.name for p in op.params]
    vararg = VARARG_PARAMS.get(op.name)
    input_names = [n.strip("*?") for n in op.inputs]
    by_name = frozenset(n for n in input_names if n not in pnames)  # inputs that may be passed by name
    fill_device = op.makes_arrays  # (its result on the current device by default)

    def f(*args, out=None, **kwargs):
        inputs, rest = args[:n_in], args[n_in:]
        if kwargs and not by_name.isdisjoint(kwargs):  # inputs passed by name
            inputs = bind_inputs(op, inputs, kwargs)
        if rest:
            if vararg is not None:
                if vararg in kwargs:
                    raise passed_twice(op, vararg)
                kwargs[vararg] = rest[0] if len(rest) == 1 and isinstance(rest[0], (tuple, list)) else rest
            else:
                if len(rest) > len(pnames):
                    raise ParamError(f"{op.name}: takes {n_in} input(s) and params ({', '.join(pnames)}); "
                                     f"got {len(args)} positional arguments")
                for name, v in zip(pnames, rest):
                    if name in kwargs:
                        raise passed_twice(op, name)
                    kwargs[name] = v
        if fill_device and "device" not in kwargs:
            kwargs["device"] = current_device()
        res = apply(op, inputs, kwargs, make_array)
        return res if out is None else write_out(op.name, res, out)

    if op.np_ufunc is not None and n_in in (1, 2):
        f = _ufunc_function(op, f)
    f.__name__ = f.__qualname__ = op.name
    params = "".join(f", {p.name}" + ("" if p.default is registry.REQUIRED else f"={p.default!r}")
                     for p in op.params)
    f.__signature__ = signature(op)
    f.__doc__ = docstring(op, f.__signature__, f"{op.qualname}({', '.join(op.inputs)}{params}): {op.doc}")
    f.op = op
    return f


_ABSENT = object()


def _ufunc_function(op: OpDef, general: Callable) -> Callable:
    """The public function of a NumPy-ufunc op: called with its arrays alone (``la.tanh(x)``,
    ``la.add(x, 2)``) it takes the operator's hot path at once, where ``apply`` would route it
    anyway; any other call (inputs by name, ``out=``, extra arguments) is ``general``'s. Inputs
    are positional-only here so no argument tuple is built on the hot path."""
    fast = operator_method(op, make_array, wrapped=True)  # (called by ``f`` below: one frame more)
    if len(op.inputs) == 1:
        def f(x=_ABSENT, /, *rest, out=None, **kwargs):
            if x.__class__ is NDArray and out is None and not rest and not kwargs:
                return fast(x)
            return general(*((x,) if x is not _ABSENT else ()), *rest, out=out, **kwargs)
    else:
        def f(x=_ABSENT, y=_ABSENT, /, *rest, out=None, **kwargs):
            if x.__class__ is NDArray and y is not _ABSENT and out is None and not rest and not kwargs:
                return fast(x, y)
            return general(*(v for v in (x, y) if v is not _ABSENT), *rest, out=out, **kwargs)
    return f


def write_out(name: str, res: NDArray, out: NDArray) -> NDArray:
    """``out=``: copy a result into an existing normal array (never allowed on lazy arrays).

    The result must cast to ``out``'s dtype under NumPy's ufunc rule (``casting="same_kind"``):
    float into int, or a signed int into bool, raises ``DTypeError`` instead of truncating.
    """
    if not isinstance(out, NDArray):
        raise ParamError(f"{name}: out= must be a lazyarray NDArray, got {type(out).__name__}")
    if not isinstance(res, NDArray):  # a multi-output op (split, array_split, ...): no single array to write
        raise ParamError(f"{name}: out= takes one array, but {name} returns {len(res)} arrays; drop out= and "
                         f"unpack the results instead (`a, b = la.{name}(...)`)")
    if is_deferred() or out.is_lazy:
        raise DeferredComputeError(
            f"{name}(..., out=...): writing into an existing array is not allowed inside deferred "
            f"compute (the graph decides where memory is reused); write `y = la.{name}(...)` instead"
        )
    if out.shape != res.shape:
        raise ShapeError(f"{name}: out= has shape {fmt_shape(out.shape)} but the result is "
                         f"{fmt_shape(res.shape)}; pass an out array of the result's shape")
    if not np.can_cast(res.dtype, out.dtype, "same_kind"):
        raise DTypeError(f"{name}: cannot write the {res.dtype} result into out= of dtype {out.dtype} with "
                         f"casting rule 'same_kind' (as NumPy's ufuncs); pass an out array of dtype "
                         f"{res.dtype}, or cast explicitly: la.{name}(...).astype('{out.dtype}')")
    out._check_writable(f"{name}(..., out=...)", f"y = la.{name}(...)")
    out._value[...] = res._materialize()
    bump(out._value)  # an in-place write: graphs and autograd that kept this array see it changed
    return out


def namespace(ns: str) -> dict[str, Callable]:
    """Public functions for every registered op of namespace ``ns`` (``""`` = top level)."""
    return {op.name: op_function(op) for op in registry.all_ops() if op.namespace == ns}
