"""``call``: one registered op that runs a sub-graph, so a graph can hold a compiled graph.

A ``CachedOp`` recorded under autograd is one ``call`` node: its ``graph`` is the compiled
forward graph (the user's outputs, then the values backward reads) and its ``backward`` the
compiled backward graph; ``saved`` / ``inputs_read`` / ``heads_read`` say what the backward
graph reads (which outputs, inputs and head gradients) and ``grad_pos`` which inputs get
gradients. The gradient of a ``call`` is another ``call`` (of ``backward``). Because it is an
ordinary registry op whose sub-graphs are typed parameters (``SUBGRAPH``), the registry, the
gradient pass, the executor and the JSON format all describe it like any other op.

A ``SubGraph`` compiles its symbol once per input signature (bounded, like ``CachedOp``) and
can be handed the program already compiled for the signature it was made for.
"""
from __future__ import annotations

import threading

from ..aval import Aval
from ..errors import GraphFormatError, LazyArrayError, ParamValueError
from ..graph.build import record_node
from ..graph.node import Entry, Node, var_node
from ..graph.passes.bind_dims import bind_dims
from ..graph.passes.infer import infer_avals
from ..graph.passes.placement import placement
from ..graph.rewrite import gc_paused
from ..graph.same_graph import graph_key
from ..graph.serialize import from_dict, to_dict
from ..graph.symbol import Symbol
from ..ops.params import INTS, Param, ParamType
from ..ops.registry import OpDef, register
from ..storage import stype_of
from .program import Program, compile_program
from .signature_cache import SignatureCache


class SubGraph:
    """A symbol a node calls, its inputs in call order, compiled once per input signature."""

    def __init__(self, sym: Symbol, names: list[str] | None = None, program: Program | None = None):
        self.sym = sym
        self.names = list(sym.list_inputs() if names is None else names)
        have = {n.name: n for n in sym.input_nodes()}
        # an input the graph does not read (a pass removed it) still takes its place in a call
        self.inputs = [have.get(nm) or var_node(nm, Aval((), None, None)) for nm in self.names]
        self.avals = tuple(e.aval for e in sym.outputs)
        self._programs = SignatureCache("a called sub-graph")
        self._programs.warn_at = float("inf")
        self._lock = threading.Lock()
        self._seed = program
        self._key = None
        self._call_params = None  # the params of a plain call of this graph, made once
        self.derived: dict = {}  # graphs made from this one (control-flow gradients), made once per key

    def out_order(self, index: int):
        """The memory order the graph's compiled program stores output ``index`` in, if not C
        order (``Program.out_orders``: saved values stored units-major), else None."""
        orders = getattr(self._seed, "out_orders", None)
        return orders[index] if orders is not None and index < len(orders) else None

    def key(self) -> tuple:
        """The graph's structural key (``graph_key``), made once: what equality compares."""
        if self._key is None:
            self._key = graph_key(self.sym)
        return self._key

    def __eq__(self, other) -> bool:  # the same graph with the same inputs (compiled programs aside)
        if self is other:
            return True
        if not isinstance(other, SubGraph) or self.names != other.names or self.avals != other.avals:
            return False
        try:
            return self.key() == other.key()
        except (TypeError, ValueError):  # (a value in the graph whose == is no bool: not known to be equal)
            return False

    def __hash__(self) -> int:
        return hash((tuple(self.names), self.avals))

    @property
    def n_outputs(self) -> int:
        return len(self.avals)

    def out_avals(self, in_avals) -> tuple:
        """Output avals for input avals (the recorded ones when they match)."""
        if all(a == n.avals[0] for a, n in zip(in_avals, self.inputs)):
            return self.avals
        given = {nm: a for nm, a in zip(self.names, in_avals)}
        out = infer_avals(self.sym.topo(), given)
        return tuple(out[id(e.node)][e.index] for e in self.sym.outputs)

    def run(self, arrays) -> list:
        """The graph's outputs for ``arrays`` (fresh buffers the caller owns)."""
        return self.program(arrays).run(arrays)

    def program(self, arrays) -> Program:
        """The program compiled for the signature of ``arrays`` (compiled now on the first call). A loop
        whose iterations share a signature looks it up once and runs it every iteration."""
        try:
            key = tuple([(a.shape, a.dtype, a.__class__) for a in arrays])
        except AttributeError:  # a Python scalar among the inputs
            key = tuple([(tuple(getattr(a, "shape", ())), getattr(a, "dtype", None), a.__class__) for a in arrays])
        prog = self._programs.items.get(key)
        if prog is None:
            with self._lock:
                prog = self._programs.items.get(key)
                if prog is None:
                    with gc_paused():
                        prog = self._seed if self._seed is not None and self._matches(arrays) else \
                            self._compile(arrays)
                    self._seed = None
                    self._programs.add(key, _Used(prog), lambda a, b: ([], ""))
                    prog = self._programs.items[key]
        prog.used = self._programs.epoch
        return prog.program

    def _compile(self, arrays) -> Program:
        """A program for these arrays: the graph as recorded when their shapes and dtypes are the recorded
        ones, else the graph with its inputs given theirs and every aval inferred again (a loop body
        traced for one batch size runs for another)."""
        sym, inputs = self.sym, self.inputs
        given = {}
        for a, n in zip(arrays, self.inputs):
            rec = n.avals[0]
            shape, dtype = tuple(getattr(a, "shape", ())), getattr(a, "dtype", None)
            if rec.dtype is not None and (shape != rec.shape or (dtype is not None and dtype != rec.dtype)):
                given[n.name] = rec._replace(shape=shape, dtype=rec.dtype if dtype is None else dtype)
        if given:
            full = {n.name: n.avals[0]._replace(shape=tuple(getattr(a, "shape", ()))) for a, n in zip(arrays, self.inputs)}
            sym = placement(bind_dims(self.sym, full, "a sub-graph"), given)
            have = {n.name: n for n in sym.input_nodes()}
            inputs = [have.get(n.name, n) for n in self.inputs]
        return compile_program(list(sym.outputs), inputs, names=sym.names())

    def _matches(self, arrays) -> bool:
        return all(tuple(getattr(a, "shape", ())) == n.avals[0].shape and stype_of(a) == n.avals[0].stype
                   for a, n in zip(arrays, self.inputs))

    def __repr__(self) -> str:
        return f"<SubGraph inputs={self.names} outputs={self.n_outputs} nodes={len(self.sym.topo())}>"


class _Used:
    __slots__ = ("program", "used")

    def __init__(self, program):
        self.program = program
        self.used = 0


class _SubGraphType(ParamType):
    """A sub-graph parameter: a ``SubGraph`` (or a ``Symbol``); JSON: its inputs and graph."""

    name = "graph"

    def convert(self, value, op, param):
        if value is None:
            if param == "graph":  # the graph a call runs is required; only its backward may be absent
                raise ParamValueError(f"{op}: parameter 'graph' must be a sub-graph, got None")
            return None
        if isinstance(value, Symbol):
            return SubGraph(value)
        if not isinstance(value, SubGraph):
            raise self._bad(value, op, param, "a sub-graph (a Symbol)")
        return value

    def to_json(self, value):
        return None if value is None else {"inputs": list(value.names), "graph": to_dict(value.sym)}

    def from_json(self, value, op, param):
        if value is None:
            return None
        if not isinstance(value, dict) or not isinstance(value.get("inputs"), list) \
                or not all(isinstance(n, str) for n in value["inputs"]):
            raise GraphFormatError(f"{op}: parameter {param!r} must be an object with 'inputs' (names) and "
                                   "'graph' (a symbol)")
        try:
            sym = Symbol(from_dict(value.get("graph"))).check()
        except GraphFormatError as exc:
            raise GraphFormatError(f"{op}: parameter {param!r}: {exc}") from None
        except LazyArrayError as exc:
            raise GraphFormatError(f"{op}: parameter {param!r} holds an invalid graph: {exc}") from None
        known = set(sym.list_inputs())
        extra = [n for n in known if n not in value["inputs"]]
        if extra:
            raise GraphFormatError(f"{op}: parameter {param!r}: graph inputs {extra} are not in 'inputs'")
        return SubGraph(sym, value["inputs"])


SUBGRAPH = _SubGraphType()


def _kernel(xp, *arrays, graph, backward=None, saved=(), inputs_read=(), heads_read=(), grad_pos=(), out=None):
    res = graph.run(arrays)
    return res[0] if len(res) == 1 else tuple(res)


def _grad(F, ins, outs, g, graph, backward=None, saved=(), inputs_read=(), heads_read=(), grad_pos=()):
    result: list = [None] * len(ins)
    if backward is None or not grad_pos:
        return result
    outs = outs if isinstance(outs, list) else [outs]
    gs = g if isinstance(g, list) else [g]
    reads = [outs[k] for k in saved] + [ins[i] for i in inputs_read] + [gs[i] for i in heads_read]
    if backward._call_params is None:  # validated once: a backward runs per training step
        backward._call_params = CALL.make_params({"graph": backward})
    res = record_node(CALL, reads, backward._call_params)
    res = (res,) if isinstance(res, Entry) else res
    for j, i in enumerate(grad_pos):
        result[i] = res[j]
    return result


def _rule(field):
    def rule(values, graph, **_):
        avals = graph.avals
        if field == "shape" and len(values) == len(graph.inputs) and \
                any(tuple(s) != n.avals[0].shape for s, n in zip(values, graph.inputs)):
            avals = graph.out_avals([n.avals[0]._replace(shape=tuple(s)) for s, n in zip(values, graph.inputs)])
        got = [getattr(a, field) for a in avals]
        return got[0] if len(got) == 1 else got

    return rule


CALL = register(OpDef(
    "call", ("*args",), _kernel,
    params=(Param("graph", SUBGRAPH), Param("backward", SUBGRAPH, None), Param("saved", INTS, ()),
            Param("inputs_read", INTS, ()), Param("heads_read", INTS, ()), Param("grad_pos", INTS, ())),
    num_outputs=lambda params: params["graph"].n_outputs,
    shape=_rule("shape"), dtype=_rule("dtype"),
    device=lambda avals, graph, **_: graph.avals[0].device,
    # the sub-graph runs its sparse values itself: no dense fallback around it
    storage=lambda stypes, shapes, graph, **_: [a.stype for a in graph.avals], sparse_kernel=_kernel,
    grad=_grad, owns_outputs=True,  # a program run hands out fresh buffers
    doc="run a sub-graph (`graph`) on the inputs; its gradient calls `backward` (a compiled CachedOp is one "
        "call node)"))


def call_params(graph: SubGraph, **grad_info) -> dict:
    """Validated params of a ``call`` of ``graph`` (make them once, record many nodes with them)."""
    return CALL.make_params({"graph": graph, **grad_info})


def call_node(params: dict, entries, avals, source) -> Node:
    """A ``call`` node reading ``entries`` (used by ``CachedOp`` under autograd)."""
    return Node(CALL, tuple(entries), params, tuple(avals), source=source)
