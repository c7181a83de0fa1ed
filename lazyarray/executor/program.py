"""Compile a graph into a flat program of steps over backend arrays, and run it.

``compile_program`` works in named stages:

1. ``_Graph``: the nodes to run, one slot per value, and the values given from outside
   (graph inputs, constants, values the caller already knows);
2. ``_own_outputs``: the one place that decides buffer ownership of what a run hands out
   (see below);
3. ``_choose_steps``: how each node runs (``StepKind``: into its planned buffer or buffers, or
   a kernel that allocates its results);
4. ``_plan``: the memory plan over the schedule (``plan.py``);
5. ``_lay_out``: each step becomes a small precompiled closure over slot numbers, so the
   run loop is ``for step in steps: step(slots)``; views of pooled buffers are made once per
   buffer set instead (``set_views.py``).

**Ownership.** Planned internal buffers are never visible to the caller. Every output of
a run is a fresh, exact-size buffer the caller owns: an output that would be a graph
input, a constant, a known value, a view of one, a view into a larger buffer, or the
same value as an earlier output is copied by an explicit ``copy`` step; an output
written into a planned buffer gets a buffer of its own size, allocated anew for each
run (the last step writes straight into it, no copy); a kernel that may hand back its
input unchanged (``sum_to`` with nothing to sum) is checked at run time. Concurrent runs
take separate buffer sets from a pool, so one program can be run from many threads.

This module works on ``Node`` / ``Entry`` and backend arrays only, never ``NDArray``.
"""
from __future__ import annotations

import enum
import functools
import operator
import time
from sys import getrefcount
from typing import NamedTuple

import numpy as np

from ..errors import DeferredComputeError
from ..graph.node import Entry, Node, check_capture
from ..graph.traverse import topo_order
from ..kernels.profile import current as current_profile
from ..kernels.scratch_free import reads_no_scratch
from ..mode import MODE, PROFILING
from ..ops import registry
from ..ops.scratch import bind_workspace, planned_workspace_bytes, workspace_arena
from ..storage import copy_value
from ..threads import num_threads
from ..tuning_table import current
from .batch_last import batch_last_slots, handed_slots
from .binding import Bindings, bindable, maker
from .buffer_set import alloc, fill_views, unheld
from .concat_in_place import candidates, image_stride, place
from .epilogue import epilogue_pairs, pair_step, residual_maker
from .interpret import fresh, interpret, run_kernel
from .plan import Step, Value, plan_memory
from .schedule import reductions_early
from .set_views import made_once, make_views
from .step_forms import FORMS, FREEING, step_error
from .units_major import units_major_slots

# Materializing at most this many kernels runs them in order without compiling a program.
SMALL_GRAPH = 4

# NumPy 2.4 deprecates a positional ``out`` for these two (a third input is ambiguous there).
_NO_POSITIONAL_OUT = frozenset({np.maximum, np.minimum})
_COPY = registry.get("copy")


def _no_outputs(slots) -> tuple:
    return ()


class StepKind(enum.Enum):
    """How a step runs its kernel."""

    OUT = "writes into its planned buffer (out=)"
    UFUNC1 = "unary NumPy ufunc into its planned buffer"
    UFUNC2 = "binary NumPy ufunc into its planned buffer"
    OUTS = "several outputs, each written into its planned buffer (out=(buf0, buf1, ...))"
    FRESH = "the kernel allocates its result"
    MULTI = "several outputs (or sparse ones), allocated by the kernel"


_PLANNED = frozenset({StepKind.OUT, StepKind.OUTS})  # kinds whose outputs live in planned buffers
_BINDABLE = frozenset({StepKind.OUT, StepKind.OUTS, StepKind.FRESH})  # kinds whose op's choice may be bound (binding.py)


def honours_out(op, xp) -> bool:
    """True when ``op``'s kernel writes its results into ``out=`` (no allocation): its single
    result into ``out=buf``, several into ``out=(buf0, buf1, ...)`` (``OpDef.writes_out``)."""
    if isinstance(op.kernel, str):
        return op.num_outputs == 1 and type(getattr(xp, op.kernel, None)).__name__ == "ufunc"
    return op.writes_out


class Program:
    """A compiled graph. ``run(args)`` takes backend arrays for the graph inputs, in order.

    >>> import lazyarray as la
    >>> x = la.sym.var("x", shape=(2,))
    >>> y = la.sym.relu(x * 2 - 1)
    >>> prog = compile_program(list(y.outputs), y.input_nodes())
    >>> prog.run([np.array([0.0, 3.0], dtype=np.float32)])
    [array([0., 5.], dtype=float32)]
    """

    def __init__(self, steps, in_slots, out_slots, template, pooled, per_run, captures, plan, nodes, once=(),
                 workspaces=()):
        self.steps = steps  # one closure per step: step(slots)
        self._once = once  # views of pooled buffers, made with each buffer set (set_views.py)
        self._workspaces = workspaces  # slots of the steps' workspaces: an arena each, made with each buffer set
        self.in_slots = in_slots
        self.out_slots = out_slots
        self._template = template
        self._pooled = pooled  # (device, nbytes, views) of buffers reused run after run
        self._per_run = per_run  # (device, nbytes, views) of buffers handed to the caller
        self._captures = captures  # constants standing for user arrays: checked before each run
        self._pool: list[list] = []
        # per handed-out buffer: the (raw, views) of the last run, taken back when nobody holds them
        self._returned: list[list] = [[] for _ in per_run]
        # the run loop's view of the handed-out buffers: (device, nbytes, views, slots of each view,
        # the buffer's taken-back list or None where nothing is taken back (GPU memory), the slots of its one
        # view where it has one view (the usual output), else None)
        self._handed = [(dev, size, views, tuple(v[-1] for v in views), back if dev.kind == "cpu" else None,
                         tuple(views[0][-1]) if len(views) == 1 else None)
                        for (dev, size, views), back in zip(per_run, self._returned)]
        # inputs bound by one slice assignment when their slots are 0..n-1 (the usual layout)
        self._in_prefix = len(in_slots) if list(in_slots) == list(range(len(in_slots))) else -1
        # the outputs' values, read in C (``itemgetter`` of one slot gives the value, of several a tuple)
        self._outs = operator.itemgetter(*out_slots) if out_slots else _no_outputs
        self._one_out = len(out_slots) == 1
        self.plan = plan
        self.nodes = nodes
        self.out_orders: list = [None] * len(out_slots)  # each output's memory order if not C (free outputs)
        self.step_specs: list = []  # per step, what it runs (``StepSpec``s): for explain() and the profiler
        self.made_once: dict = {}  # plan step -> ``StepSpec`` of the views made with each buffer set (and of
        # the concatenations written in place, ``plan.concats_in_place``): steps outside the run loop
        self.kept: tuple = ()  # ``step_specs`` of the steps computed once that feed this one (param_cache.py)
        self.bindings: Bindings | None = None  # ``steps`` with the kernels' choices bound in (binding.py)

    def _new_set(self) -> list:
        slots = list(self._template)
        for dev, size, views in self._pooled:
            fill_views(slots, alloc(dev, size), views)
        if self._once:
            make_views(slots, self._once)
        for w in self._workspaces:  # (the steps lend them as their kernels' scratch: ops/scratch.py)
            slots[w] = workspace_arena(slots[w])
        return slots

    def run(self, args) -> list:
        """Run once; returns the output values (new arrays, owned by the caller)."""
        if self._captures:
            for node in self._captures:
                check_capture(node)
        pool = self._pool
        try:
            base = pool.pop()  # (atomic: two threads never take the same set)
        except IndexError:
            base = self._new_set()
        s = base.copy()
        for dev, size, views, ats, back, one in self._handed:  # outputs: memory nobody holds
            last = None
            if back:
                try:
                    last = back.pop()
                except IndexError:  # another thread took it between the test and the pop
                    pass
            if last is not None:
                if one is not None:  # (the usual output: one view; ``unheld`` inline, no frame)
                    raw, (v,) = last  # (the same counts: ``last``, ``raw``, v's base, the argument; ``made``, ``v``, the argument)
                    if getrefcount(raw) == 4 and getrefcount(v) == 3 and v.flags.writeable:
                        for slot in one:
                            s[slot] = v
                    else:
                        last = None
                elif unheld(last):
                    for v, at in zip(last[1], ats):
                        for slot in at:
                            s[slot] = v
                else:
                    last = None
            if last is None:
                raw = alloc(dev, size)
                last = (raw, fill_views(s, raw, views))
            if back is not None:
                back.append(last)
        n = self._in_prefix
        if n >= 0 and len(args) == n:
            s[:n] = args
        else:
            for slot, v in zip(self.in_slots, args):
                s[slot] = v
        b = self.bindings
        if MODE.get() & PROFILING:
            self._run_timed(s)  # (the same steps, timed)
        elif b is None:
            for step in self.steps:
                step(s)
        else:
            t, n = current(), num_threads()
            table, threads, steps, _ = b.current
            for step in steps if table is t and threads == n else b.steps_for(t, n):
                step(s)
        outs = self._outs(s)
        pool.append(base)
        return [outs] if self._one_out else list(outs)

    def _run_timed(self, s) -> None:
        """The steps a plain run runs (the bound ones where the program binds, ``binding.py``), each
        timed into the profile being recorded (``la.profile()``). A bound step's row names the choice
        it ran: one its function noted while it ran (a fallback, ``runner.direct``; an early tier),
        else its ``Bound``'s ``choice`` read after the step (a step that binds again inside sets it,
        ``runner.by_facts``; a dense layer's step with its relu: the dense's); the others' runners
        note what they choose while they run."""
        prof = current_profile()
        prof.saw(self)
        where = id(self)
        steps, chosen = self._steps_now()
        for i, (step, specs) in enumerate(zip(steps, self.step_specs)):
            prof.take_choice()  # (nothing noted before this step names it)
            start = time.perf_counter_ns()
            step(s)
            bound = chosen.get(i)  # (after the step: bound by this run, or its choice set by this call)
            prof.add(specs[0].node.op if len(specs) == 1 else "+".join(sp.node.op.qualname for sp in specs),
                     tuple(e.aval.shape for e in specs[0].node.inputs), start, "compiled", step=i,
                     node=specs[0].name, program=where,
                     bound=None if bound is None else (bound[0] if isinstance(bound, tuple) else bound).choice)

    def _steps_now(self) -> tuple:
        """The steps a run under the tuning table and thread count in force runs, and the ``Bound`` of
        each step bound there (step index -> Bound; a dict that fills as steps bind at their first run)."""
        b = self.bindings
        if b is None:
            return self.steps, {}
        t, n = current(), num_threads()
        table, threads, steps, chosen = b.current
        if table is not t or threads != n:
            steps = b.steps_for(t, n)
            chosen = b.current[3]
        return steps, chosen

    def __repr__(self) -> str:
        return f"<Program {len(self.steps)} steps, {self.plan!r}>"


class _Graph:
    """What ``compile_program`` works on: nodes in order, their slots, what is given."""

    def __init__(self, outputs: list[Entry], inputs, known):
        # One walk; ``known`` is asked of constants too (a caller may check a captured array there).
        given: dict[int, list] = {}

        def stop(n) -> bool:
            vals = known(n) if known is not None else None
            if vals is not None:
                given[id(n)] = vals
                return True
            return n.op is None

        self.order = topo_order(list(outputs), stop=stop)
        self.slot_of: dict[tuple[int, int], int] = {}
        self.avals: list = []
        self.template: list = []
        self.external: list[bool] = []
        self.captures: list[Node] = []
        self.copies: set[int] = set()  # ownership copies added by ``_own_outputs``
        input_ids = {id(v) for v in inputs}
        for node in _inputs_first(self.order, inputs):
            vals = given.get(id(node))
            k = len(vals) if vals is not None else (len(node.avals) or 1)
            for i in range(k):
                self._add_slot(node, i)
            if vals is not None:
                for i, v in enumerate(vals):
                    self.template[self.slot_of[(id(node), i)]] = v
            elif node.op is None:
                if node.kind == "const":
                    self.template[self.slot_of[(id(node), 0)]] = node.value
                    if node.version is not None:
                        self.captures.append(node)
                elif id(node) not in input_ids:
                    raise DeferredComputeError(
                        f"cannot compute: graph input {node.name!r} ({node.avals[0]}) has no value; "
                        "bind it by calling the symbol through la.CachedOp(sym)(...)")
            for i in range(k):
                self.external[self.slot_of[(id(node), i)]] = vals is not None or node.op is None
        self.todo = reductions_early([n for n in self.order if id(n) not in given and n.op is not None])

    def _add_slot(self, node: Node, i: int) -> int:
        k = len(self.avals)
        self.slot_of[(id(node), i)] = k
        self.avals.append(node.avals[i] if i < len(node.avals) else None)
        self.template.append(None)
        self.external.append(False)
        return k

    def slot(self, e: Entry) -> int:
        return self.slot_of[(id(e.node), e.index)]



def _inputs_first(order: list[Node], inputs) -> list[Node]:
    """The nodes to give slots, in slot order: the graph inputs first, in the order given (those the
    outputs do not read too: a slot nothing reads), then the rest of ``order``. The inputs' slots are
    then 0..n-1, so a run binds its arguments by one slice assignment (``Program._in_prefix``) however
    the walk met them (a ``ParamCache`` body's kept values, parameters read late or only by its head)."""
    first, seen = [], set()
    for v in inputs:
        if v.op is None and id(v) not in seen:
            seen.add(id(v))
            first.append(v)
    return first + [n for n in order if id(n) not in seen] if first else order

# -- 2. ownership of outputs -----------------------------------------------------------------------
def _own_outputs(g: _Graph, outputs: list[Entry]) -> list[Entry]:
    """Outputs the caller can own: a ``copy`` step where an output would alias memory it does not
    own afresh (an input, a constant, a known value, a view of one or into a larger value) or
    memory an earlier output already hands out."""
    owned = []
    seen: set[int] = set()
    for e in outputs:
        sl = g.slot(e)
        if sl in seen or _needs_copy(g, e):
            a = e.aval
            node = Node(_COPY, (e,), {}, (a,), name=f"{e.node.label()}_out", source=e.node.source)
            g.order.append(node)
            g.todo.append(node)
            g.copies.add(id(node))
            g._add_slot(node, 0)
            e = Entry(node, 0)
            sl = g.slot(e)
        seen.add(sl)
        owned.append(e)
    return owned


def _needs_copy(g: _Graph, e: Entry) -> bool:
    if g.external[g.slot(e)]:
        return True
    node = e.node
    size = e.aval.nbytes if e.aval.shape is not None and None not in e.aval.shape else None
    while node.op is not None and node.op.view and node.inputs:
        src = node.inputs[0]
        if g.external[g.slot(src)]:
            return True
        a = src.aval
        if size is None or a.shape is None or None in a.shape or a.nbytes != size:
            return True  # a view into a larger (or unknown) buffer would keep all of it alive
        node = src.node
    return False


# -- 3. step kinds ---------------------------------------------------------------------------------
class StepSpec(NamedTuple):
    """What one node of a compiled step is (``Program.step_specs``: a tuple per step, two where a
    dense layer's step runs its relu too): the node, its name, how it runs, its slots and the
    memory order of its first output (None: C order)."""

    node: Node
    name: str
    kind: StepKind
    ins: tuple
    outs: tuple
    order: tuple | None


class _Spec:
    """One step before layout: the node, how it runs, its slots."""

    __slots__ = ("node", "kind", "fn", "ins", "outs", "planned", "takes_params")

    def __init__(self, node, kind, fn, ins, outs, planned, takes_params=True):
        self.node, self.kind, self.fn, self.ins, self.outs, self.planned = node, kind, fn, ins, outs, planned
        self.takes_params = takes_params  # ``fn`` takes the node's parameters (False: a bound choice, ``binding.py``)


def _choose_steps(g: _Graph, out_slots: set[int]) -> list[_Spec]:
    specs = []
    kind_of: dict[int, StepKind] = {}
    for node in g.todo:
        op = node.op
        xp = node.avals[0].device.xp
        ins = tuple(g.slot(e) for e in node.inputs)
        outs = tuple(g.slot_of[(id(node), i)] for i in range(len(node.avals)))
        sparse = any(e.aval.stype != "default" for e in node.inputs) or any(a.stype != "default" for a in node.avals)
        planned = all(a.shape is not None and None not in a.shape and a.dtype is not None and a.stype == "default"
                      for a in node.avals)
        if sparse:
            kind = StepKind.MULTI
        elif planned and honours_out(op, xp):
            kind = StepKind.OUT if len(node.avals) == 1 else StepKind.OUTS
        elif len(node.avals) > 1:
            kind = StepKind.MULTI
        else:
            kind = StepKind.FRESH
        for o in outs:
            kind_of[o] = kind
        if id(node) in g.copies:
            fn, kind = _copy_kernel, StepKind.FRESH  # an ownership copy (dense or sparse)
            kind_of[outs[0]] = kind
        elif sparse:  # the interpreter knows the storage rules (sparse kernels, dense fallback)
            fn = _interpreted(node)
        else:
            fn = op.bind(xp)
            if kind not in _PLANNED and not op.view and not op.owns_outputs and _may_return_input(node, g, kind_of, out_slots, outs):
                fn = _unaliasing(fn)
        specs.append(_Spec(node, kind, fn, ins, outs, planned))
    return specs


def _may_return_input(node: Node, g: _Graph, kind_of, out_slots, outs) -> bool:
    """A kernel that allocates its result might return an input unchanged (``sum_to`` with nothing
    to sum, ``cast_storage`` to the same storage). Harmless unless that input lives in a pooled
    buffer a later step overwrites, or the result is handed to the caller."""
    out = node.avals[0]
    escapes = any(o in out_slots for o in outs)
    for e in node.inputs:
        a = e.aval
        if a.shape == out.shape and a.dtype == out.dtype and a.stype == out.stype:
            sl = g.slot(e)
            if escapes or kind_of.get(sl) in _PLANNED:
                return True
    return False


def _unaliasing(fn):
    def run(*args, **kw):
        r = fn(*args, **kw)
        return copy_value(r) if _aliases(r, args) else r

    return run


def _aliases(r, args) -> bool:
    """True when ``r`` is one of ``args`` or shares its memory (a view of it, or of its base)."""
    return not fresh([r], args)[0]


def _interpreted(node: Node):
    def run(*args, **kw):
        return run_kernel(node, list(args))

    return run


# -- 4. the memory plan ----------------------------------------------------------------------------
def _plan(g: _Graph, specs: list[_Spec], out_slots: set[int], names: dict, orders: dict):
    label = _slot_labels(g, names)  # (each value made once, named: no second pass copying them all)
    values = []
    for slot, a in enumerate(g.avals):
        if g.external[slot] or a is None or a.shape is None or None in a.shape or a.stype != "default" \
                or a.dtype is None:
            # Made by a step but not plannable (sparse: its size depends on the data): its kernel
            # allocates it at run time, and the plan lists it as such.
            runtime = "" if g.external[slot] or a is None else (
                a.stype if a.stype != "default" else "data-dependent shape")
            values.append(Value(0, getattr(a, "device", None), True, None, slot in out_slots, label[slot], runtime))
        else:
            values.append(Value(a.nbytes, a.device, False, None, slot in out_slots, label[slot]))
    steps = []
    for sp in specs:
        node, ins, outs = sp.node, sp.ins, sp.outs
        if node.op.view and ins and sp.planned:  # an alias: no memory of its own
            src = values[ins[0]]
            values[outs[0]] = Value(0, src.device, True, None, outs[0] in out_slots, label[outs[0]]) \
                if src.external else Value(values[outs[0]].nbytes, src.device, False, ins[0],
                                           outs[0] in out_slots, label[outs[0]])
        pairs = ()
        if sp.kind in _PLANNED:
            pairs = tuple((ip, op_) for ip, op_ in node.op.inplace
                          if ip < len(ins) and op_ < len(outs) and not values[ins[ip]].external
                          and values[ins[ip]].nbytes == node.avals[op_].nbytes
                          and node.inputs[ip].aval.shape == node.avals[op_].shape
                          and node.inputs[ip].aval.dtype == node.avals[op_].dtype
                          and orders.get(ins[ip]) == orders.get(outs[op_]))  # same memory order
        ws = planned_workspace_bytes(node.op, [e.aval for e in node.inputs], node.params) if sp.kind in _PLANNED else 0
        if ws and _binds_without_scratch(sp, orders):  # (its bound kernel reads none: no workspace planned)
            ws = 0
        steps.append(Step(ins, outs, pairs, names.get(id(node), node.label()), ws))
    in_place = frozenset()
    if current().concat_in_place:  # (concat_in_place.py: parts written into the concatenation's memory)
        values, in_place = place(values, steps, *candidates(specs, orders, handed_slots(specs, out_slots), _PLANNED))
    plan = plan_memory(values, steps)
    plan.concats_in_place = in_place
    return plan


def _slot_labels(g: _Graph, names: dict) -> list[str]:
    """Each slot's name in the plan's table: its node's (``names``, else its label), ``.i`` added
    for the outputs of a node with several; "" for a slot no node of the order fills."""
    label = [""] * len(g.avals)
    slot_of = g.slot_of
    for node in g.order:
        nm = names.get(id(node))
        if nm is None:
            nm = node.label()
        if len(node.avals) <= 1:  # (one output: one slot, or none)
            sl = slot_of.get((id(node), 0))
            if sl is not None:
                label[sl] = nm
            continue
        k = sum(1 for i in range(len(node.avals)) if (id(node), i) in slot_of)
        if k == 1:
            label[slot_of[(id(node), 0)]] = nm
            continue
        for i in range(k):
            label[slot_of[(id(node), i)]] = f"{nm}.{i}"
    return label


def _binds_without_scratch(sp: _Spec, orders: dict) -> bool:
    """Whether the step binds (``binding.py``) a kernel that never takes scratch for arrays of its avals
    as planned (``kernels/scratch_free.py``, asked on stand-ins: NumPy, C-ordered; a step reading or
    writing a value in a planned memory order is not asked). Its runner's steps (a first run, the
    kernels log) then take the thread's own arena where they take scratch: the same values."""
    node = sp.node
    if any(orders.get(k) is not None for k in sp.ins + sp.outs) or node.avals[0].device.xp is not np \
            or not bindable(sp, _BINDABLE, _PLANNED):
        return False
    arrays = [np.empty(e.aval.shape, e.aval.dtype) for e in node.inputs]
    out = np.empty(node.avals[0].shape, node.avals[0].dtype) if len(sp.outs) == 1 else None
    return reads_no_scratch(node.op, np, *arrays, out=out, **node.params)


# -- 5. layout -------------------------------------------------------------------------------------
def _lay_out(g: _Graph, specs: list[_Spec], plan, out_slots: set[int], orders: dict):
    """Buffers (pooled or per run) and one closure per step."""
    views_by_buffer: dict[int, list] = {}
    skip = plan.concats_in_place  # (their results: views of the memory their parts' steps write)
    for i, sp in enumerate(specs):
        if sp.kind in _PLANNED or i in skip:
            for o, a in zip(sp.outs, sp.node.avals):
                views_by_buffer.setdefault(plan.buffer_of[o], []).append((o, a.dtype, a.shape, a.nbytes,
                                                                          plan.offset_of[o],
                                                                          image_stride(plan.values[o]) or orders.get(o)))
    for w in plan.workspace_of.values():  # each step's workspace: a slot past the values' (``ops/scratch.py``)
        g.template.extend([None] * (w + 1 - len(g.template)))
        views_by_buffer.setdefault(plan.buffer_of[w], []).append((w, np.uint8, (plan.values[w].nbytes,),
                                                                  plan.values[w].nbytes, plan.offset_of[w], None))
    pooled, per_run = [], []
    pooled_c = set()  # slots of values in pooled buffers, C order (views of them may be made once)
    for b, views in views_by_buffer.items():
        layouts: dict = {}
        for slot, dtype, shape, nbytes, off, order in views:
            layouts.setdefault((dtype, shape, nbytes, off, order), []).append(slot)
        spec = (plan.buffer_device[b], plan.buffer_size[b], tuple(k + (tuple(v),) for k, v in layouts.items()))
        (per_run if b in plan.escaping_buffers else pooled).append(spec)  # outputs: new memory each run
        if b not in plan.escaping_buffers:
            pooled_c.update(slot for slot, *_, order in views if order is None)
    once = made_once(specs, pooled_c, out_slots, StepKind.FRESH, g.copies)  # (set_views.py)
    # When to drop temporaries the kernels allocated (planned slots need no dropping).
    last_read = [-1] * len(g.avals)
    for i, sp in enumerate(specs):
        for sl in sp.ins:
            last_read[sl] = i
    frees_at: list[list[int]] = [[] for _ in specs]
    for i, sp in enumerate(specs):
        if sp.kind in _PLANNED or i in once or i in skip:
            continue
        for o in sp.outs:
            if o not in out_slots:
                frees_at[max(last_read[o], i)].append(o)
    merged = epilogue_pairs(specs, plan, out_slots, StepKind.OUT)  # (epilogue.py: dense + in-place relu / residual)
    steps, made_of, makers = [], [], {}
    for i, sp in enumerate(specs):
        if i - 1 in merged or i in once or i in skip:
            continue  # (run by the dense step before it; made with the buffer set)
        group = (sp, specs[i + 1]) if i in merged else (sp,)
        make = functools.partial(_closure_of, tuple(frees_at[i]) + (tuple(frees_at[i + 1]) if i in merged else ()),
                                 plan.workspace_of.get(i))
        steps.append(make(group))
        if all(bindable(g, _BINDABLE, _PLANNED) for g in group):  # (binding.py: choices bound in at the first run)
            makers[len(steps) - 1] = maker(group, make, steps[-1], _PLANNED)
        elif len(group) == 2 and bindable(sp, _BINDABLE, _PLANNED):  # (a residual add: no binder, its ufunc as it is)
            makers[len(steps) - 1] = residual_maker(maker((sp,), _with_rest(make, group[1:]), steps[-1], _PLANNED))
        made_of.append(group)
    return steps, made_of, pooled, per_run, once, makers


def _with_rest(make, rest: tuple):
    """``make`` of a merged step whose first spec alone binds: the bound spec, then ``rest`` as they are."""
    return lambda specs, **kw: make(tuple(specs) + rest, **kw)


def _closure_of(frees: tuple, workspace, group: tuple, lends: bool = True):
    """A step's closure from its specs (their ``fn`` the runners' or the bound choices'), lending its
    workspace to the thread while it runs where it has one and ``lends`` (False: a bound kernel that
    never takes scratch, ``Bound.scratch``; its planned workspace stays, unread)."""
    if len(group) == 2:
        return pair_step(group[0], group[1], frees, step_error)
    step = _step_closure(group[0], frees)
    return step if workspace is None or not lends else bind_workspace(step, workspace)


def _step_closure(sp: _Spec, frees: tuple):
    """The step as a closure over its slots: the maker of its form (``step_forms.FORMS``) binds the kernel,
    its slots and parameters; a failure is re-raised naming the op, the input avals and the
    user's source line (Python 3.11's try costs nothing until something raises)."""
    form = _form(sp)
    kw = dict(sp.node.params) if sp.takes_params else {}  # (a bound choice has its parameters bound in)
    if form in FREEING:  # (these forms drop the slots themselves: no second closure per step)
        return FREEING[form](sp.fn, sp.ins, sp.outs, kw, sp.node, frees)
    step = FORMS[form](sp.fn, sp.ins, sp.outs, kw, sp.node)
    if not frees:
        return step

    def step_and_free(s):
        step(s)
        for k in frees:
            s[k] = None

    return step_and_free


def _form(sp: _Spec) -> str:
    """Which closure runs the step: the kind (``StepKind``) refined by arity and parameters, so
    the common cases build no argument list per run."""
    fn, n, kind, kw = sp.fn, len(sp.ins), sp.kind, sp.takes_params and bool(sp.node.params)
    if kind is StepKind.OUT:
        if not kw and getattr(fn, "nin", None) == n in (1, 2) and getattr(fn, "nout", None) == 1 \
                and fn not in _NO_POSITIONAL_OUT:
            return f"ufunc{n}"  # ``out`` positionally, nothing else
        # (relu; binary kernels; dense with its bias; the rest: pooling, conv2d, ... whose kernels
        # cost far more than the argument list built per run)
        return f"out{n}" if n in (1, 2, 3) and not kw else "out_any"
    if kind is StepKind.OUTS:
        return "outs"
    if kind is StepKind.FRESH:
        if sp.node.avals[0].shape == ():
            return "fresh_scalar"  # NumPy returns scalars for 0-d results; keep arrays
        return "fresh1" if n == 1 else "fresh_any"  # (``flatten``, reshapes)
    return "multi"


def compile_program(outputs: list[Entry], inputs=(), *, known=None, names: dict | None = None,
                    free_outputs=(), input_orders: dict | None = None) -> Program:
    """Compile the graph that computes ``outputs`` from the variable nodes ``inputs``.

    ``known(node)``: the values of a node the caller already has (a list, one per output), or
    None; such nodes, and constants, are taken as they are and never written. ``names``
    (``id(node) -> name``) labels the memory plan's table.

    ``free_outputs``: positions of outputs only lazyarray reads (a training forward's values saved
    for its backward): they may be stored in another memory order (``units_major.py``), which
    ``Program.out_orders`` reports. ``input_orders``: ``input position -> memory order`` of inputs
    known to arrive so stored (the backward's saved values), a layout hint only: an input stored
    otherwise gives the same values.
    """
    g = _Graph(outputs, inputs, known)
    outputs = _own_outputs(g, list(outputs))
    out_list = [g.slot(e) for e in outputs]
    out_slots = set(out_list)
    free = set(out_list[i] for i in free_outputs) - {s for i, s in enumerate(out_list) if i not in free_outputs}
    in_orders = {}
    for i, order in (input_orders or {}).items():
        slot = g.slot_of.get((id(inputs[i]), 0))
        if slot is not None and order is not None:
            in_orders[slot] = order
    specs = _choose_steps(g, out_slots)
    orders = batch_last_slots(g, specs, out_slots, _PLANNED)
    # (2-D values; batch-last ones are 4-D)
    orders.update(units_major_slots(g, specs, out_slots, _PLANNED, free=free, input_orders=in_orders))
    plan = _plan(g, specs, out_slots, names or {}, orders)
    steps, made_of, pooled, per_run, once, makers = _lay_out(g, specs, plan, out_slots, orders)
    n = len(g.template)
    # (every graph input has a slot: ``_inputs_first``; the scratch slot at the end is a safety net)
    in_slots = [g.slot_of.get((id(v), 0), n) for v in inputs]
    g.template.append(None)
    prog = Program(steps, in_slots, out_list, g.template, pooled, per_run, g.captures, plan, g.order,
                   tuple(once.values()), tuple(plan.workspace_of.values()))
    prog.out_orders = [orders.get(s) for s in out_list]
    prog.bindings = Bindings(steps, makers) if makers else None

    def spec_of(sp):
        return StepSpec(sp.node, names.get(id(sp.node), sp.node.label()) if names else sp.node.label(),
                        sp.kind, sp.ins, sp.outs, orders.get(sp.outs[0]) if sp.outs else None)

    prog.step_specs = [tuple(spec_of(sp) for sp in group) for group in made_of]
    prog.made_once = {k: spec_of(specs[k]) for k in sorted(set(once) | plan.concats_in_place)}
    return prog


def evaluate(outputs: list[Entry], known=None) -> list:
    """Values of ``outputs`` (fresh buffers the caller owns), computing only what is missing.

    ``known(node)`` gives the values the caller already has (computed lazy arrays, autograd's
    saved values); constants are read as they are. A few kernels run in order directly;
    larger graphs run as one compiled, memory-planned program.

    >>> import lazyarray as la
    >>> with la.deferred():
    ...     y = la.ones((2,)) * 3
    >>> evaluate([y._entry])
    [array([3., 3.], dtype=float32)]
    """
    if known is not None:
        known = _once(known)
    todo = [n for n in topo_order(list(outputs), stop=lambda n: n.op is None or (known is not None and
                                                                                 known(n) is not None))
            if n.op is not None and (known is None or known(n) is None)]
    if len(todo) <= SMALL_GRAPH:  # a few kernels: planning would cost more than it saves
        return interpret(outputs, known, owned=True)
    return compile_program(outputs, (), known=known).run([])


def _once(known):
    """``known`` asked at most once per node (it may check versions or walk tables)."""
    cache: dict = {}

    def ask(node):
        k = id(node)
        if k in cache:
            return cache[k]
        v = cache[k] = known(node)
        return v

    return ask


def _copy_kernel(x, **_):
    return copy_value(x)

