"""Run a described sub-graph once, node by node: the cold path of materialization.

A graph materialized once gains nothing from a memory plan, in-place pairs or step closures:
they pay for themselves over repeated runs. Here each kernel allocates its result, and a value
is dropped right after its last reader ran, so a long chain holds a few values at a time. The
ownership rule is ``interpret.py``'s, as for every evaluator: every output handed back is a buffer
of its own (a result that shares memory with an input, a constant, a known value or another output
is copied).
"""
from __future__ import annotations

import numpy as np

from ..errors import LazyArrayError
from ..kernels.profile import timed
from ..mode import MODE, PROFILING
from .interpret import hand_out, kernel_error, owns_memory, run_kernel
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
    out_slots = d.out_slots
    outset = set(out_slots)
    last = _last_reads(d, outset)
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
        outs = _run_dense(node, args_i, kernels, profiled) if dense else tuple(run_kernel(node, args_i))
        if len(outs) == 1:
            vals[f] = outs[0]
            if f in outset:
                _mark_fresh(fresh, node.op, f, outs, args_i)
        else:
            vals[f:f + len(outs)] = outs
            if any(f + j in outset for j in range(len(outs))):
                _mark_fresh(fresh, node.op, f, outs, args_i)
        for s in ins:
            if last[s] == i:
                vals[s] = None
    return hand_out([vals[s] for s in out_slots], {id(vals[s]) for s in fresh})


def _last_reads(d: Described, outset: set) -> list[int]:
    """Per slot, the step after which its value may be dropped (-2: an output, never dropped)."""
    last = [-1] * d.n_slots
    for i, (_, ins, _) in enumerate(d.steps):
        for s in ins:
            last[s] = i
    for s in outset:
        last[s] = -2
    return last


def _run_dense(node, args: list, kernels: dict, profiled) -> tuple:
    """A dense node's outputs: its kernel bound once per run and device (timed when profiling)."""
    op = node.op
    avals = node.avals
    dev = avals[0].device
    bound = kernels.get(op)
    if bound is None or bound[0] is not dev:
        bound = kernels[op] = (dev, timed(op, op.bind(dev.xp), "interpreted") if profiled else op.bind(dev.xp))
    params = node.params
    try:
        out = bound[1](*args, **params) if params else bound[1](*args)
    except LazyArrayError:
        raise
    except Exception as exc:
        raise kernel_error(node, args, exc) from exc
    if len(avals) == 1:
        return (out if out.__class__ is _ND or op.owns_outputs else _array(out),)
    return tuple(out) if op.owns_outputs else tuple(_array(o) for o in out)


def _mark_fresh(fresh: set, op, f: int, outs, args) -> None:
    """Add the slots (from ``f``) of the outputs that are buffers of their own (the others are
    copied when handed out)."""
    fresh.update(f + j for j, good in enumerate(owns_memory(op, outs, args)) if good)
