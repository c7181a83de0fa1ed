"""``la.distributed.DataParallel``: data-parallel training steps on a Dask cluster.

One step: the batch is split along axis 0 (a ``dask.array`` keeps its chunks, NumPy is split
over the workers); every piece runs forward and backward on a worker through one compiled graph
(the model, the loss summed over the piece, and the gradient of that sum with respect to every
parameter: ``graph/passes/gradient.py``); the gradients are ``P(sum)`` pieces, reduced once per
step by a tree of additions; the driver writes them as the parameters' gradients and the
``Trainer`` applies its update once; the new parameter values are scattered to every worker
(``broadcast=True``) for the next step. The result equals ``loss.backward(); trainer.step(batch)``
in one process, up to float rounding of the summation order.

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

import numpy as np

from .. import autograd
from ..blocks import hybrid
from ..blocks.block import HybridBlock
from ..creation import array, zeros
from ..device import Device
from ..graph.build import apply_node
from ..graph.node import Entry
from ..graph.passes.gradient import gradient
from ..graph.symbol import Symbol
from ..ndarray import NDArray
from ..ops import registry
from ..rng import generator
from ..sbp import split, split_sizes
from . import pieces as P
from .bounded import BoundedCall, check_timeout, dask_modules
from .run import _delayed, _is_dask, _tree_reduce, dask_pieces
from .worker import run_region_seeded


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
    fixes it too). Without ``client``, a
    ``LocalCluster`` of processes is started at the first step; ``close()`` (or a ``with``
    block) stops it.

    ``timeout`` (seconds; ``None``: ``bounded.DEFAULT_TIMEOUT``, 300 s; ``math.inf``: no bound)
    bounds every step (``step(..., timeout=)`` overrides it for one step): past it, or when a
    worker dies with the only copy of a scattered batch piece (NumPy batches are scattered piece
    by piece; dask-array batches are recomputed), or the scheduler is lost, the step raises
    ``la.DistributedError`` naming what and the fix, and leaves the parameters as they were.

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
        grads = gradient([total], [None], wrt)
        zeros_like = registry.get("zeros_like")
        outs = [total] + [g if g is not None else apply_node(zeros_like, w) for g, w in zip(grads, wrt)] + updates
        graph = Symbol(outs)
        return graph.to_json(), graph.list_inputs(), params, names, updated

    def step(self, data, label, timeout=None) -> float:
        """One training step on the batch ``(data, label)``; returns the batch's mean loss.
        ``timeout``: this step's bound in seconds (``None``: the ``DataParallel``'s)."""
        call = BoundedCall(self.client, self.timeout if timeout is None else timeout, "DataParallel.step",
                           "call step again with the same batch")
        batch = data.shape[0]
        workers = call.workers()
        n = len(data.chunks[0]) if _is_dask(data) else len(workers)
        xs, ys = _batch_pieces("data", data, n, call), _batch_pieces("label", label, n, call)
        rows = split_sizes(batch, n)
        for r in set(rows):
            if r not in self._graphs:
                self._graphs[r] = self._trace(data, label, r)
        _, order, params, names, updated = self._graphs[rows[0]]
        if any(g[3:] != (names, updated) for g in self._graphs.values()):  # (one model: never, but say so)
            raise RuntimeError("DataParallel.step: the graphs traced for different piece sizes differ in their "
                               "parameters; chunk the batch evenly")
        shared = {k: call.scatter(params[k].data().asnumpy(), f"parameter {k!r}", broadcast=True)
                  for k in order if k in params}
        texts = {r: call.scatter(self._graphs[r][0], f"the training graph of {r}-row pieces", broadcast=True)
                 for r in set(rows)}
        per_piece = []
        for i in range(n):
            _, order, _, _, _ = self._graphs[rows[i]]
            args = [xs[i] if k == "data0" else ys[i] if k == "data1" else shared[k] for k in order]
            per_piece.append(_delayed(_piece_step)(texts[rows[i]], tuple(order), self.piece_seed(self.steps, i),
                                                   rows[i] / batch, 1 + len(names), *args))
        outs = [_tree_reduce([_delayed(_item)(p, j) for p in per_piece], "sum")
                for j in range(1 + len(names) + len(updated))]
        values = call.compute(outs)
        self._apply(values[1:1 + len(names)], names, params)
        self.trainer.step(batch)
        for k, v in zip(updated, values[1 + len(names):]):
            params[k].set_data(array(np.asarray(v, dtype=params[k].dtype)))
        self.steps += 1
        return float(values[0]) / batch

    def _apply(self, grads, names, params) -> None:
        """Write the reduced gradients as the parameters' gradients (d/dw sum(w * g) = g exactly)."""
        arrays = [params[k].data() for k in names]
        with autograd.record():
            total = None
            for w, g in zip(arrays, grads):
                term = (w * array(np.asarray(g, dtype=w.dtype))).sum()
                total = term if total is None else total + term
        total.backward()


def _piece_step(text, order, seed, weight, n_summed, *arrays) -> tuple:
    """One piece's forward + backward (on a worker): the loss sum and gradients as computed (they
    add up over the pieces), the updated parameters scaled by the piece's share of the batch (so
    the sum over the pieces is their row-weighted mean)."""
    outs = run_region_seeded(text, order, seed, *arrays)
    return tuple(outs[:n_summed]) + tuple(o * o.dtype.type(weight) for o in outs[n_summed:])


def _item(t, j):
    return t[j]


def _first_rows(v):
    v = v[:1]
    return np.asarray(v.compute() if _is_dask(v) else v.asnumpy() if isinstance(v, NDArray) else v)


def _batch_pieces(name: str, v, n, call: BoundedCall) -> list:
    if _is_dask(v):
        return dask_pieces(f"DataParallel.step: {name}", v, split(0), n)  # (rows split, every other axis whole)
    v = v.asnumpy() if isinstance(v, NDArray) else np.asarray(v)
    return call.scatter(P.split_value(v, split(0), n), [f"{name} piece {i} of {n}" for i in range(n)])
