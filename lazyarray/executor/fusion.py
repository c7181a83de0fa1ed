"""Elementwise fusion: groups of elementwise ops run as one node, chunk by chunk.

A compiled graph runs one kernel per node, and every elementwise kernel streams its whole
operands through memory: ``0.5 * x * (1 + tanh(c * (x + 0.044715 * x*x*x)))`` on 16M floats
reads and writes 64 MB about ten times. A ``fused`` node runs such a group **chunk by chunk**
along axis 0 instead: each chunk (sized to stay in the L2 cache) goes through every op of the
group in small scratch buffers before the next chunk starts, so memory sees the inputs once and
the output once. Chunks are spread over ``la.set_num_threads(n)`` threads (NumPy ufuncs release
the GIL; see ``threads.py``).

* **The pass** (``fuse``): on a compiled graph (concrete shapes), a group grows from a root
  elementwise node backwards into producers that are fusible elementwise ops of the root's
  shape whose every consumer is already in the group. Operands from outside (arrays that
  broadcast, such as a bias row, scalar constants, inputs) stay inputs of the fused node.
  Groups of ``MIN_GROUP`` (3) or more ops become one ``fused`` node named ``fused[op,op,...]``.
* **The op** (``fused``): a registered op whose ``graph`` parameter (a ``SUBGRAPH``) is the
  group as a symbol, so ``print``, drawings, the JSON format and the memory plan see it like
  any other node; its kernel writes into the planned output buffer (``out=``).

The gradient pass runs on unfused graphs (the registry's gradients); the forward and the
backward program are fused separately afterwards. ``la.CachedOp(sym, fuse=False)`` or
``LAZYARRAY_FUSE=0`` turns fusion off.
"""
from __future__ import annotations

import threading

import numpy as np

from ..graph.node import Entry, Node, var_node
from ..graph.passes.gradient import gradient
from ..graph.symbol import Symbol
from ..graph.traverse import topo_order
from ..ops.params import Param
from ..ops.registry import OpDef, register
from ..threads import chunked
from ..tuning_table import current
from . import fusion_gpu
from .call import SUBGRAPH, SubGraph
from .fusion_gpu import gpu_form

# Per operand and chunk. Measured (GELU, 16M float32, 2 cores): 128 KB chunks 31 ms on 1 thread and
# 34 ms on 2; 2 MB chunks 22 ms and 12 ms: the per-chunk Python overhead outweighs the cache misses.
CHUNK_BYTES = 2 << 20
# Smaller groups run as they are: a fused pair saved nothing measurable against its per-chunk
# Python overhead (benchmarks/mlp_step.py, hybridized step: 1.12x NumPy fused vs 1.04x unfused)
MIN_GROUP = 3
# NumPy 2.4 deprecates a positional ``out`` for these two (a third input is ambiguous there).
_NO_POSITIONAL_OUT = frozenset({np.maximum, np.minimum})


def fusion_enabled(flag: bool | None) -> bool:
    """``fuse=None`` means the tuning table's ``fuse`` (``LAZYARRAY_FUSE=0`` turns it off)."""
    if flag is not None:
        return bool(flag)
    return current().fuse


# -- the pass --------------------------------------------------------------------------------------
def fusible(node: Node) -> bool:
    """A dense elementwise op with one output whose kernel can join a group: on the CPU one that
    writes into a buffer, on a GPU one with an exact C form (``fusion_gpu.C_FORMS``)."""
    op = node.op
    if op is None or not op.elementwise or len(node.avals) != 1 or op.random or op.compose is not None:
        return False
    a = node.avals[0]
    if not (a.stype == "default" and a.shape is not None and None not in a.shape and a.device is not None
            and a.dtype is not None and a.dtype.kind in "biuf"
            and all(e.aval.stype == "default" for e in node.inputs)):
        return False
    if a.device.kind == "gpu":
        return gpu_form(node)
    return a.device.kind == "cpu" and (op.np_ufunc is not None or op.writes_out)


def fuse(outputs: list[Entry]) -> list[Entry]:
    """The graph of ``outputs`` with fusible elementwise groups replaced by ``fused`` nodes.

    Variable and constant nodes are kept as they are (so a program's inputs still match).
    """
    order = topo_order(list(outputs))
    consumers: dict[int, int] = {}
    for node in order:
        for e in node.inputs:
            consumers[id(e.node)] = consumers.get(id(e.node), 0) + 1
    for e in outputs:  # a graph output is consumed outside any group
        consumers[id(e.node)] = consumers.get(id(e.node), 0) + 1
    group_of: dict[int, list[Node]] = {}
    taken: set[int] = set()
    for root in reversed(order):  # roots first: each group grows from its last node
        if id(root) in taken or not fusible(root):
            continue
        members = _grow(root, consumers, taken)
        if len(members) >= MIN_GROUP:
            group_of[id(root)] = members
            taken.update(id(n) for n in members)
    if not group_of:
        return list(outputs)
    env: dict[int, Node] = {}

    def entry(e: Entry) -> Entry:
        n = env.get(id(e.node))
        return e if n is None else Entry(n, e.index)

    for node in order:
        if node.op is None:
            continue
        if id(node) in group_of:
            env[id(node)] = _fused_node(group_of[id(node)], entry)
        elif id(node) not in taken and any(id(e.node) in env for e in node.inputs):
            env[id(node)] = Node(node.op, tuple(entry(e) for e in node.inputs), dict(node.params), node.avals,
                                 name=node.name, source=node.source, block=node.block)
    return [entry(e) for e in outputs]


def _grow(root: Node, consumers: dict, taken: set) -> list[Node]:
    """The group rooted at ``root``: producers pulled in while all their consumers are members."""
    shape = root.avals[0].shape
    members = {id(root): root}
    uses: dict[int, int] = {}
    stack = [root]
    while stack:
        node = stack.pop()
        for e in node.inputs:
            p = e.node
            if id(p) in members or id(p) in taken or not fusible(p) or p.avals[0].shape != shape:
                continue
            uses[id(p)] = uses.get(id(p), 0) + 1
            if uses[id(p)] == consumers[id(p)]:  # every consumer is in the group now
                members[id(p)] = p
                stack.append(p)
    # A producer counted before all its uses were seen is still out; keep members in graph order.
    return [n for n in topo_order([Entry(root, 0)], stop=lambda n: id(n) not in members) if id(n) in members]


def _fused_node(members: list[Node], entry) -> Node:
    """One ``fused`` node for ``members`` (in order; the last is the root)."""
    inside = {id(n) for n in members}
    outer: list[Entry] = []
    var_of: dict[tuple[int, int], Node] = {}
    local: dict[int, Node] = {}
    for n in members:
        ins = []
        for e in n.inputs:
            if id(e.node) in inside:
                ins.append(Entry(local[id(e.node)], e.index))
                continue
            key = (id(e.node), e.index)
            if key not in var_of:
                var_of[key] = var_node(f"in{len(outer)}", e.aval)
                outer.append(entry(e))
            ins.append(Entry(var_of[key]))
        local[id(n)] = Node(n.op, tuple(ins), dict(n.params), n.avals, source=n.source, block=n.block)
    root = members[-1]
    sub = SubGraph(Symbol([Entry(local[id(root)], 0)]), [v.name for v in var_of.values()])
    params = FUSED.make_params({"graph": sub})
    name = "fused[" + ",".join(n.op.name for n in members) + "]"
    return Node(FUSED, tuple(outer), params, root.avals, name=name, source=root.source, block=root.block)


# -- the kernel ------------------------------------------------------------------------------------
class _Steps:
    """A fused group as flat steps over slots: ``(fn, input slots, output slot, (dtype, params))``.

    Intermediates live in a few scratch *registers* (one chunk each), assigned by liveness: a
    register is free again after the last step that reads it, so a chain of ten ops needs two.
    """

    def __init__(self, sub: SubGraph):
        order = [n for n in sub.sym.topo() if n.op is not None]  # (the group's operands are inputs)
        slot = {id(n): i for i, n in enumerate(sub.inputs)}
        self.n_in = len(sub.inputs)
        root = sub.sym.outputs[0].node
        last_use: dict[int, int] = {}
        for k, n in enumerate(order):
            for e in n.inputs:
                last_use[id(e.node)] = k
        free: dict = {}  # dtype -> free register numbers
        self.registers: list = []  # dtype of each register
        reg_of: dict[int, int] = {}
        self.steps = []
        self.whole: list = []  # the steps for ``_run_whole``
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
            ins = tuple(slot[id(e.node)] for e in n.inputs)
            self.steps.append((fn, ins, slot[id(n)], reg, dict(n.params)))
            # the whole-array loop's form: a ufunc of 1 or 2 inputs takes ``out`` positionally
            positional = not n.params and getattr(fn, "nout", 0) == 1 and getattr(fn, "nin", 0) == len(ins) \
                and len(ins) in (1, 2) and fn not in _NO_POSITIONAL_OUT
            self.whole.append((fn, ins[0] if ins else 0, ins[1] if len(ins) > 1 else 0, slot[id(n)], reg,
                               len(ins) if positional else 0, ins, dict(n.params)))
        self.n_slots = len(slot)

    def scratch(self, chunk_shape) -> list:
        """Registers for chunks of ``chunk_shape``: views of this thread's pooled buffers."""
        return _registers(self.registers, chunk_shape)


_POOL = threading.local()  # per worker thread: raw buffers every fused kernel's registers borrow


def _registers(dtypes: list, chunk_shape) -> list:
    """One array of ``chunk_shape`` per dtype in ``dtypes``, from this thread's pool when they are
    chunk-sized (the pool holds as many buffers as the largest group needs: a few chunks per
    thread, shared by every fused kernel), fresh otherwise (an unchunked huge row)."""
    n = 1
    for d in chunk_shape:
        n *= d
    sizes = [n * d.itemsize for d in dtypes]
    if not sizes or max(sizes) > 2 * CHUNK_BYTES:
        return [np.empty(chunk_shape, d) for d in dtypes]
    pool = getattr(_POOL, "raw", None)
    if pool is None:
        pool = _POOL.raw = []
    while len(pool) < len(dtypes):
        pool.append(np.empty(0, np.uint8))
    out = []
    for k, (d, nb) in enumerate(zip(dtypes, sizes)):
        if pool[k].nbytes < nb:
            pool[k] = np.empty(2 * CHUNK_BYTES, np.uint8)
        out.append(pool[k][:nb].view(d).reshape(chunk_shape))
    return out


def _steps_of(sub: SubGraph) -> _Steps:
    s = getattr(sub, "_fused_steps", None)
    if s is None:
        s = sub._fused_steps = _Steps(sub)
    return s


def _run_whole(steps: _Steps, args, out) -> None:
    """The group over whole arrays (an output that fits one chunk): no slicing per op, ufuncs
    called with ``out`` positionally (the fixed cost per op is what small arrays pay)."""
    regs = steps.scratch(out.shape)
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


def _run_chunks(steps: _Steps, args, bounds, out, rows_total, per):
    regs = steps.scratch((min(per, rows_total),) + out.shape[1:])
    cut = [a.ndim == out.ndim and a.shape[0] == rows_total and rows_total > 1 for a in args]
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


def _kernel(xp, *arrays, graph, out=None):
    if xp is not np:  # a GPU group: one CUDA kernel (fusion_gpu.py)
        return fusion_gpu.run(xp, graph, arrays, out)
    steps = _steps_of(graph)
    shape, dtype = graph.avals[0].shape, graph.avals[0].dtype
    if out is None:
        out = np.empty(shape, dtype)
    if not shape:
        _run_whole(steps, [np.asarray(a).reshape(1) for a in arrays], out.reshape(1))
        return out
    args = [a if a.ndim == len(shape) else a.reshape((1,) * (len(shape) - a.ndim) + a.shape)
            for a in (np.asarray(a) for a in arrays)]
    rows = shape[0]
    row_bytes = max(1, out.nbytes // max(rows, 1))
    per = max(1, CHUNK_BYTES // row_bytes)
    if per >= rows:  # one chunk
        _run_whole(steps, args, out)
        return out
    chunked(rows, per, out.nbytes, lambda bounds: _run_chunks(steps, args, bounds, out, rows, per))
    return out


def _grad(F, ins, out, g, graph):
    """The group inlined on the inputs (unfused ops), then differentiated by the gradient pass."""

    env = {id(v): e for v, e in zip(graph.inputs, ins)}
    for n in graph.sym.topo():
        if n.op is not None:
            env[id(n)] = getattr(F, n.op.name)(*[env[id(e.node)] for e in n.inputs], **n.params)
    return gradient([env[id(graph.sym.outputs[0].node)]], [g], list(ins))


def _rule(field):
    def rule(values, graph, **_):
        return getattr(graph.avals[0], field)

    return rule


FUSED = register(OpDef(
    "fused", ("*args",), _kernel, params=(Param("graph", SUBGRAPH),),
    shape=_rule("shape"), dtype=_rule("dtype"),
    device=lambda avals, graph, **_: graph.avals[0].device,
    writes_out=True, grad=_grad,
    # the output may take the buffer of an operand that dies here (the planner checks the size):
    # each chunk of an operand is read before the same chunk of the output is written
    inplace=tuple((i, 0) for i in range(64)),
    doc="a group of elementwise ops (its `graph`) run as one kernel, chunk by chunk along axis 0 "
        "(made by the fusion pass of a compiled graph)"))
