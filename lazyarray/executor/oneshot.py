"""Run a described sub-graph once, node by node: the cold path of materialization.

A graph materialized once gains nothing from a memory plan, in-place pairs or step closures:
they pay for themselves over repeated runs. Here each kernel allocates its result, and a value
is dropped right after its last reader ran, so a long chain holds a few values at a time. The
ownership rule is the compiled program's: every output handed back is a buffer of its own (a
result that shares memory with an input, a constant, a known value or another output is
copied).
"""
from __future__ import annotations

import numpy as np

from ..errors import LazyArrayError
from ..storage import copy_value
from .interpret import kernel_error, run_kernel
from .program import _fresh
from .structure import Described

_ND = np.ndarray


def _array(o):
    return o if hasattr(o, "shape") and not isinstance(o, np.generic) else np.asarray(o)


def run_once(d: Described, args: list) -> list:
    """The values of ``d``'s outputs from the leaf values ``args`` (in ``d.in_slots`` order)."""
    steps = d.steps
    vals: list = [None] * d.n_slots
    for s, v in zip(d.in_slots, args):
        vals[s] = v
    last = [-1] * d.n_slots
    for i, (_, ins, _) in enumerate(steps):
        for s in ins:
            last[s] = i
    out_slots = d.out_slots
    outset = set(out_slots)
    for s in outset:
        last[s] = -2  # never dropped
    fresh: set[int] = set()
    dense = d.dense
    kernels: dict = {}  # (op, array module) -> bound kernel, looked up once per run
    for i, (node, ins, f) in enumerate(steps):
        args_i = [vals[s] for s in ins]
        op = node.op
        avals = node.avals
        single = len(avals) == 1
        if dense:
            at = (op, avals[0].device)
            fn = kernels.get(at)
            if fn is None:
                fn = kernels[at] = op.bind(avals[0].device.xp)
            params = node.params
            try:
                out = fn(*args_i, **params) if params else fn(*args_i)
            except LazyArrayError:
                raise
            except Exception as exc:
                raise kernel_error(node, args_i, exc) from exc
            if op.owns_outputs:
                outs = [out] if single else list(out)
            elif single:
                outs = [out if out.__class__ is _ND else _array(out)]
            else:
                outs = [_array(o) for o in out]
        else:
            outs = run_kernel(node, args_i)
        for j, o in enumerate(outs):
            vals[f + j] = o
        if f in outset or not single and any(f + j in outset for j in range(len(outs))):
            if op.owns_outputs:
                ok = [True] * len(outs)
            elif op.view:
                ok = [False] * len(outs)
            else:
                ok = _fresh(outs, args_i)
            fresh.update(f + j for j, good in enumerate(ok) if good)
        for s in ins:
            if last[s] == i:
                vals[s] = None
    result = []
    handed: set[int] = set()
    for s in out_slots:
        v = vals[s]
        if s not in fresh or id(v) in handed:
            v = copy_value(v)
        handed.add(id(v))
        result.append(v)
    return result
