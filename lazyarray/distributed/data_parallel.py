"""``la.distributed.DataParallel``: data-parallel training steps on a Dask cluster.

One step: the batch is split along axis 0 (a ``dask.array`` keeps its chunks, NumPy is split
over the workers); every piece runs forward and backward on a worker through one compiled graph
(the model, the loss summed over the piece, and the gradient of that sum with respect to every
parameter: ``graph/passes/gradient.py``); the gradients are ``P(sum)`` pieces, reduced once per
step by a tree of additions; the driver writes them as the parameters' gradients and the
``Trainer`` applies its update once; the new parameter values are scattered to every worker
(``broadcast=True``) for the next step. The result equals ``loss.backward(); trainer.step(batch)``
in one process, up to float rounding of the summation order.

The loss must return one value per sample (Gluon's losses do), and the graph is traced in
inference mode (``HybridBlock.export_graph``): models whose training mode differs (dropout,
batch-norm statistics) are not covered yet.
"""
from __future__ import annotations

import numpy as np

from .. import autograd
from ..blocks.block import HybridBlock
from ..creation import array
from ..graph.build import apply_node
from ..graph.node import Entry
from ..graph.passes.gradient import gradient
from ..graph.symbol import Symbol
from ..ndarray import NDArray
from ..ops import registry
from ..sbp import split, split_sizes
from . import pieces as P
from .run import _delayed, _is_dask, _tree_reduce, dask_modules
from .worker import run_region


class _WithLoss(HybridBlock):
    def __init__(self, net, loss_fn):
        super().__init__()
        self.net = net
        self.loss_fn = loss_fn

    def forward(self, data, label):
        return self.loss_fn(self.net(data), label)


class DataParallel:
    """Train ``net`` with ``loss_fn`` and ``trainer`` over the pieces of each batch on a Dask cluster.

    ``step(data, label)`` returns the mean loss of the batch (a float). Without ``client``, a
    ``LocalCluster`` of processes is started at the first step; ``close()`` (or a ``with``
    block) stops it.

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

    def __init__(self, net, loss_fn, trainer, client=None):
        self.net, self.loss_fn, self.trainer = net, loss_fn, trainer
        self._client, self._own = client, None
        self._graph = None  # (JSON text, parameter names, parameters) once traced

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
    def _trace(self, x, y):
        """The graph ``(sum of the losses, d sum / d parameter ...)`` with inputs data0, data1, parameters."""
        block = _WithLoss(self.net, self.loss_fn)
        block.hybridize()
        block(array(x), array(y))
        sym, params = block.export_graph()
        nodes = {n.name: n for n in sym.input_nodes()}
        names = [n for n in sym.list_inputs() if n in params and params[n].grad_req != "null"]
        loss = sym.outputs[0]
        total = apply_node(registry.get("sum"), loss)
        wrt = [Entry(nodes[n], 0) for n in names]
        grads = gradient([total], [None], wrt)
        zeros_like = registry.get("zeros_like")
        outs = [total] + [g if g is not None else apply_node(zeros_like, w) for g, w in zip(grads, wrt)]
        graph = Symbol(outs)
        return graph.to_json(), graph.list_inputs(), params, names

    def step(self, data, label) -> float:
        """One training step on the batch ``(data, label)``; returns the batch's mean loss."""
        client = self.client
        if self._graph is None:
            x0 = _first_rows(data)
            y0 = _first_rows(label)
            self._graph = self._trace(x0, y0)
        text, order, params, names = self._graph
        batch = data.shape[0]
        n = len(data.chunks[0]) if _is_dask(data) else max(1, len(client.scheduler_info()["workers"]))
        xs, ys = _batch_pieces(data, n, client), _batch_pieces(label, n, client)
        if len(xs) != len(ys):
            raise ValueError(f"DataParallel.step: data has {len(xs)} pieces, label {len(ys)}; chunk them alike")
        shared = {k: client.scatter(p.data().asnumpy(), broadcast=True, hash=False)
                  for k, p in params.items()}
        text_f = client.scatter(text, broadcast=True, hash=False)
        per_piece = []
        for i in range(n):
            args = [xs[i] if k == "data0" else ys[i] if k == "data1" else shared[k] for k in order]
            per_piece.append(_delayed(run_region)(text_f, tuple(order), *args))
        outs = [_tree_reduce([_delayed(_item)(p, j) for p in per_piece], "sum") for j in range(1 + len(names))]
        values = client.compute(outs, sync=True)
        self._apply(values[1:], names, params)
        self.trainer.step(batch)
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


def _item(t, j):
    return t[j]


def _first_rows(v):
    v = v[:1]
    return np.asarray(v.compute() if _is_dask(v) else v.asnumpy() if isinstance(v, NDArray) else v)


def _batch_pieces(v, n, client) -> list:
    if _is_dask(v):
        want = tuple(split_sizes(v.shape[0], len(v.chunks[0])))
        if v.chunks[0] != want:
            v = v.rechunk({0: want})
        return [d for d in v.to_delayed().ravel()]
    v = v.asnumpy() if isinstance(v, NDArray) else np.asarray(v)
    return client.scatter(P.split_value(v, split(0), n), hash=False)
