"""``fused[chunked]``: a fused elementwise group (``executor/fusion.py``) run op by op with
NumPy's ufuncs, chunk by chunk.

Each chunk of the output (sized to stay in the L2 cache, ``CHUNK_BYTES`` per operand) goes
through every op of the group in small scratch buffers before the next chunk starts, so memory
sees the inputs once and the output once; chunks are spread over ``la.set_num_threads(n)``
threads (NumPy ufuncs release the GIL; see ``threads.py``). An output that fits one chunk runs
over whole arrays (``run_whole``): no slicing per op, ufuncs called with ``out`` positionally,
since on small arrays the fixed cost per op is all there is. This is the path without numba, the
path of a group's first calls (``kernels/fused.py``'s tiers), and that of groups the compiled
kernel does not take (other dtypes, ops without an exact compiled form).

A group may end in a reduction over the last axis (``REDUCTIONS``; ``executor/fusion.py``'s
``ends_group``): its elementwise part then runs at the shape of the value reduced (``Steps.grid``)
into a scratch register, block of rows by block of rows, and each block is reduced into its rows of
the output. NumPy reduces each row of a C-ordered block on its own (the pairwise sum of one row's
values), so a block's sums are the whole array's bit for bit, in float32 as in float64.
"""
from __future__ import annotations

import threading
from types import MappingProxyType

import numpy as np

from ..caches import NamedCache
from ..threads import chunked

# Per operand and chunk. Measured (GELU, 16M float32, 2 cores): 128 KB chunks 31 ms on 1 thread and
# 34 ms on 2; 2 MB chunks 22 ms and 12 ms: the per-chunk Python overhead outweighs the cache misses.
CHUNK_BYTES = 2 << 20
# Calls of a group over whole arrays that run its steps in a loop; the next writes them out as one
# function (``run_whole``). Measured (200-op group, 4x4 float32, loaded 2-core machine): writing costs
# about 25 us per op once (Python's compiler), the written function saves about 0.5 us per op and call:
# it pays for itself after about 50 calls; a group that ran this many times is taken to be a hot one.
WRITE_AFTER = 32
# The reductions a group may end in, each called as the unfused op calls it (``ops/reduce.py``:
# ``np.sum`` is ``np.add.reduce``; ``np.mean`` divides the sum by the count in float64 and rounds,
# so it is called itself), with ``axis=-1, keepdims=...`` and the block of the output as ``out``.
REDUCTIONS = MappingProxyType({"sum": np.add.reduce, "mean": np.mean, "max": np.maximum.reduce,
                               "min": np.minimum.reduce})
# NumPy 2.4 deprecates a positional ``out`` for these two (a third input is ambiguous there).
_NO_POSITIONAL_OUT = frozenset({np.maximum, np.minimum})


class Steps:
    """A fused group as flat steps over slots: ``(fn, input slots, output slot, (dtype, params))``.

    Intermediates live in a few scratch *registers* (one chunk each), assigned by liveness: a
    register is free again after the last step that reads it, so a chain of ten ops needs two.
    ``ends``: the reduction the group ends in (a ``REDUCTIONS`` name) or None; ``grid``: the shape
    its elementwise part runs at (the reduced value's; the output's when it ends in none).
    """

    def __init__(self, sub):
        order = [n for n in sub.sym.topo() if n.op is not None]  # (the group's operands are inputs)
        slot = {id(n): i for i, n in enumerate(sub.inputs)}
        self.n_in = len(sub.inputs)
        root = sub.sym.outputs[0].node
        self.ends = root.op.name if root.op.name in REDUCTIONS and not root.op.elementwise else None
        self.grid = root.inputs[0].aval.shape if self.ends else root.avals[0].shape
        size = 1
        for d in self.grid:
            size *= d
        # bytes of one row (along axis 0) of the values the group runs over
        self.row_bytes = max(1, size * root.avals[0].dtype.itemsize // max(self.grid[0], 1)) if self.grid else 1
        last_use: dict[int, int] = {}
        for k, n in enumerate(order):
            for e in n.inputs:
                last_use[id(e.node)] = k
        free: dict = {}  # dtype -> free register numbers
        self.registers: list = []  # dtype of each register
        reg_of: dict[int, int] = {}
        self.steps = []
        self.whole: list = []  # the steps for ``run_whole``
        for k, n in enumerate(order):
            for e in n.inputs:  # inputs read for the last time here free their register first
                r = reg_of.get(id(e.node))
                if r is not None and last_use[id(e.node)] == k and r not in free.get(self.registers[r], ()):
                    free.setdefault(self.registers[r], []).append(r)
            dtype = n.avals[0].dtype
            if n is root:
                reg = -1  # the output chunk itself
            elif free.get(dtype):
                reg = free[dtype].pop()
            else:
                reg = len(self.registers)
                self.registers.append(dtype)
            reg_of[id(n)] = reg
            slot[id(n)] = len(slot)
            fn = n.op.np_ufunc if n.op.np_ufunc is not None else n.op.bind(np)
            params = dict(n.params)
            if n is root and self.ends:
                fn, params = REDUCTIONS[self.ends], {"axis": -1, "keepdims": bool(params.get("keepdims"))}
            ins = tuple(slot[id(e.node)] for e in n.inputs)
            self.steps.append((fn, ins, slot[id(n)], reg, params))
            # the whole-array loop's form: a ufunc of 1 or 2 inputs takes ``out`` positionally
            positional = not params and getattr(fn, "nout", 0) == 1 and getattr(fn, "nin", 0) == len(ins) \
                and len(ins) in (1, 2) and fn not in _NO_POSITIONAL_OUT
            self.whole.append((fn, ins[0] if ins else 0, ins[1] if len(ins) > 1 else 0, slot[id(n)], reg,
                               len(ins) if positional else 0, ins, params))
        self.n_slots = len(slot)
        self.calls = 0  # calls over whole arrays so far (``run_whole``)
        self.written = None  # the steps written out as one function, once ``WRITE_AFTER`` calls ran

    def scratch(self, chunk_shape) -> list:
        """Registers for chunks of ``chunk_shape``: views of this thread's pooled buffers."""
        return scratch_registers(self.registers, chunk_shape)


# per thread (by its id): the raw buffers every fused kernel's registers borrow; a named cache (bounded,
# ``clear()``) rather than a thread-local, so it is counted and can be emptied (a thread id that is
# used again finds buffers it may reuse: no two live threads share an id)
POOL = NamedCache("fused kernel scratch per thread", size=64)


class _Scratch:
    """A thread's raw buffers (``bufs``) and the register views made of them, by dtypes and chunk
    shape (``views``: a hot group's call finds its views instead of slicing per register; dropped
    when a buffer is replaced by a larger one, and when ``VIEWS_KEPT`` shapes are held)."""

    __slots__ = ("bufs", "views")

    def __init__(self):
        self.bufs: list = []
        self.views: dict = {}


VIEWS_KEPT = 64


def scratch_registers(dtypes, chunk_shape) -> list:
    """One array of ``chunk_shape`` per dtype in ``dtypes``, from this thread's pool when they are
    chunk-sized (the pool holds as many buffers as the largest group needs: a few chunks per
    thread, shared by every fused kernel), fresh otherwise (an unchunked huge row)."""
    key = threading.get_ident()
    pool = POOL.get(key)
    if pool is None:
        pool = _Scratch()
        POOL.put(key, pool)
    vkey = (tuple(dtypes), tuple(chunk_shape))
    got = pool.views.get(vkey)
    if got is not None:
        return got
    n = 1
    for d in chunk_shape:
        n *= d
    sizes = [n * d.itemsize for d in dtypes]
    if not sizes or max(sizes) > 2 * CHUNK_BYTES:
        return [np.empty(chunk_shape, d) for d in dtypes]
    bufs = pool.bufs
    while len(bufs) < len(dtypes):
        bufs.append(np.empty(0, np.uint8))
    out = []
    for k, (d, nb) in enumerate(zip(dtypes, sizes)):
        if bufs[k].nbytes < nb:
            bufs[k] = _aligned(2 * CHUNK_BYTES)
            pool.views.clear()  # (views of the old buffer would hold it alive)
        out.append(bufs[k][:nb].view(d).reshape(chunk_shape))
    if len(pool.views) >= VIEWS_KEPT:
        pool.views.clear()
    pool.views[vkey] = out
    return out


def _aligned(nbytes: int):
    """``nbytes`` of memory starting on a cache line (NumPy's large arrays start 16 bytes into a
    page: SIMD stores then straddle lines; measured 9.0 against 13.3 us for a (64, 768) float32
    multiply into such a buffer, loaded 2-core machine)."""
    raw = np.empty(nbytes + 64, np.uint8)
    at = -raw.ctypes.data % 64
    return raw[at:at + nbytes]


def steps_of(sub) -> Steps:
    s = getattr(sub, "_fused_steps", None)
    if s is None:
        s = sub._fused_steps = Steps(sub)
    return s


def run_whole(steps: Steps, args, out) -> None:
    """The group over whole arrays (an output that fits one chunk): no slicing per op, ufuncs
    called with ``out`` positionally (the fixed cost per op is what small arrays pay). Its first
    ``WRITE_AFTER - 1`` calls run the steps in a loop; then they are written out once as one
    straight-line function (``_written``), which skips the loop's unpacking and branching per op."""
    fn = steps.written
    if fn is None:
        steps.calls += 1
        if steps.calls < WRITE_AFTER:
            _run_loop(steps, args, out)
            return
        fn = steps.written = _written(steps)
    fn(*args, out, steps.scratch(steps.grid if steps.ends else out.shape))


def _run_loop(steps: Steps, args, out) -> None:
    regs = steps.scratch(steps.grid if steps.ends else out.shape)
    s = list(args) + [None] * (steps.n_slots - len(args))
    for fn, a, b, o, reg, form, ins, params in steps.whole:
        buf = out if reg < 0 else regs[reg]
        if form == 2:
            fn(s[a], s[b], buf)
        elif form == 1:
            fn(s[a], buf)
        else:
            fn(*[s[i] for i in ins], out=buf, **params)
        s[o] = buf


def _written(steps: Steps):
    """``steps.whole`` as the source of one function ``(in0, ..., out, registers)`` (one line per
    op, each value a local name), compiled. The source holds generated names only; the ops and
    their params are bound as globals of its namespace."""
    scope: dict = {}
    var = {i: f"a{i}" for i in range(steps.n_in)}
    regs = "".join(f"r{k}, " for k in range(len(steps.registers)))
    lines = [f"def run({''.join(v + ', ' for v in var.values())}out, regs):", f"    {regs}= regs" if regs else ""]
    for k, (fn, _a, _b, o, reg, form, ins, params) in enumerate(steps.whole):
        scope[f"f{k}"] = fn
        buf = "out" if reg < 0 else f"r{reg}"
        operands = "".join(var[i] + ", " for i in ins)
        if form:
            lines.append(f"    f{k}({operands}{buf})")
        else:
            scope[f"p{k}"] = params
            lines.append(f"    f{k}({operands}out={buf}" + (f", **p{k})" if params else ")"))
        var[o] = buf
    exec(compile("\n".join(lines) + "\n", "<lazyarray fused group>", "exec"), scope)  # noqa: S102  (written above)
    return scope["run"]


def _run_chunks(steps: Steps, args, bounds, out, rows_total, per):
    grid = steps.grid
    regs = steps.scratch((min(per, rows_total),) + tuple(grid[1:]))
    cut = [a.ndim == len(grid) and a.shape[0] == rows_total and rows_total > 1 for a in args]
    slots = [None] * steps.n_slots
    for lo, hi in bounds:
        # operands spanning the output's axis 0 are cut to the chunk; broadcast ones are used whole
        for i, a in enumerate(args):
            slots[i] = a[lo:hi] if cut[i] else a
        target = out[lo:hi]
        m = hi - lo
        for fn, ins, o, reg, params in steps.steps:
            buf = target if reg < 0 else regs[reg][:m]
            if params:
                fn(*[slots[i] for i in ins], out=buf, **params)
            else:
                fn(*[slots[i] for i in ins], out=buf)
            slots[o] = buf


def run_chunked(xp, *arrays, graph, out=None):
    """The group ``graph`` (a fused node's ``SubGraph``) on NumPy arrays, into ``out`` (or a new
    array): chunk by chunk along axis 0 over ``la.set_num_threads`` threads, or over whole arrays
    when the output fits one chunk (for a group ending in a reduction: chunks and sizes of the
    value it reduces, ``steps.grid``)."""
    steps = steps_of(graph)
    if out is None:
        out = np.empty(graph.avals[0].shape, graph.avals[0].dtype)
    grid = steps.grid
    if not grid:
        run_whole(steps, [np.asarray(a).reshape(1) for a in arrays], out.reshape(1))
        return out
    rows = grid[0]
    per = max(1, CHUNK_BYTES // steps.row_bytes)
    if per >= rows:  # one chunk: the operands as the unfused ops take them (the ufuncs broadcast)
        run_whole(steps, arrays, out)
        return out
    nd = len(grid)
    args = [a if a.__class__ is np.ndarray and a.ndim == nd else _lifted(a, nd) for a in arrays]
    nbytes = steps.row_bytes * rows
    # A block's reduction is written before the next blocks are read: an output taking the memory
    # of an operand (the planner's in-place pairs) that is not cut row by row with it would be
    # read after it is written, so such a group reduces into a copy.
    target = out if not steps.ends or not any(np.may_share_memory(a, out) for a in args) else np.empty_like(out)
    chunked(rows, per, nbytes, lambda bounds: _run_chunks(steps, args, bounds, target, rows, per))
    if target is not out:
        out[...] = target
    return out


def _lifted(a, nd: int):
    """``a`` as a NumPy array of ``nd`` dims (leading 1s)."""
    a = np.asarray(a)
    return a if a.ndim == nd else a.reshape((1,) * (nd - a.ndim) + a.shape)

