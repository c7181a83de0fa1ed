"""Parameter-only steps computed once: the values of a compiled program that depend on nothing but
its parameters (weight slices, transposes, stacks and reshapes of an imported model) are computed
by a program of their own (the *head*) and kept while the parameters hold still; the rest of the
graph (the *body*) takes them as inputs.

At compile time (``hoisted_program``, for plain signatures of a ``CachedOp`` that knows which of its
inputs are parameters: a hybridized block's, a ``SymbolBlock``'s) a node is *hoisted* when it is
deterministic (no random op, no sub-graph), of known size and dense, and reads only parameters,
constants that belong to the graph and other hoisted nodes, at least one parameter among them. The
hoisted values something else reads (the *kept* values) become graph inputs of the body; where they
would hold more than the tuning table's ``param_cache_max_bytes``, the largest stay in the body
(computed every call) until the rest fit.

At run time (``ParamCache.run``) the kept values follow the rule of ``ops/derived.py`` (copies derived
from weights, ``conv2d[..., kernel kept]``), since a stale value would be a silently wrong result:

* keyed on the identity **and** buffer version (``buffer.version``) of every parameter array the head
  reads: an optimizer step, ``Parameter.set_data`` or any in-place write through lazyarray bumps a
  version and the next call recomputes; the arrays are held weakly;
* only NumPy arrays owning their memory and never handed out writable (``derived.cacheable`` minus its
  switch: ``buffer.exposed`` memory is written behind the versions' back);
* only from the second call at the same versions: a training loop (a version bump between calls) never
  keeps anything, it runs the head each call as the uncompiled program did.

Kept values are the head's outputs copied into memory of their own and made read-only: no step writes
them (the planner treats graph inputs as it treats parameters: never a buffer of its plan), and the
body's ownership rule (``program._own_outputs``) copies any that is also a graph output, so the caller
never holds memory that aliases them. Only plain signatures (nothing recorded, no input wanting a
gradient) use this; a training signature runs every step, so gradients are today's.

``explain()`` lists the head's steps before the body's as ``op[computed once: parameters]`` and
counts them in the program's header (``Program.kept``).

    >>> import lazyarray as la
    >>> x, w = la.sym.var("x", shape=(2, 3)), la.sym.var("w", shape=(3, 3))
    >>> op = la.CachedOp(la.sym.dot(x, la.sym.transpose(w) * 2.0), parameters=["w"])
    >>> args = la.ones((2, 3)), la.ones((3, 3))
    >>> _ = op(*args); print(op(*args).asnumpy())  # the second call at w's version keeps w.T * 2
    [[6. 6. 6.]
     [6. 6. 6.]]
    >>> print(op.explain(*args))  # doctest: +NORMALIZE_WHITESPACE
    program: 1 steps (and 2 steps computed once: parameters), peak 24 bytes in 1 buffer (lower bound 24)
    step  node        op[implementation]                    inputs        output  memory          workspace
       -  transpose0  transpose[computed once: parameters]  [3,3]         [3,3]   kept            -
       -  multiply0   multiply[computed once: parameters]   [3,3], []     [3,3]   kept            -
       0  dot0        dot[reference]                        [2,3], [3,3]  [2,3]   #0 (to caller)  -
"""
from __future__ import annotations

import operator
import weakref

import numpy as np

from ..buffer import any_exposed, cells, exposed, version, versioned
from ..graph.node import Entry, Node, unique_names, var_node
from ..graph.rewrite import rewrite
from ..graph.symbol import Symbol
from ..graph.traverse import topo_order
from ..tuning_table import current
from .call import SubGraph
from .fusion import fuse
from .program import Program, compile_program

KEPT = "computed once: parameters"  # explain()'s label of a head step
_is = operator.is_
_DEREF = weakref.ref.__call__  # (a weak reference's target, mapped in C)
_COUNT = operator.itemgetter(0)  # (a version cell's count: buffer.cells)


def _deterministic(node: Node) -> bool:
    """A node whose outputs follow from its inputs alone, of known size and dense storage, in host memory
    (only NumPy values are kept: on a GPU the head would run every call, as a second program)."""
    if node.op.random or any(isinstance(v, SubGraph) for v in node.params.values()):
        return False
    return all(a.shape is not None and None not in a.shape and a.dtype is not None and a.stype == "default"
               and all(isinstance(d, int) for d in a.shape) and getattr(a.device, "kind", "cpu") == "cpu"
               for a in node.avals)


def _hoisted(order: list[Node], params: set[int]) -> set[int]:
    """Ids of the nodes that read only parameters (``params``: their var nodes' ids), the graph's own
    constants and each other, reaching at least one parameter."""
    hoisted: set[int] = set()
    reads_param: set[int] = set(params)
    for node in order:
        if node.op is None or not _deterministic(node):
            continue
        ok = True
        for e in node.inputs:
            n = e.node
            if id(n) in hoisted or id(n) in params:
                continue
            if n.op is None and n.kind == "const" and n.version is None:  # (not a captured user array)
                continue
            ok = False
            break
        if ok:
            hoisted.add(id(node))
            if any(id(e.node) in reads_param for e in node.inputs):
                reads_param.add(id(node))
    return hoisted & reads_param


def _kept_entries(order: list[Node], outputs: list[Entry], hoisted: set[int]) -> list[Entry]:
    """The hoisted values read outside the hoisted nodes (or returned), in graph order."""
    read = {(id(e.node), e.index) for n in order if n.op is not None and id(n) not in hoisted for e in n.inputs}
    read |= {(id(e.node), e.index) for e in outputs}
    return [Entry(n, i) for n in order if id(n) in hoisted for i in range(len(n.avals)) if (id(n), i) in read]


def _within_budget(order, outputs, hoisted: set[int], budget: int) -> list[Entry]:
    """The kept values, the largest left to the body (and ``hoisted`` shrunk) until they fit ``budget``."""
    while True:
        kept = _kept_entries(order, outputs, hoisted)
        if sum(e.aval.nbytes for e in kept) <= budget or not kept:
            return kept
        hoisted.discard(id(max(kept, key=lambda e: e.aval.nbytes).node))


def hoisted_program(graph: Symbol, inputs: list[Node], parameters, fused: bool, names: dict):
    """A ``ParamCache`` running ``graph`` (over the var nodes ``inputs``, those named in ``parameters``
    being parameters) with its parameter-only values computed once; None where no step depends on
    parameters only (or nothing fits the budget). (A symbol, not its outputs: the compile has walked
    it already, and its order serves here as it is.)"""
    budget = current().param_cache_max_bytes
    params = {id(n): i for i, n in enumerate(inputs) if n.name in parameters}
    if budget <= 0 or not params:
        return None
    if graph.unused_inputs:  # (only what its outputs read)
        graph = Symbol(list(graph.outputs))
    outputs = list(graph.outputs)
    order = graph.topo()
    kept = _within_budget(order, outputs, _hoisted(order, set(params)), budget)
    if not kept:
        return None
    seen = {id(n) for n in order}
    head_ins = [n for n in inputs if id(n) in params and id(n) in seen]
    head = compile_program(kept, head_ins, names=names)
    kept_vars = {(id(e.node), e.index): var_node(f"__kept{k}", e.aval) for k, e in enumerate(kept)}
    by_node: dict[int, list] = {}
    for (nid, i), v in kept_vars.items():
        by_node.setdefault(nid, []).append((i, v))

    def cut(node: Node, ins):
        got = by_node.get(id(node))
        if got is None:
            return None
        at = dict(got)
        return tuple(Entry(at[i]) if i in at else Entry(node, i) for i in range(len(node.avals)))

    body_outs = list(rewrite(graph, cut, share=True).outputs)
    if fused:
        body_outs = fuse(body_outs)
    body = compile_program(body_outs, list(inputs) + list(kept_vars.values()),
                           names=unique_names(topo_order(body_outs), names))  # (copied nodes named too)
    body.kept = tuple(head.step_specs)
    return ParamCache(head, body, [params[id(n)] for n in head_ins], sum(e.aval.nbytes for e in kept))


class ParamCache:
    """A compiled program whose parameter-only values are computed once (see the module): ``run`` takes
    the graph's inputs like ``Program.run``; ``head`` computes the kept values from the parameters
    (positions ``param_at`` of the inputs), ``body`` the outputs from the inputs and the kept values."""

    __slots__ = ("head", "body", "param_at", "kept_bytes", "_entry")

    def __init__(self, head: Program, body: Program, param_at: list[int], kept_bytes: int):
        self.head = head
        self.body = body
        self.param_at = param_at
        self.kept_bytes = kept_bytes  # the most the kept values hold (the budget was checked at compile time)
        # (weak references to the parameter arrays, their versions, the kept values or None, the arrays'
        # version cells while values are kept): replaced whole, never changed, so a thread reading it
        # sees one consistent entry
        self._entry: tuple | None = None

    @property
    def plan(self):
        """The body's memory plan (the kept values are inputs to it, outside the plan)."""
        return self.body.plan

    @property
    def kept(self) -> tuple | None:
        """The kept values now (read-only arrays), or None while none are kept."""
        e = self._entry
        return None if e is None else e[2]

    def run(self, args) -> list:
        """Run once; returns the output values (new arrays, owned by the caller)."""
        params = list(map(args.__getitem__, self.param_at))  # (gathered in C)
        return self.body.run([*args, *self._values(params)])

    def _values(self, params: list) -> list | tuple:
        e = self._entry
        # The kept values' check, in C: the same arrays (alive: their version cells are theirs), at the
        # versions the values were computed from, none handed out writable since.
        if e is not None and e[2] is not None and all(map(_is, map(_DEREF, e[0]), params)) \
                and list(map(_COUNT, e[3])) == e[1] and not any_exposed(params):
            return e[2]
        return self._checked_values(params)

    def _checked_values(self, params: list) -> list | tuple:
        """The head's values where nothing is kept for these arrays at these versions (yet)."""
        now = [version(p) for p in params]
        e = self._entry
        if e is not None and e[1] == now and all(map(_is, map(_DEREF, e[0]), params)) \
                and not any(map(exposed, params)):
            if e[2] is not None:
                return e[2]
            vals = self.head.run(params)
            if all(map(versioned, params)) and all(v.__class__ is np.ndarray for v in vals):  # second call at these versions: keep
                vals = tuple(_frozen(v) for v in vals)
                held = cells(params)
                if len(held) == len(params) and list(map(_COUNT, held)) == now:  # (a write that ended meanwhile: keep nothing)
                    self._entry = (e[0], now, vals, held)
            return vals
        try:
            self._entry = (tuple(weakref.ref(p) for p in params), now, None, None)
        except TypeError:  # (an array type without weak references: never kept)
            self._entry = None
        return self.head.run(params)


def _frozen(v):
    """``v`` in memory of its own (not a view of the head's per-run buffer), read-only."""
    v = np.array(v, copy=True, order="C")
    v.flags.writeable = False
    return v
