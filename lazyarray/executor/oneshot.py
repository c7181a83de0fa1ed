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
from ..kernels.profile import timed
from ..mode import MODE, PROFILING
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
    kernels: dict = {}  # op -> (device, bound kernel), looked up once per run
    profiled = MODE.get() & PROFILING
    for i, (node, ins, f) in enumerate(steps):
        n_in = len(ins)  # (no comprehension for the common arities: it costs a frame per step)
        if n_in == 1:
            args_i = [vals[ins[0]]]
        elif n_in == 2:
            args_i = [vals[ins[0]], vals[ins[1]]]
        else:
            args_i = [vals[s] for s in ins]
        op = node.op
        avals = node.avals
        if dense:
            dev = avals[0].device
            bound = kernels.get(op)
            if bound is None or bound[0] is not dev:
                bound = kernels[op] = (dev, timed(op, op.bind(dev.xp), "interpreted") if profiled
                                       else op.bind(dev.xp))
            params = node.params
            try:
                out = bound[1](*args_i, **params) if params else bound[1](*args_i)
            except LazyArrayError:
                raise
            except Exception as exc:
                raise kernel_error(node, args_i, exc) from exc
            if len(avals) == 1:
                outs = (out if out.__class__ is _ND or op.owns_outputs else _array(out),)
            else:
                outs = tuple(out) if op.owns_outputs else tuple(_array(o) for o in out)
        else:
            outs = tuple(run_kernel(node, args_i))
        if len(outs) == 1:
            vals[f] = outs[0]
            handed_out = f in outset
        else:
            vals[f:f + len(outs)] = outs
            handed_out = any(f + j in outset for j in range(len(outs)))
        if handed_out:  # which outputs are buffers of their own (the others are copied)
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
