"""Inference: a recurrent layer's input projection moved into its ``foreach`` body.

An imported LSTM or GRU (``onnx/import_rnn.py``) projects every time step's input before the
loop: ``foreach(add(matmul(x, W), b), ...)`` (the reverse direction: the projection flipped in
time, ``getitem(..., ::-1)``). At a small batch and hidden size those two steps, a product of a
few thousand multiply-adds and a bias add, each cost as much in per-step overhead as the whole
compiled time loop (``foreach[compiled_cell]``) spends on them. This pass gives the body the
step's input instead: a new data input ``x_t`` and loop-invariant inputs ``W`` and ``b`` (appended
after the body's own free inputs), and the body computes ``add(matmul(x_t, W), b)`` where it read
the projected step. The reverse direction scans ``getitem(x, ::-1)`` (a view). Values: each step's
product is the same product of ``x[t]`` by ``W`` (summed in another order than one BLAS call over
every step: equal within rounding).

Applied only where a compiled cell will run the body (numba on), the body has one data input and
saves no states, the projection and its bias add are read by this loop only, ``x`` is [time, batch,
features] and ``W`` 2-D, ``b`` one row; the projection's multiply-adds per step stay within the tuning
table's ``foreach_projection_max_macs``, over all the steps (the traced length times the rows, features
and units) within its ``foreach_projection_max_call_macs`` (past either one BLAS product over every
step wins: the loop's products cost about the same per multiply-add at any length, the hoisted
product a fixed two program steps and less per multiply-add), and the body's within
``foreach_cell_max_macs``, at the traced batch.
"""
from __future__ import annotations

from ... import jit
from ...caches import NamedCache
from ...ops import registry
from ...tuning_table import current as tuning
from ..build import record_node
from ..node import Entry, Node, var_node
from ..rewrite import has_op, rewrite, use_counts
from ..symbol import Symbol

_REVERSE = (slice(None, None, -1),)
# (body, projection avals) -> the body with its projection: one per layer, whatever the signature,
# so the compiled cell's first-calls count (kernels/rnn_cell.Entry) runs over every signature
BODIES = NamedCache("foreach bodies with their input projection", 64)


def _op(e: Entry, name: str) -> Node | None:
    n = e.node
    return n if n.op is not None and n.op.name == name and e.index == 0 else None


def _flip(data: Entry, uses) -> tuple[Entry, bool] | None:
    """(what a time flip ``getitem(v, ::-1)`` of ``data`` reads, True), or (``data``, False); None where
    the flip is read elsewhere too."""
    flip = _op(data, "getitem")
    if flip is None or flip.params.get("key") != _REVERSE:
        return data, False
    return (flip.inputs[0], True) if uses.get(id(flip), 0) == 1 else None


def _projection(data: Entry, uses) -> tuple | None:
    """``(matmul node, add node or None, the bias's input index, flipped)`` where ``data`` is
    ``[add](matmul(x, W), b)``, flipped in time before or after the add or not at all, each value read
    only here; else None."""
    got = _flip(data, uses)
    if got is None:
        return None
    data, flipped = got
    add, b_at = _op(data, "add"), None
    if add is not None:
        b_at = 1 if len(add.inputs[1].aval.shape) == 1 else 0
        if uses.get(id(add), 0) != 1 or len(add.inputs[b_at].aval.shape) != 1:
            return None
        got = _flip(add.inputs[1 - b_at], uses)
        if got is None or (got[1] and flipped):
            return None
        data, flipped = got[0], flipped or got[1]
    mm = _op(data, "matmul")
    if mm is None or uses.get(id(mm), 0) != 1:
        return None
    x, w = (e.aval for e in mm.inputs)
    if len(x.shape) != 3 or len(w.shape) != 2 or not all(isinstance(d, int) for d in x.shape + w.shape) \
            or x.dtype != w.dtype or x.dtype.kind != "f" or x.stype != "default" or w.stype != "default":
        return None
    if add is not None and (add.inputs[b_at].aval.shape[0] != w.shape[1] or add.inputs[b_at].aval.dtype != w.dtype):
        return None
    return mm, add, b_at, flipped


def _cell_macs(body) -> int:
    """Multiply-adds per batch row and step of the body's products by 2-D matrices."""
    total = 0
    for n in body.sym.topo():
        if n.op is not None and n.op.name == "matmul" and len(n.inputs[1].aval.shape) == 2:
            k, m = n.inputs[1].aval.shape
            total += k * m if isinstance(k, int) and isinstance(m, int) else 1 << 40
    return total


def _fresh(body, stem: str) -> str:
    name, k = stem, 0
    while name in body.names:
        k += 1
        name = f"{stem}{k}"
    return name


def _new_body(body, x: Entry, w: Entry, b: Entry | None):
    """The body reading ``x_t`` (one step of ``x``) and computing its projection by ``w`` (+ ``b``),
    made once per body and projection (``BODIES``); None where the projection's step does not have
    the aval of the body's data input."""
    key = (id(body), x.aval.shape[2], x.aval.dtype, x.aval.device, w.aval, None if b is None else b.aval)
    hit = BODIES.get(key)
    if hit is not None and hit[0] is body:
        return hit[1]
    new = _projected(body, x, w, b)
    BODIES.put(key, (body, new))
    return new


def _projected(body, x: Entry, w: Entry, b: Entry | None):
    old = body.inputs[0]
    rows = old.avals[0].shape[0]
    x_in = var_node(_fresh(body, "proj_x"), x.aval._replace(shape=(rows, x.aval.shape[2])))
    w_in = var_node(_fresh(body, "proj_w"), w.aval)
    extra = [w_in]
    step = record_node(registry.get("matmul"), [Entry(x_in, 0), Entry(w_in, 0)], {}, source=old.source)
    if b is not None:
        b_in = var_node(_fresh(body, "proj_b"), b.aval)
        extra.append(b_in)
        step = record_node(registry.get("add"), [step, Entry(b_in, 0)], {}, source=old.source)
    if step.aval.shape != old.avals[0].shape or step.aval.dtype != old.avals[0].dtype:
        return None
    sym = rewrite(body.sym, lambda n, ins: (step,) if n is old else None)
    # (the body's own class, the executor's SubGraph: this floor reads graphs and does not import it)
    return type(body)(sym, [x_in.name] + body.names[1:] + [n.name for n in extra])


def scan_projection(sym: Symbol) -> Symbol:
    """``sym`` with each foreach's input projection computed by its body, step by step.

    >>> import lazyarray as la, numpy as np
    >>> x, w = la.array(np.ones((5, 2, 3), "float32")), la.array(np.ones((3, 4), "float32"))
    >>> u, h0 = la.array(np.ones((4, 4), "float32")), la.array(np.zeros((2, 4), "float32"))
    >>> def cell(xt, s):
    ...     h = la.tanh(xt + la.matmul(s[0], u))
    ...     return h, [h]
    >>> with la.deferred():
    ...     ys, _ = la.foreach(cell, la.matmul(x, w), [h0])
    >>> sym = la.get_symbol(ys, inputs={})  # (recorded: the loop saves its states for a gradient)
    >>> scan_projection(sym) is sym  # (an imported LSTM's inference graph: tests/graph/passes/test_scan_projection.py)
    True
    """
    if not has_op(sym, "foreach") or not jit.enabled() or tuning().foreach_projection_max_macs <= 0:
        return sym
    uses = use_counts(sym)
    foreach = registry.get("foreach")
    matches = {}  # id(foreach node) -> its projection (_projection)
    for n in sym.topo():
        if n.op is foreach and n.params["n_data"] == 1 and not n.params["save_states"]:
            got = _projection(n.inputs[0], uses)
            if got is not None and _fits(n, got[0]):
                matches[id(n)] = got
    if not matches:
        return sym
    parts = {id(p) for mm, add, _, _ in matches.values() for p in (mm, add) if p is not None}
    new_ins: dict[int, list] = {}  # id(matmul or add node) -> its inputs in the new graph

    def visit(node: Node, ins):
        if id(node) in parts:
            new_ins[id(node)] = ins
            return None
        got = matches.get(id(node))
        if got is None:
            return None
        mm, add, b_at, flipped = got
        (x, w), b = new_ins[id(mm)], new_ins[id(add)][b_at] if add is not None else None
        body = _new_body(node.params["body"], x, w, b)
        if body is None:
            return None
        if flipped:
            x = record_node(registry.get("getitem"), [x], {"key": _REVERSE}, source=node.source)
        operands = [x] + list(ins[1:]) + [w] + ([b] if b is not None else [])
        out = record_node(foreach, operands, dict(node.params, body=body), source=node.source)
        return out if isinstance(out, tuple) else (out,)

    return rewrite(sym, visit, share=True)


def _fits(node: Node, mm: Node) -> bool:
    """Whether the projection's products stay within ``foreach_projection_max_macs`` per step and
    ``foreach_projection_max_call_macs`` over every step (the loop's products cost about the same per
    multiply-add whatever the length, where one BLAS product over every step costs two program steps and
    then less per multiply-add: past the bound, it wins) and the body's, the projection's included,
    within the compiled cell's bound, at the traced batch and length."""
    (steps, batch, feats), units = mm.inputs[0].aval.shape, mm.inputs[1].aval.shape[1]
    tune, per_step = tuning(), batch * feats * units
    return per_step <= tune.foreach_projection_max_macs and steps * per_step <= tune.foreach_projection_max_call_macs \
        and batch * (feats * units + _cell_macs(node.params["body"])) <= tune.foreach_cell_max_macs
