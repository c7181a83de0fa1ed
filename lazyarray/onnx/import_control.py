"""ONNX control flow -> our control-flow ops: ``If`` -> ``cond``, ``Loop`` -> ``while_loop`` (or
``foreach`` when it has scan outputs and a fixed trip count), ``Scan`` -> ``foreach``.

A body graph is converted by the same loader into a Symbol (``OnnxNode.subgraph``); the values of
enclosing graphs it reads by name become extra operands of the node (the ops' free variables).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import sym as S
from ..errors import GraphFormatError
from ..executor.call import SubGraph
from ..graph.symbol import Symbol
from .import_ops import NotKnownWhenLoading, OnnxNode, check_size, constant, iota_along

_REVERSE = (slice(None, None, -1),)


@dataclass
class Body:
    """A converted body graph: its input names and vars, outputs, and captured outer values."""

    names: list
    vars: list  # list[Symbol]
    outs: list  # list[Symbol]
    captured: dict  # outer name -> outer Symbol (the body reads a var of that name)


def _aval(s: Symbol):
    a = s.outputs[0].aval
    return a.shape, a.dtype


def _graph(outs: list, names: list) -> SubGraph:
    return SubGraph(Symbol([o.outputs[0] for o in outs]), list(names))


def _outputs(res: Symbol, n: int) -> list:
    return [res[i] for i in range(n)]


def _scalar(x: Symbol, dtype) -> Symbol:
    x = S.reshape(x, shape=())
    return x if _aval(x)[1] == np.dtype(dtype) else S.cast(x, dtype=dtype)


# -- If ---------------------------------------------------------------------------------------
def if_op(n: OnnxNode) -> list:
    """``cond`` over both branches. A condition known at load time inlines the branch it takes instead:
    always when it is a constant (computed from initializers or shapes), and, when it is computed from
    graph inputs the ``onnx.backend`` was given values for, only where ``cond`` cannot take the branches:
    their outputs differ in shape (ONNX's function expansions switch on the rank so) or are sequences
    or optionals (``import_sequence.py``)."""
    n.arity(1)
    if not isinstance(n.input(0), Symbol):
        n.fail("the condition must be a tensor, not a sequence or optional value")
    if not n.input(0).input_nodes():
        return n.inline("then_branch" if _known(n, 0, "condition") else "else_branch")
    then_b = n.subgraph("then_branch", [])
    else_b = n.subgraph("else_branch", [])
    if len(then_b.outs) != len(else_b.outs):
        n.fail(f"then_branch gives {len(then_b.outs)} outputs, else_branch {len(else_b.outs)}; they must agree")
    for k, (a, b) in enumerate(zip(then_b.outs, else_b.outs)):
        if not isinstance(a, Symbol) or not isinstance(b, Symbol) or _aval(a) != _aval(b):
            taken = _known(n, 0, "condition")
            if taken is not None:
                return n.inline("then_branch" if taken else "else_branch")
            if not isinstance(a, Symbol) or not isinstance(b, Symbol):
                n.fail(f"output {k} is a sequence or optional value; lazyarray imports such an If only when its "
                       "condition is known when the model is loaded")
            n.fail(f"output {k}: then_branch gives {_aval(a)}, else_branch {_aval(b)} (shape, dtype); lazyarray's "
                   "cond needs both branches to give the same shapes and dtypes, or a condition known when the "
                   "model is loaded")
    outer = {**then_b.captured, **else_b.captured}
    names = list(outer)
    res = S.cond(_scalar(n.input(0), bool), list(outer.values()), then_graph=_graph(then_b.outs, names),
                 else_graph=_graph(else_b.outs, names))
    return _outputs(res, len(then_b.outs))


# -- Scan -------------------------------------------------------------------------------------
def _ints_attr(n: OnnxNode, name: str, count: int) -> list:
    v = n.attr(name)
    v = [0] * count if v is None else list(v)
    if len(v) != count:
        n.fail(f"attribute {name!r} has {len(v)} entries, the node has {count} of those")
    return v


def _move(x: Symbol, src: int, dst: int, n: OnnxNode, what: str) -> Symbol:
    """``x`` with its axis ``src`` moved to ``dst`` (negative axes count from the end)."""
    shape = _aval(x)[0]
    if shape is None:
        n.fail(f"{what}: a scan axis other than 0 needs the rank of the value, which is unknown here; "
               "give input_shapes to la.onnx.load")
    rank = len(shape)
    if rank == 0:
        n.fail(f"{what}: the value is a scalar (0-d); a scan runs over an axis, so it needs at least one")
    for a in (src, dst):
        if not -rank <= a < rank:
            n.fail(f"{what}: axis {a} is out of range for a value of rank {rank} (shape {shape})")
    src, dst = src % rank, dst % rank
    if src == dst:
        return x
    perm = [i for i in range(rank) if i != src]
    perm.insert(dst, src)
    return S.transpose(x, axes=tuple(perm))


def scan_op(n: OnnxNode) -> list:
    m = n.attr("num_scan_inputs")
    if m is None or not 1 <= m <= len(n.inputs):
        n.fail(f"num_scan_inputs is {m}, but the node has {len(n.inputs)} inputs")
    n_states = len(n.inputs) - m
    if any(x is None for x in n.inputs):
        n.fail("an omitted input is not supported")
    states, data = list(n.inputs[:n_states]), list(n.inputs[n_states:])
    in_axes = _ints_attr(n, "scan_input_axes", m)
    in_dirs = _ints_attr(n, "scan_input_directions", m)
    for i, (axis, d) in enumerate(zip(in_axes, in_dirs)):
        if d not in (0, 1):
            n.fail(f"scan_input_directions[{i}] is {d}; 0 (forward) or 1 (reverse)")
        data[i] = _move(data[i], axis, 0, n, f"scan_input_axes[{i}] = {axis}")
        if d == 1:
            data[i] = S.getitem(data[i], key=_REVERSE)
    in_avals = [_aval(s) for s in states] + [(None if sh is None else sh[1:], dt)
                                            for sh, dt in (_aval(x) for x in data)]
    body = n.subgraph("body", in_avals)
    k = len(body.outs) - n_states
    if k < 0:
        n.fail(f"the body gives {len(body.outs)} outputs, fewer than the {n_states} states")
    out_axes = _ints_attr(n, "scan_output_axes", k)
    out_dirs = _ints_attr(n, "scan_output_directions", k)
    names = body.names[n_states:] + body.names[:n_states] + list(body.captured)
    sub = _graph(body.outs[n_states:] + body.outs[:n_states], names)
    res = S.foreach([*data, *states, *body.captured.values()], body=sub, n_data=m, n_states=n_states, save_states=True)
    outs = _outputs(res, k + 2 * n_states)
    ys, final = outs[:k], outs[k:k + n_states]
    for i, (axis, d) in enumerate(zip(out_axes, out_dirs)):
        if d not in (0, 1):
            n.fail(f"scan_output_directions[{i}] is {d}; 0 (forward) or 1 (reverse)")
        if d == 1:
            ys[i] = S.getitem(ys[i], key=_REVERSE)
        ys[i] = _move(ys[i], 0, axis, n, f"scan_output_axes[{i}] = {axis}")
    return final + ys


# -- Loop -------------------------------------------------------------------------------------
def _same_value(a: Symbol, b: Symbol) -> bool:
    """Whether ``a`` is ``b`` (possibly through identity-like nodes)."""
    e = a.outputs[0]
    while e.node.op is not None and e.node.op.name in ("identity", "reshape", "copy") and e.node.inputs:
        if e == b.outputs[0]:
            return True
        e = e.node.inputs[0]
    return e == b.outputs[0]


def _true_constant(s: Symbol) -> bool:
    consts = s.constant_nodes()
    if s.input_nodes() or s.outputs[0].node.op is not None or not consts:
        return False
    v = consts[0].value
    v = np.asarray(v.get() if hasattr(v, "get") and not isinstance(v, np.ndarray) else v)
    return v.dtype != object and v.size == 1 and bool(v.reshape(-1)[0])


def _known(n: OnnxNode, i: int, what: str):
    """Input ``i`` as a Python number when it is known at load time, else ``None``."""
    try:
        v = np.asarray(n.const(i, what)).reshape(-1)
    except GraphFormatError:  # computed from graph inputs: known only when running
        return None
    if v.size != 1 or v.dtype.kind not in "biuf" or (v.dtype.kind == "f" and not np.isfinite(v[0])):
        n.fail(f"the {what} must be one finite number, got {v.dtype}{list(v.shape)} {v.reshape(-1)[:4].tolist()}")
    return bool(v[0]) if v.dtype == bool else int(v[0])


def loop_op(n: OnnxNode) -> list:
    if len(n.inputs) < 2:
        n.inputs = list(n.inputs) + [None] * (2 - len(n.inputs))
    m_in, c_in, vs = n.input(0), n.input(1), list(n.inputs[2:])
    if any(v is not None and not isinstance(v, Symbol) for v in (m_in, c_in)):
        n.fail("the trip count and the condition must be tensors, not sequence or optional values")
    if any(v is None for v in vs):
        n.fail("an omitted loop-carried input is not supported")
    if any(not isinstance(v, Symbol) for v in vs):
        return _loop_unrolled(n, m_in, c_in, vs)
    trip = None if m_in is None else _known(n, 0, "trip count M")  # known when loading, else None
    first = None if c_in is None else _known(n, 1, "condition")
    in_avals = [((), np.dtype(np.int64)), ((), np.dtype(bool))] + [_aval(v) for v in vs]
    try:
        body = n.subgraph("body", in_avals)
    except NotKnownWhenLoading:
        if trip is None or (c_in is not None and first is None):
            raise
        # the body needs a value computed from the iteration number (a slice bound) as a fixed one, and the
        # trip count is known: one copy of the body per iteration knows it
        return _loop_unrolled(n, m_in, c_in, vs)
    nv = len(vs)
    k = len(body.outs) - 1 - nv
    if k < 0:
        n.fail(f"the body gives {len(body.outs)} outputs; it must give the condition and the {nv} loop-carried values")
    if k > 0:  # scan outputs: a foreach over the iteration numbers, when the loop runs M times for sure
        return _loop_with_scans(n, body, vs, c_in, trip, first, k)
    return _loop_while(n, body, vs, m_in, c_in, trip)


def _loop_with_scans(n: OnnxNode, body, vs: list, c_in, trip, first, k: int) -> list:
    """A Loop whose body has ``k`` scan outputs: a ``foreach`` over the iteration numbers when it
    runs M times for sure (the count known when loading), else ``_loop_stopping_early``."""
    nv = len(vs)
    always = c_in is None or first is not None
    if first is not None and not first:
        trip = 0 if trip is not None else None
    if trip is None:
        n.fail(f"the body has {k} scan output(s); lazyarray imports those only when the trip count M is "
               "known when loading (it bounds how many rows they may get): give the loop's count as a "
               "constant, or use Scan")
    if not always or not (_same_value(body.outs[0], body.vars[1]) or _true_constant(body.outs[0])):
        return _loop_stopping_early(n, body, vs, c_in, trip, k)
    steps = _iteration_numbers(n, trip)
    names = [body.names[0], *body.names[2:], *body.captured, body.names[1]]
    sub = _graph(body.outs[1 + nv:] + body.outs[1:1 + nv], names)
    res = S.foreach([steps, *vs, *body.captured.values(), constant(np.array(True))], body=sub, n_data=1,
                    n_states=nv, save_states=True)
    outs = _outputs(res, k + 2 * nv)
    return outs[k:k + nv] + outs[:k]


def _loop_while(n: OnnxNode, body, vs: list, m_in, c_in, trip) -> list:
    """A Loop without scan outputs: a ``while_loop`` over (iteration number, condition, the
    loop-carried values); a trip count known only when running joins the condition."""
    nv = len(vs)
    i_var, c_var = body.vars[0], body.vars[1]
    c_out = _scalar(body.outs[0], bool)
    c0 = constant(np.array(True)) if c_in is None else _scalar(c_in, bool)
    names = list(body.names) + list(body.captured)
    free = list(body.captured.values())
    cond = c_var
    if m_in is not None and trip is None:  # a count known only when running: part of the condition
        m_var = S.var("__loop_trip_count", shape=(), dtype=np.int64)
        cond = S.logical_and(cond, S.less(i_var, m_var))
        names.append("__loop_trip_count")
        free.append(_scalar(m_in, np.int64))
    else:
        cond = S.reshape(cond, shape=())
    new_i = S.add(i_var, constant(np.array(1, np.int64)))
    body_graph = _graph([new_i, c_out, *body.outs[1:]], names)
    cond_graph = _graph([cond], names)
    res = S.while_loop([constant(np.array(0, np.int64)), c0, *vs, *free], cond_graph=cond_graph,
                       body_graph=body_graph, n_vars=2 + nv, max_iterations=-1 if trip is None else max(trip, 0))
    return _outputs(res, 2 + nv)[2:]


def _iteration_numbers(n: OnnxNode, trip: int) -> Symbol:
    """``0 .. M - 1``, the size checked first (a few bytes of model can ask for ``M = 2**62``): a
    constant up to ``import_ops.MAX_FOLD_BYTES``, else an ``iota`` computed when the graph runs."""
    count = max(trip, 0)
    check_size(n, (count,), np.int64, "the iteration numbers 0 .. M - 1 (M the trip count)")
    return iota_along(count, 0, 1, np.int64)


def _loop_stopping_early(n: OnnxNode, body: Body, vs: list, c_in, trip: int, k: int) -> list:
    """A Loop with scan outputs that may stop before its count: a ``while_loop`` that also carries one
    buffer of ``trip`` rows per scan output and writes row ``i`` at iteration ``i``; the scan outputs
    are the rows written, ``boolean_mask``ed by ``row < iterations run`` once the loop ends."""
    nv = len(vs)
    i_var = body.vars[0]
    ys = body.outs[1 + nv:]
    rows = _iteration_numbers(n, trip)
    bufs, buf_vars, buf_names, new_bufs = [], [], [], []
    for j, y in enumerate(ys):
        shape, dtype = _aval(y)
        if shape is None or None in shape:
            n.fail(f"scan output {j} of a loop that may stop early needs a static per-iteration shape, got {shape}")
        full, _ = check_size(n, (max(trip, 0),) + tuple(shape), dtype, f"scan output {j}'s rows (M x its shape)")
        name = f"__loop_scan_rows{j}"
        buf = S.var(name, shape=full, dtype=dtype)
        here = S.reshape(S.equal(rows, i_var), shape=(-1,) + (1,) * len(shape))  # row i, broadcastable
        new_bufs.append(S.where(here, S.broadcast_to(S.expand_dims(y, axis=0), shape=full), buf))
        bufs.append(S.broadcast_to(constant(np.zeros((), dtype)), shape=full))
        buf_vars.append(buf)
        buf_names.append(name)
    captured = list(body.captured)
    names = list(body.names) + buf_names + captured
    c_var = body.vars[1]
    new_i = S.add(i_var, constant(np.array(1, np.int64)))
    body_graph = _graph([new_i, _scalar(body.outs[0], bool), *body.outs[1:1 + nv], *new_bufs], names)
    cond_graph = _graph([S.reshape(c_var, shape=())], names)
    c0 = constant(np.array(True)) if c_in is None else _scalar(c_in, bool)
    res = S.while_loop([constant(np.array(0, np.int64)), c0, *vs, *bufs, *body.captured.values()],
                       cond_graph=cond_graph, body_graph=body_graph, n_vars=2 + nv + k, max_iterations=max(trip, 0))
    outs = _outputs(res, 2 + nv + k)
    ran = S.less(rows, outs[0])  # the rows the iterations run wrote
    return outs[2:2 + nv] + [S.boolean_mask(b, ran) for b in outs[2 + nv:]]


UNROLL_LIMIT = 4096  # iterations a Loop carrying sequences may be unrolled into when loading


def _loop_unrolled(n: OnnxNode, m_in, c_in, vs: list) -> list:
    """A Loop carrying sequence or optional values (``import_sequence.py``: their structure must be known
    when loading), or whose body needs its iteration number as a fixed value (a slice bound), with a
    trip count known when loading: the body is converted in place once per iteration, the condition
    known each time (as ONNX's expansion of SequenceMap gives them)."""
    why = ("lazyarray unrolls this Loop when loading (it carries sequence or optional values, or its body needs "
           "the iteration number as a fixed value), so its {} must be known then")
    trip = None if m_in is None else _known(n, 0, "trip count M")
    go = True if c_in is None else _known(n, 1, "condition")
    if (m_in is not None and trip is None) or go is None:
        n.fail(why.format("trip count and condition"))
    if trip is None:
        trip = UNROLL_LIMIT + 1  # no count: until the condition stops it
    nv = len(vs)
    rows: list = []
    i = 0
    while go and i < trip:
        if i == UNROLL_LIMIT:
            n.fail(f"lazyarray unrolls this Loop when loading (it carries sequence or optional values, or its body "
                   f"needs the iteration number as a fixed value), and it runs past {UNROLL_LIMIT} iterations")
        outs = n.inline("body", [constant(np.array(i, np.int64)), constant(np.array(bool(go))), *vs])
        if len(outs) < 1 + nv:
            n.fail(f"the body gives {len(outs)} outputs; it must give the condition and the {nv} loop-carried values")
        go = bool(np.asarray(n.evaluate(outs[0], "the body's condition (" + why.format("condition") + ")")
                             ).reshape(-1)[0])
        vs = list(outs[1:1 + nv])
        rows.append(outs[1 + nv:])
        i += 1
    k = n.n_outputs - nv
    if k and not rows:
        n.fail("the loop runs no iteration, so the shapes of its scan outputs are unknown")
    scans = [S.stack([r[j] for r in rows], axis=0) for j in range(k)]
    return vs + scans


CONTROL_CONVERTERS = {"If": if_op, "Loop": loop_op, "Scan": scan_op}
