"""Compiled backward programs reused across training steps with the same tape structure.

A Gluon-style step records the same ops every iteration (a hybridized block's ``call`` node,
the loss's eager ops), then ``backward()``. Building the gradient graph and compiling its
program every step costs milliseconds (the gradient pass, ``compile_program`` and the memory
planner per step). Here a tape is first described by its **structure**: per record its op,
params, input avals and how its inputs connect (to which record's output, which leaf, or a
constant), the leaves' avals and the head gradients' avals. Tapes of equal structure share one
compiled program, built once from a template copy of the tape in which

* every record's outputs that the backward reads are program inputs (the saved values),
* every constant a record read (a label array, a scalar) is a program input,
* every leaf is a program input,
* every head gradient is a program input,

so a step only gathers the current values, checks their buffer versions (as the uncached path
does) and runs the program. Values are never part of the key: two steps with different data
and the same structure are one entry; anything that changes the structure (a shape, a dtype,
an op, a param, a connection) is another. Tapes holding sparse values or inputs no record
tracks take the general path. The cache is LRU-bounded (``LAZYARRAY_CACHE_SIZE``).
"""
from __future__ import annotations

import threading
from collections import OrderedDict

from .buffer import version
from .executor.program import Program, compile_program
from .executor.signature_cache import default_size
from .graph.build import apply_node
from .graph.node import Entry, Node, var_node
from .graph.passes.gradient import gradient
from .graph.rewrite import copy_node, gc_paused
from .graph.traverse import topo_order
from .ops import registry
from .tape import Leaf, captured_input_written, saved_value_written

_CACHE: OrderedDict = OrderedDict()
# (key, compiled) of the last hit: a training loop asks for the same structure every step, and
# comparing with it walks the key mostly by identity, where a dict lookup hashes all of it first
_LAST: list = [None, None]
_LOCK = threading.Lock()


class Compiled:
    """A backward program and how to feed it: ``reads`` lists, per program input, where its
    value comes from: ``("saved", record, output)``, ``("const", k)``, ``("leaf", j)`` or
    ``("head", i)``; the program's outputs are the leaves' gradients in tape order."""

    __slots__ = ("program", "reads")

    def __init__(self, program: Program, reads: list):
        self.program = program
        self.reads = reads


def structure(records: list, leaves: list, outputs: list, heads: list):
    """``(key, consts)``: the hashable structure of a tape and the constant nodes its records read
    (in key order), or ``(None, None)`` when the tape must take the general path.

    ``records``: the tape, parents before the records that read them (``autograd._tape``'s order);
    ``leaves``: ``[(leaf, entries)]``.
    """
    rec_ix = {id(r): k for k, r in enumerate(records)}
    leaf_tag = {}  # id(leaf) -> its input tag ("l", j)
    leaf_avals = []
    tags = _leaf_tags(len(leaves))
    for j, (leaf, entries) in enumerate(leaves):
        if len(entries) != 1 or leaf.stype != "default" or leaf.entry.node.avals[0].stype != "default":
            return None, None  # (a leaf written between two uses in one tape stands for two values)
        leaf_tag[id(leaf)] = tags[j]
        for e in entries.values():
            leaf_avals.append(e.node.avals[e.index])
    consts: list[Node] = []
    parts = []
    for r in records:
        node = r.node
        ins = []
        for e, p in zip(node.inputs, r.parents):
            src = e.node
            a = src.avals[e.index]
            if a.stype != "default":
                return None, None
            if p is None:
                if src.kind != "const":  # an untracked op output (lazy): not ours to cache
                    return None, None
                consts.append(src)
                ins.append(("c", a))
            elif p.__class__ is Leaf:
                ins.append(leaf_tag[id(p)])
            else:
                ins.append(("r", rec_ix[id(p)], e.index))
        # (params that are not plain data make the key unhashable: ``lookup`` finds nothing and
        # ``cacheable`` says no, so that tape takes the general path; nothing is hashed per step)
        parts.append((node.op, tuple(node.params.items()), tuple(ins), node.avals))
    outs = tuple(("r", rec_ix[id(o._ag)], o._entry.index) if id(o._ag) in rec_ix else leaf_tag[id(o._ag)]
                 for o in outputs)
    head_avals = tuple([None if h is None else h.aval for h in heads])
    return (tuple(parts), outs, head_avals, tuple(leaf_avals)), consts


_TAGS: list = []


def _leaf_tags(n: int) -> list:
    """``[("l", 0), ("l", 1), ...]`` (at least ``n``), made once: the keys of successive steps then
    share these tuples, and comparing a key with the last one meets them by identity."""
    while len(_TAGS) < n:
        _TAGS.append(("l", len(_TAGS)))
    return _TAGS


def lookup(key) -> Compiled | None:
    """The program compiled for ``key``, or None (a key never seen, or one that is not hashable)."""
    last_key, last = _LAST
    if last is not None and key == last_key:
        return last
    try:
        c = _CACHE.get(key)
    except TypeError:  # a param that is not plain data
        return None
    if c is not None:
        _CACHE.move_to_end(key)
        _LAST[:] = [key, c]
    return c


def cacheable(key) -> bool:
    """False when ``key`` holds a param that is not plain data (unhashable): no program is kept for it."""
    try:
        hash(key)
    except TypeError:
        return False
    return True


def build(key, records: list, leaves: list, heads: list) -> Compiled:
    """Compile the backward program of a tape of this structure (see the module docstring), with the
    cyclic GC paused as for any compile (``gc_paused``: the many nodes and steps made here form no
    cycle to collect)."""
    with gc_paused():
        return _build(key, records)


def _build(key, records: list) -> Compiled:
    parts, outs_key, head_avals, leaf_avals = key
    leaf_vars = [var_node(f"__leaf{j}", a) for j, a in enumerate(leaf_avals)]
    template, const_vars = _forward_graph(parts, records, leaf_vars)
    out_entries = [Entry(template[o[1]], o[2]) if o[0] == "r" else Entry(leaf_vars[o[1]]) for o in outs_key]
    head_vars = [None if a is None else var_node(f"__head{i}", a) for i, a in enumerate(head_avals)]
    grads = gradient(out_entries, [None if v is None else Entry(v) for v in head_vars],
                     [Entry(v) for v in leaf_vars])
    grads = [g if g is not None else apply_node(registry.get("zeros_like"), Entry(v))
             for g, v in zip(grads, leaf_vars)]
    outs, saved, reads = _cut_forward(grads, template)
    used = {id(n) for n in topo_order(outs)}  # only what the backward reads is fed (and version-checked)
    inputs = list(saved)
    for what, nodes in (("const", const_vars), ("leaf", leaf_vars), ("head", head_vars)):
        for k, v in enumerate(nodes):
            if v is not None and id(v) in used:
                inputs.append(v)
                reads.append((what, k, None))
    compiled = Compiled(compile_program(outs, inputs, input_orders=_saved_orders(reads, template)), reads)
    _remember(key, compiled)
    return compiled


def _forward_graph(parts, records: list, leaf_vars: list) -> tuple[list[Node], list[Node]]:
    """The tape's structure as graph nodes (one per record, in tape order) over the variables
    ``leaf_vars`` and one variable per constant input (numbered as ``structure()`` lists them)."""
    const_vars: list[Node] = []
    const_of: dict[tuple[int, int], Node] = {}
    for k, (op, params, ins, avals) in enumerate(parts):
        for i, inp in enumerate(ins):
            if inp[0] == "c":
                const_of[(k, i)] = var_node(f"__const{len(const_vars)}", inp[1])
                const_vars.append(const_of[(k, i)])
    template: list[Node] = []
    for k, (op, params, ins, avals) in enumerate(parts):  # a record's parents come before it
        entries = []
        for i, inp in enumerate(ins):
            if inp[0] == "c":
                entries.append(Entry(const_of[(k, i)]))
            elif inp[0] == "l":
                entries.append(Entry(leaf_vars[inp[1]]))
            else:
                entries.append(Entry(template[inp[1]], inp[2]))
        template.append(Node(op, tuple(entries), dict(params), avals, source=records[k].node.source))
    return template, const_vars


def _cut_forward(grads: list[Entry], template: list[Node]) -> tuple[list[Entry], list[Node], list]:
    """The gradient graph with the forward values it reads (outputs of ``template``'s nodes) made
    variables ``__saved{k}``: ``(outputs, the saved variables, ("saved", record, output) each)``."""
    fwd = {id(n): k for k, n in enumerate(template)}
    saved: dict[tuple[int, int], Node] = {}
    reads: list = []
    env: dict[int, Node] = {}

    def cut(e: Entry) -> Entry:
        if id(e.node) in fwd:
            at = (id(e.node), e.index)
            if at not in saved:
                saved[at] = var_node(f"__saved{len(saved)}", e.node.avals[e.index])
                reads.append(("saved", fwd[id(e.node)], e.index))
            return Entry(saved[at])
        n = env.get(id(e.node))
        return e if n is None else Entry(n, e.index)

    for node in topo_order(grads, stop=lambda n: id(n) in fwd):
        if id(node) in fwd or node.op is None:
            continue
        env[id(node)] = copy_node(node, [cut(e) for e in node.inputs])
    outs = inline_calls([cut(g) for g in grads])
    return outs, list(saved.values()), reads


def _remember(key, compiled: Compiled) -> None:
    """Keep ``compiled`` under ``key``, the least recently used beyond the cache's size dropped."""
    with _LOCK:
        if _LAST[1] is not None and _LAST[0] in _CACHE:
            _CACHE.move_to_end(_LAST[0])  # (hits through _LAST skip the LRU update)
        _CACHE[key] = compiled
        while len(_CACHE) > default_size():
            _, gone = _CACHE.popitem(last=False)
            if gone is _LAST[1]:
                _LAST[:] = [None, None]


def _saved_orders(reads: list, template: list) -> dict:
    """``input position -> memory order`` of the saved values a hybridized block's forward program
    stores in another order (its ``out_orders``: units-major activations), so the backward plans
    its products to match (``executor/units_major.py``). A hint only: other layouts give the same
    values."""
    call = registry.get("call")
    orders = {}
    for p, (what, k, index) in enumerate(reads):
        node = template[k] if what == "saved" else None
        sub = node.params.get("graph") if node is not None and node.op is call else None
        order = sub.out_order(index) if sub is not None else None
        if order is not None:
            orders[p] = order
    return orders


def inline_calls(outputs: list[Entry]) -> list[Entry]:
    """The graph of ``outputs`` with every ``call`` node (the backward of a hybridized block or a
    ``CachedOp``) replaced by the nodes of the graph it calls, so the backward is one flat
    program: no nested program run per step, and one memory plan over the whole backward. A call
    whose operands differ in shape or dtype from its graph's recorded inputs (a shape-generic
    trace serving new shapes) stays a call: its graph's avals hold only for the recorded ones."""
    return _copy_inlined(outputs, {})


def _copy_inlined(outputs: list[Entry], given: dict) -> list[Entry]:
    """``outputs`` rebuilt with the variable nodes in ``given`` (``id -> Entry``) substituted and
    calls inlined; nodes that change nothing are kept as they are."""
    call = registry.get("call")
    env: dict[int, list[Entry]] = {}

    def entry(e: Entry) -> Entry:
        if e.node.op is None:
            return given.get(id(e.node), e)
        outs = env.get(id(e.node))
        return e if outs is None else outs[e.index]

    for node in topo_order(list(outputs)):
        if node.op is None:
            continue
        ins = [entry(e) for e in node.inputs]
        sub = node.params.get("graph") if node.op is call else None
        if sub is not None and len(ins) == len(sub.inputs) and all(
                (e.aval.shape, e.aval.dtype, e.aval.stype) == (v.avals[0].shape, v.avals[0].dtype, v.avals[0].stype)
                for e, v in zip(ins, sub.inputs)):
            env[id(node)] = _copy_inlined(list(sub.sym.outputs), {id(v): e for v, e in zip(sub.inputs, ins)})
        elif any(a is not b for a, b in zip(ins, node.inputs)):
            new = copy_node(node, ins)
            env[id(node)] = [Entry(new, i) for i in range(len(node.avals))]
    return [entry(e) for e in outputs]


def run(compiled: Compiled, records: list, leaves: list, consts: list[Node], heads: list) -> list:
    """The leaves' gradients for this step's values (versions checked as the general path does).

    A leaf with ``grad_req="write"`` drops its previous gradient before the program runs (after
    every check passed): when nothing else holds that gradient's memory any more, the program
    writes this step's gradient into it (``Program.run`` reuses handed-out memory nobody holds)
    instead of allocating, and faulting in, fresh buffers every step. A gradient the user kept
    (``g = p.grad``) is still held, so it is never overwritten: that step allocates anew. Should
    the program fail, those leaves are left without a gradient (None), never with a stale one.
    """
    args = gather(compiled, records, leaves, consts, heads)
    for leaf, _ in leaves:
        if leaf.grad_req == "write":
            leaf.grad = None
    return compiled.program.run(args)


def gather(compiled: Compiled, records: list, leaves: list, consts: list[Node], heads: list) -> list:
    """The program's arguments for this step's values, their buffer versions checked."""
    args = []
    for what, a, b in compiled.reads:
        if what == "saved":
            r = records[a]
            if b < len(r.versions) and version(r.values[b]) != r.versions[b]:
                raise saved_value_written(r, b)
            args.append(r.values[b])
        elif what == "head":
            args.append(heads[a]._materialize())
        else:
            node = consts[a] if what == "const" else next(iter(leaves[a][1].values())).node
            if node.version is not None and version(node.value) != node.version:
                raise captured_input_written(node, None if what == "const" else leaves[a][0].name)
            args.append(node.value)
    return args


def clear() -> None:
    with _LOCK:
        _CACHE.clear()
        _LAST[:] = [None, None]


def size() -> int:
    return len(_CACHE)


