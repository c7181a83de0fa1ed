"""``la.distributed.DataParallel``: data-parallel training steps on a Dask cluster.

Each worker holds a replica of the model and its optimizer for the life of the trainer
(``replica.py``: worker-held state addressed by a key, and why not Dask actors). The client's
parameters are broadcast once, at the first step; after it a step is one message per worker,
sent straight from the client to the worker (``exchange.py``: a Dask comm handler, no scheduler
task), holding the worker's batch pieces and the step tag; the answer is the loss. A
``dask.array`` batch keeps its chunks: its step is one Dask task per worker, which Dask feeds
with them. ``step_many(batches)`` sends K steps in one message per worker (dask-array batches:
one task per worker for the K steps; a persisted batch's pieces run where they are, ``_owners``).
The client's ``net`` and ``trainer`` are not updated: ``sync_to_client()`` copies a replica into them when asked,
``save_parameters(path)`` writes the parameters from a worker, ``save_checkpoint(folder)`` a
sharded checkpoint (``checkpoint.py``: each worker writes its part) that ``load_checkpoint``
reads back on any number of workers.

One step: every piece runs forward and backward on its worker through one compiled graph (the
model, the loss summed over the piece, and the gradient of that sum with respect to every
parameter: ``graph/passes/gradient.py``). Each worker packs its gradients (with the loss sum and
the updated statistics) into flat buckets of ``la.config.dp_bucket_bytes`` (25 MB) and cuts each
into one shard per worker; shard ``j`` is summed on worker ``j`` (reduce-scatter) and every
worker gathers all the sums (all-gather), by direct messages between the workers, and applies
the optimizer to its replica. Each worker sends and receives ``2 (N - 1) / N`` of the gradient
bytes, the bound of a ring all-reduce, in two rounds instead of a ring's ``2 (N - 1)``, and a
step is N messages from the client and ``2 N (N - 1)`` between workers whatever the number of
parameter arrays. Every sum is taken in worker order on one worker and copied to the others, so
the replicas stay equal bit for bit. The result equals ``loss.backward(); trainer.step(batch)``
in one process, up to float rounding of the summation order.

A lost worker: the step raises ``la.DistributedError`` at once (its connection closes; its peers,
waiting for its gradients, are told to stop); a frozen one at the step's timeout. The next step
finds the workers changed and copies the most advanced surviving replica (worker to worker) to
every worker without one (a new worker the nanny started, or one whose replica is behind); with
no survivor it names the fix (load the last checkpoint). A step the client gave up on is applied
nowhere where a surviving replica still holds the client's step count (the others are set back to
it); where every survivor applied it after all (a worker finished just after the timeout), it
counts as taken and the next call says so and runs nothing (its batch may be the same one again).

The graph is traced in training mode, so models whose training mode differs run as they train:

* **Dropout**: each piece draws its own masks, from a generator seeded per step and piece
  (``piece_seed``): the step is reproducible (the same seed gives the same masks, whichever
  worker runs a piece, also when Dask re-runs it), and equals one process that draws piece by
  piece with those seeds; it equals one process drawing one mask for the whole batch only in
  distribution (the masks are independent Bernoulli draws either way).
* **Batch norm**: each piece normalizes with its own batch statistics (PyTorch DDP's default,
  no synchronization). A parameter the model updates in its forward (the running statistics)
  is computed on each piece and averaged over the pieces weighted by their rows:
  ``running_mean`` then equals single-process training exactly (the weighted mean of the piece
  means is the batch mean); ``running_var`` becomes ``momentum * running_var + (1 - momentum) *
  sum_i (rows_i / batch) * var_i``, the mean *within-piece* variance, which is what the pieces
  normalized with (smaller than the whole batch's variance by the spread of the piece means).

The loss must return one value per sample (Gluon's losses do).
"""
from __future__ import annotations

import os
import pickle
import uuid
from concurrent.futures import CancelledError

import numpy as np

from ..aval import Aval
from ..blocks import hybrid
from ..blocks.block import HybridBlock
from ..creation import array, zeros
from ..device import Device
from ..errors import DistributedError, ParamError, ParamValueError
from ..graph.build import apply_node
from ..graph.node import Entry, var_node
from ..graph.passes.gradient import gradient
from ..graph.symbol import Symbol
from ..ndarray import NDArray
from ..ops import registry
from ..rng import generator
from ..sbp import split, split_sizes
from ..tuning_table import current
from . import checkpoint as C
from . import exchange as X
from . import pieces as P
from . import replica as R
from .bounded import BoundedCall, check_timeout, dask_modules
from .run import _is_dask, dask_pieces


class _WithLoss(HybridBlock):
    def __init__(self, net, loss_fn):
        super().__init__()
        self.net = net
        self.loss_fn = loss_fn

    def forward(self, data, label):
        return self.loss_fn(self.net(data), label)


class DataParallel:
    """Train ``net`` with ``loss_fn`` and ``trainer`` over the pieces of each batch on a Dask cluster.

    ``step(data, label)`` returns the mean loss of the batch (a float). ``seed`` fixes the random
    draws (dropout masks) of every step: piece ``i`` of step ``t`` draws from a generator seeded
    with ``piece_seed(t, i)`` (``None``: a seed drawn from la's generator, so ``la.random.seed``
    fixes it too). Without ``client``, a ``LocalCluster`` of processes is started at the first
    step; ``close()`` (or a ``with`` block) drops the replicas from the workers and stops it.

    The model trains on the workers: ``net`` and ``trainer`` on the client keep the values of the
    first step until ``sync_to_client()`` copies a replica (parameters and optimizer states) into
    them; ``save_parameters(path)`` writes the parameters from a worker, ``save_checkpoint(folder)``
    a sharded checkpoint (parameters and optimizer states, a part from each worker).

    ``timeout`` (seconds; ``None``: ``bounded.DEFAULT_TIMEOUT``, 300 s; ``math.inf``: no bound)
    bounds every step (``step(..., timeout=)`` overrides it for one step): past it, or when a
    worker dies with the only copy of a scattered batch piece or with its replica, or the
    scheduler is lost, the step raises ``la.DistributedError`` naming what and the fix; the next
    step re-syncs the replicas from the most advanced survivor.

    >>> import numpy as np, lazyarray as la, pytest
    >>> _ = pytest.importorskip("dask.distributed")  # (the doctest skips without the distributed extra)
    >>> from dask.distributed import Client, LocalCluster
    >>> from lazyarray import blocks as nn
    >>> net = nn.Dense(3, in_units=4)
    >>> net.initialize()
    >>> trainer = nn.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1})
    >>> x, y = np.ones((8, 4), "float32"), np.zeros(8, "int32")
    >>> with LocalCluster(n_workers=2, processes=False, dashboard_address=":0") as cluster, Client(cluster) as c:
    ...     dp = la.distributed.DataParallel(net, nn.SoftmaxCrossEntropyLoss(), trainer, client=c)
    ...     first, second = dp.step(x, y), dp.step(x, y)
    >>> second < first
    True
    """

    def __init__(self, net, loss_fn, trainer, client=None, timeout=None, seed: int | None = None):
        self.net, self.loss_fn, self.trainer = net, loss_fn, trainer
        self.timeout = check_timeout(timeout, "DataParallel")
        self._client, self._own = client, None
        self._block = None  # the model with its loss, hybridized, once its parameter shapes are settled
        self._graphs = {}  # piece rows -> (JSON text, input order, parameters, trained names, updated names)
        self.seed = seed  # None: drawn from la's CPU generator at the first step (la.random.seed fixes it)
        self.steps = 0  # steps taken: the step index of piece_seed
        self._key = f"la-dp-{uuid.uuid4().hex[:12]}"  # the replicas' key on the workers (replica.REPLICAS)
        self._holders: list[str] = []  # the workers holding a replica at self.steps, in shard order
        self._suspect = False  # a step failed: the replicas may differ in their step count
        self._plan = None  # replica.StepPlan, made at the first broadcast
        self._sent: set = set()  # (worker, piece rows): the graphs sent to each worker's replica
        self._attempts = 0  # steps tried: the second half of a step's tag (exchange.py)

    def piece_seed(self, step: int, piece: int) -> int:
        """The seed of the random draws (dropout masks) of ``piece`` at ``step`` (0-based)."""
        if self.seed is None:
            self.seed = int(generator(Device("cpu", 0)).integers(2 ** 63))
        return int(np.random.SeedSequence((self.seed, step, piece)).generate_state(2, np.uint64)[0] >> 1)

    # -- cluster -------------------------------------------------------------------------------------
    @property
    def client(self):
        if self._client is None:
            dd = dask_modules()[2]
            cluster = dd.LocalCluster(processes=True, dashboard_address=":0")
            self._own = (cluster, dd.Client(cluster))
            self._client = self._own[1]
        return self._client

    def close(self) -> None:
        """Drop the replicas from the workers (best effort) and stop the cluster this object started."""
        self.close_replicas()
        if self._own is not None:
            cluster, client = self._own
            client.close()
            cluster.close()
            self._own = self._client = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # -- the training graph ----------------------------------------------------------------------------
    def _trace(self, data, label, rows: int):
        """The training-mode graph ``(sum of the losses, d sum / d parameter ..., updated parameter ...)``
        of a piece of ``rows`` rows, with inputs data0, data1 and the parameters. One per piece size:
        a model may bake the batch size into its graph (``x.reshape((x.shape[0], -1))``)."""
        if self._block is None:
            self._block = _WithLoss(self.net, self.loss_fn)
            self._block.hybridize()
            # inference mode on one row: settles deferred parameter shapes, updates nothing
            self._block(array(_first_rows(data)), array(_first_rows(label)))
        block = self._block
        like = [zeros((rows,) + tuple(v.shape[1:]), dtype=np.dtype(v.dtype)) for v in (data, label)]
        traced = hybrid.trace(block, tuple(like), block.collect_params(), training=True)
        sym, srcs = hybrid.fold_captures(traced.symbol, traced.sources)  # captured arrays travel as constants
        sources = dict(zip(sym.list_inputs(), srcs))
        params = {k: p for k, p in sources.items() if not isinstance(p, int)}
        nodes = {n.name: n for n in sym.input_nodes()}
        names = [n for n in sym.list_inputs() if n in params and params[n].grad_req != "null"]
        loss = sym.outputs[0]
        updates = list(sym.outputs[traced.num_outputs:traced.num_outputs + len(traced.updates)])
        by_param = {id(p): k for k, p in params.items()}
        updated = [by_param[id(p)] for p in traced.updates]
        total = apply_node(registry.get("sum"), loss)
        wrt = [Entry(nodes[n], 0) for n in names]
        grads = gradient([_scaled(total, loss) if self.trainer.amp is not None else total], [None], wrt)
        zeros_like = registry.get("zeros_like")
        outs = [total] + [g if g is not None else apply_node(zeros_like, w) for g, w in zip(grads, wrt)] + updates
        graph = Symbol(outs)
        return graph.to_json(), graph.list_inputs(), params, names, updated, total.aval.dtype

    def step(self, data, label, timeout=None) -> float:
        """One training step on the batch ``(data, label)``; returns the batch's mean loss.
        ``timeout``: this step's bound in seconds (``None``: the ``DataParallel``'s)."""
        return self._steps([(data, label)], timeout, "DataParallel.step")[0]

    def step_many(self, batches, timeout=None) -> list[float]:
        """``step`` on each ``(data, label)`` of ``batches`` in turn, sent in one message per worker: the
        workers run the steps one after the other, reducing among themselves, and the client waits once.
        The mean loss of each batch. The result equals as many ``step`` calls (bit for bit: the same
        seeds, the same sums). ``timeout`` bounds them all. NumPy (or ``NDArray``) batches of any sizes,
        or dask-array batches: then one Dask task per worker runs all the steps, fed by Dask with the
        pieces (a persisted batch's pieces run on the workers holding them: ``_owners``). A failure
        raises ``la.DistributedError`` like ``step``'s; the replicas may then have applied some of the
        steps (``steps`` says how many after the next call, which re-syncs them: to the steps the client
        counted where a replica still holds them, else to the most advanced)."""
        batches = list(batches)
        return self._steps(batches, timeout, "DataParallel.step_many") if batches else []

    def _steps(self, batches: list, timeout, caller: str) -> list[float]:
        call = BoundedCall(self.client, self.timeout if timeout is None else timeout, caller,
                           "call it again with the same batch (it first copies a surviving replica to the workers "
                           "without one, and says so and runs nothing where every survivor applied this step after "
                           "all; with no survivor, load the last checkpoint)")
        workers, tag = [], None
        try:
            workers = sorted(call.workers())
            dask = any(_is_dask(d) or _is_dask(lab) for d, lab in batches)
            rows = [split_sizes(d.shape[0], len(d.chunks[0]) if _is_dask(d) else len(workers)) for d, _ in batches]
            for (d, lab), rs in zip(batches, rows):
                for r in sorted(set(rs) - set(self._graphs)):
                    self._graphs[r] = self._trace(d, lab, r)
            workers = self._replicas(call, workers)
            owners = _owners(call, workers, batches, rows) if dask else [workers] * len(batches)
            tag, self._attempts = (self.steps, self._attempts), self._attempts + 1
            if dask:
                sums = self._task_steps(call, workers, owners, rows, batches, tag)
            else:
                sums = self._direct_steps(call, workers, owners, rows, batches, tag)
        except BaseException as exc:
            self._suspect = True  # (some replicas may have applied the step: compare them at the next step)
            self._sent = set()
            if tag is not None:  # (the workers still waiting for their peers stop now)
                why = f"{caller}: the client gave up on step {tag[0]}: {exc}"
                call.post_each(X.ABORT, {w: {"key": self._rkey(w), "tag": list(tag), "count": len(batches),
                                             "why": why} for w in workers})
            raise
        self.steps += len(batches)
        return [total / d.shape[0] for total, (d, _) in zip(sums, batches)]

    def _messages(self, workers, owners: list, rows: list, tag, timeout) -> list[tuple[dict, list, list]]:
        """Per worker: the arguments of its ``replica.run_step`` but the pieces, ``(seed, weight, rows)``
        of its pieces in each step, and the indices of its pieces in each step (``owners[k][i]``: the
        worker of piece ``i`` of step ``k``)."""
        peers = [(w, self._rkey(w)) for w in workers]
        out = []
        for j, addr in enumerate(workers):
            mine = [[i for i, w in enumerate(owner) if w == addr] for owner in owners]
            sizes = sorted({rs[i] for rs, ix in zip(rows, mine) for i in ix})
            graphs = {r: self._graphs[r][:2] for r in sizes if (addr, r) not in self._sent}
            self._sent |= {(addr, r) for r in sizes}  # (a failed call forgets them all: sent again)
            meta = [[(self.piece_seed(tag[0] + k, i), rs[i] / sum(rs), rs[i]) for i in ix]
                    for k, (rs, ix) in enumerate(zip(rows, mine))]
            out.append((dict(key=self._rkey(addr), tag=tag, peers=peers, index=j, graphs=graphs, timeout=timeout),
                        meta, mine))
        return out

    def _direct_steps(self, call, workers, owners, rows, batches, tag) -> list[float]:
        """NumPy batches: one message per worker straight from the client (``exchange.py``), its pieces in it."""
        cut = [[P.split_value(v.asnumpy() if isinstance(v, NDArray) else np.asarray(v), split(0), len(workers))
                for v in batch] for batch in batches]
        messages = {}
        for (m, meta, mine), addr in zip(self._messages(workers, owners, rows, tag, call.remaining()), workers):
            m["steps"] = [(sum(rs), [(s, w, r, xs[i], ys[i]) for (s, w, r), i in zip(step, ix)])
                          for rs, step, ix, (xs, ys) in zip(rows, meta, mine, cut)]
            messages[addr] = m
        answers = call.message_each(X.STEP, messages, f"computing step {tag[0]}"
                                    + (f" and the {len(batches) - 1} after it" if len(batches) > 1 else "")
                                    + f" on {len(workers)} workers")
        failed = {w: a if isinstance(a, BaseException) else DistributedError(
            f"{call.caller}: worker {w} answered {a!r} to its step, not the losses (it has no {X.STEP} handler: "
            f"restarted without its replica?); {call.again}") for w, a in zip(workers, answers) if not isinstance(a, (list, tuple))}
        if not failed:
            return list(answers[0])
        gone = set(workers) - set(call.workers())
        lost = [w for w in workers if w in gone or isinstance(failed.get(w), OSError)]
        if lost:
            raise DistributedError(
                f"{call.caller}: lost {', '.join(f'replica {workers.index(w)} of the model on worker {w}' for w in lost)}"
                f": the worker left the cluster or its connection closed (died, killed, or retired) during the step; "
                f"{call.again}") from failed.get(lost[0])
        raise next(e for e in failed.values() if not isinstance(e, CancelledError))

    def _task_steps(self, call, workers, owners, rows, batches, tag) -> list[float]:
        """Dask-array batches: one task per worker (``replica.step_task``) running every step, so that Dask
        brings the pieces (computed where Dask computes them; a persisted piece stays where it is)."""
        cut = [_batch_pieces(d, lab, owner, call) for (d, lab), owner in zip(batches, owners)]
        futures = []
        for j, ((m, meta, mine), addr) in enumerate(zip(self._messages(workers, owners, rows, tag, call.remaining()),
                                                        workers)):
            arrays = [a for (xs, ys), ix in zip(cut, mine) for i in ix for a in (xs[i], ys[i])]
            futures.append(call.submit(R.step_task, m["key"], tag, m["peers"], j, meta, m["graphs"],
                                       [sum(rs) for rs in rows], m["timeout"], *arrays,
                                       key=f"{self._key}-{tag[0]}-{tag[1]}-{j}", worker=addr))
        return call.gather(futures, watch={w: f"replica {i} of the model" for i, w in enumerate(workers)})[0]

    # -- the replicas ----------------------------------------------------------------------------------
    def _rkey(self, worker: str) -> str:
        """The key of the replica on ``worker`` (one per worker: threaded workers share one table)."""
        return f"{self._key}@{worker}"

    def _replicas(self, call, workers: list[str]) -> list[str]:
        """Make sure every worker holds a replica at ``self.steps``: the first time by a broadcast from
        the client, after a change of workers (or a failed step) by copies of a surviving replica at the
        client's step count (a replica that finished a step the client gave up is set back), else of the
        most advanced one, made worker to worker. The workers, in the order of their shards."""
        if self._holders == workers and not self._suspect:
            return workers
        if not self._holders:
            blob = call.scatter(self._first_blob(), "the model replica (parameters and optimizer)", broadcast=True,
                                workers=workers)
            call.gather([call.submit(R.install, self._rkey(w), blob, key=f"{self._key}-install-{w}", worker=w)
                         for w in workers])
        else:
            tag = f"{self._key}-check-{self.steps}-{uuid.uuid4().hex[:6]}"
            have = call.gather([call.submit(R.steps_of, self._rkey(w), key=f"{tag}-{w}", worker=w) for w in workers])
            best = self.steps if self.steps in have else max(have)  # (a step the client gave up is undone...
            # ...where a replica still holds the client's count; else every survivor applied it: said below)
            if best < 0:
                raise DistributedError(
                    f"DataParallel.step: every worker holding a replica of the model is gone (had "
                    f"{', '.join(self._holders)}; now {', '.join(workers)}): the trained values are lost. Load the "
                    "last checkpoint (net.load_parameters of a file save_parameters wrote) and make a new "
                    "DataParallel")
            src = workers[have.index(best)]
            blob = call.submit(R.export, self._rkey(src), key=f"{tag}-export", worker=src)
            call.gather([call.submit(R.install, self._rkey(w), blob, key=f"{tag}-install-{w}", worker=w)
                         for w, h in zip(workers, have) if h != best])
            gave_up, self.steps = self.steps, best
            self._sent = set()  # (an installed replica has no graphs: they are sent anew)
            if best > gave_up:
                self._holders, self._suspect = list(workers), False
                raise DistributedError(_applied_after_all(call.caller, gave_up, best))
        self._holders, self._suspect = list(workers), False
        return workers

    def _named(self) -> tuple[dict, list[str]]:
        """The model's parameters (and the loss's own, ``loss_fn.*``) by structural name, and the names of
        the trainer's parameters in its order."""
        params = C.named_params(self.net, self.loss_fn)
        struct = {id(p): k for k, p in params.items()}
        missing = [p.name for p in self.trainer.params if id(p) not in struct]
        if missing:
            raise ParamError(f"DataParallel: the trainer updates parameters {missing} that are not the model's or "
                             "the loss's; make the Trainer over net.collect_params()")
        return params, [struct[id(p)] for p in self.trainer.params]

    def _first_blob(self) -> bytes:
        """The client's parameters, optimizer (with its states) and step plan, pickled once for every worker."""
        params, trained = self._named()
        struct = {id(p): k for k, p in params.items()}
        _, order, graph_params, names, updated, loss_dtype = self._graphs[min(self._graphs)]
        plan = R.StepPlan(self._layout(graph_params, names, updated, loss_dtype),
                          {k: struct[id(p)] for k, p in graph_params.items()},
                          tuple(struct[id(graph_params[k])] for k in names),
                          tuple(struct[id(graph_params[k])] for k in updated))
        self._plan = plan
        amp = self.trainer.amp
        return pickle.dumps((params, trained, self.trainer.optimizer, R.states_bytes(self.trainer), self.steps, plan,
                             None if amp is None else amp.portable(self.trainer.params)))

    def _layout(self, graph_params, names, updated, loss_dtype) -> R.FlatLayout:
        bucket = current().dp_bucket_bytes
        if bucket <= 0:
            raise ParamValueError(f"DataParallel: la.config.dp_bucket_bytes must be positive, got {bucket}")
        arrays = [graph_params[k] for k in names] + [graph_params[k] for k in updated]
        return R.FlatLayout([()] + [tuple(p.shape) for p in arrays], [np.dtype(loss_dtype)] + [p.dtype for p in arrays],
                            bucket)

    # -- the client's copy ----------------------------------------------------------------------------
    def sync_to_client(self, timeout=None) -> None:
        """Copy a replica's parameters into ``net`` and its optimizer states into ``trainer`` (the client's
        objects are not updated by ``step``; call this before reading or using them)."""
        if not self._holders:
            return
        call = BoundedCall(self.client, self.timeout if timeout is None else timeout, "DataParallel.sync_to_client",
                           "call sync_to_client again")
        values, states, amp = call.gather([call.submit(R.state, self._rkey(self._holders[0]), key=f"{self._key}-state-{uuid.uuid4().hex[:6]}",
                                                  worker=self._holders[0])])[0]
        params = C.named_params(self.net, self.loss_fn)
        for k, v in values.items():
            if k in params:
                params[k].set_data(array(v))
        R.load_states_bytes(self.trainer, states)
        if amp is not None and self.trainer.amp is not None:
            self.trainer.amp.restore(amp, self.trainer.params)

    def save_parameters(self, path: str, timeout=None) -> str:
        """Write the model's parameters to ``path`` (``Block.save_parameters``'s file) from the first
        worker's replica: the values do not pass through the client. ``path`` is on that worker's
        file system (a local cluster shares the client's). Returns ``path``."""
        if not self._holders:
            self.net.save_parameters(path)
            return path
        call = BoundedCall(self.client, self.timeout if timeout is None else timeout, "DataParallel.save_parameters",
                           "call save_parameters again")
        names = list(self.net.collect_params())
        return call.gather([call.submit(R.save, self._rkey(self._holders[0]), str(path), names,
                                        key=f"{self._key}-save-{uuid.uuid4().hex[:6]}", worker=self._holders[0])])[0]

    # -- sharded checkpoints ---------------------------------------------------------------------------
    def save_checkpoint(self, folder, timeout=None) -> str:
        """Write a sharded checkpoint of the model and its optimizer states into ``folder`` (made if
        missing; ``checkpoint.py``): each worker writes its part (about ``1/N`` of the bytes) from
        its replica, then the client writes the manifest that makes it the folder's checkpoint (the
        previous one stays whole until then). ``folder`` is on the workers' file system too (a
        local cluster shares the client's). Before the first step the client's values are written,
        as one shard. Returns ``folder``. ``load_checkpoint`` (or ``la.distributed.load_checkpoint``
        without a cluster) reads it back on any number of workers."""
        folder = os.path.abspath(os.fspath(folder))
        os.makedirs(folder, exist_ok=True)
        ckpt = uuid.uuid4().hex
        params, trained = self._named()
        if not self._holders:
            written = [C.write_shard(folder, ckpt, 0, 1, list(params), params, trained, self.trainer, self.steps)]
            C.write_manifest(folder, ckpt, self.steps, [(written[0][0], written[0][1], list(params))])
            return folder
        call = BoundedCall(self.client, self.timeout if timeout is None else timeout, "DataParallel.save_checkpoint",
                           "call save_checkpoint again (the folder's previous checkpoint is still whole)")
        workers = self._replicas(call, sorted(call.workers()))
        parts = C.partition({k: int(p.data().size) * np.dtype(p.dtype).itemsize for k, p in params.items()},
                            len(workers))
        written = call.gather([call.submit(C.save_shard, self._rkey(w), folder, ckpt, j, len(workers), parts[j],
                                           key=f"{self._key}-ckpt-{ckpt}-{j}", worker=w) for j, w in enumerate(workers)],
                              watch={w: f"replica {j} of the model" for j, w in enumerate(workers)})
        steps = {s for _, _, s in written}
        if len(steps) != 1:  # (a step failed half way since the check: the next step re-syncs them)
            self._suspect = True
            raise DistributedError(f"DataParallel.save_checkpoint: the replicas are at different steps {sorted(steps)}; "
                                   "call step (it re-syncs them) and save again")
        C.write_manifest(folder, ckpt, steps.pop(), [(f, h, part) for (f, h, _), part in zip(written, parts)])
        return folder

    def load_checkpoint(self, folder) -> int:
        """Load the checkpoint in ``folder`` (``save_checkpoint``'s, saved on any number of workers) into
        ``net``, the loss's own parameters (a ``Block`` loss with parameters) and ``trainer`` (its
        optimizer states and, with ``la.amp``, its loss scaler and float32 master weights); the replicas
        are dropped and the next step broadcasts the loaded values to the workers (any number). ``steps`` becomes the checkpoint's step (so the dropout seeds
        continue where it was saved, given the same ``seed``). Returns that step."""
        step = C.load_into(folder, self.net, self.trainer, self.loss_fn)
        self.close_replicas()
        self.steps, self._suspect, self._sent = step, False, set()
        return step

    def close_replicas(self) -> None:
        """Drop the replicas from the workers (best effort); the next step broadcasts the client's values."""
        if self._holders and self._client is not None and self._client.status == "running":
            dd = dask_modules()[2]
            for w in self._holders:  # (not waited for: a worker that is gone took its replica with it)
                dd.fire_and_forget(self._client.submit(R.drop, self._rkey(w), key=f"{self._key}-drop-{w}", workers=[w],
                                                       pure=False))
        self._holders = []
        self._key = f"la-dp-{uuid.uuid4().hex[:12]}"  # (new replicas get new keys: a late drop never meets them)


def _scaled(total: Entry, loss: Entry) -> Entry:
    """The head the gradients of a step with loss scaling (``la.amp``) are taken of: the sum of the
    float32 losses times the scale (the graph input ``replica.LOSS_SCALE``), as ``amp.scale_loss`` makes it."""
    f32 = np.dtype("float32")
    scale = Entry(var_node(R.LOSS_SCALE, Aval((), f32, loss.aval.device)))
    losses = loss if loss.aval.dtype == f32 else apply_node(registry.get("cast"), loss, dtype=f32)
    return apply_node(registry.get("sum"), apply_node(registry.get("multiply"), losses, scale))


def _owners(call: BoundedCall, workers: list[str], batches: list, rows: list) -> list[list[str]]:
    """The worker of each piece of each batch: where a persisted dask-array batch already holds the
    piece (its row chunks are the pieces), as long as no worker gets more than its share of a step's
    pieces (``ceil(pieces / workers)``); else the least loaded worker, the workers in turn."""
    where = call.who_has([d for d, _ in batches if _is_dask(d)])  # (one question for every batch)
    keys = dask_modules()[0].core.flatten
    out = []
    for (d, _), rs in zip(batches, rows):
        found = [None] * len(rs)
        if _is_dask(d) and d.chunks == tuple([tuple(rs)] + [(k,) for k in d.shape[1:]]):
            found = [(where.get(k) or [None])[0] for k in keys(d.__dask_keys__())]
        cap, load, owner = -(-len(rs) // len(workers)), dict.fromkeys(workers, 0), []
        for i, w in enumerate(found):
            if w not in load or load[w] >= cap:
                w = min(workers, key=lambda v: (load[v], (workers.index(v) - i) % len(workers)))
            load[w] += 1
            owner.append(w)
        out.append(owner)
    return out


def _first_rows(v):
    v = v[:1]
    return np.asarray(v.compute() if _is_dask(v) else v.asnumpy() if isinstance(v, NDArray) else v)


def _batch_pieces(data, label, owner: list[str], call: BoundedCall) -> tuple[list, list]:
    """The ``len(owner)`` row pieces of ``data`` and ``label``: NumPy pieces scattered (all at once) to
    the workers that run them (``owner``), dask-array pieces computed where Dask puts them (their
    chunks stay where they are)."""
    n, out = len(owner), []
    numpy = {}
    for name, v in (("data", data), ("label", label)):
        if _is_dask(v):
            pieces = dask_pieces(f"DataParallel.step: {name}", v, split(0), n)  # (rows split, other axes whole)
            out.append(call.client.compute(pieces))
        else:
            v = v.asnumpy() if isinstance(v, NDArray) else np.asarray(v)
            numpy[name] = P.split_value(v, split(0), n)
            out.append(None)
    if numpy:
        items = [(name, i, p) for name, ps in numpy.items() for i, p in enumerate(ps)]
        sent = call.scatter_each([p for _, _, p in items], [f"{name} piece {i} of {n}" for name, i, _ in items],
                                 [owner[i] for _, i, _ in items])
        for k, name in enumerate(numpy):
            out[0 if name == "data" else 1] = sent[k * n:(k + 1) * n]
    return out[0], out[1]


def _applied_after_all(caller: str, gave_up: int, best: int) -> str:
    """The error of the call after one that raised, when every surviving replica had finished the steps
    the client gave up on (from ``gave_up`` to ``best``): they count now, and this call ran nothing."""
    steps = f"step {gave_up} was" if best == gave_up + 1 else f"steps {gave_up} to {best - 1} were"
    return (f"{caller}: {steps} applied after all by every surviving replica, though the last call raised "
            f"(a worker finished after the client stopped waiting); DataParallel.steps is now {best}. "
            "This call ran nothing: call it again, unless its batch is the one the last call gave up on (that "
            "step is applied: running it again would apply it twice)")
