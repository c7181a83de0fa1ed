"""Building graph nodes from op applications (``apply_node``): how the symbol API, the passes and
the importers make an op's ``Node`` (the dispatcher's recording hot path builds its own inline).

``apply_node(op, *inputs, **params)`` validates params, turns Python scalars into typed
constants, infers output avals with the op's rules and returns the output entry (or a
tuple of entries). Deferred-compute recording, the gradient pass and ``la.sym`` all
build through it, so they produce identical graphs.
"""
from __future__ import annotations

import contextlib
import numbers
from contextvars import ContextVar
from sys import _getframe

import numpy as np

from ..aval import Aval
from ..device import current_device
from ..errors import OpOverflowError, ParamError
from ..ops import registry
from ..ops.registry import OpDef, OpNamespace
from .node import BLOCK_SCOPE, IN_PACKAGE, RECORD_SOURCE, Entry, const_node, op_node, user_source
from .same_graph import params_key

_SCALAR_DTYPES: dict = {}
_SCALAR_NODES: dict = {}  # (type, value, dtype, device) -> Entry: constants are immutable, share them
_PY_SCALARS = (float, int, bool)
_COMPARISONS = frozenset({"equal", "not_equal", "less", "less_equal", "greater", "greater_equal"})


def scalar_const(value, array_dtypes: list, device, op: OpDef | None = None) -> Entry:
    """A Python scalar as a 0-d constant typed the way NumPy 2 treats a weak scalar.

    Equal scalars of equal type share one constant node (``x * 2.0`` a thousand times
    records one ``2.0``); constants are read-only, so sharing them is safe. Zeros are not
    shared, so ``-0.0`` keeps its sign. A Python int outside the array's integer dtype is
    compared exactly (``uint8_array < 300``), as NumPy 2 does, and refused in arithmetic.
    """
    key = (tuple(array_dtypes), type(value))
    dtype = _SCALAR_DTYPES.get(key)
    if dtype is None:
        if array_dtypes:
            dtype = np.result_type(*array_dtypes, value)
        else:  # a number on its own: floats default to float32, like la.array
            dtype = np.dtype("float32") if isinstance(value, float) else np.asarray(value).dtype
        if not isinstance(value, int) or not array_dtypes:  # Python ints are value-dependent
            _SCALAR_DTYPES[key] = dtype
    adjusted = False
    if type(value) is int and dtype.kind in "iu":
        info = np.iinfo(dtype)
        if not info.min <= value <= info.max:
            if op is not None and op.name in _COMPARISONS:
                dtype = np.dtype("int64") if -2**63 <= value < 2**63 else np.dtype("float64")
                adjusted = True
            else:
                name = op.name if op is not None else "scalar"
                raise OpOverflowError(
                    f"{name}: Python integer {value} is out of bounds for {dtype} (NumPy 2 keeps the array's "
                    f"dtype for a Python scalar); cast first, e.g. x.astype('int64'), or pass an array")
    shared = value != 0 and value == value  # not zero, not NaN
    if not shared:
        return Entry(const_node(device.xp.asarray(value, dtype=dtype), Aval((), dtype, device)))
    nkey = (type(value), value, dtype, device)
    entry = _SCALAR_NODES.get(nkey)
    if entry is None:
        if len(_SCALAR_NODES) > 4096:
            _SCALAR_NODES.clear()
            SCALAR_BESIDE.clear()
        arr = device.xp.asarray(value, dtype=dtype)
        entry = _SCALAR_NODES[nkey] = Entry(const_node(arr, Aval((), dtype, device)))  # (read-only)
    if len(array_dtypes) == 1 and not adjusted:  # the same constant for every op: memoize
        SCALAR_BESIDE[(type(value), value, array_dtypes[0], device)] = entry
    return entry


# (type, value, array dtype, device) -> the shared constant beside an array of that dtype, for
# scalars whose dtype is the same for every op (not a range-adjusted int of a comparison)
SCALAR_BESIDE: dict = {}


def scalar_beside(value, aval: Aval, op: OpDef) -> Entry:
    """``scalar_const(value, [aval.dtype], aval.device, op)``, memoized for the recording hot path
    (``x * 1.5`` a thousand times decides the constant once)."""
    entry = SCALAR_BESIDE.get((value.__class__, value, aval.dtype, aval.device))
    return entry if entry is not None else scalar_const(value, [aval.dtype], aval.device, op)


def apply_node(op: OpDef, *inputs, source=None, **params):
    """Record ``op(*inputs, **params)`` as a node; returns its output entry / entries.

    ``inputs`` are ``Entry`` objects, Python scalars, or (for ``*seq`` ops) one list of them.
    """
    if op.compose is not None:
        return op.compose(GRAPH_F, *inputs, **op.make_params(params))
    return record_node(op, as_entries(op, inputs), op.make_params(params), source)


def record_node(op: OpDef, entries: list[Entry], params: dict, source=None, skip: int = 2):
    """``apply_node`` for entries and params that are already checked (the recording hot path).

    ``skip``: frames between ``user_source`` and the first frame that may be the user's (see
    ``graph.node.user_source``).
    """
    if len(entries) == 1:
        e = entries[0]
        in_avals = (e.node.avals[e.index],)
    else:
        in_avals = tuple([e.node.avals[e.index] for e in entries])
    try:  # the rule's memo (``registry.infer``), read here to skip a call per node
        avals = op._infer_cache.get((in_avals, tuple(params.items())) if params else in_avals)
    except TypeError:  # unhashable params
        avals = None
    if avals is None:
        avals = _infer_avals(op, in_avals, params)
    if source is None:
        source = RECORD_SOURCE.get()
    if source is None:
        frame = _getframe(skip)  # (user_source, inlined: the caller's frames are the package's)
        flag = IN_PACKAGE.get(frame.f_code)
        source = (frame.f_code.co_filename, frame.f_lineno) if flag is False else user_source(skip + 1)
    scope = BLOCK_SCOPE.get()
    node = op_node(op, tuple(entries), params, avals, source, scope[1] or None if scope is not None else None)
    if len(avals) == 1:
        return Entry(node, 0)
    return tuple(Entry(node, i) for i in range(len(avals)))


def _infer_avals(op: OpDef, in_avals: tuple, params: dict) -> tuple:
    for a in in_avals:
        if a.shape is None or a.dtype is None:  # la.sym.var without a shape
            dev = next((a.device for a in in_avals if a.device is not None), None)
            return tuple(Aval(None, None, dev) for _ in range(op.outputs_for(params)))
    memo = SHAPE_MEMO.get()
    if memo is None:
        return registry.infer(op, list(in_avals), params)
    try:  # (sizes by value and class: a Dim and the DimExpr of its symbol are equal, their results differ so)
        key = (id(op), in_avals, tuple([d.__class__ for a in in_avals for d in a.shape]),
               params_key(params) if params else ())
        avals = memo.get(key)
    except (TypeError, ValueError):  # a parameter without a hash (or an == that is no bool)
        return registry.infer(op, list(in_avals), params)
    if avals is None:
        avals = memo[key] = registry.infer(op, list(in_avals), params)
    return avals


# Inside ``shapes_memoized``: ``(id(op), input avals, params) -> output avals`` of the rules run there
# (keyed by value and class: the sizes' classes beside the avals, ``same_graph.params_key``).
# The registry's own memo leaves out avals with symbolic sizes (symbols compare by name, and two of one
# name may differ in their bounds, which the rules' checks read); within one scope whose symbols are
# one set (an ONNX import without symbolic ``input_shapes``: each ``dim_param`` one ``la.Dim`` of default
# bounds, every other symbol fresh), equal avals ask one question, so the answer is kept.
SHAPE_MEMO: ContextVar[dict | None] = ContextVar("lazyarray_shape_memo", default=None)


@contextlib.contextmanager
def shapes_memoized(on: bool = True):
    """Within: the output avals ``record_node`` infers are kept per (op, input avals, params), those with
    symbolic sizes too (see ``SHAPE_MEMO``: only for a scope whose symbols of one name are one symbol);
    ``on=False``: none kept within (a scope inside one that keeps them, whose symbols may differ).

    >>> import lazyarray as la
    >>> b = la.Dim("b")
    >>> with shapes_memoized():
    ...     x = la.sym.var("x", shape=(b, 3))
    ...     la.sym.exp(x).outputs[0].aval.shape == la.sym.exp(x).outputs[0].aval.shape
    True
    """
    token = SHAPE_MEMO.set({} if on else None)
    try:
        yield
    finally:
        SHAPE_MEMO.reset(token)


def as_entries(op: OpDef, inputs) -> list[Entry]:
    """Flatten ``*seq`` inputs, drop missing optional ones and make scalars constants."""
    if op.plain:
        if len(inputs) != len(op.inputs):
            zip_inputs(op, inputs)  # raises the arity error
        flat = inputs
    elif not op.variadic:  # only optional inputs: drop the missing ones
        if not op.n_required <= len(inputs) <= len(op.inputs):
            zip_inputs(op, inputs)  # raises the arity error
        flat = [x for name, x in zip(op.inputs, inputs) if x is not None or not name.endswith("?")]
    else:
        flat = [x for _, x in flat_inputs(op, inputs)]
    arrays = [x for x in flat if type(x) is Entry]
    if len(arrays) == len(flat):
        return arrays
    avals = [e.node.avals[e.index] for e in arrays]
    dtypes = [a.dtype for a in avals if a.dtype is not None]
    device = avals[0].device if avals else current_device()
    out = []
    for x in flat:
        if type(x) is Entry:
            out.append(x)
        elif type(x) in _PY_SCALARS or isinstance(x, (numbers.Number, np.bool_, np.number)):
            out.append(scalar_const(x, dtypes, device, op))
        else:
            raise ParamError(f"{op.name}: cannot use {type(x).__name__} {x!r} as an input; "
                             "pass an array or a Python number")
    return out


def flat_inputs(op: OpDef, inputs):
    """``(name, value)`` pairs with ``*seq`` inputs flattened and missing optionals dropped: the one
    input normaliser (the dispatcher runs it on arrays, ``as_entries`` on entries)."""
    for name, a in zip_inputs(op, inputs):
        if name.startswith("*"):
            if not isinstance(a, (list, tuple)):
                raise ParamError(f"{op.name}: expects a list or tuple of arrays, got {type(a).__name__}; "
                                 f"write la.{op.name}([a, b, ...])")
            for x in a:
                yield name, x
        elif a is None and name.endswith("?"):
            continue
        else:
            yield name, a


def none_input(op: OpDef, name: str) -> ParamError:
    """The error for ``None`` given as a required input (only ``name?`` inputs may be left out)."""
    name = name.strip("*?")
    optional = [n.rstrip("?") for n in op.inputs if n.endswith("?")]
    left_out = f" (only {', '.join(optional)} may be None)" if optional else ""
    return ParamError(f"{op.name}: input '{name}' is None; pass an array or a number{left_out}")


def zip_inputs(op: OpDef, inputs) -> list:
    """Pair each declared input name with what was passed (``None`` for a missing optional)."""
    names = op.inputs
    if len(inputs) > len(names) or len(inputs) < op.n_required:
        want = ", ".join(names)
        raise ParamError(f"{op.name}: takes inputs ({want}), got {len(inputs)} input(s)")
    padded = list(inputs) + [None] * (len(names) - len(inputs))
    return list(zip(names, padded))


GRAPH_F = OpNamespace(apply_node)


def clear() -> None:
    """Forget the shared scalar constants and their dtypes (memos: 4096 constants at most)."""
    _SCALAR_NODES.clear()
    SCALAR_BESIDE.clear()
    _SCALAR_DTYPES.clear()
