"""Elementwise fusion: groups of elementwise ops run as one node.

A compiled graph runs one kernel per node, and every elementwise kernel streams its whole
operands through memory: ``0.5 * x * (1 + tanh(c * (x + 0.044715 * x*x*x)))`` on 16M floats
reads and writes 64 MB about ten times, and on small arrays each kernel call is mostly fixed
cost. A ``fused`` node runs such a group as one kernel instead, chosen in the kernels layer
(``kernels/fused.py``): ``fused[numba]``, one compiled loop over tiles of the output with every
intermediate in a register, ``fused[mixed]``, runs of exact ops compiled and the other ops
(exp, tanh, ...) NumPy's, or ``fused[chunked]``, NumPy's ufuncs op by op over cache-sized
chunks spread over ``la.set_num_threads(n)`` threads. On a GPU a group is one CUDA kernel
(``fusion_gpu.py``).

* **The pass** (``fuse``): on a compiled graph (concrete shapes), a group grows from a root
  elementwise node backwards into producers that are fusible elementwise ops of the root's
  shape whose every consumer is already in the group. Operands from outside (arrays that
  broadcast, such as a bias row, scalar constants, inputs) stay inputs of the fused node.
  Groups of ``MIN_GROUP`` (3) or more ops become one ``fused`` node named ``fused[op,op,...]``.
* **Groups that end in a reduction**: a ``sum``, ``mean``, ``max`` or ``min`` over the last axis
  (keepdims or not; float32/float64, at least 2-D, ``ends_group``) is a root too: its group grows
  from its input, at the input's shape, and the reduction is the group's last op (counted in
  ``MIN_GROUP``), so ``sum((x - m) ** 2, axis=-1)`` never writes its full-size intermediate. The
  elementwise result it reduces has no other consumer (``_grow``'s rule). The kernel reduces each
  block of rows as the unfused op reduces the whole (``kernels/fused_chunked.py``).
* **The op** (``fused``): a registered op whose ``graph`` parameter (a ``SUBGRAPH``) is the
  group as a symbol, so ``print``, drawings, the JSON format and the memory plan see it like
  any other node; its kernel writes into the planned output buffer (``out=``).

The gradient pass runs on unfused graphs (the registry's gradients); the forward and the
backward program are fused separately afterwards. ``la.CachedOp(sym, fuse=False)`` or
``LAZYARRAY_FUSE=0`` turns fusion off.
"""
from __future__ import annotations

import numpy as np

from ..graph.node import Entry, Node, var_node
from ..graph.passes.gradient import gradient
from ..graph.symbol import Symbol
from ..graph.traverse import topo_order
from ..kernels.fused import REDUCTIONS, run_fused
from ..ops.params import Param
from ..ops.reduce import reduce_axes
from ..ops.registry import OpDef, register
from ..tuning_table import current
from . import fusion_gpu
from .call import SUBGRAPH, SubGraph
from .fusion_gpu import gpu_form

# Smaller groups run as they are: a fused pair saved nothing measurable against its per-chunk
# Python overhead (benchmarks/mlp_step.py, hybridized step: 1.12x NumPy fused vs 1.04x unfused)
MIN_GROUP = 3


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


def ends_group(node: Node) -> bool:
    """A reduction that may end a CPU group (``REDUCTIONS``: sum, mean, max, min) over the last
    axis of a dense float32/float64 value of 2 or more concrete dims, keeping its dtype, whose
    input is a fusible op's output. Not max/min over an empty axis (the unfused op's error stays)."""
    op = node.op
    if op is None or op.name not in REDUCTIONS or len(node.inputs) != 1 or len(node.avals) != 1:
        return False
    e = node.inputs[0]
    x, a = e.aval, node.avals[0]
    if not (x.stype == "default" and a.stype == "default" and x.shape is not None and None not in x.shape
            and len(x.shape) >= 2 and x.device is not None and x.device.kind == "cpu"
            and x.dtype in _REDUCED_DTYPES and a.dtype == x.dtype):
        return False
    if reduce_axes(node.params.get("axis"), len(x.shape), op.name) != (len(x.shape) - 1,):
        return False
    if op.name in ("max", "min") and x.shape[-1] == 0:
        return False
    return e.index == 0 and fusible(e.node)


_REDUCED_DTYPES = (np.dtype("float32"), np.dtype("float64"))


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
        if id(root) in taken:
            continue
        if fusible(root):
            members = _grow(root, root.avals[0].shape, consumers, taken)
        elif ends_group(root):  # (the group's ops run at the shape of the value it reduces)
            members = _grow(root, root.inputs[0].aval.shape, consumers, taken)
        else:
            continue
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


def _grow(root: Node, shape, consumers: dict, taken: set) -> list[Node]:
    """The group rooted at ``root``: producers of ``shape`` pulled in while all their consumers
    are members."""
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
    # A producer counted before all its uses were seen is still out; keep members in graph order
    # (members are op nodes, which graph order lists by creation: by serial, no second walk needed).
    return sorted(members.values(), key=_serial)


def _serial(node: Node) -> int:
    return node.serial


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
def _kernel(xp, *arrays, graph, out=None):
    if xp is not np:  # a GPU group: one CUDA kernel (fusion_gpu.py)
        return fusion_gpu.run(xp, graph, arrays, out)
    return run_fused(xp, *arrays, graph=graph, out=out)  # (kernels/fused.py chooses how)


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
    # each chunk of an operand is read before the same chunk of the output is written (a group
    # ending in a reduction whose output shares an operand's memory reduces into a copy when
    # chunked: kernels/fused_chunked.run_chunked)
    inplace=tuple((i, 0) for i in range(64)),
    doc="a group of elementwise ops (its `graph`), maybe ending in a reduction over the last axis, run "
        "as one kernel, chunk by chunk along axis 0 (made by the fusion pass of a compiled graph)"))
