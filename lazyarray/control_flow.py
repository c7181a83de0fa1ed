"""``la.cond``, ``la.while_loop``, ``la.foreach``: branches and loops that a graph can hold.

Eagerly (deferred compute off) each simply runs the Python functions: the reference semantics,
and autograd's tape sees every op they run. Under ``la.deferred()`` (and so inside hybridized
blocks and ``la.get_symbol``) each records **one** node of a registered op
(``executor/control_flow.py``):

1. **trace** every function once on placeholders (lazy arrays standing for fresh graph variables
   ``arg0..``), under a ``BodyTrace`` that forbids value reads of them (``TraceError``) and passes
   shape reads and parameter reads on to an enclosing hybridize trace;
2. **lift free variables**: anything the body's graph reaches that the trace did not create (an
   outer lazy array, a block parameter or a captured array, an enclosing trace's variable: nodes
   older than the trace, variables, captured arrays) becomes an extra operand of the node and a
   graph input ``free<j>`` of the sub-graph; literal constants stay inside;
3. **record** the node (operands, then the lifted entries) and, under ``autograd.record()``, its
   autograd record, whose parents for the lifted entries come from the records the body trace made.
"""
from __future__ import annotations

from collections.abc import Callable

import numpy as np

from . import guards
from .args import callable_arg
from .autograd import Leaf, Record, tracked_nodes
from .aval import Aval
from .creation import array as _array
from .deferred import MODE, RECORDING, deferred, is_deferred, show
from .errors import ControlFlowError, ShapeError, TraceError, fmt_shape
from .executor.call import SubGraph
from .executor.control_flow import COND, FOREACH, WHILE_LOOP
from .functions import op_function
from .graph.build import record_node
from .graph.node import Entry, Node, source_text, user_source, var_node
from .graph.rewrite import rewrite
from .graph.symbol import Symbol
from .graph.traverse import topo_order
from .ndarray import NDArray, make_array
from .ops import registry

__all__ = ["cond", "foreach", "while_loop"]
_STACK = op_function(registry.get("stack"))


# -- tracing a body -------------------------------------------------------------------------------
class BodyTrace(guards.Trace):
    """The trace of one control-flow body: its placeholders are its inputs.

    Value reads of a placeholder raise ``TraceError``; shape reads and parameter reads are passed
    on to the enclosing trace (a hybridize trace or an outer body), with each placeholder dim
    mapped to the operand dim it stands for, so the enclosing trace's guards stay sound.
    """

    def __init__(self, label: str, inputs: list[Node], outer: guards.Trace | None, operands: list):
        super().__init__(label, inputs)
        self.outer = outer
        self.operands = operands  # per placeholder: (outer entry, dim offset) or None

    def read_dims(self, entry: Entry, dims) -> None:
        if self.outer is None:
            return
        self.outer.read_dims(entry, dims)  # what the entry takes from outside the body
        for k in dims:
            for i, d in self._sources_of(entry, k):
                if self.operands[i] is not None:
                    outer_entry, offset = self.operands[i]
                    self.outer.read_dims(outer_entry, [d + offset])

    def check_value_read(self, entries: list[Entry]) -> None:
        super().check_value_read(entries)
        if self.outer is not None:
            self.outer.check_value_read(entries)

    def value_read_error(self, node: Node) -> TraceError:
        where = source_text(user_source()) or "(unknown line)"
        return TraceError(
            f"{self.block_name} reads a value of its arguments at {where}, but control-flow bodies are traced "
            "once into a graph on placeholders that have no values. Compute with ops instead: "
            f"{guards.FIXES}")

    def read_parameter(self, param) -> None:
        if self.outer is not None:
            self.outer.read_parameter(param)


class Body:
    """One traced function: its placeholders, output entries and structure, and its free entries."""

    def __init__(self, fn: Callable, label: str, avals: list[Aval], operands: list, pack: Callable):
        self.label = label
        self.placeholders = [var_node(f"arg{i}", a) for i, a in enumerate(avals)]
        self.start = Node(None, (), {}, ()).serial  # every node the trace makes is newer
        self.own = {id(n) for n in self.placeholders}
        args = [make_array(None, Entry(n), n.avals[0].device) for n in self.placeholders]
        tracer = BodyTrace(label, self.placeholders, guards.active(), operands)
        with guards.tracing(tracer), deferred():
            out = fn(*pack(args))
            self.arrays = flatten_arrays(out, label)
            self.outputs = [a._as_entry() for a in self.arrays]
        self.raw = out
        self.free = self._free_entries()

    def _is_free(self, node: Node) -> bool:
        if id(node) in self.own:
            return False
        if node.op is None:  # another trace's variable, or a user's captured array (parameters)
            return node.kind == "var" or node.version is not None
        return node.serial < self.start

    def _stop(self, node: Node) -> bool:
        return id(node) in self.own or self._is_free(node)

    def _free_entries(self) -> list[Entry]:
        found: dict[Entry, None] = {}
        for node in topo_order(self.outputs, stop=self._stop):
            if node.op is not None and not self._is_free(node):
                for e in node.inputs:
                    if self._is_free(e.node):
                        found[e] = None
        for e in self.outputs:
            if self._is_free(e.node):
                found[e] = None
        return list(found)

    @property
    def avals(self) -> tuple[Aval, ...]:
        return tuple(e.aval for e in self.outputs)

    def subgraph(self, free: list[Entry]) -> SubGraph:
        """The body as a sub-graph taking its placeholders, then the entries ``free`` (``free<j>``)."""
        slot = {e: j for j, e in enumerate(free)}

        def visit(node: Node, ins):
            if id(node) in self.own:
                return node
            if self._is_free(node):
                return tuple(Entry(var_node(f"free{slot[Entry(node, i)]}", a)) if Entry(node, i) in slot else None
                             for i, a in enumerate(node.avals))
            return None

        sym = rewrite(Symbol(self.outputs), visit, stop=self._stop)
        return SubGraph(sym, [n.name for n in self.placeholders] + [f"free{j}" for j in range(len(free))])

    def autograd_parents(self) -> dict:
        """``id(node) -> record or leaf`` for the free entries autograd tracks (found through the
        records the trace made while ``autograd.record()`` was on)."""
        free = {id(e.node) for e in self.free}
        found: dict = {}
        stack, seen = [], set()
        for a, e in zip(self.arrays, self.outputs):
            ag = a._ag
            if type(ag) is Leaf and id(e.node) in free:
                found[id(e.node)] = ag
            elif ag is not None:
                stack.append(ag)
        while stack:
            rec = stack.pop()
            if id(rec) in seen or rec.node.serial < self.start:
                continue
            seen.add(id(rec))
            for e, p in zip(rec.node.inputs, rec.parents):
                if p is None:
                    continue
                if id(e.node) in free:
                    found[id(e.node)] = p
                elif type(p) is Record:
                    stack.append(p)
        return found


def flatten_arrays(out, label: str) -> list[NDArray]:
    """A function's result as a list of arrays (one array, or a tuple / list of them)."""
    items = list(out) if isinstance(out, (tuple, list)) else [out]
    if not items:
        raise ControlFlowError(f"{label} returned an empty {type(out).__name__}; return at least one array")
    result = []
    for i, x in enumerate(items):
        if isinstance(x, NDArray):
            result.append(x)
        elif isinstance(x, (bool, int, float, np.number, np.bool_)):
            result.append(_array(x))
        else:
            raise ControlFlowError(f"{label} must return an array or a tuple / list of arrays; item {i} is a "
                                   f"{type(x).__name__}")
    return result


def restructure(arrays: list, like):
    """``arrays`` in the structure of ``like`` (one array, a tuple or a list)."""
    if isinstance(like, tuple):
        return tuple(arrays)
    if isinstance(like, list):
        return list(arrays)
    return arrays[0]


def signature(avals, like=None) -> str:
    text = ", ".join(f"{a.dtype}{fmt_shape(a.shape)}" for a in avals)
    return f"({text})" if isinstance(like, (tuple, list)) or len(avals) != 1 else text


def _where() -> str:
    line = source_text(user_source())
    return f" (at {line})" if line else ""


# -- recording the node -----------------------------------------------------------------------------
def as_arrays(values, what: str) -> list[NDArray]:
    out = []
    for i, v in enumerate(values):
        if isinstance(v, NDArray):
            out.append(v)
        elif isinstance(v, (bool, int, float, np.ndarray, np.number, np.bool_)):
            out.append(_array(v))
        else:
            raise ControlFlowError(f"{what}: item {i} is a {type(v).__name__}, not an array")
    return out


def aval_of(a: NDArray) -> Aval:
    return a._as_entry().aval


def emit(op, arrays: list[NDArray], free: list[Entry], params: dict, bodies: list[Body]) -> list[NDArray]:
    """Record one ``op`` node reading ``arrays`` then ``free``; lazy arrays for its outputs, linked to
    autograd when it records."""
    entries = [a._as_entry() for a in arrays] + free
    res = record_node(op, entries, params)
    res = (res,) if isinstance(res, Entry) else res
    outs = []
    for e in res:
        o = make_array(None, e, e.aval.device)
        show(o, e)
        outs.append(o)
    if MODE.get() & RECORDING:
        by_node = tracked_nodes(arrays)
        for body in bodies:
            by_node.update(body.autograd_parents())
        node = res[0].node
        parents = tuple(by_node.get(id(e.node)) for e in node.inputs)
        if any(p is not None for p in parents):
            rec = Record(node, None, parents)
            for o in outs:
                o._ag = rec
    return outs


def union(*lists: list[Entry]) -> list[Entry]:
    return list(dict.fromkeys(e for lst in lists for e in lst))


def _scalar_pred(pred, what: str) -> NDArray:
    p = pred if isinstance(pred, NDArray) else _array(pred)
    shape = p.static_shape
    if None in shape or int(np.prod(shape, dtype=np.int64)) != 1:
        raise ControlFlowError(f"{what} must be one value (a 0-d or size-1 array), got shape {fmt_shape(shape)}"
                               + _where())
    return p


def _truth(pred: NDArray, what: str) -> bool:
    return bool(np.asarray(_scalar_pred(pred, what).asnumpy()).reshape(-1)[0])


# -- cond -------------------------------------------------------------------------------------------
def cond(pred, then_fn: Callable, else_fn: Callable, *operands):
    """``then_fn(*operands)`` if the size-1 ``pred`` is true, else ``else_fn(*operands)``.

    Both functions return an array or a tuple / list of arrays with the same shapes and dtypes.
    Under deferred compute (and in hybridized blocks) this records one ``cond`` node holding both
    branches as sub-graphs, so a branch on the data can be compiled; gradients flow through the
    branch taken.

    >>> import lazyarray as la
    >>> x = la.array([1.0, -2.0])
    >>> with la.deferred():
    ...     y = la.cond(x.sum() > 0, lambda a: a * 2, lambda a: -a, x)
    >>> y.asnumpy()
    array([-1.,  2.], dtype=float32)
    """
    _functions("la.cond", then_fn=then_fn, else_fn=else_fn)
    operands = as_arrays(operands, "la.cond operands")
    if not is_deferred():
        return then_fn(*operands) if _truth(pred, "la.cond: pred") else else_fn(*operands)
    if isinstance(pred, (bool, np.bool_)):  # a Python value: the branch is known now
        return then_fn(*operands) if pred else else_fn(*operands)
    pred = _scalar_pred(pred, "la.cond: pred")
    avals = [aval_of(a) for a in operands]
    where = [(a._as_entry(), 0) for a in operands]
    then_body = Body(then_fn, "la.cond then_fn", avals, where, tuple)
    else_body = Body(else_fn, "la.cond else_fn", avals, where, tuple)
    _check_branches(then_body, else_body)
    free = union(then_body.free, else_body.free)
    params = COND.make_params({"then_graph": then_body.subgraph(free), "else_graph": else_body.subgraph(free)})
    outs = emit(COND, [pred] + operands, free, params, [then_body, else_body])
    return restructure(outs, then_body.raw)


def _functions(where: str, **fns) -> None:
    """Each of ``fns`` (the traced functions) callable, else ``ParamError`` naming it."""
    for name, f in fns.items():
        callable_arg(f, where, name, "a function of the arrays, e.g. lambda x: x + 1")


def _check_branches(a: Body, b: Body) -> None:
    same_structure = type(a.raw) is type(b.raw) or not any(isinstance(r, (tuple, list)) for r in (a.raw, b.raw))
    if not same_structure or [(x.shape, x.dtype) for x in a.avals] != [(x.shape, x.dtype) for x in b.avals]:
        raise ControlFlowError(
            f"la.cond: the branches must return the same shapes and dtypes{_where()}: then_fn returns "
            f"{_describe(a)}, else_fn returns {_describe(b)}; make them agree (e.g. cast or broadcast one "
            "branch's result)")


def _describe(body: Body) -> str:
    kind = {tuple: "tuple ", list: "list "}.get(type(body.raw), "")
    return kind + signature(body.avals, body.raw)


# -- while_loop ---------------------------------------------------------------------------------------
def while_loop(cond_fn: Callable, body_fn: Callable, loop_vars, max_iterations: int | None = None):
    """Run ``loop_vars = body_fn(*loop_vars)`` while ``cond_fn(*loop_vars)`` is true (JAX semantics),
    at most ``max_iterations`` times when given (MXNet's bound); returns the final vars in the
    structure of ``loop_vars`` (one array, or a tuple / list).

    The body must keep each var's shape and dtype. There is no gradient through a while loop
    (its trip count depends on the data): use ``la.foreach`` with a fixed count to differentiate.

    >>> import lazyarray as la
    >>> i, s = la.array(0), la.array(1.0)
    >>> with la.deferred():
    ...     i, s = la.while_loop(lambda i, s: i < 5, lambda i, s: (i + 1, s * 2), (i, s))
    >>> int(i.item()), float(s.item())
    (5, 32.0)
    """
    _functions("la.while_loop", cond_fn=cond_fn, body_fn=body_fn)
    single = not isinstance(loop_vars, (tuple, list))
    state = as_arrays([loop_vars] if single else loop_vars, "la.while_loop loop_vars")
    if max_iterations is not None and (not isinstance(max_iterations, int) or max_iterations < 0):
        raise ControlFlowError(f"la.while_loop: max_iterations must be None or an int >= 0, got {max_iterations!r}")
    bound = -1 if max_iterations is None else max_iterations
    if not is_deferred():
        return restructure(_while_eager(cond_fn, body_fn, state, bound), loop_vars if not single else state[0])
    avals = [aval_of(a) for a in state]
    where = [(a._as_entry(), 0) for a in state]
    cond_body = Body(cond_fn, "la.while_loop cond_fn", avals, where, tuple)
    _check_scalar(cond_body)
    body = Body(body_fn, "la.while_loop body_fn", avals, where, tuple)
    _check_states(body.avals, avals, "la.while_loop", "loop var")
    free = union(cond_body.free, body.free)
    params = WHILE_LOOP.make_params({"cond_graph": cond_body.subgraph(free), "body_graph": body.subgraph(free),
                                     "n_vars": len(state), "max_iterations": bound})
    outs = emit(WHILE_LOOP, state, free, params, [cond_body, body])
    return restructure(outs, loop_vars if not single else state[0])


def _while_eager(cond_fn, body_fn, state: list, bound: int) -> list:
    done = 0
    while (bound < 0 or done < bound) and _truth(cond_fn(*state), "la.while_loop: cond_fn's result"):
        new = flatten_arrays(body_fn(*state), "la.while_loop body_fn")
        _check_states([aval_of(a) for a in new], [aval_of(a) for a in state], "la.while_loop", "loop var")
        state = new
        done += 1
    return state


def _check_scalar(body: Body) -> None:
    if len(body.avals) != 1 or None in body.avals[0].shape or \
            int(np.prod(body.avals[0].shape, dtype=np.int64)) != 1:
        raise ControlFlowError(f"la.while_loop: cond_fn must return one value (a 0-d or size-1 array), got "
                               f"{signature(body.avals, body.raw)}{_where()}")


def _check_states(new, old, what: str, kind: str) -> None:
    if len(new) != len(old):
        raise ControlFlowError(f"{what}: the body returns {len(new)} {kind}s but got {len(old)}{_where()}; "
                               f"return one new value per {kind}")
    for k, (a, b) in enumerate(zip(new, old)):
        if (a.shape, a.dtype) != (b.shape, b.dtype):
            raise ControlFlowError(
                f"{what}: the body turns {kind} {k} from {b.dtype}{fmt_shape(b.shape)} into "
                f"{a.dtype}{fmt_shape(a.shape)}{_where()}; a {kind} must keep its shape and dtype (cast or "
                "reshape the new value)")


# -- foreach ----------------------------------------------------------------------------------------
def foreach(body_fn: Callable, data, init_states):
    """A scan over axis 0 (MXNet ``contrib.foreach``): ``body_fn(data_slice, states) -> (step_outputs,
    new_states)`` for each index of axis 0; returns ``(outputs, final_states)``, the step outputs
    stacked along a new axis 0.

    ``data`` is an array or a list of arrays (same length along axis 0), ``init_states`` an array
    or a list; ``body_fn`` receives them in the same structure, and the results mirror what it
    returns. Gradients flow to the data, the initial states and the arrays the body closes over.

    >>> import lazyarray as la
    >>> xs = la.array([1.0, 2.0, 3.0])
    >>> with la.deferred():
    ...     sums, total = la.foreach(lambda x, s: (s + x, s + x), xs, la.array(0.0))
    >>> sums.asnumpy(), float(total.item())
    (array([1., 3., 6.], dtype=float32), 6.0)
    """
    data_single = not isinstance(data, (tuple, list))
    _functions("la.foreach", body_fn=body_fn)
    states_single = not isinstance(init_states, (tuple, list))
    xs = as_arrays([data] if data_single else data, "la.foreach data")
    states = as_arrays([init_states] if states_single else init_states, "la.foreach init_states")
    if not xs:
        raise ControlFlowError("la.foreach: data must hold at least one array to scan over")
    for i, a in enumerate(xs):
        aval = aval_of(a)
        if aval.shape is not None and len(aval.shape) == 0:
            which = "data" if data_single else f"data[{i}]"
            raise ShapeError(f"la.foreach: {which} is 0-d ({aval.dtype}[]), but foreach scans axis 0 and needs "
                             "data of at least 1 dim; pass x.reshape(1) for one step, or pass a single "
                             "value as a state or close over it in body_fn" + _where())

    def pack(args):
        d, s = args[:len(xs)], args[len(xs):]
        return (d[0] if data_single else list(d)), (s[0] if states_single else list(s))

    if not is_deferred():
        return _foreach_eager(body_fn, xs, states, pack, init_states)
    shapes = [aval_of(a).shape for a in xs]  # (the avals: checking the lengths agree guards no length)
    if any(len(s) == 0 for s in shapes) or len({s[0] for s in shapes}) != 1:
        raise ControlFlowError("la.foreach: every data array needs the same length along axis 0, got shapes "
                               + ", ".join(fmt_shape(s) for s in shapes) + _where())
    avals = [aval_of(a)._replace(shape=aval_of(a).shape[1:]) for a in xs] + [aval_of(a) for a in states]
    where = [(a._as_entry(), 1) for a in xs] + [(a._as_entry(), 0) for a in states]
    body = Body(lambda *args: _split_step(body_fn(*args), len(states)), "la.foreach body_fn", avals, where,
                lambda args: pack(args))
    step_out = body.raw.step[0]
    n_out = len(body.avals) - len(states)
    _check_states(list(body.avals[n_out:]), [aval_of(a) for a in states], "la.foreach", "state")
    params = FOREACH.make_params({"body": body.subgraph(body.free), "n_data": len(xs), "n_states": len(states)})
    outs = emit(FOREACH, xs + states, body.free, params, [body])
    return restructure(outs[:n_out], step_out), restructure(outs[n_out:n_out + len(states)], init_states)


def _split_step(res, n_states: int):
    """A body's ``(step_outputs, new_states)`` as one flat tuple, remembering the structure."""
    if not isinstance(res, (tuple, list)) or len(res) != 2:
        raise ControlFlowError("la.foreach: body_fn must return (step_outputs, new_states), got "
                               f"{type(res).__name__}" + _where())
    return _Step(res)


class _Step(tuple):
    """The flat outputs of a foreach body, keeping what it returned (``step_out, new_states``)."""

    def __new__(cls, res):
        outs = flatten_arrays(res[0], "la.foreach body_fn (step outputs)")
        new = list(res[1]) if isinstance(res[1], (tuple, list)) else [res[1]]
        self = super().__new__(cls, outs + flatten_arrays(new, "la.foreach body_fn (new states)") if new else outs)
        self.step = res
        return self


def _foreach_eager(body_fn, xs, states, pack, init_states):
    steps = xs[0].shape[0]
    if any(a.shape[:1] != (steps,) for a in xs):
        raise ControlFlowError("la.foreach: every data array needs the same length along axis 0, got shapes "
                               + ", ".join(fmt_shape(a.shape) for a in xs) + _where())
    if steps == 0:  # no step runs: the graph op knows the output shapes from the traced body
        with deferred():
            return foreach(body_fn, *pack(xs + states))
    per_step, step_out = [], None
    for t in range(steps):
        out = body_fn(*pack([x[t] for x in xs] + states))
        if not isinstance(out, (tuple, list)) or len(out) != 2:
            raise ControlFlowError("la.foreach: body_fn must return (step_outputs, new_states), got "
                                   f"{type(out).__name__}" + _where())
        step_out = out[0]
        new = flatten_arrays(out[1], "la.foreach body_fn (new states)")
        _check_states([aval_of(a) for a in new], [aval_of(a) for a in states], "la.foreach", "state")
        per_step.append(flatten_arrays(out[0], "la.foreach body_fn (step outputs)"))
        states = new
    stacked = [_STACK(list(col)) for col in zip(*per_step)]
    return restructure(stacked, step_out), restructure(states, init_states)
