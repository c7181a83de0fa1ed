"""What a ``DataParallel`` keeps on each Dask worker: a model replica and its optimizer, addressed by key.

Why worker-held state addressed by a key, rather than Dask actors: a replica is updated in place
by a step that also talks to the other replicas (``exchange.py``: one message per worker from the
client, the gradients reduced by direct worker-to-worker messages), and an actor's methods run
on one thread with every call through the scheduler. A replica is not a Dask result either (a
result may be spilled to disk, copied to another worker or recomputed); it lives in ``REPLICAS``
in the worker's process, under the trainer's key, until ``drop`` (``DataParallel.close``) or
until the table's bound pushes it out.

What runs on a worker:

* ``install(key, blob)`` (a task pinned to the worker): the first broadcast (the client's
  parameters, optimizer and its states, pickled once), or a copy of a surviving replica
  (``export``) after a worker was lost; it adds the peer channel's handlers to the worker;
* ``run_step`` (the ``la_dp_step`` handler, or ``step_task`` for a dask-array batch): ``local``,
  forward and backward of the worker's batch pieces, the gradients (with the loss sum and the
  row-weighted updated statistics) packed into flat buckets (``FlatLayout``), each cut into one
  shard per worker; shard ``j`` of every worker's bucket summed on worker ``j`` in worker order
  (``reduce_shard``, reduce-scatter), the sums sent to every worker (all-gather), and
  ``apply_reduced``: the gradients written and the optimizer run on the replica. The same
  update of the same values everywhere, so the replicas stay equal bit for bit; a step already
  applied changes nothing (Dask may run a task again).
"""
from __future__ import annotations

import contextlib
import math
import os
import pickle
import tempfile
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np

from .. import autograd
from ..amp import TrainerAmp
from ..blocks.param_file import save_arrays
from ..blocks.trainer import Trainer
from ..creation import array
from ..errors import DistributedError
from . import exchange as X
from .bounded import dask_modules
from .worker import run_step_region


class FlatLayout:
    """Arrays of given shapes and dtypes packed into flat buckets of at most ``bucket_bytes`` each.

    The arrays of one dtype are laid end to end; that vector is cut into buckets of about
    ``bucket_bytes`` (an array may straddle two). ``pack`` / ``unpack`` are exact inverses.
    """

    def __init__(self, shapes: list[tuple], dtypes: list, bucket_bytes: int):
        self.shapes = [tuple(s) for s in shapes]
        self.dtypes = [np.dtype(d) for d in dtypes]
        self.sizes = [math.prod(s) for s in self.shapes]  # (kept: unpack runs every step)
        self.groups: dict[np.dtype, list[int]] = {}
        for i, d in enumerate(self.dtypes):
            self.groups.setdefault(d, []).append(i)
        self.buckets: list[tuple[np.dtype, int, int]] = []  # (dtype, start, stop) in the dtype's vector
        for d, members in self.groups.items():
            size = sum(self.sizes[i] for i in members)
            per = max(1, bucket_bytes // d.itemsize)
            count = max(1, -(-size // per))
            edges = np.linspace(0, size, count + 1).astype(np.int64)
            self.buckets += [(d, int(a), int(b)) for a, b in zip(edges[:-1], edges[1:])]

    def pack(self, arrays: list) -> list[np.ndarray]:
        flat = {d: np.concatenate([np.asarray(arrays[i], dtype=d).ravel() for i in members])
                for d, members in self.groups.items()}
        return [flat[d][a:b] for d, a, b in self.buckets]

    def unpack(self, buckets: list) -> list[np.ndarray]:
        """The arrays of ``buckets`` (per bucket: its values, or a list of consecutive pieces of them, such
        as the shards of a reduce), as views of one new flat array per dtype."""
        out: list = [None] * len(self.shapes)
        for d, members in self.groups.items():
            parts = [p for (bd, _, _), b in zip(self.buckets, buckets) if bd == d
                     for p in (b if isinstance(b, list) else [b])]
            flat, at = np.concatenate(parts), 0  # (a copy: the arrays are written in place later)
            for i in members:
                out[i] = flat[at:at + self.sizes[i]].reshape(self.shapes[i])
                at += self.sizes[i]
        return out


LOSS_SCALE = "la_dp_loss_scale"  # the training graph's input that takes the loss scale (la.amp), if any


@dataclass(frozen=True)
class StepPlan:
    """What every step of one trainer shares: the bucket layout of ``[loss sum] + gradients +
    updated parameters``, the structural name of each graph input that is a parameter, and the
    structural names of the trained and of the updated parameters (in the layout's order)."""

    layout: FlatLayout
    names: dict
    grads: tuple
    updates: tuple


class Replica:
    """One worker's copy of the model's parameters (``params``: structural name -> ``Parameter``)
    and the ``Trainer`` over the trained ones (``trained``, the client trainer's order), with
    ``steps`` updates applied. ``amp``: the client trainer's loss scaling (``TrainerAmp.portable``;
    None: none), so the replica's trainer scales, unscales and skips steps as the client's would."""

    def __init__(self, params: dict, trained: list[str], optimizer, states: bytes, steps: int, plan: StepPlan,
                 amp: tuple | None = None):
        self.params, self.trained, self.plan = params, list(trained), plan
        self.trainer = Trainer([params[k] for k in trained], optimizer)
        if states:
            load_states_bytes(self.trainer, states)
        if amp is not None:
            self.trainer.amp = TrainerAmp.rebuilt(amp, self.trainer.params)
        self.steps = steps
        self.losses: dict[int, float] = {}  # step -> loss sum, for a step that runs again
        self.graphs: dict[int, tuple] = {}  # piece rows -> (training graph text, its input order)
        self.mailbox = X.Mailbox()  # what the peers sent (exchange.py)
        self.lock = threading.Lock()  # one step at a time (a late message of an attempt given up may still run)

    def graph(self, rows: int) -> tuple:
        found = self.graphs.get(rows)
        if found is None:
            raise DistributedError(f"DataParallel: this replica has no training graph for {rows}-row pieces (the "
                                   "replica was installed anew): call step again (it sends the graphs anew)")
        return found

    def amp_state(self) -> tuple | None:
        amp = self.trainer.amp
        return None if amp is None else amp.portable(self.trainer.params)

    def export(self) -> bytes:
        """This replica as ``install`` takes it."""
        return pickle.dumps((self.params, self.trained, self.trainer.optimizer, states_bytes(self.trainer),
                             self.steps, self.plan, self.amp_state()))


class _Table:
    """The replicas of this worker process by trainer key, at most ``limit`` (the oldest goes first)."""

    def __init__(self, limit: int):
        self.limit, self._items, self._lock = limit, OrderedDict(), threading.Lock()

    def put(self, key: str, replica: Replica) -> None:
        with self._lock:
            self._items[key] = replica
            while len(self._items) > self.limit:
                self._items.popitem(last=False)

    def get(self, key: str) -> Replica:
        with self._lock:
            r = self._items.get(key)
        if r is None:
            raise DistributedError(f"DataParallel: this worker holds no replica {key!r} (its worker restarted, or "
                                   f"more than {self.limit} trainers were made on it): the trainer re-syncs it from "
                                   "a surviving replica at its next step")
        return r

    def pop(self, key: str) -> None:
        with self._lock:
            self._items.pop(key, None)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()


REPLICAS = _Table(16)


# -- the tasks ------------------------------------------------------------------------------------------
def install(key: str, blob: bytes) -> int:
    """Make this worker's replica ``key`` from ``blob`` (``pickle`` of ``Replica``'s arguments); its step count."""
    replica = Replica(*pickle.loads(blob))
    REPLICAS.put(key, replica)
    X.serve(dask_modules()[2].get_worker(), REPLICAS, run_step)
    return replica.steps


def export(key: str) -> bytes:
    return REPLICAS.get(key).export()


def steps_of(key: str) -> int:
    """The number of updates the replica ``key`` has applied (-1: none here)."""
    try:
        return REPLICAS.get(key).steps
    except DistributedError:
        return -1


def drop(key: str) -> None:
    REPLICAS.pop(key)


def local(replica: Replica, step: int, n_shards: int, pieces: list) -> list:
    """Forward and backward of this worker's pieces; ``[[shard j of bucket b] for j] for b]``.

    ``pieces``: ``(seed, weight, rows, data, label)`` per piece, run by the replica's graph of
    ``rows``-row pieces (``Replica.graphs``). The pieces' outputs are summed in order.
    """
    if replica.steps != step:
        raise DistributedError(f"DataParallel: the replica has applied {replica.steps} steps, asked for step "
                               f"{step}: the trainer re-syncs its replicas at its next step")
    plan, n_grads = replica.plan, len(replica.plan.grads)
    scale = None if replica.trainer.amp is None else np.float32(replica.trainer.amp.scaler.scale)
    total = None
    for seed, weight, rows, data, label in pieces:
        text, order = replica.graph(rows)
        args = [data if k == "data0" else label if k == "data1" else scale if k == LOSS_SCALE else
                replica.params[plan.names[k]].data() for k in order]  # (the parameters as they are: no copies)
        with np.errstate(over="ignore", invalid="ignore") if scale is not None else contextlib.nullcontext():
            outs = run_step_region(text, tuple(order), seed, *args)  # (amp: overflow skips the step, unwarned)
        outs = list(outs[:1 + n_grads]) + [o * o.dtype.type(weight) for o in outs[1 + n_grads:]]
        total = outs if total is None else [t + o for t, o in zip(total, outs)]
    if total is None:  # (no piece here this step: more workers than pieces) adds nothing to the sums
        total = [np.zeros(s, d) for s, d in zip(plan.layout.shapes, plan.layout.dtypes)]
    return [np.array_split(b, n_shards) for b in plan.layout.pack(total)]


def reduce_shard(*shards) -> np.ndarray:
    """The sum of one shard over the workers, in worker order (the same order on every worker)."""
    total = np.array(shards[0], copy=True)
    with np.errstate(over="ignore", invalid="ignore"):  # (scaled gradients may overflow: la.amp then skips the step)
        for s in shards[1:]:
            total += s
    return total


def apply_reduced(replica: Replica, step: int, batch: int, reduced: list) -> float:
    """Write the reduced gradients, step the replica's optimizer, write the updated parameters;
    the batch's loss sum. ``reduced``: the reduced shards, bucket by bucket, shard by shard."""
    plan = replica.plan
    n_buckets = len(plan.layout.buckets)
    per = len(reduced) // n_buckets
    values = plan.layout.unpack([list(reduced[b * per:(b + 1) * per]) for b in range(n_buckets)])
    _write_grads([replica.params[k] for k in plan.grads], values[1:1 + len(plan.grads)])
    replica.trainer.step(batch)
    for k, v in zip(plan.updates, values[1 + len(plan.grads):]):
        p = replica.params[k]
        p.set_data(array(np.asarray(v, dtype=p.dtype)))
    replica.steps = step + 1
    replica.losses = {step: float(values[0])}
    return replica.losses[step]


def run_step(worker, key: str, tag: tuple, peers: list, index: int, steps: list, graphs: dict,
             timeout: float | None) -> list[float]:
    """Steps of the replica ``key`` on ``worker`` (``exchange``'s module docs), one after the other: for
    each ``(batch rows, pieces)`` of ``steps``, forward and backward of ``pieces`` (``(seed, weight,
    rows, data, label)`` each), the reduce among ``peers`` (``(worker address, replica key)`` per
    replica, in shard order; this one is ``peers[index]``) over the peer channel, the optimizer; each
    step's batch loss sum. Step ``k`` has the tag ``(tag[0] + k, tag[1])``. ``graphs``: rows ->
    ``(graph text, input order)`` the replica did not have. ``timeout``: seconds for them all (None:
    no bound)."""
    replica = REPLICAS.get(key)
    replica.graphs.update(graphs)
    deadline = None if timeout is None else time.monotonic() + timeout
    out = []
    for k, (batch, pieces) in enumerate(steps):
        now = (int(tag[0]) + k, int(tag[1]))
        replica.mailbox.begin(now)
        with replica.lock:
            if replica.steps == now[0] + 1 and now[0] in replica.losses:  # (applied already: the task ran again)
                out.append(replica.losses[now[0]])
                continue
            shards = local(replica, now[0], len(peers), pieces)
            out.append(_exchange(worker, replica, now, peers, index, shards, batch, deadline))
    return out


def _exchange(worker, replica: Replica, tag: tuple, peers: list, index: int, shards: list, batch: int,
              deadline: float | None) -> float:
    """Reduce-scatter and all-gather ``shards`` (``local``'s) among ``peers``, then ``apply_reduced``."""
    caller, box, n = f"DataParallel.step (replica {index} on {peers[index][0]})", replica.mailbox, len(peers)
    others = {i: peers[i][0] for i in range(n) if i != index}
    X.send(worker, [(*peers[i], [b[i] for b in shards]) for i in others], tag, "rs", index, box, caller)
    got = box.take(tag, "rs", others, deadline, caller)
    mine = [reduce_shard(*[b[index] if i == index else got[i][k] for i in range(n)]) for k, b in enumerate(shards)]
    X.send(worker, [(*peers[i], mine) for i in others], tag, "ag", index, box, caller)
    got = box.take(tag, "ag", others, deadline, caller)
    reduced = [mine[k] if i == index else got[i][k] for k in range(len(shards)) for i in range(n)]
    loss = apply_reduced(replica, tag[0], batch, reduced)
    box.finish(tag[0])
    return loss


def step_task(key: str, tag: tuple, peers: list, index: int, meta: list, graphs: dict, batches: list,
              timeout: float | None, *arrays) -> list[float]:
    """``run_step`` as a Dask task (dask-array batches: Dask brings their pieces here); ``meta``: per
    step, ``(seed, weight, rows)`` per piece, each taking the next two of ``arrays`` (data, label);
    ``batches``: the rows of each step's batch. Each step's loss sum."""
    steps, at = [], 0
    for batch, step in zip(batches, meta):
        steps.append((batch, [(s, w, r, arrays[at + 2 * i], arrays[at + 2 * i + 1])
                              for i, (s, w, r) in enumerate(step)]))
        at += 2 * len(step)
    return run_step(dask_modules()[2].get_worker(), key, tag, peers, index, steps, graphs, timeout)


def state(key: str) -> tuple[dict, bytes, tuple | None]:
    """The replica's parameter values (structural name -> NumPy array), optimizer states
    (``Trainer.save_states`` bytes) and loss scaling state (``TrainerAmp.portable``), for ``sync_to_client``."""
    r = REPLICAS.get(key)
    return {k: p.data().asnumpy() for k, p in r.params.items()}, states_bytes(r.trainer), r.amp_state()


def save(key: str, path: str, names: list[str]) -> str:
    """Write the replica's parameters ``names`` to ``path`` (the file of ``Block.save_parameters``),
    from this worker (``path`` is on the worker's file system)."""
    params = REPLICAS.get(key).params
    save_arrays(path, {k: params[k] for k in names})
    return path


def _write_grads(params: list, grads: list) -> None:
    """Make ``grads`` the parameters' fresh gradients, as a backward writes them (``autograd.write_grads``:
    adopted, or added for ``grad_req="add"``)."""
    autograd.write_grads([p.data() for p in params], [np.asarray(g, dtype=p.dtype) for p, g in zip(params, grads)])


def states_bytes(trainer: Trainer) -> bytes:
    fd, path = tempfile.mkstemp(suffix=".safetensors")
    os.close(fd)
    try:
        trainer.save_states(path)
        with open(path, "rb") as f:
            return f.read()
    finally:
        os.unlink(path)


def load_states_bytes(trainer: Trainer, states: bytes) -> None:
    fd, path = tempfile.mkstemp(suffix=".safetensors")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(states)
        trainer.load_states(path)
    finally:
        os.unlink(path)
