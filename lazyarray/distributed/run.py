"""``la.distributed.run``: a graph (or a block's exported graph) run over the pieces of global arrays on Dask.

Plan of one call:

1. the inputs' SBPs: ``sbp=`` where given, else a ``dask.array`` chunked along one axis is
   ``split(axis)`` (one chunk: ``broadcast``), a block's data inputs are ``split(0)`` and
   everything else (parameters, NumPy inputs of a symbol) is ``broadcast``;
2. the number of pieces: the chunk count of the split Dask inputs (they must agree), else the
   number of workers for split NumPy inputs, else 1; a Dask input is then rechunked to agree
   with its SBP (``dask_pieces``: whole along every other axis, ``array_split`` sizes along the
   split axis), and one that cannot be (no such axis, unknown chunk sizes) is refused;
3. ``Symbol.infer_sbp`` annotates the graph and inserts boxing nodes; ``pieces.regions`` cuts
   it at the boxing nodes;
4. Dask tasks: one per region and piece (``worker.run_region``: the region's JSON, scattered
   once to every worker, compiled into a ``CachedOp`` once per worker and piece shape), and
   per boxing node the concatenations / reductions / slices of ``pieces.py``. Broadcast NumPy
   inputs and parameters are resident on the workers by content hash (``params.py``: sent once
   per model, not per call), split ones scattered piece by piece, each to its piece's worker.
   With ``compute=False`` nothing is scattered: the region's JSON and the NumPy pieces are carried
   by the returned graph (``_carried``) and every parameter copy is made from its source task
   (``params.resident(durable=True)``), so the caller's later ``.compute()`` survives a worker's
   death (Dask makes again what the worker held);
5. each piece has a worker (``_owners``: the one holding its chunk of a persisted dask input,
   else the workers in turn); with ``compute=True`` every task of the piece carries the strict
   Dask annotation ``workers=[it], allow_other_workers=False`` (never stolen; the graph is then
   computed unoptimized, as fusion drops annotations), and a pinned worker lost with nothing
   scattered on it plans the call again, once.

Dask is imported only when ``run`` is called.
"""
from __future__ import annotations

import contextlib
import math
import uuid

import numpy as np

from ..aval import Aval
from ..device import cpu
from ..errors import DistributedError, GraphError
from ..graph.passes.bind_dims import bind_dims
from ..graph.passes.placement import placement
from ..graph.symbol import Symbol
from ..ndarray import NDArray, array_from
from ..sbp import SBP, SBPError, broadcast, parse, split, split_sizes
from . import params as params_on_workers
from . import pieces as P
from .bounded import BoundedCall, check_timeout, dask_modules
from .worker import run_region

B = broadcast()


def run(sym_or_block, *, client=None, sbp: dict | None = None, compute: bool = False, timeout=None, **inputs):
    """Run ``sym_or_block`` over global arrays on a Dask cluster.

    ``inputs`` are NumPy arrays, lazyarray arrays or ``dask.array`` arrays, named as the graph's
    inputs (a block's: ``data``, or ``data0..N``); ``sbp`` maps names to ``la.sbp`` values. Returns
    ``dask.array`` arrays (one, or a list), or lazyarray arrays with ``compute=True``. Without
    ``client``, a ``LocalCluster`` is started and closed for the call (results are computed
    before it closes).

    ``timeout`` (seconds; ``None``: ``bounded.DEFAULT_TIMEOUT``, 300 s; ``math.inf``: no bound)
    bounds the call: the wait for workers, the scatters and, with ``compute=True`` (or without
    ``client``), the computation. Past it, or when a worker dies with the only copy of a scattered
    NumPy piece, or the scheduler is lost, ``la.DistributedError`` names what and the fix. A call
    with ``compute=True`` survives a worker's death: it plans itself again over the workers
    present, once. Arrays returned with ``compute=False`` are computed by the caller (``.compute()``),
    outside the bound, and survive it too: nothing they read is scattered (NumPy inputs are carried
    by their graph, as ``da.from_array`` does; the parameters' copies on the workers are made from
    a source task the scheduler can run again, ``params.resident(durable=True)``), so Dask makes
    what a lost worker held again elsewhere.

    >>> import numpy as np, lazyarray as la, pytest
    >>> _ = pytest.importorskip("dask.distributed")  # (the doctest skips without the distributed extra)
    >>> from dask.distributed import Client, LocalCluster
    >>> x = la.sym.var("x", shape=(6, 4))
    >>> y = la.sym.sum(la.sym.exp(x) * 2.0, axis=0)
    >>> with LocalCluster(n_workers=2, processes=False, dashboard_address=None) as cluster, Client(cluster) as c:
    ...     out = la.distributed.run(y, client=c, sbp={"x": la.sbp.split(0)}, x=np.ones((6, 4), "float32"))
    ...     bool(np.allclose(out.compute(), 12 * np.e))
    True
    """
    check_timeout(timeout, "la.distributed.run")
    sym, params = _graph(sym_or_block)
    names = sym.list_inputs()
    values = dict(params)
    unknown = sorted(set(inputs) - set(names))
    if unknown:
        raise GraphError(f"run: no graph input named {', '.join(map(repr, unknown))}; inputs: {', '.join(names)}")
    values.update(inputs)
    missing = [n for n in names if n not in values]
    if missing:
        raise GraphError(f"run: missing inputs {missing}; the graph's inputs are {names}")
    data_names = set(inputs) if not isinstance(sym_or_block, Symbol) else set()
    plan = (sym, names, values, data_names, sbp or {})
    if client is None:
        dd = dask_modules()[2]
        with dd.LocalCluster(processes=True, dashboard_address=":0") as cluster, dd.Client(cluster) as own:
            outs, results = _computed(BoundedCall(own, timeout, "la.distributed.run", _AGAIN, replans=True), plan)
        return _finish(results, outs, compute)
    if compute:
        outs, results = _computed(BoundedCall(client, timeout, "la.distributed.run", _AGAIN, replans=True), plan)
        return _finish(results, outs, True)
    outs, _ = _run(*plan, BoundedCall(client, timeout, "la.distributed.run", _AGAIN), pin=False)
    return outs[0] if len(outs) == 1 else outs


def _computed(call: BoundedCall, plan: tuple) -> tuple[list, list]:
    """The call's outputs (Dask arrays) and their values, each piece's tasks pinned to its worker.

    A pinned worker that leaves the cluster with nothing scattered on it (dask-array inputs, the
    parameters' copies on the other workers) ends the wait at once; the call is then planned again
    over the workers present, once, within the same deadline (Dask recomputes the lost pieces)."""
    for attempt in range(2):
        outs, pins = _run(*plan, call, pin=True)
        try:
            return outs, call.compute(outs, watch=pins)
        except DistributedError:
            if not call.lost_pinned or attempt:
                raise
            call.lost_pinned = False
    raise AssertionError("unreachable")


_AGAIN = "call la.distributed.run again"


def _graph(obj) -> tuple[Symbol, dict]:
    if isinstance(obj, Symbol):
        return obj, {}
    if hasattr(obj, "export_graph"):
        sym, params = obj.export_graph()
        return sym, {k: p.data() for k, p in params.items()}  # (not copied: see _host)
    raise TypeError(f"run: expected a Symbol or a hybridized block, got {type(obj).__name__}")


def _finish(results, outs, compute: bool):
    da = dask_modules()[1]
    if compute:
        res = [array_from(np.asarray(r), cpu(0)) for r in results]
    else:
        res = [da.from_array(np.asarray(r), chunks=o.chunks) for r, o in zip(results, outs)]
    return res[0] if len(res) == 1 else res


def _is_dask(v) -> bool:
    return type(v).__module__.startswith("dask.array") and hasattr(v, "chunks")


def input_sbps(names, values, data_names, given: dict) -> dict[str, SBP]:
    """The SBP of every input (see the module docs, step 1)."""
    out = {}
    for n in names:
        v = values[n]
        if n in given:
            out[n] = parse(given[n])
        elif _is_dask(v):
            split_axes = [k for k, c in enumerate(v.chunks) if len(c) > 1]
            if len(split_axes) > 1:
                raise SBPError(f"input {n!r}: a dask array chunked along several axes {split_axes} (chunks "
                               f"{_chunks_text(v)}) has no SBP; declare one (sbp={{{n!r}: la.sbp.split(axis)}}: it "
                               "is rechunked to agree) or rechunk it along one axis (split) or none (broadcast)")
            out[n] = split(split_axes[0]) if split_axes else B
        else:
            out[n] = split(0) if n in data_names and np.ndim(v) > 0 else B
    return out


def check_inputs(values, sbps: dict[str, SBP]) -> None:
    """Refuse, before any task, the inputs that cannot be made to agree with their SBP: a split
    axis the array lacks, a dask array whose chunk sizes are unknown (they cannot be rechunked)."""
    for k, s in sbps.items():
        v = values[k]
        if s.is_split and s.axis >= len(v.shape):
            raise SBPError(f"input {k!r} of shape {tuple(v.shape)}{_chunks_note(v)} is declared {s}, but it has "
                           f"no axis {s.axis}; split one of its axes 0..{len(v.shape) - 1} or broadcast it")
        if _is_dask(v) and any(math.isnan(c) for c in _flat(v.chunks)):
            raise SBPError(f"input {k!r}: a dask array with unknown chunk sizes (chunks {_chunks_text(v)}) "
                           f"cannot be rechunked to agree with its SBP {s}; call .compute_chunk_sizes() on it first")


def _pieces_count(names, values, sbps, workers: int) -> int:
    counts = {}
    for n in names:
        v = values[n]
        if sbps[n].is_split and _is_dask(v) and len(v.chunks[sbps[n].axis]) > 1:
            counts[n] = len(v.chunks[sbps[n].axis])
    if len(set(counts.values())) > 1:
        listing = ", ".join(f"{k} ({sbps[k]}, chunks {_chunks_text(values[k])}): {c} pieces"
                            for k, c in counts.items())
        raise SBPError(f"run: the split inputs have different numbers of pieces ({listing}); rechunk them "
                       "to the same number of chunks along their split axes")
    if counts:
        return next(iter(counts.values()))
    if any(s.is_split for s in sbps.values()):
        return workers
    return 1


def wanted_chunks(v, s: SBP, n: int) -> tuple:
    """The chunks the dask array ``v`` must have under ``s`` over ``n`` pieces (the chunking rule)."""
    if s.is_split:
        return tuple(tuple(split_sizes(d, n)) if k == s.axis else (d,) for k, d in enumerate(v.shape))
    return tuple((d,) for d in v.shape)


def dask_pieces(what: str, v, s: SBP, n: int, at=None) -> list:
    """The ``n`` pieces (Dask delayed values) of the dask array ``v`` under ``s``: the chunking rule
    (``what`` names ``v`` in the error, ``"input 'x'"``).

    Under ``S(k)`` the array is rechunked whole along every other axis and to ``array_split``
    sizes along ``k`` (one chunk per piece, whatever its chunks were); under ``B`` or ``P`` to
    one chunk, the whole array (``P(sum)``: on piece 0, zeros elsewhere). The chunks are checked
    after rechunking, so a piece is never a part of what the SBP says it holds.
    """
    want = wanted_chunks(v, s, n)
    got = v if v.chunks == want else v.rechunk(want)
    blocks = list(got.to_delayed().ravel())
    if got.chunks != want or len(blocks) != (n if s.is_split else 1):
        raise SBPError(f"{what}: its chunks {_chunks_text(v)} could not be made to agree with {s} over "
                       f"{n} pieces (wanted chunks {want}, got {got.chunks}); rechunk it to {want} yourself")
    if s.is_split:
        return blocks
    if s.is_partial and s.reduce == "sum":
        zeros = []
        for i in range(1, n):
            with at(i) if at is not None else contextlib.nullcontext():
                zeros.append(_delayed(np.zeros_like)(blocks[0]))
        return blocks + zeros
    return blocks * n


def _flat(chunks) -> list:
    return [c for axis in chunks for c in axis]


def _chunks_text(v) -> str:
    return str(tuple(tuple(c) for c in v.chunks))


def _chunks_note(v) -> str:
    return f" (chunks {_chunks_text(v)})" if _is_dask(v) else ""


def _run(sym, names, values, data_names, given, call: BoundedCall, *, pin: bool) -> tuple[list, dict]:
    """The call's output arrays and ``{worker: what is pinned to it}``. ``pin``: each piece's tasks
    carry a Dask annotation ``workers=[its worker], allow_other_workers=False`` (not stolen)."""
    sbps = input_sbps(names, values, data_names, given)  # (from shapes only)
    values = {k: _host(v, _replicated(sbps[k])) for k, v in values.items()}
    check_inputs(values, sbps)
    workers = call.workers()  # (none: a DistributedError by the deadline, before anything is scattered)
    n = _pieces_count(names, values, sbps, len(workers))
    avals = {k: Aval(tuple(v.shape), np.dtype(v.dtype), cpu(0)) for k, v in values.items()}
    # the global sizes bound first (symbolic sizes, pinned inputs checked), as a CachedOp would
    ann = placement(bind_dims(sym, avals, "la.distributed.run"), avals).infer_sbp(pieces=n, **sbps)
    _check_random(ann, n)
    at = _Pins(_owners(values, sbps, n, workers, call), pin)
    whole = {k: v for k, v in values.items() if not _is_dask(v) and _replicated(sbps[k])}
    copies = params_on_workers.resident(call, whole, sorted(set(at.owners)), durable=not pin) if whole else {}
    env: dict[tuple[int, int], list] = {}
    for node in ann.input_nodes():
        if node.name in copies:
            env[(id(node), 0)] = [copies[node.name][w] for w in at.owners]
        else:
            env[(id(node), 0)] = _input_pieces(f"input {node.name!r}", values[node.name], sbps[node.name], n, call, at)
    boxed = {id(e.node) for b in ann.topo() if b.op is not None and b.op.name == "boxing" for e in b.inputs}
    for node in ann.constant_nodes():  # (regions carry their constants; these are for boxing nodes)
        if id(node) in boxed:
            env[(id(node), 0)] = _input_pieces(f"constant {node.name!r}", np.asarray(node.value), B, n, call, at)
    for kind, item in P.regions(ann):
        if kind == "region":
            _region_tasks(item, env, n, call, at)
        else:
            src = item.inputs[0]
            env[(id(item), 0)] = _box(env[(id(src.node), src.index)], item.params["src"], item.params["dst"], at)
    return _outputs(ann, env, n, at), at.listing()


def _host(v, whole: bool):
    """``v`` as a NumPy array (a dask array as it is). A whole (replicated) lazyarray value on the CPU is
    its own buffer, not a copy: ``params.resident`` only hashes it (by buffer version) and copies it when
    it must be sent; anything else that is scattered is a copy the caller cannot write meanwhile."""
    if isinstance(v, NDArray):
        if whole and not v.is_lazy and v._value.__class__ is np.ndarray:
            return v._value
        return v.asnumpy()
    return v if _is_dask(v) else np.asarray(v)


def _replicated(s: SBP) -> bool:
    return s.is_broadcast or (s.is_partial and s.reduce != "sum")


def _region_tasks(item, env: dict, n: int, call: BoundedCall, at) -> None:
    """One ``run_region`` task per piece (on the piece's worker); the region's outputs' pieces into ``env``."""
    delayed = dask_modules()[0].delayed
    text = _carried(item.symbol.to_json()) if not at.pin else \
        call.scatter(item.symbol.to_json(), "a region's graph", broadcast=True)
    nout = len(item.outputs)
    names_in = tuple(f"in{i}" for i in range(len(item.inputs)))
    for e in item.inputs:
        if (id(e.node), e.index) not in env:
            raise GraphError(f"run: no pieces for {e.node.label()!r}")  # (regions come in order)
    per_piece = []
    for i in range(n):
        args = [env[(id(e.node), e.index)][i] for e in item.inputs]
        with at(i):
            per_piece.append(delayed(run_region, nout=nout, pure=False)(text, names_in, *args))
    for j, e in enumerate(item.outputs):
        env[(id(e.node), e.index)] = [per_piece[i][j] for i in range(n)]


def _outputs(ann: Symbol, env: dict, n: int, at) -> list:
    """The graph's outputs as Dask arrays: split ones concatenated (lazy), partial ones reduced by
    a tree among the pieces' workers, broadcast ones piece 0."""
    da = dask_modules()[1]
    outs = []
    for e in ann.outputs:
        pieces, s, a = env[(id(e.node), e.index)], e.node.sbp[e.index], e.aval
        if s.is_split:
            parts = []
            for i, p in enumerate(pieces):
                with at(i):
                    parts.append(da.from_delayed(_as_delayed(p), shape=P.physical_shape(a.shape, s, i, n),
                                                 dtype=a.dtype))
            outs.append(da.concatenate(parts, axis=s.axis))
        elif s.is_partial:
            with at(0):
                outs.append(da.from_delayed(_tree_reduce(pieces, s.reduce, at), shape=a.shape, dtype=a.dtype))
        else:
            with at(0):
                outs.append(da.from_delayed(_as_delayed(pieces[0]), shape=a.shape, dtype=a.dtype))
    return outs


class _Pins:
    """Which worker runs piece ``i`` (``owners[i]``); ``at(i)``: a context in which the Dask tasks
    made carry that worker as a strict restriction (``pin``; else no annotation)."""

    def __init__(self, owners: list[str], pin: bool):
        self.owners, self.pin = owners, pin

    def __call__(self, i: int):
        if not self.pin:
            return contextlib.nullcontext()
        return dask_modules()[0].annotate(workers=[self.owners[i]], allow_other_workers=False)

    def listing(self) -> dict:
        out: dict[str, list[int]] = {}
        for i, w in enumerate(self.owners):
            out.setdefault(w, []).append(i)
        return {w: f"the tasks of piece(s) {', '.join(map(str, ix))} (pinned to it)" for w, ix in out.items()}


def _owners(values: dict, sbps: dict, n: int, workers: list[str], call: BoundedCall) -> list[str]:
    """The worker of each piece: where a persisted split dask input already holds it (its chunks
    agree with its SBP, so the piece is that chunk), else the workers in turn."""
    workers = sorted(workers)
    owners = [workers[i % len(workers)] for i in range(n)]
    for k, v in values.items():
        s = sbps[k]
        if not (_is_dask(v) and s.is_split and v.chunks == wanted_chunks(v, s, n)):
            continue
        where = call.who_has(v)
        keys = [key for key in dask_modules()[0].core.flatten(v.__dask_keys__())]
        found = [(where.get(key) or [None])[0] for key in keys]
        if all(w in workers for w in found):
            return found
    return owners


def _check_random(ann: Symbol, n: int) -> None:
    """A random op with a broadcast output would draw a different "whole" array on every piece."""
    if n < 2:
        return
    for node in ann.topo():
        if node.op is not None and node.op.random and any(s.is_broadcast for s in node.sbp):
            raise SBPError(f"run: {node.op.name} ({node.name!r}) draws random values on each of the {n} pieces, "
                           "but its result is broadcast (every piece must hold the same array); draw it "
                           "outside the graph and pass it as an input, or give it a split input (dropout_mask)")


def _as_delayed(p):
    dask = dask_modules()[0]
    return p if hasattr(p, "dask") else dask.delayed(_identity)(p)


def _identity(x):
    return x


def _input_pieces(what: str, v, s: SBP, n: int, call: BoundedCall, at) -> list:
    if _is_dask(v):
        return dask_pieces(what, v, s, n, at)
    if not at.pin:  # (compute=False: pieces the graph carries, which Dask can make again after a worker's death)
        if _replicated(s):
            return [_carried(v)] * n
        return [_carried(p) for p in P.split_value(v, s, n)]
    if _replicated(s):
        return [call.scatter(v, what, broadcast=True)] * n
    return call.scatter_each(P.split_value(v, s, n), [f"{what} piece {i} of {n}" for i in range(n)], at.owners)


def _carried(value):
    """``value`` (a NumPy array, a graph's text) carried by the Dask graph itself, as ``da.from_array``
    does: a key whose data the graph holds, so Dask can make it again on any worker (a scattered key
    lost with its worker cannot be). A copy of an array: the caller may write theirs before computing."""
    data = np.array(value, copy=True) if isinstance(value, np.ndarray) else value
    return dask_modules()[0].delayed(data, name=f"la-data-{uuid.uuid4().hex}")


def _delayed(f):
    dask = dask_modules()[0]
    return dask.delayed(f, pure=True)


def _tree_reduce(pieces: list, how: str, at):
    """Pairwise reduction among the pieces' workers (pair ``(i, j)`` on piece ``i``'s worker): log2(n)
    rounds of tasks instead of one task reading every piece; the client receives only the sum."""
    level = list(enumerate(pieces))
    while len(level) > 1:
        nxt = []
        for k in range(0, len(level) - 1, 2):
            (i, a), (_, b) = level[k], level[k + 1]
            with at(i):
                nxt.append((i, _delayed(P.reduce)([a, b], how)))
        if len(level) % 2:
            nxt.append(level[-1])
        level = nxt
    return _as_delayed(level[0][1])


def _box(pieces: list, src: SBP, dst: SBP, at) -> list:
    """The Dask tasks of one boxing node (``pieces.box`` is the NumPy reference), each on the worker
    of the piece it makes (a slice: on the worker of the piece it cuts), never through the client."""
    n = len(pieces)
    d = _delayed

    def on(i, f, *args):
        with at(i):
            return d(f)(*args)

    if src.is_broadcast:
        if dst.is_split:
            return [on(i, P.piece_slice, p, dst.axis, i, n) for i, p in enumerate(pieces)]
        if dst.reduce == "sum":  # B -> P(sum): the value stays on piece 0, zeros elsewhere
            return [pieces[0]] + [on(i, np.zeros_like, p) for i, p in enumerate(pieces) if i]
        return list(pieces)
    if src.is_split and dst.is_split:  # all-to-all
        return [on(i, P.concat, [on(j, P.piece_slice, p, dst.axis, i, n) for j, p in enumerate(pieces)], src.axis)
                for i in range(n)]
    if src.is_partial and dst.is_split:  # reduce-scatter: piece i reduces slice i of every piece
        return [on(i, P.reduce, [on(j, P.piece_slice, p, dst.axis, i, n) for j, p in enumerate(pieces)], src.reduce)
                for i in range(n)]
    if dst.is_broadcast:  # all-gather / all-reduce (a pairwise tree)
        full = on(0, P.concat, pieces, src.axis) if src.is_split else _tree_reduce(pieces, src.reduce, at)
        return [full] * n
    raise SBPError(f"no boxing from {src} to {dst}")
