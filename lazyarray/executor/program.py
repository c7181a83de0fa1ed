"""Compile a graph into a flat program of steps over backend arrays, and run it.

A ``Program`` is what the executor runs: a list of steps, each ``(mode, kernel, first
input slot, second input slot, output slot, input slots, params, slots to free, node)``, over a list of slots that hold the
values of one run. Everything is decided at compile time (kernel bound to its array
module, slot numbers, which buffer each output is written into, when a temporary is
dropped), so the run loop is a few lines.

Memory follows the plan (``plan.py``): every buffer is allocated once per *buffer set*;
kernels that write into a given array (ufuncs, ``matmul``, ``relu``, ``dense``) get a view
of their planned buffer as ``out=``; the others return fresh arrays, which stand in for
their planned buffer and are dropped after their last reader. An output written into a
pooled buffer is handed to the caller and that buffer is replaced before the next run, so
outputs are never aliased by later calls. Concurrent runs take separate buffer sets from
a pool, so one program can be run from many threads at once.

This module works on ``Node`` / ``Entry`` and backend arrays only, never ``NDArray``.
"""
from __future__ import annotations

import numpy as np

from ..device import on_device
from ..errors import DeferredComputeError, LazyArrayError
from ..graph.node import Entry, Node
from ..graph.traverse import topo_order
from .interpret import run_kernel
from .plan import Step, Value, plan_memory

OUT, FRESH, FRESH_0D, MULTI, UFUNC1, UFUNC2 = 0, 1, 2, 3, 4, 5

# Outputs smaller than this get a buffer of their own rather than a reused one (see plan.py).
SHARE_OUT_MIN_BYTES = 1 << 16

# Materializing at most this many kernels runs them in order without compiling a program.
SMALL_GRAPH = 4

# NumPy 2.4 deprecates a positional ``out`` for these two (a third input is ambiguous there).
_NO_POSITIONAL_OUT = frozenset({np.maximum, np.minimum})


def honours_out(op, xp) -> bool:
    """True when ``op``'s kernel writes its single result into ``out=`` (no allocation)."""
    if op.num_outputs != 1:
        return False
    if isinstance(op.kernel, str):
        return type(getattr(xp, op.kernel, None)).__name__ == "ufunc"
    return op.writes_out


class _BufferSet:
    """The slots of one run with every pooled buffer allocated: one per concurrent run."""

    __slots__ = ("raws", "stale", "template")

    def __init__(self, template: list, raws: dict):
        self.template = template
        self.raws = raws
        self.stale = False  # True when the last run handed out some of these buffers


class Program:
    """A compiled graph. ``run(args)`` takes backend arrays for the graph inputs, in order.

    >>> import lazyarray as la
    >>> x = la.sym.var("x", shape=(2,))
    >>> y = la.sym.relu(x * 2 - 1)
    >>> prog = compile_program(list(y.outputs), y.input_nodes())
    >>> prog.run([np.array([0.0, 3.0], dtype=np.float32)])
    [array([0., 5.], dtype=float32)]
    """

    def __init__(self, steps, in_slots, out_slots, copy_out, template, views_by_buffer,
                 buffer_specs, escaping_buffers, plan, nodes):
        self.steps = steps
        self.in_slots = in_slots
        self.out_slots = out_slots
        self.copy_out = copy_out
        self._template = template
        self._views_by_buffer = views_by_buffer
        self._buffer_specs = buffer_specs  # buffer -> (device, nbytes), pooled buffers only
        self._escaping = [b for b in escaping_buffers if b in buffer_specs]
        self._pool: list[_BufferSet] = []
        self.plan = plan
        self.nodes = nodes
        self.once = False  # a program run only once skips refilling its buffer set

    # -- buffers ---------------------------------------------------------------------------
    def _new_set(self) -> _BufferSet:
        raws = {b: _alloc(dev, size) for b, (dev, size) in self._buffer_specs.items()}
        tmpl = list(self._template)
        for b, views in self._views_by_buffer.items():
            raw = raws[b]
            for slot, dtype, shape, nbytes in views:
                tmpl[slot] = raw[:nbytes].view(dtype).reshape(shape)
        return _BufferSet(tmpl, raws)

    def _refill(self, bs: _BufferSet) -> None:
        """Fresh memory for the buffers whose values the last run handed out. Done when the set
        is taken again, not when it is given back: by then the caller has usually dropped the
        previous outputs, so the two never need memory at the same time."""
        tmpl = bs.template
        for b in self._escaping:
            dev, size = self._buffer_specs[b]
            raw = bs.raws[b] = _alloc(dev, size)
            for slot, dtype, shape, nbytes in self._views_by_buffer[b]:
                tmpl[slot] = raw[:nbytes].view(dtype).reshape(shape)
        bs.stale = False

    # -- running ---------------------------------------------------------------------------
    def run(self, args) -> list:
        """Run once; returns the output values (new arrays, owned by the caller)."""
        pool = self._pool
        bs = pool.pop() if pool else self._new_set()
        if bs.stale:
            self._refill(bs)
        s = bs.template.copy()
        for slot, v in zip(self.in_slots, args):
            s[slot] = v
        node = None
        try:
            for mode, fn, a, b, o, ins, kw, frees, node in self.steps:
                if mode == 5:  # binary ufunc into its buffer
                    fn(s[a], s[b], s[o])
                elif mode == 4:  # unary ufunc into its buffer
                    fn(s[a], s[o])
                elif mode == 0:
                    fn(*[s[i] for i in ins], out=s[o], **kw)
                elif mode == 1:
                    s[o] = fn(*[s[i] for i in ins], **kw)
                elif mode == 2:
                    r = fn(*[s[i] for i in ins], **kw)
                    s[o] = np.asarray(r) if isinstance(r, np.generic) else r
                else:
                    res = fn(*[s[i] for i in ins], **kw)
                    for k, r in zip(o, res):
                        s[k] = np.asarray(r) if isinstance(r, np.generic) else r
                if frees:
                    for k in frees:
                        s[k] = None
        except LazyArrayError:
            raise
        except Exception as exc:
            raise _step_error(node, s, exc) from exc
        outs = [s[k].copy() if c else s[k] for k, c in zip(self.out_slots, self.copy_out)]
        if not self.once:
            bs.stale = bool(self._escaping)
            pool.append(bs)
        return outs

    def __repr__(self) -> str:
        return f"<Program {len(self.steps)} steps, {self.plan!r}>"


def _alloc(device, nbytes: int):
    with on_device(device):
        return device.xp.empty(nbytes, dtype=np.uint8)


def _step_error(node: Node | None, s: list, exc: Exception) -> Exception:
    if node is None:
        return exc
    where = node.source_line()
    avals = ", ".join(str(e.aval) for e in node.inputs)
    return type(exc)(f"{node.op.name} failed in a compiled graph on inputs [{avals}]: {exc}"
                     + (f" (recorded at {where})" if where else ""))


def compile_program(outputs: list[Entry], inputs=(), *, names: dict | None = None) -> Program:
    """Compile the graph that computes ``outputs`` from the variable nodes ``inputs``.

    Nodes that already hold values (constants, computed nodes) are taken as they are and
    never written. ``names`` (``id(node) -> name``) labels the memory plan's table.
    """
    order = topo_order(list(outputs), stop=lambda n: n.values is not None)
    slot_of: dict[tuple[int, int], int] = {}
    slot_aval: list = []
    for node in order:
        k = 1 if node.op is None or node.values is not None else node.op.num_outputs
        if node.values is not None:
            k = len(node.values)
        for i in range(k):
            slot_of[(id(node), i)] = len(slot_aval)
            slot_aval.append(node.avals[i] if i < len(node.avals) else None)
    n = len(slot_aval)
    input_ids = {id(v): v for v in inputs}
    for node in order:
        if node.op is None and node.values is None and id(node) not in input_ids:
            raise DeferredComputeError(
                f"cannot compute: graph input {node.name!r} ({node.avals[0]}) has no value; "
                "bind it by calling the symbol through la.CachedOp(sym)(...)"
            )
    out_slots = [slot_of[(id(e.node), e.index)] for e in outputs]
    out_set = set(out_slots)

    # What each slot is: external (given), planned by the plan, or unplanned (unknown size).
    template: list = [None] * n
    external = [False] * n
    mode_of_producer = [None] * n
    for node in order:
        if node.values is not None:
            for i, v in enumerate(node.values):
                template[slot_of[(id(node), i)]] = v
                external[slot_of[(id(node), i)]] = True
        elif node.op is None:
            external[slot_of[(id(node), 0)]] = True

    steps_spec = []
    for node in order:
        if node.values is not None or node.op is None:
            continue
        op = node.op
        xp = node.avals[0].device.xp
        ins = tuple(slot_of[(id(e.node), e.index)] for e in node.inputs)
        outs = tuple(slot_of[(id(node), i)] for i in range(op.num_outputs))
        sparse = any(e.aval.stype != "default" for e in node.inputs) or \
            any(a.stype != "default" for a in node.avals)
        planned = all(a.shape is not None and None not in a.shape and a.dtype is not None
                      and a.stype == "default" for a in node.avals)
        if op.num_outputs > 1 or sparse:
            mode = MULTI
        elif planned and honours_out(op, xp):
            mode = OUT
        elif node.avals[0].shape == ():
            mode = FRESH_0D
        else:
            mode = FRESH
        for o in outs:
            mode_of_producer[o] = mode
        if sparse:  # the interpreter knows the storage rules (sparse kernels, dense fallback)
            fn = _interpreted(node)
        else:
            fn = op.bind(xp)
            if mode != OUT and not op.view and _may_alias(node, slot_of, mode_of_producer):
                fn = _unaliasing(fn)
        steps_spec.append((node, mode, fn, ins, outs, planned))

    # The plan: one value per slot.
    values = []
    for slot, a in enumerate(slot_aval):
        if external[slot] or a is None or a.shape is None or None in a.shape or a.stype != "default" \
                or a.dtype is None:
            # Made by a step but not plannable (sparse: its size depends on the data): its kernel
            # allocates it at run time, and the plan lists it as such.
            runtime = "" if external[slot] or a is None else (
                a.stype if a.stype != "default" else "data-dependent shape")
            values.append(Value(0, getattr(a, "device", None), external=True, escapes=slot in out_set,
                                runtime=runtime))
        else:
            values.append(Value(a.nbytes, a.device, escapes=slot in out_set))
    names = names or {}
    psteps = []
    for node, mode, fn, ins, outs, planned in steps_spec:
        if node.op.view and ins and planned:  # an alias: no memory of its own
            src = values[ins[0]]
            values[outs[0]] = Value(0, src.device, external=True, escapes=outs[0] in out_set) \
                if src.external else Value(values[outs[0]].nbytes, src.device, view_of=ins[0],
                                           escapes=outs[0] in out_set)
        pairs = ()
        if mode == OUT:
            oa = node.avals[0]
            pairs = tuple((ip, op_) for ip, op_ in node.op.inplace
                          if ip < len(ins) and mode_of_producer[ins[ip]] == OUT
                          and node.inputs[ip].aval.shape == oa.shape and node.inputs[ip].aval.dtype == oa.dtype)
        psteps.append(Step(ins, outs, pairs, names.get(id(node), node.label())))
    for node in order:
        nm = names.get(id(node), node.label())
        k = len(node.values) if node.values is not None else (1 if node.op is None else node.op.num_outputs)
        for i in range(k):
            sl = slot_of[(id(node), i)]
            values[sl] = Value(values[sl].nbytes, values[sl].device, values[sl].external, values[sl].view_of,
                               values[sl].escapes, nm if k == 1 else f"{nm}.{i}", values[sl].runtime)
    plan = plan_memory(values, psteps, share_out_min_bytes=SHARE_OUT_MIN_BYTES)

    # Pooled buffers: those that some ``out=`` step writes into.
    views_by_buffer: dict[int, list] = {}
    for node, mode, fn, ins, outs, planned in steps_spec:
        if mode == OUT:
            o = outs[0]
            b = plan.buffer_of[o]
            a = node.avals[0]
            views_by_buffer.setdefault(b, []).append((o, a.dtype, a.shape, a.nbytes))
    buffer_specs = {b: (plan.buffer_device[b], plan.buffer_size[b]) for b in views_by_buffer}

    # When to drop temporaries the kernels allocated (pooled slots need no dropping).
    last_read = [-1] * n
    for i, (node, mode, fn, ins, outs, planned) in enumerate(steps_spec):
        for sl in ins:
            last_read[sl] = i
    frees_at: list[list[int]] = [[] for _ in steps_spec]
    for i, (node, mode, fn, ins, outs, planned) in enumerate(steps_spec):
        if mode == OUT:
            continue
        for o in outs:
            if o not in out_set:
                frees_at[max(last_read[o], i)].append(o)
    steps = []
    for i, (node, mode, fn, ins, outs, planned) in enumerate(steps_spec):
        o = outs if mode == MULTI else outs[0]
        if mode == OUT and not node.params and getattr(fn, "nin", None) == len(ins) in (1, 2) \
                and getattr(fn, "nout", None) == 1 and fn not in _NO_POSITIONAL_OUT:
            mode = UFUNC1 if len(ins) == 1 else UFUNC2  # ufunc: ``out`` positionally, nothing else
        a = ins[0] if ins else None
        b = ins[1] if len(ins) > 1 else None
        steps.append((mode, fn, a, b, o, ins, dict(node.params), tuple(frees_at[i]), node))
    # An input nothing reads is bound to a scratch slot at the end.
    in_slots = [slot_of.get((id(v), 0), n) for v in inputs]
    template.append(None)
    # Outputs never alias memory the caller does not own afresh: a graph input, a constant, or a
    # view of one (``y = x.T``) is copied on the way out (a run-time value is already fresh).
    copy_out = [values[k].external and not values[k].runtime for k in out_slots]
    return Program(steps, in_slots, out_slots, copy_out, template, views_by_buffer, buffer_specs,
                   plan.escaping_buffers, plan, order)


def _may_alias(node: Node, slot_of, mode_of_producer) -> bool:
    """A fresh kernel might return an input unchanged (``sum_to`` with nothing to sum); that is
    harmless unless the input lives in a pooled buffer that a later step overwrites."""
    out = node.avals[0]
    for e in node.inputs:
        a = e.aval
        if a.shape == out.shape and a.dtype == out.dtype and \
                mode_of_producer[slot_of[(id(e.node), e.index)]] == OUT:
            return True
    return False


def _unaliasing(fn):
    def run(*args, **kw):
        r = fn(*args, **kw)
        for a in args:
            if r is a:
                return r.copy()
        return r

    return run


def _interpreted(node: Node):
    def run(*args, **kw):
        return run_kernel(node, list(args))

    return run


def evaluate(outputs: list[Entry], keep=None) -> list:
    """Values of ``outputs`` through a compiled, planned program, computing only what is missing.

    Nodes that already hold values are inputs of the program. ``keep(node) -> bool`` says
    which computed nodes store their values (the requested ones always do).

    >>> import lazyarray as la
    >>> with la.deferred():
    ...     y = la.ones((2,)) * 3
    >>> evaluate([y._entry])
    [array([3., 3.], dtype=float32)]
    """
    order = topo_order(list(outputs), stop=lambda n: n.values is not None)
    todo = [n for n in order if n.values is None]
    want = {id(e.node) for e in outputs}
    if len(todo) <= SMALL_GRAPH and all(n.op is not None for n in todo):
        # A few kernels: planning would cost more than it saves; run them in order.
        temp: dict[int, list] = {}
        for node in todo:
            args = [e.node.values[e.index] if e.node.values is not None else temp[id(e.node)][e.index]
                    for e in node.inputs]
            outs = run_kernel(node, args)
            if id(node) in want or (keep is not None and keep(node)):
                node.values = outs
            else:
                temp[id(node)] = outs
        return [e.node.values[e.index] for e in outputs]
    filled = [n for n in todo if n.op is not None and (id(n) in want or (keep is not None and keep(n)))]
    entries = [Entry(n, i) for n in filled for i in range(n.op.num_outputs)]
    prog = compile_program(entries, ())
    prog.once = True
    vals = prog.run([])
    k = 0
    for n in filled:
        n.values = vals[k:k + n.op.num_outputs]
        k += n.op.num_outputs
    return [e.node.values[e.index] for e in outputs]
