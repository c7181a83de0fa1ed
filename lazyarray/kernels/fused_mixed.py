"""``fused[mixed]``: a fused group with ops the compiled loop has no exact form for (``exp``,
``tanh``, ``log``, ``sigmoid``, ``power``, ops with parameters ...), run as a few calls instead
of one per op: each run of consecutive exact ops (``fused.OPS``) is one call of the compiled
loop (``fused_jit.py``), every other op is its NumPy kernel, as in the chunked path.

Why not compile ``exp`` and friends: numba calls the C library's ``expf`` / ``exp`` one value at
a time (11-26 ns a value on the development machine, NumPy's SIMD loops 0.3-3 ns), and NumPy's own
float32 ``exp`` and ``log`` are not the correctly rounded values: over every 13th float32 on the
development machine (AVX512_SPR) NumPy's ``exp`` is up to 2 ulp and ``log`` up to 4 ulp from
the C library's float64 result rounded to float32 (``tanh`` within 1); in float64 the two differ
by 1 ulp (exp, log) to 3 (tanh) on a few percent of values (``benchmarks/fusion.py --ulp``). A
compiled ``exp`` would be both slower and more than 1 ulp away from the path it stands for. Leaving those ops to NumPy
keeps every value NumPy's, bit for bit, in float32 and float64, while a GELU written out as
25 ops (ONNX's erf as a polynomial: one ``exp``, 24 exact ops) runs as three calls.

It takes groups whose values all have one float dtype, with at least one run of ``MIN_RUN``
exact ops, each run reading at most ``fused.ARRAY_SLOTS[-1]`` arrays and leaving at most
``fused.OUT_SLOTS`` values to later ops, whose output fits one chunk (``CHUNK_BYTES``: the
small outputs where the chunked path's fixed cost per op is what a call costs); ``plan_of``
says whether a group qualifies (``fused.admission`` asks it, and ``fused.mixed_pays``
whether it is expected to run faster). Values that cross from one call to the next live in the chunked path's pooled
per-thread scratch (``fused_chunked.scratch_registers``), reused by liveness.
"""
from __future__ import annotations

import numpy as np

from . import fused_table as F
from .fused_chunked import CHUNK_BYTES, scratch_registers

MIN_RUN = 2  # (a run of one exact op is one NumPy call either way)


class Step:
    """One call: ``table`` (a ``fused.Table``, or None: the NumPy op ``fn`` with ``params``),
    the value slots it reads (``ins``) and writes (``outs``), and the layout cache the compiled
    loop keeps (``layout``)."""

    __slots__ = ("fn", "ins", "layout", "outs", "params", "table")

    def __init__(self, table, fn, ins, outs, params):
        self.table, self.fn, self.ins, self.outs, self.params = table, fn, tuple(ins), tuple(outs), params
        self.layout = None


class Plan:
    """A group as ``steps`` over value slots (the group's operands first, then one per op);
    ``buffer[slot]``: the scratch register a value crossing calls lives in (-1: the output),
    ``registers``: how many such registers (all of the group's dtype)."""

    def __init__(self, steps, buffer, registers, dtype, n_ops):
        self.steps, self.buffer, self.registers, self.dtype, self.n_ops = steps, buffer, registers, dtype, n_ops
        self.n_slots = len(buffer)


def plan_of(graph):
    """The group's ``Plan``, or False where ``fused[mixed]`` does not take it: more than one dtype
    or not a float, no run of ``MIN_RUN`` exact ops, a run reading too many arrays or leaving
    too many values, an output larger than one chunk."""
    order = [n for n in graph.sym.topo() if n.op is not None]
    dtype = graph.avals[0].dtype
    size = 1
    for d in graph.avals[0].shape:
        size *= d
    if dtype not in F.FLOATS or size * dtype.itemsize > CHUNK_BYTES or any(
            n.avals[0].dtype != dtype for n in order) or any(v.avals[0].dtype != dtype for v in graph.inputs):
        return False
    runs = _runs(order)
    if not any(len(run) >= MIN_RUN for run in runs if _exact(run[0])):
        return False
    return _plan(graph, order, runs, dtype)


def _exact(node) -> bool:
    return node.op.name in F.OPS and not node.params


def _runs(order) -> list:
    """``order`` cut into maximal runs of exact ops and single other ops."""
    runs: list = []
    for n in order:
        if _exact(n) and runs and _exact(runs[-1][-1]):
            runs[-1].append(n)
        else:
            runs.append([n])
    return runs


def _plan(graph, order, runs, dtype):
    slot = {id(v): k for k, v in enumerate(graph.inputs)}
    for n in order:
        slot[id(n)] = len(slot)
    root = order[-1]
    readers: dict[int, int] = {}  # value -> index of the last run that reads it
    for k, run in enumerate(runs):
        for n in run:
            for e in n.inputs:
                readers[id(e.node)] = k
    steps = []
    for k, run in enumerate(runs):
        if not (_exact(run[0]) and len(run) >= MIN_RUN):
            for n in run:  # (single ops, and runs too short to compile: NumPy's kernel)
                fn = n.op.np_ufunc if n.op.np_ufunc is not None else n.op.bind(np)
                steps.append(Step(None, fn, [slot[id(e.node)] for e in n.inputs], [slot[id(n)]], dict(n.params)))
            continue
        inside = {id(n) for n in run}
        loads = []
        for n in run:
            for e in n.inputs:
                if id(e.node) not in inside and all(e.node is not v for v in loads):
                    loads.append(e.node)
        exports = [n for n in run if n is root or readers.get(id(n), -1) > k]
        if sum(not F.is_scalar(v) for v in loads) > F.ARRAY_SLOTS[-1] or len(exports) > F.OUT_SLOTS:
            return False
        table = F.build(loads, run, dtype, exports)
        steps.append(Step(table, None, [slot[id(v)] for v in loads], [slot[id(n)] for n in exports], None))
    buffer, registers = _registers_by_liveness(steps, len(slot), slot[id(root)])
    return Plan(steps, buffer, registers, dtype, len(order))


def _registers_by_liveness(steps, n_slots, root):
    """A scratch register for every value a step writes (the root writes the output): freed after
    the last step that reads it, so a long group needs a few."""
    last: dict[int, int] = {}
    for k, s in enumerate(steps):
        for i in s.ins:
            last[i] = k
    buffer = [-2] * n_slots  # (-2: an operand of the group, read where it is)
    free: list[int] = []
    count = 0
    for k, s in enumerate(steps):
        for i in s.ins:
            if buffer[i] >= 0 and last[i] == k and buffer[i] not in free:
                free.append(buffer[i])
        for o in s.outs:
            if o == root:
                buffer[o] = -1
            elif free:
                buffer[o] = free.pop()
            else:
                buffer[o], count = count, count + 1
    return buffer, count


def run_mixed(plan: Plan, arrays, out) -> None:
    """The group's steps over whole arrays into ``out`` (C order, the plan's dtype)."""
    regs = scratch_registers([plan.dtype] * plan.registers, out.shape)
    s = list(arrays) + [None] * (plan.n_slots - len(arrays))
    buffer = plan.buffer
    for step in plan.steps:
        bufs = [out if buffer[o] == -1 else regs[buffer[o]] for o in step.outs]
        if step.table is None:
            if step.params:
                step.fn(*[s[i] for i in step.ins], out=bufs[0], **step.params)
            else:
                step.fn(*[s[i] for i in step.ins], out=bufs[0])
        else:
            F.run_table(step.table, [s[i] for i in step.ins], bufs, out.shape, step)
        for o, b in zip(step.outs, bufs):
            s[o] = b
