"""Sound traces: what a hybridize trace may read, and the guards that say when it can be reused.

``hybridize()`` traces ``forward`` once on *placeholder* inputs (lazy arrays standing for graph
variables, like JAX's tracers) and reuses the graph for later calls. Two kinds of Python-level
reads would bake a value into that graph silently; this module turns each into something
sound:

* **Shape reads** (``x.shape``, ``x.shape[0]``, ``len(x)``, ``x.size``, iterating, unpacking)
  on an array that depends on a block input give a ``GuardedShape``: a tuple that records,
  for the dims actually used, which input dims they come from (found by re-running the
  graph's shape rules with that input dim changed). Each becomes a ``Guard`` (input, dim,
  value, the user's line); the trace is reused for a new signature only when every guard
  holds. Shape-generic ops (``reshape_like``, ``mean``, ``nn.flatten``) read no Python shape,
  add no guard, and such blocks keep one trace for every batch size. ``x.ndim`` is no guard:
  ranks are part of every signature.
* **Value reads** (``bool()``, ``float()``, ``.item()``, ``asnumpy()``, ``if x.sum() > 0``, a
  data-dependent ``.shape``) of anything that depends on a block input raise ``TraceError``
  naming the line, the op that produced the value and the fixes. Values that depend only on
  constants and parameters can still be read.

The trace context lives in a ``ContextVar`` (per thread and task), like the deferred flag.
"""
from __future__ import annotations

import contextlib
import contextvars
import dataclasses

from .dim import TracedSize, has_symbols, is_symbolic
from .errors import LazyArrayError, TraceError
from .graph.node import Entry, Node, source_text, user_source
from .graph.traverse import topo_order
from .ops import registry

FIXES = ("la.where(cond, a, b) for an elementwise choice; la.cond(pred, then_fn, else_fn, *operands) for a "
         "branch on the data; la.while_loop(cond_fn, body_fn, loop_vars) or la.foreach(body_fn, data, states) "
         "for a loop")
_TRACE: contextvars.ContextVar[Trace | None] = contextvars.ContextVar("lazyarray_trace", default=None)


@dataclasses.dataclass(frozen=True)
class Guard:
    """Input ``input`` must have size ``value`` in dim ``dim`` for the trace to be reused."""

    input: int
    dim: int
    value: int
    source: tuple | None = None

    def holds(self, sig) -> bool:
        shape = sig[self.input][0]
        return self.dim < len(shape) and shape[self.dim] == self.value

    def __str__(self) -> str:
        where = f"  (from {source_text(self.source)})" if self.source else ""
        return f"input {self.input} dim {self.dim} == {self.value}{where}"


class Trace:
    """The state of one hybridize trace: its input variables, the guards and parameters read."""

    def __init__(self, block_name: str, inputs: list[Node]):
        self.block_name = block_name
        self.inputs = {id(n): i for i, n in enumerate(inputs)}
        self.input_nodes = list(inputs)
        self.guards: list[Guard] = []
        self._seen: set = set()
        self.params_read: dict[int, object] = {}  # id(Parameter) -> Parameter
        self.draws: list[Entry] = []  # random draws recorded, used or not (each advances the generator)
        # what shape reads learned of the graph (see _sources_of): id(node) -> (node, inputs it reads),
        # and per (id(input), dim): id(node) -> (node, its avals with that dim bumped)
        self._below: dict[int, tuple] = {}
        self._bumps: dict[tuple, dict[int, tuple]] = {}

    # -- shape reads ------------------------------------------------------------------------------
    def read_dims(self, entry: Entry, dims) -> None:
        """``dims`` of ``entry``'s shape were read by Python: guard the input dims they come from."""
        source = None
        for k in dims:
            key = (id(entry.node), entry.index, k)
            if key in self._seen:
                continue
            self._seen.add(key)
            for i, d in self._sources_of(entry, k, concrete=True):
                value = self.input_nodes[i].avals[0].shape[d]
                if any(g.input == i and g.dim == d for g in self.guards):
                    continue
                if source is None:
                    source = user_source()
                self.guards.append(Guard(i, d, value, source))

    def _sources_of(self, entry: Entry, k: int, concrete: bool = False) -> list[tuple[int, int]]:
        """The (input, dim) pairs dim ``k`` of ``entry`` changes with (shape rules re-run);
        ``concrete``: only input dims of concrete size (a symbolic batch is computed with, never
        baked in, so a read of it needs no guard and its dims are not tried).

        Nodes are immutable and a trace only adds nodes, so what a walk learns stays true for the
        rest of the trace: the inputs each node reads (``_inputs_below``) and each node's avals
        with one input dim bumped (``_bumped``) are kept, and a read walks only the nodes no earlier
        read reached (a model's reads then cost one walk per input dim, not one per read)."""
        base = entry.aval.shape[k]
        found = []
        for n in self._inputs_below(entry.node):
            shape = n.avals[0].shape
            for d in range(len(shape)):
                if concrete and is_symbolic(shape[d]):
                    continue
                changed = self._bumped(entry.node, n, d)
                if changed is _REFUSED:
                    found.append((self.inputs[id(n)], d))  # the rules refuse another size: guard it
                    continue
                a = changed[entry.index]
                if a is None or a.shape is None or a.shape[k] != base:
                    found.append((self.inputs[id(n)], d))
        return found

    def _inputs_below(self, root: Node) -> tuple[Node, ...]:
        """The trace's input nodes ``root`` reads, in the order a depth-first walk meets them."""
        memo = self._below
        for node in _unvisited_post_order(root, memo):
            if id(node) in self.inputs:
                got: tuple = (node,)
            else:
                got = ()
                for e in node.inputs:
                    got += tuple(v for v in memo[id(e.node)][1] if v not in got)
            memo[id(node)] = (node, got)  # (the node is held: its id is not reused while the trace runs)
        return memo[id(root)][1]

    def _bumped(self, root: Node, var: Node, d: int):
        """``root``'s avals when dim ``d`` of input ``var`` grows (its shape rules re-run), or
        ``_REFUSED`` when a rule on the way refuses that size."""
        memo = self._bumps.setdefault((id(var), d), {})
        for node in _unvisited_post_order(root, memo):
            memo[id(node)] = (node, _bumped_avals(node, var, d, memo))
        return memo[id(root)][1]

    # -- value reads ------------------------------------------------------------------------------
    def check_value_read(self, entries: list[Entry]) -> None:
        """Raise ``TraceError`` when computing ``entries`` would read a block input's value."""
        for e in entries:
            if depends_on_inputs(self, e):
                raise self.value_read_error(e.node)

    def value_read_error(self, node: Node) -> TraceError:
        what = node.op.name if node.op is not None else "a block input"
        here = user_source()
        where = source_text(here) or "(unknown line)"
        # (the line that recorded the value, unless it is the line that reads it: named once)
        recorded = _recorded(node) if node.source != here else ", recorded on that line"
        return TraceError(
            f"{self.block_name}: forward reads a value that depends on the block's input while it is "
            f"being traced for hybridize(), at {where} (the value comes from {what}"
            f"{recorded}). A trace is reused for every call, so this value would be baked in. "
            f"Fixes: {FIXES}; or net.hybridize(active=False) for this block")

    def read_parameter(self, param) -> None:
        self.params_read[id(param)] = param


def _recorded(node: Node) -> str:
    line = node.source_line()
    return f", recorded at {line}" if line else ""


def _bump(shape: tuple, d: int) -> tuple:
    return tuple(s + 7 if i == d else s for i, s in enumerate(shape))


_REFUSED = object()  # a shape rule refused the bumped size


def _bumped_avals(node: Node, var: Node, d: int, memo: dict):
    """``node``'s avals given its inputs' bumped avals in ``memo`` (unchanged inputs: its own)."""
    if node is var:
        return (node.avals[0]._replace(shape=_bump(node.avals[0].shape, d)),)
    if node.op is None:
        return node.avals
    ins = [memo[id(e.node)][1] for e in node.inputs]
    if any(a is _REFUSED for a in ins):
        return _REFUSED
    if all(a is e.node.avals for a, e in zip(ins, node.inputs)):
        return node.avals
    try:
        return registry.infer(node.op, [a[e.index] for a, e in zip(ins, node.inputs)], node.params)
    except LazyArrayError:
        return _REFUSED


def _unvisited_post_order(root: Node, memo: dict) -> list[Node]:
    """The nodes ``root`` reads that ``memo`` has no entry for, each after its inputs."""
    if id(root) in memo:
        return []
    order: list[Node] = []
    seen = {id(root)}
    stack = [(root, iter(root.inputs))]
    while stack:
        node, it = stack[-1]
        for e in it:
            child = e.node
            if id(child) not in seen and id(child) not in memo:
                seen.add(id(child))
                stack.append((child, iter(child.inputs)))
                break
        else:
            stack.pop()
            order.append(node)
    return order


class GuardedShape(tuple):
    """A shape tuple that records which dims Python reads while a trace is active."""

    def __new__(cls, shape, entry: Entry, trace: Trace):
        t = super().__new__(cls, tuple(TracedSize.of(d) for d in shape) if has_symbols(shape) else shape)
        t._entry, t._trace = entry, trace  # (a tuple subclass without __slots__ takes attributes)
        return t

    def _read(self, dims) -> None:
        self._trace.read_dims(self._entry, dims)

    def __getitem__(self, k):
        n = tuple.__len__(self)
        if isinstance(k, slice):
            self._read(range(n)[k])
        else:
            self._read([k % n if isinstance(k, int) and -n <= k < n else k])
        return tuple.__getitem__(self, k)

    def __iter__(self):
        self._read(range(tuple.__len__(self)))
        return tuple.__iter__(self)

    def __eq__(self, other):
        self._read(range(tuple.__len__(self)))
        return tuple.__eq__(self, other)

    def __ne__(self, other):
        return not self.__eq__(other)

    def __hash__(self):
        self._read(range(tuple.__len__(self)))
        return tuple.__hash__(self)

    def __repr__(self) -> str:
        self._read(range(tuple.__len__(self)))
        return tuple.__repr__(self)

    def __reduce__(self):
        return (tuple, (tuple.__getitem__(self, slice(None)),))


def active() -> Trace | None:
    """The trace running in this thread / task, or None."""
    return _TRACE.get()


@contextlib.contextmanager
def tracing(trace: Trace):
    token = _TRACE.set(trace)
    try:
        yield trace
    finally:
        _TRACE.reset(token)


def depends_on_inputs(trace: Trace, entry: Entry) -> bool:
    return any(id(n) in trace.inputs for n in topo_order([entry]))
