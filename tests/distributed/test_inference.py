"""Inference ``la.distributed.run`` on worker processes: parameters sent once per model and held on the
workers by content hash, each piece run on the worker that holds it, ``P(sum)`` reduced among the
workers (the client receives only the final arrays), every chunking equal to one process."""
from __future__ import annotations

import weakref

import numpy as np
import pytest

import lazyarray as la
from lazyarray import blocks as nn
from lazyarray.buffer import version
from lazyarray.distributed import bounded, params

pytest.importorskip("dask.distributed")
import dask.array as da  # noqa: E402
from dask.distributed import SchedulerPlugin, get_task_stream  # noqa: E402

S = la.sbp.split


def _mlp(seed: int):
    la.random.seed(seed)
    net = nn.HybridSequential()
    net.add(nn.Dense(16, activation="relu", in_units=8), nn.Dense(4, in_units=16))
    net.initialize()
    net.hybridize()
    net(la.ones((1, 8)))
    return net


def _named(task: dict, prefix: str) -> bool:
    """Whether the task of a task-stream record is a ``prefix`` task (keys may be tuples)."""
    key = task["key"]
    return str(key[0] if isinstance(key, tuple) else key).startswith(prefix)


def _param_sends(monkeypatch, net) -> list:
    """Record the shapes of ``net``'s parameter arrays sent from the client (each the argument of one
    source task: ``params.source``)."""
    shapes = {p.shape for p in net.collect_params().values()}
    calls = []
    real = bounded.BoundedCall.submit

    def submit(self, fn, *args, **kw):
        if fn is params.source and args[0].shape in shapes:
            calls.append(args[0].shape)
        return real(self, fn, *args, **kw)

    monkeypatch.setattr(bounded.BoundedCall, "submit", submit)
    return calls


def test_parameters_travel_once_per_model_and_stay_on_the_workers_by_content_hash(client, monkeypatch):
    net = _mlp(0)
    x = np.random.default_rng(0).standard_normal((10, 8)).astype("float32")
    want = net(la.array(x)).asnumpy()
    calls = _param_sends(monkeypatch, net)
    n_params = len(net.collect_params())
    for _ in range(3):
        out = la.distributed.run(net, client=client, data=x, compute=True)
        np.testing.assert_allclose(out.asnumpy(), want, rtol=1e-5, atol=1e-6)
    assert len(calls) == n_params  # the first call only, once each (not once per worker)
    np.testing.assert_allclose(la.distributed.run(net, client=client, data=x).compute(), want, rtol=1e-5, atol=1e-6)
    assert len(calls) == n_params  # compute=False: the same copies (made from their sources)
    # the client forgets its futures (a new client, or its table's bound): the workers still hold them
    params.SENT.clear()
    la.distributed.run(net, client=client, data=x, compute=True)
    assert len(calls) == n_params
    # the workers forget too: sent again, once
    params.SENT.clear()
    client.run(params.clear)
    np.testing.assert_allclose(la.distributed.run(net, client=client, data=x, compute=True).asnumpy(), want,
                               rtol=1e-5, atol=1e-6)
    assert len(calls) == 2 * n_params
    # new values (a trained model): a new content hash, sent
    net[0].weight.set_data(net[0].weight.data() * 2)
    la.distributed.run(net, client=client, data=x, compute=True)
    assert len(calls) == 2 * n_params + 1


def test_a_parameter_updated_in_place_is_sent_anew_and_an_unchanged_one_is_not_hashed_again(client, monkeypatch):
    """The client keeps each parameter's hash per buffer version: an unchanged model hashes nothing at
    the next call, and every way of writing a parameter in place (set_data, an optimizer step, an
    index assignment, a write through np.asarray's alias) makes the next call send the new values."""
    net = _mlp(5)
    x = np.random.default_rng(5).standard_normal((10, 8)).astype("float32")
    hashed = []
    real = params.content_hash
    monkeypatch.setattr(params, "content_hash", lambda v: hashed.append(v.shape) or real(v))
    la.distributed.run(net, client=client, data=x, compute=True)
    assert len(hashed) == len(net.collect_params())
    hashed.clear()
    np.testing.assert_allclose(la.distributed.run(net, client=client, data=x, compute=True).asnumpy(),
                               net(la.array(x)).asnumpy(), rtol=1e-5, atol=1e-6)
    assert hashed == []  # unchanged: no parameter hashed again
    w = net[0].weight
    trainer = nn.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.5})
    with la.autograd.record():
        loss = net(la.array(x)).sum()
    loss.backward()

    def index_write():
        w.data()[0] = 3.0

    def alias_write():
        np.asarray(w.data())[1] *= -2.0  # (a write lazyarray cannot see: the array is never cached again)

    for update in (lambda: w.set_data(w.data() * 2), lambda: trainer.step(1), index_write, alias_write, alias_write):
        update()
        hashed.clear()
        got = la.distributed.run(net, client=client, data=x, compute=True).asnumpy()
        np.testing.assert_allclose(got, net(la.array(x)).asnumpy(), rtol=1e-5, atol=1e-6)
        assert hashed  # the changed parameters were hashed again


def test_hashes_are_kept_only_for_arrays_whose_writes_are_seen():
    a = np.arange(12.0).reshape(3, 4).copy()
    h = params.hash_of(a)
    assert params.HASHES.get(id(a))[2] == h == params.content_hash(a)
    assert params.hash_of(a) == h
    arr = la.array(a)
    buf = arr._value  # (the array's own buffer: lazyarray's writes bump its version)
    params.hash_of(buf)
    arr[0, 0] = 100.0
    assert params.hash_of(buf) == params.content_hash(buf) != params.content_hash(a)
    view = a[1:]
    params.hash_of(view)
    entry = params.HASHES.get(id(view))  # a view: its owner may be written unseen, so never kept
    assert entry is None or entry[0]() is not view  # (an entry at its id is a dead array's, from an earlier test)
    gone = np.ones(3)
    dead = weakref.ref(gone)
    del gone
    b = np.zeros((3, 4))  # an entry left by a dead array at b's id never answers for b
    params.HASHES.put(id(b), (dead, version(b), "stale"))
    assert params.hash_of(b) == params.content_hash(b)


def test_the_tables_are_bounded_and_clear():
    assert params.HELD.size == params.HELD_ENTRIES and params.SENT.size == params.SENT_ENTRIES
    assert params.HASHES.size == params.HASH_ENTRIES
    a, b = np.arange(6.0).reshape(2, 3), np.arange(6.0).reshape(3, 2)
    assert params.content_hash(a) != params.content_hash(b)  # same bytes, another shape
    assert params.content_hash(a) == params.content_hash(a.copy()) != params.content_hash(a.astype("float32"))
    assert params.content_hash(a.T) == params.content_hash(np.ascontiguousarray(a.T))
    assert params.content_hash(np.array(True)) != params.content_hash(np.array(1, "uint8"))
    assert params.content_hash(np.array(2.0)) != params.content_hash(np.array([2.0]))  # 0-d vs 1-d
    assert params.content_hash(np.arange(3).astype("datetime64[s]")) != params.content_hash(np.arange(3))
    params.keep("k", a)
    assert params.held(["k", "other"]) == ["k"] and params.take("k") is not None
    params.clear()
    assert params.held(["k"]) == []
    with pytest.raises(KeyError, match="no longer held.*call run again"):
        params.take("k")


def test_each_piece_runs_on_the_worker_that_holds_its_chunk(client):
    net = _mlp(1)
    x = np.random.default_rng(1).standard_normal((40, 8)).astype("float32")
    workers = sorted(client.scheduler_info()["workers"])
    blocks = [client.persist(da.from_array(x[i * 10:(i + 1) * 10], chunks=(10, 8)), workers=[workers[i % 2]])
              for i in range(4)]  # (chunks 0 and 2 on the first worker, 1 and 3 on the second)
    dx = da.concatenate(blocks)
    la.distributed.run(net, client=client, data=dx, compute=True)  # (warm: the workers compile)
    with get_task_stream(client) as ts:
        out = la.distributed.run(net, client=client, data=dx, compute=True)
    np.testing.assert_allclose(out.asnumpy(), net(la.array(x)).asnumpy(), rtol=1e-5, atol=1e-6)
    regions = sorted((t for t in ts.data if _named(t, "run_region")), key=lambda t: t["key"])
    assert len(regions) == 4
    where = client.who_has(dx)
    ran = {t["worker"] for t in regions}
    assert ran == set(workers)  # both workers ran pieces
    for t in ts.data:  # no input chunk moved between workers: each piece ran where it was
        for ss in t["startstops"]:
            assert ss["action"] != "transfer" or not _named(t, "run_region"), t  # (parameters: local copies)
    assert sorted(ws[0] for ws in where.values()) == sorted(workers * 2)


def test_partial_sum_is_reduced_among_the_workers_and_the_client_receives_only_the_result(client, monkeypatch):
    x = la.sym.var("x", shape=(400, 300))
    y = la.sym.sum(la.sym.exp(x) * 0.5, axis=0)  # split(0) pieces -> P(sum): a (300,) sum of 4 partial sums
    data = np.random.default_rng(2).standard_normal((400, 300)) / 4
    dx = client.persist(da.from_array(data, chunks=(100, 300)))
    received = []
    real = client.gather

    def gather(futures, *a, **kw):
        out = real(futures, *a, **kw)
        if not kw.get("asynchronous"):
            received.append(out)
            return out

        async def record():
            received.append(await out)
            return received[-1]

        return record()

    monkeypatch.setattr(client, "gather", gather)
    with get_task_stream(client) as ts:
        got = la.distributed.run(y, client=client, x=dx, compute=True)
    np.testing.assert_allclose(got.asnumpy(), (np.exp(data) * 0.5).sum(0), rtol=1e-12)
    sizes = [np.asarray(v).shape for r in received for v in (r if isinstance(r, list) else [r])]
    assert sizes == [(300,)]  # one final array: no piece, no partial sum came to the client
    reduces = [t for t in ts.data if _named(t, "reduce")]
    assert len(reduces) == 3  # a tree: 2 + 1 pairwise sums over 4 pieces, on the workers
    assert {t["worker"] for t in reduces} <= set(client.scheduler_info()["workers"])


class _Restrictions(SchedulerPlugin):
    """Records, as each task starts processing, its worker restrictions and the worker it went to."""

    def __init__(self, scheduler):
        self.scheduler, self.seen = scheduler, {}

    def transition(self, key, start, finish, *args, **kwargs):
        if finish == "processing":
            ts = self.scheduler.tasks[key]
            self.seen[key] = (set(ts.worker_restrictions or ()), ts.loose_restrictions, ts.processing_on.address)


def test_pinned_tasks_are_not_stolen_and_numpy_pieces_go_to_their_workers(client):
    x = la.sym.var("x", shape=(9, 4))
    graph = la.sym.softmax(la.sym.exp(x), axis=0)  # an all-to-all between two regions
    data = np.random.default_rng(3).standard_normal((9, 4))
    scheduler = client.cluster.scheduler  # (LocalCluster: the scheduler runs in this process)
    plugin = _Restrictions(scheduler)
    scheduler.add_plugin(plugin, name="test-restrictions")
    try:
        with get_task_stream(client) as ts:
            got = la.distributed.run(graph, client=client, sbp={"x": S(0)}, x=data, compute=True)
    finally:
        scheduler.remove_plugin(name="test-restrictions")
    regions = [v for k, v in plugin.seen.items() if _named({"key": k}, "run_region")]
    concats = [v for k, v in plugin.seen.items() if _named({"key": k}, "concat-")]
    assert len(regions) == 4 and len(concats) == 2  # 2 regions x 2 pieces; the all-to-all's concatenations
    for restrictions, loose, ran_on in regions + concats:  # strict: never stolen to another worker
        assert restrictions == {ran_on} and not loose
    e = np.exp(data)
    np.testing.assert_allclose(got.asnumpy(), np.exp(e) / np.exp(e).sum(0), rtol=1e-12)
    workers = sorted(client.scheduler_info()["workers"])
    regions = sorted((t for t in ts.data if _named(t, "run_region")), key=lambda t: t["key"])
    assert {t["worker"] for t in regions} == set(workers)


CHUNKS = {  # (chunks, declared SBP): more chunks than workers, uneven, a 2-D grid, split(0) and split(1)
    "5 uneven row chunks, split(0)": (((1, 4, 2, 2, 3), (6,)), S(0)),
    "2-D grid, split(1)": (((3, 4, 5), (2, 4)), S(1)),
    "2-D grid, split(0)": (((6, 6), (1, 2, 3)), S(0)),
    "rows, declared split(1)": (((4, 4, 4), (6,)), S(1)),
    "columns, inferred": (((12,), (1, 1, 1, 3)), None),
}


@pytest.mark.parametrize("case", list(CHUNKS))
def test_chunkings_on_worker_processes_equal_one_process(client, case):
    chunks, sbp = CHUNKS[case]
    data = np.random.default_rng(4).standard_normal((12, 6))
    x = la.sym.var("x", shape=(12, 6))
    sym = la.Symbol([la.sym.exp(x).outputs[0], la.sym.sum(x, axis=0).outputs[0], la.sym.max(x, axis=1).outputs[0]])
    want = [o.asnumpy() for o in la.CachedOp(sym)(x=data)]
    outs = la.distributed.run(sym, client=client, sbp={} if sbp is None else {"x": sbp},
                              x=da.from_array(data, chunks=chunks), compute=True)
    for got, w in zip(outs, want):
        assert got.shape == w.shape
        np.testing.assert_allclose(got.asnumpy(), w, rtol=1e-12, atol=1e-12)
