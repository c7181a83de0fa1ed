"""Control flow as graph ops: ``cond``, ``while_loop`` and ``foreach``, each one registered op.

Their bodies are sub-graphs held as typed parameters (``SUBGRAPH``, as the ``call`` op's), so
the registry, the gradient pass, the executor, the JSON format and the drawing describe them
like any other op. A kernel runs a body through ``SubGraph.run``, which compiles it once per
input signature: a loop body's buffers are planned once and reused by every iteration.

Inputs, in order (free variables lifted out of the bodies come last, see ``lazyarray/control_flow.py``):

* ``cond(pred, *operands)``: both branches take every operand; outputs: the branch's outputs.
* ``while_loop(*loop_vars, *free)``: ``cond_graph`` gives a scalar, ``body_graph`` the new vars.
* ``foreach(*data, *states, *free)``: ``body`` maps (one slice of each data array along axis 0,
  states, free) to (step outputs, new states); outputs: the step outputs stacked along a new
  axis 0, the final states, then (``save_states``) the states each step started from, stacked:
  hidden outputs that only the gradient (a reverse scan) reads.

Gradients are graphs of these same ops: a ``cond`` of the two branches' vector-Jacobian products,
and for ``foreach`` a ``foreach`` over reversed time of the body's vector-Jacobian product.
``while_loop`` has no gradient (its trip count is data-dependent): use ``foreach`` with a fixed count.
"""
from __future__ import annotations

from ..aval import Aval
from ..errors import AutogradError, ShapeError, fmt_shape
from ..graph.build import GRAPH_F, record_node
from ..graph.node import Entry, Node, var_node
from ..graph.passes.gradient import gradient
from ..graph.passes.placement import placement
from ..graph.symbol import Symbol
from ..kernels import install as install_kernels
from ..ops.params import BOOL, INT, Param
from ..ops.registry import OpDef, register
from .call import SUBGRAPH, SubGraph

_REVERSE = (slice(None, None, -1),)


# -- running bodies ---------------------------------------------------------------------------
def _truth(pred) -> bool:
    """The Python truth of a size-1 predicate value (NumPy or CuPy)."""
    return bool(pred.reshape(-1)[0])


def _result(values: list):
    return values[0] if len(values) == 1 else tuple(values)


def _owned(xp, values, inputs) -> list:
    """``values`` with every value that is one of ``inputs`` copied (a kernel's outputs own their memory)."""
    ids = {id(a) for a in inputs}
    return [xp.array(v, copy=True) if id(v) in ids else v for v in values]


def body_avals(graph: SubGraph, in_shapes) -> tuple[Aval, ...]:
    """Output avals of ``graph`` for input shapes ``in_shapes`` (the recorded ones when they match)."""
    if len(in_shapes) == len(graph.inputs) and \
            any(tuple(s) != n.avals[0].shape for s, n in zip(in_shapes, graph.inputs) if n.avals[0].dtype is not None):
        return graph.out_avals([n.avals[0]._replace(shape=tuple(s)) for s, n in zip(in_shapes, graph.inputs)])
    return graph.avals


def _one_or_list(items: list):
    return items[0] if len(items) == 1 else list(items)


# -- cond -----------------------------------------------------------------------------------
def _cond_kernel(xp, pred, *operands, then_graph, else_graph, out=None):
    graph = then_graph if _truth(pred) else else_graph
    return _result(_owned(xp, graph.run(operands), operands))


def _cond_shape(shapes, then_graph, else_graph):
    return _one_or_list([a.shape for a in body_avals(then_graph, shapes[1:])])


def _cond_dtype(dtypes, then_graph, else_graph):
    return _one_or_list([a.dtype for a in then_graph.avals])


def _cond_grad(F, ins, outs, g, then_graph, else_graph):
    gs = g if isinstance(g, list) else [g]
    in_avals = tuple(e.aval for e in ins[1:])
    params = COND.make_params({"then_graph": vjp_graph(then_graph, in_avals),
                               "else_graph": vjp_graph(else_graph, in_avals)})
    res = record_node(COND, [ins[0], *ins[1:], *gs], params)
    res = (res,) if isinstance(res, Entry) else res
    return [None, *res]


COND = register(OpDef(
    "cond", ("pred", "*operands"), _cond_kernel,
    params=(Param("then_graph", SUBGRAPH), Param("else_graph", SUBGRAPH)),
    num_outputs=lambda params: params["then_graph"].n_outputs,
    shape=_cond_shape, dtype=_cond_dtype, grad=_cond_grad,
    doc="run `then_graph` on the operands when the size-1 `pred` is true, else `else_graph` (la.cond)"))


# -- while_loop -----------------------------------------------------------------------------
def _while_kernel(xp, *arrays, cond_graph, body_graph, n_vars, max_iterations, out=None):
    state, free = list(arrays[:n_vars]), list(arrays[n_vars:])
    done = 0
    while (max_iterations < 0 or done < max_iterations) and _truth(cond_graph.run(state + free)[0]):
        state = body_graph.run(state + free)
        done += 1
    return _result(_owned(xp, state, arrays))


def _while_shape(shapes, cond_graph, body_graph, n_vars, max_iterations):
    return _one_or_list([tuple(s) for s in shapes[:n_vars]])


def _while_dtype(dtypes, cond_graph, body_graph, n_vars, max_iterations):
    return _one_or_list(list(dtypes[:n_vars]))


def _while_grad(F, ins, outs, g, **params):
    raise AutogradError("while_loop has no gradient (its number of iterations depends on the data); to "
                        "differentiate a loop, use la.foreach with a fixed count (a scan over axis 0), or "
                        "call .detach() on the loop's inputs")


WHILE_LOOP = register(OpDef(
    "while_loop", ("*args",), _while_kernel,
    params=(Param("cond_graph", SUBGRAPH), Param("body_graph", SUBGRAPH), Param("n_vars", INT),
            Param("max_iterations", INT, -1)),
    num_outputs=lambda params: params["n_vars"],
    shape=_while_shape, dtype=_while_dtype, grad=_while_grad,
    doc="repeat `body_graph` on the loop vars while `cond_graph` is true, at most `max_iterations` times "
        "(-1: no bound) (la.while_loop)"))


# -- foreach --------------------------------------------------------------------------------
def _foreach_kernel(xp, *arrays, body, n_data, n_states, save_states, out=None):
    data = arrays[:n_data]
    states = list(arrays[n_data:n_data + n_states])
    free = list(arrays[n_data + n_states:])
    steps = data[0].shape[0]
    in_shapes = [d.shape[1:] for d in data] + [a.shape for a in arrays[n_data:]]
    avals = body_avals(body, in_shapes)
    n_out = body.n_outputs - n_states
    if out is not None:  # planned buffers: stacked outputs, final states, saved states
        out = out if isinstance(out, tuple) else (out,)  # (one output: out=buf)
        ys, saved = list(out[:n_out]), list(out[n_out + n_states:])
    else:
        ys = [xp.empty((steps,) + tuple(a.shape), a.dtype) for a in avals[:n_out]]
        saved = [xp.empty((steps,) + s.shape, s.dtype) for s in states] if save_states else []
    prog = None  # every step has the same signature (a state keeps its shape): one program, looked up once
    for t in range(steps):
        for k, s in enumerate(saved):
            s[t] = states[k]
        args = [d[t] for d in data] + states + free
        if prog is None:
            prog = body.program(args)
        res = prog.run(args)
        for k, y in enumerate(ys):
            y[t] = res[k]
        states = res[n_out:]
    if out is not None:
        for o, st in zip(out[n_out:n_out + n_states], states):
            o[...] = st
        return _result(list(out))
    return _result(ys + _owned(xp, states, arrays) + saved)


def _foreach_shape(shapes, body, n_data, n_states, save_states):
    data = [tuple(s) for s in shapes[:n_data]]
    if any(len(s) == 0 for s in data):
        raise ShapeError("foreach: every data array needs an axis 0 to scan over, got shapes "
                         + ", ".join(fmt_shape(s) for s in data))
    steps = data[0][0]
    if any(s[0] != steps for s in data):
        raise ShapeError("foreach: data arrays must have the same length along axis 0, got shapes "
                         + ", ".join(fmt_shape(s) for s in data))
    states = [tuple(s) for s in shapes[n_data:n_data + n_states]]
    avals = body_avals(body, [s[1:] for s in data] + [tuple(s) for s in shapes[n_data:]])
    n_out = body.n_outputs - n_states
    for k, (s, a) in enumerate(zip(states, avals[n_out:])):
        if a.shape != s:
            raise ShapeError(f"foreach: the body turns state {k} of shape {fmt_shape(s)} into shape "
                             f"{fmt_shape(a.shape)}; a state must keep its shape")
    out = [(steps,) + tuple(a.shape) for a in avals[:n_out]] + states
    if save_states:
        out += [(steps,) + s for s in states]
    return _one_or_list(out)


def _foreach_dtype(dtypes, body, n_data, n_states, save_states):
    n_out = body.n_outputs - n_states
    states = list(dtypes[n_data:n_data + n_states])
    return _one_or_list([a.dtype for a in body.avals[:n_out]] + states + (states if save_states else []))


def _foreach_grad(F, ins, outs, g, body, n_data, n_states, save_states):
    """Gradient through time: a ``foreach`` over reversed time whose body is the body's vjp.

    Carried states: the gradient with respect to the state (``gh``) and the sums of the free
    variables' gradients (``acc``); scanned data: the inputs of each step, the states it started
    from (the hidden saved outputs), and the head gradients of its outputs and saved states.
    """
    if not save_states:
        raise AutogradError("foreach(save_states=False) keeps no per-step states, so it has no gradient; "
                            "this happens for a gradient of a gradient through foreach, which is not supported")
    outs = outs if isinstance(outs, list) else [outs]
    gs = g if isinstance(g, list) else [g]
    d, s = n_data, n_states
    n_out = body.n_outputs - s
    free = list(ins[d + s:])
    in_avals = tuple(e.aval._replace(shape=e.aval.shape[1:]) for e in ins[:d]) + tuple(e.aval for e in ins[d:])
    rev = vjp_scan_graph(body, in_avals, d, s)

    def flip(e):
        return F.getitem(e, key=_REVERSE)

    data = [flip(x) for x in ins[:d]] + [flip(h) for h in outs[n_out + s:]] + \
        [flip(gy) for gy in gs[:n_out]] + [flip(gh) for gh in gs[n_out + s:]]
    init = list(gs[n_out:n_out + s]) + [F.zeros_like(f) for f in free]
    params = FOREACH.make_params({"body": rev, "n_data": len(data), "n_states": s + len(free),
                                  "save_states": False})
    res = record_node(FOREACH, data + init + free, params)
    res = (res,) if isinstance(res, Entry) else res
    return [flip(dx) for dx in res[:d]] + list(res[d:d + s + len(free)])


FOREACH = register(OpDef(
    "foreach", ("*args",), _foreach_kernel,
    params=(Param("body", SUBGRAPH), Param("n_data", INT), Param("n_states", INT), Param("save_states", BOOL, True)),
    num_outputs=lambda params: params["body"].n_outputs + (params["n_states"] if params["save_states"] else 0),
    shape=_foreach_shape, dtype=_foreach_dtype, grad=_foreach_grad, writes_out=True,
    doc="scan `body` over axis 0 of the data, carrying states (la.foreach): step outputs stacked, final "
        "states, then the per-step states (read by the gradient)"))
install_kernels()  # foreach's runner (kernels/foreach.py: small recurrent bodies as one written-out loop)


# -- vector-Jacobian products of bodies -------------------------------------------------------
class _Vjp:
    """A body's graph with fresh inputs ``xs``, its outputs ``ys``, head-gradient inputs ``gs`` and
    the gradient of each input (``dxs``, zeros where no gradient reaches)."""

    def __init__(self, graph: SubGraph, in_avals):
        # fresh inputs with the avals of this call and every aval inferred again: a body traced for
        # one batch size is differentiated in a graph compiled for another
        given = dict(zip(graph.names, in_avals))
        sym = placement(graph.sym, given)
        have = {n.name: n for n in sym.input_nodes()}
        self.xs = [have.get(nm) or var_node(nm, a) for nm, a in given.items()]
        self.ys = list(sym.outputs)
        self.gs = [var_node(f"grad{j}", y.aval) for j, y in enumerate(self.ys)]
        got = gradient(self.ys, [Entry(gn) for gn in self.gs], [Entry(x) for x in self.xs])
        self.dxs = [dx if dx is not None else GRAPH_F.zeros_like(Entry(x)) for dx, x in zip(got, self.xs)]


def _derived(graph: SubGraph, key, make):
    got = graph.derived.get(key)
    if got is None:
        got = graph.derived[key] = make()
    return got


def vjp_graph(graph: SubGraph, in_avals: tuple) -> SubGraph:
    """``(inputs..., output grads...) -> input grads``: the vjp of ``graph`` (a cond's gradient branch)."""
    def make():
        v = _Vjp(graph, in_avals)
        return SubGraph(Symbol(v.dxs), [n.name for n in v.xs + v.gs])

    return _derived(graph, ("vjp", in_avals), make)


def vjp_scan_graph(body: SubGraph, in_avals: tuple, n_data: int, n_states: int) -> SubGraph:
    """The body of the reverse scan of ``foreach``'s gradient (see ``_foreach_grad`` for its inputs).

    Step outputs: the data gradients; new states: the state gradient for the step before, and the
    free variables' gradient sums.
    """
    def make():
        v = _Vjp(body, in_avals)
        d, s = n_data, n_states
        n_out = len(v.ys) - s
        xs, hs, fs = v.xs[:d], v.xs[d:d + s], v.xs[d + s:]
        g_saved = [var_node(f"grad_saved{j}", h.avals[0]) for j, h in enumerate(hs)]
        acc = [var_node(f"acc{j}", f.avals[0]) for j, f in enumerate(fs)]
        dhs = [GRAPH_F.add(dh, Entry(gn)) for dh, gn in zip(v.dxs[d:d + s], g_saved)]
        sums = [GRAPH_F.add(Entry(a), df) for a, df in zip(acc, v.dxs[d + s:])]
        inputs: list[Node] = xs + hs + v.gs[:n_out] + g_saved + v.gs[n_out:] + acc + fs
        return SubGraph(Symbol(v.dxs[:d] + dhs + sums), [n.name for n in inputs])

    return _derived(body, ("scan_vjp", in_avals, n_data, n_states), make)
