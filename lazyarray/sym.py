"""``la.sym``: build graphs directly. ``la.sym.var(name)`` plus one function per registered op
(the variance op ``la.var`` is ``la.sym.variance``, since ``la.sym.var`` makes an input).

The functions come from the same registry as ``la.<op>``; they take and return ``Symbol``
objects (single-output symbols stand for their entry) and Python numbers.

>>> import lazyarray as la
>>> x = la.sym.var("x", shape=(2, 3))
>>> print(la.sym.relu(x))
%x = input : float32[2,3] @cpu(0)
%relu0 = relu(%x) : float32[2,3] @cpu(0)
return %relu0
"""
from __future__ import annotations

from collections.abc import Callable

from .args import choice_arg, seq_arg, type_arg
from .aval import STYPES, Aval, as_dtype, check_shape
from .device import Device, as_device, current_device
from .errors import ParamError
from .executor import call, control_flow  # noqa: F401  (the ops whose params are sub-graphs register there)
from .graph.build import apply_node
from .graph.node import PINNED, Entry, var_node
from .graph.symbol import Symbol, as_entry, symbol_of
from .ops import registry
from .ops.registry import OpDef
from .ops.signature import bind_inputs, docstring, signature


def var(name: str, shape=None, dtype="float32", device: Device | None = None, stype="default", *,
        pinned: bool = False) -> Symbol:
    """A named graph input. ``shape=None`` leaves it to ``infer_shape`` / the executor; dims may be
    symbolic (``la.Dim("batch")``: every call binds it). ``pinned``: the concrete dims of ``shape``
    hold for every call (a call at other sizes raises ``ShapeError``), for graphs that computed
    with those sizes (a model loaded with ``input_shapes``).

    >>> import lazyarray as la
    >>> print(la.sym.var("x", shape=(la.Dim("batch"), 3)))
    %x = input : float32[batch,3] @cpu(0)
    return %x
    """
    type_arg(name, "la.sym.var", "name", str, "a str naming the input, e.g. 'data'")
    dev = current_device() if device is None else as_device(device, f"la.sym.var({name!r})")
    choice_arg(stype, f"la.sym.var({name!r})", "stype", STYPES)
    if shape is not None:
        shape = check_shape(f"la.sym.var({name!r})", seq_arg(
            shape, f"la.sym.var({name!r})", "shape", "None or a tuple of sizes (ints, None or la.Dim), e.g. (2, 3)"),
            what="input")
    aval = Aval(shape, as_dtype(dtype, "var"), dev, stype)
    node = var_node(name, aval)
    if pinned:
        node.params = {PINNED: True}
    return Symbol([Entry(node)])


def _entries(res) -> bool:
    """Whether ``res`` is a tuple or list of entries (a multi-output op's result)."""
    if not isinstance(res, (tuple, list)):
        return False
    for e in res:  # (no builtins all / any here: la.sym's op functions of those names shadow them)
        if e.__class__ is not Entry:
            return False
    return True


def _sym_function(op: OpDef) -> Callable:
    # (no builtins such as ``any`` in here: this module's globals are la.sym's op functions)
    fill_device = op.makes_arrays  # (the default device, as la.sym.var takes it)

    def f(*args, **params):
        if params:
            args = bind_inputs(op, args, params)  # inputs passed by name, in their places
        if fill_device and "device" not in params:
            params["device"] = current_device()
        ins = [[as_entry(x, op.name) for x in a] if isinstance(a, (list, tuple)) else as_entry(a, op.name)
               for a in args]
        res = apply_node(op, *ins, **params)
        if res.__class__ is not Entry and not _entries(res):
            # a composite that hands an input straight back (dropout outside training) never checked it
            bad = next((x for x in ins if x.__class__ is not Entry), res)
            raise ParamError(f"la.sym.{op.qualname}: got {type(bad).__name__} {bad!r}"[:200]
                             + " where a Symbol input was expected; pass a Symbol (la.sym.var('x', shape=...))")
        return symbol_of(res)

    f.__name__ = f.__qualname__ = op.name
    f.__signature__ = signature(op, "Symbol", params_by_position=False, out=False)
    f.__doc__ = docstring(op, f.__signature__, f"la.sym.{op.qualname}: {op.doc}")
    return f


# Ops whose name is taken by la.sym's own API: ``la.sym.var`` makes a graph input (the contract), so
# the variance op (``la.var``) is ``la.sym.variance`` here.
_RENAMED = {"var": "variance"}


def _all() -> dict[str, Callable]:
    return {_RENAMED.get(op.name, op.name): _sym_function(op) for op in registry.all_ops()}


globals().update(_all())


class _Namespace:
    """``la.sym.nn.<op>`` mirrors ``la.nn.<op>``."""

    def __init__(self, ns: str):
        for op in registry.all_ops():
            if op.namespace == ns:
                setattr(self, op.name, _sym_function(op))


nn = _Namespace("nn")
linalg = _Namespace("linalg")
fft = _Namespace("fft")
