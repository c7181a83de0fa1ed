"""Building graph nodes from op applications: the one place a ``Node`` for an op is made.

``apply_node(op, *inputs, **params)`` validates params, turns Python scalars into typed
constants, infers output avals with the op's rules and returns the output entry (or a
tuple of entries). Deferred-compute recording, the gradient pass and ``la.sym`` all
build through it, so they produce identical graphs.
"""
from __future__ import annotations

import numbers

import numpy as np

from ..aval import Aval
from ..device import current_device
from ..errors import ParamError
from ..ops import registry
from ..ops.registry import OpDef, OpNamespace
from .node import Entry, Node, const_node, user_source


def scalar_const(value, array_dtypes: list, device) -> Entry:
    """A Python scalar as a 0-d constant typed the way NumPy treats a weak scalar."""
    dtype = np.result_type(*array_dtypes, value) if array_dtypes else np.asarray(value).dtype
    if not array_dtypes and isinstance(value, float):
        dtype = np.dtype("float32")
    arr = device.xp.asarray(value, dtype=dtype)
    return Entry(const_node(arr, Aval((), np.dtype(dtype), device)))


def apply_node(op: OpDef, *inputs, source=None, **params):
    """Record ``op(*inputs, **params)`` as a node; returns its output entry / entries.

    ``inputs`` are ``Entry`` objects, Python scalars, or (for ``*seq`` ops) one list of them.
    """
    if op.compose is not None:
        return op.compose(GRAPH_F, *inputs, **op.make_params(params))
    entries = as_entries(op, inputs)
    p = op.make_params(params)
    in_avals = [e.aval for e in entries]
    if any(a.shape is None or a.dtype is None for a in in_avals):  # la.sym.var without a shape
        dev = next((a.device for a in in_avals if a.device is not None), None)
        avals = tuple(Aval(None, None, dev) for _ in range(op.num_outputs))
    else:
        avals = registry.infer(op, in_avals, p)
    node = Node(op, tuple(entries), p, avals, source=source if source is not None else user_source())
    node.requires_grad = any(e.node.requires_grad for e in entries)
    if op.num_outputs == 1:
        return Entry(node, 0)
    return tuple(Entry(node, i) for i in range(op.num_outputs))


def as_entries(op: OpDef, inputs) -> list[Entry]:
    """Flatten ``*seq`` inputs, drop missing optional ones and make scalars constants."""
    flat = []
    for name, x in zip_inputs(op, inputs):
        if name.startswith("*"):
            flat.extend(x)
        elif x is None and name.endswith("?"):
            continue
        else:
            flat.append(x)
    arrays = [x for x in flat if isinstance(x, Entry)]
    dtypes = [e.aval.dtype for e in arrays if e.aval.dtype is not None]
    device = arrays[0].aval.device if arrays else current_device()
    out = []
    for x in flat:
        if isinstance(x, Entry):
            out.append(x)
        elif isinstance(x, (numbers.Number, np.bool_, np.number)):
            out.append(scalar_const(x, dtypes, device))
        else:
            raise ParamError(f"{op.name}: cannot use {type(x).__name__} {x!r} as an input; "
                             "pass an array or a Python number")
    return out


def zip_inputs(op: OpDef, inputs) -> list:
    """Pair each declared input name with what was passed (``None`` for a missing optional)."""
    names = op.inputs
    if len(inputs) > len(names) or len(inputs) < sum(1 for n in names if not n.endswith("?")):
        want = ", ".join(names)
        raise ParamError(f"{op.name}: takes inputs ({want}), got {len(inputs)} input(s)")
    padded = list(inputs) + [None] * (len(names) - len(inputs))
    return list(zip(names, padded))


GRAPH_F = OpNamespace(apply_node)
