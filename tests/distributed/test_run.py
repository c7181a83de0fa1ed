"""``la.distributed.run`` on a Dask ``LocalCluster`` equals the single-process ``CachedOp``."""
from __future__ import annotations

import numpy as np
import pytest

import lazyarray as la
from lazyarray import blocks as nn
from lazyarray.distributed import bounded, params

pytest.importorskip("dask.distributed")
import dask.array as da  # noqa: E402
from dask.distributed import Client, LocalCluster  # noqa: E402

S, B = la.sbp.split, la.sbp.broadcast()


@pytest.fixture(scope="module")
def client(threaded_client):  # (conftest.py: workers as threads of this process)
    return threaded_client


@pytest.fixture(scope="module")
def mlp():
    la.random.seed(0)
    net = nn.HybridSequential()
    net.add(nn.Dense(32, activation="relu"), nn.Dense(16, activation="relu"), nn.Dense(10))
    net.initialize()
    net.hybridize()
    net(la.ones((1, 20)))
    return net


def test_block_over_split_numpy_rows(client, mlp):
    x = np.random.default_rng(0).standard_normal((101, 20)).astype("float32")
    out = la.distributed.run(mlp, client=client, data=x)
    assert isinstance(out, da.Array) and out.shape == (101, 10)
    assert len(out.chunks[0]) == 2  # one piece per worker, still split
    np.testing.assert_allclose(out.compute(), mlp(la.array(x)).asnumpy(), rtol=1e-5, atol=1e-6)


def test_dask_input_chunking_gives_the_split_and_compute_gives_la_arrays(client, mlp):
    x = np.random.default_rng(1).standard_normal((90, 20)).astype("float32")
    dx = da.from_array(x, chunks=(30, 20))
    out = la.distributed.run(mlp, client=client, compute=True, data=dx)
    assert isinstance(out, la.NDArray)
    np.testing.assert_allclose(out.asnumpy(), mlp(la.array(x)).asnumpy(), rtol=1e-5, atol=1e-6)


def test_graph_with_boxing_equals_single_process(client):
    x, w, b = la.sym.var("x", shape=(12, 6)), la.sym.var("w", shape=(5, 6)), la.sym.var("b", shape=(5,))
    h = la.sym.relu(la.sym.dense(x, w, b))
    soft = la.sym.softmax(h, axis=0)           # along the split axis: all-to-all first
    total = la.sym.mean(h, axis=0)             # partial sum over the pieces, global count
    top = la.sym.max(h)                        # partial max
    sym = la.Symbol(list(soft.outputs) + list(total.outputs) + list(top.outputs))
    rng = np.random.default_rng(2)
    vals = {"x": rng.standard_normal((12, 6)), "w": rng.standard_normal((5, 6)), "b": rng.standard_normal(5)}
    want = [o.asnumpy() for o in la.CachedOp(sym)(**vals)]
    for sbp in ({"x": S(0)}, {"x": S(1), "w": S(1)}, {"w": S(0), "b": S(0)}):
        got = la.distributed.run(sym, client=client, sbp=sbp, **vals)
        for g, w_ in zip(got, want):
            np.testing.assert_allclose(g.compute(), w_, rtol=1e-10, atol=1e-12)


def test_expand_pieces_on_workers(client):
    x = la.sym.var("x", shape=(4, 1, 6))
    y = la.sym.expand(x, sizes=(4, 3, 6)) * 2.0
    data = np.arange(24.0).reshape(4, 1, 6)
    out = la.distributed.run(y, client=client, x=da.from_array(data, chunks=(4, 1, 3)))
    assert out.chunks == ((4,), (3,), (3, 3))
    np.testing.assert_array_equal(out.compute(), np.broadcast_to(data, (4, 3, 6)) * 2)


def test_inconsistent_pieces_fail_before_any_task(client):
    x, y = la.sym.var("x", shape=(12, 4)), la.sym.var("y", shape=(12, 4))
    with pytest.raises(la.sbp.SBPError, match="different numbers of pieces"):
        la.distributed.run(x + y, client=client, x=da.ones((12, 4), chunks=(6, 4)), y=da.ones((12, 4), chunks=(4, 4)))
    with pytest.raises(la.sbp.SBPError, match="several axes"):
        la.distributed.run(x + y, client=client, x=da.ones((12, 4), chunks=(6, 2)), y=np.ones((12, 4)))
    with pytest.raises(la.GraphError, match="missing inputs"):
        la.distributed.run(x + y, client=client, x=np.ones((12, 4)))


def test_without_client_a_local_cluster_of_processes_runs_the_call(mlp):
    x = np.random.default_rng(3).standard_normal((40, 20)).astype("float32")
    out = la.distributed.run(mlp, data=x)
    assert isinstance(out, da.Array)
    np.testing.assert_allclose(out.compute(), mlp(la.array(x)).asnumpy(), rtol=1e-5, atol=1e-6)


def _mlp(seed):
    la.random.seed(seed)
    net = nn.HybridSequential()
    net.add(nn.Dense(16, activation="relu", in_units=8), nn.Dense(3, in_units=16))
    net.initialize()
    return net


@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
def test_data_parallel_equals_single_process_training(client, optimizer):
    rng = np.random.default_rng(5)
    batches = [(rng.standard_normal((24, 8)).astype("float32"), rng.integers(0, 3, 24).astype("int32"))
               for _ in range(3)]
    ref, dist = _mlp(7), _mlp(7)
    loss_fn = nn.SoftmaxCrossEntropyLoss()
    opts = {"learning_rate": 0.1} if optimizer == "sgd" else {"learning_rate": 0.01}
    ref_tr = nn.Trainer(ref.collect_params(), optimizer, dict(opts))
    dp = la.distributed.DataParallel(dist, loss_fn, nn.Trainer(dist.collect_params(), optimizer, dict(opts)),
                                     client=client)
    before = {k: p.data().asnumpy().copy() for k, p in dist.collect_params().items()}
    for x, y in batches:
        with la.autograd.record():
            loss = loss_fn(ref(la.array(x)), la.array(y))
        loss.backward()
        ref_tr.step(x.shape[0])
        got = dp.step(da.from_array(x, chunks=(12, 8)), da.from_array(y, chunks=12))
        assert got == pytest.approx(float(loss.asnumpy().mean()), rel=1e-5)
    dp.sync_to_client()  # (the trained replicas live on the workers)
    for (k, p), (_, q) in zip(sorted(ref.collect_params().items()), sorted(dist.collect_params().items())):
        np.testing.assert_allclose(q.data().asnumpy(), p.data().asnumpy(), rtol=1e-5, atol=1e-6, err_msg=k)
        assert not np.allclose(q.data().asnumpy(), before[k])  # the steps did train


async def _exit_soon():
    """Kill this worker process a moment after ``client.run`` has had its answer."""
    import asyncio
    import os

    asyncio.get_running_loop().call_later(0.05, os._exit, 1)


def _gated(block):
    """Hold each input chunk until the test opens the gate: the run cannot finish before the kill."""
    from dask.distributed import Event

    if not Event("lazyarray-test-gate").wait(timeout=60):
        raise TimeoutError("the test never opened the gate")
    return block


def _kill_one_worker_then_open_the_gate(c, gate, victim=None) -> None:
    """While every input chunk waits at the gate: kill one worker (``victim``, else the first), wait
    until the scheduler has removed it, then let the run go on."""
    import time

    victim = victim or sorted(c.scheduler_info()["workers"])[0]
    c.run(_exit_soon, workers=[victim])
    deadline = time.monotonic() + 30
    while victim in c.scheduler_info()["workers"] and time.monotonic() < deadline:
        time.sleep(0.1)
    gate.set()


def _tanh_chain():
    x, w = la.sym.var("x", shape=(4000, 256)), la.sym.var("w", shape=(256, 256))
    h = x
    for _ in range(30):
        h = la.sym.tanh(h @ w)
    wv = (np.random.default_rng(0).standard_normal((256, 256)) / 16).astype("float32")
    data = da.random.RandomState(0).random_sample((4000, 256), chunks=(250, 256)).astype("float32")
    return h, wv, data


def test_a_worker_that_dies_mid_run_is_replaced_and_the_run_completes():
    """With ``compute=True`` the call survives a worker's death: Dask re-runs the lost tasks (inputs
    made by a Dask graph are recomputed) and the call plans itself again over the workers present
    (parameters and the regions' JSON are made resident on the replacement worker). The kill is
    made certain to land mid-run by a gate every input chunk waits at."""
    import threading

    from dask.distributed import Event

    h, wv, data = _tanh_chain()
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0") as cluster, \
            Client(cluster) as c:
        gate = Event("lazyarray-test-gate", client=c)
        killer = threading.Timer(1.0, _kill_one_worker_then_open_the_gate, (c, gate))
        killer.start()
        try:
            got = la.distributed.run(h, client=c, x=data.map_blocks(_gated, dtype="float32"), w=wv,
                                     compute=True, timeout=120).asnumpy()
        finally:
            killer.join()
        assert gate.is_set()  # (the run waited at the gate: it cannot have finished before the kill)
    want = la.CachedOp(h)(x=data.compute(), w=wv).asnumpy()
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_arrays_of_compute_false_survive_the_death_of_the_worker_holding_a_parameter_copy():
    """The arrays ``run(compute=False)`` returns are computed by the caller, later, and survive a worker's
    death: the lost worker's parameter copy is made again from its source task (the NumPy weight ``w``,
    carried by a task the scheduler holds) and the graph carries the regions' JSON. The victim is the
    only holder of the copy piece 0 reads (lost with it: nothing scattered could make it again), and
    the kill lands mid-compute (every input chunk waits at a gate until the victim is gone)."""
    import threading
    import time

    from dask.distributed import Event

    h, wv, data = _tanh_chain()
    want = la.CachedOp(h)(x=data.compute(), w=wv).asnumpy()
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0") as cluster, \
            Client(cluster) as c:
        gate = Event("lazyarray-test-gate", client=c)
        gate.set()
        out = la.distributed.run(h, client=c, x=data.map_blocks(_gated, dtype="float32"), w=wv)
        entry = params.SENT.get((c.scheduler.address, params.content_hash(wv)))
        wv[...] = 0  # (the caller's array is theirs to write: the copies are of what it was)
        np.testing.assert_allclose(c.compute(out).result(timeout=120), want, rtol=1e-4, atol=1e-5)
        first = sorted(c.scheduler_info()["workers"])[0]
        copy = entry.futures[first]  # (the weight's copy that piece 0 reads)
        deadline = time.monotonic() + 30
        while len(holders := c.who_has([copy])[copy.key]) > 1 and time.monotonic() < deadline:
            time.sleep(0.2)  # (a region task that read it elsewhere left a replica: Dask's memory manager drops it)
        assert len(holders) == 1
        gate.clear()
        killer = threading.Timer(0.5, _kill_one_worker_then_open_the_gate, (c, gate, holders[0]))
        killer.start()
        try:
            got = c.compute(out).result(timeout=120)
        finally:
            killer.join()
        assert holders[0] not in c.scheduler_info()["workers"]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_captured_constants_are_boxed_and_inputs_can_be_outputs(client):
    xv, v = la.array(np.ones((6, 4))), la.array(np.arange(4.0))
    with la.deferred():
        y = xv + v  # v is captured: a constant of the graph, sliced for pieces split along axis 1
    sym = la.get_symbol(y, inputs={"x": xv})
    ann = sym.infer_sbp(x=S(1))
    assert [n.name for n in ann.topo() if n.op is not None and n.op.name == "boxing"] == ["local_slice"]
    data = np.random.default_rng(4).standard_normal((6, 4))
    out = la.distributed.run(sym, client=client, sbp={"x": S(1)}, x=data)
    np.testing.assert_allclose(out.compute(), data + np.arange(4.0))
    x = la.sym.var("x", shape=(6, 4))
    both = la.distributed.run(la.Symbol([x.outputs[0], la.sym.exp(x).outputs[0]]), client=client,
                              sbp={"x": S(0)}, x=data)
    np.testing.assert_array_equal(both[0].compute(), data)
    np.testing.assert_allclose(both[1].compute(), np.exp(data))


@pytest.mark.filterwarnings("ignore::lazyarray.ops.sbp_rules.SBPFallbackWarning")
def test_every_boxing_kind_runs_on_dask(client):
    x, v, m = la.sym.var("x", shape=(10, 6)), la.sym.var("v", shape=(6,)), la.sym.var("m", shape=(10, 6))
    outs = [la.sym.exp(la.sym.sum(x, axis=0)),                       # P(sum) -> S(0): reduce-scatter
            la.sym.softmax(la.sym.sum(x, axis=0), axis=0),           # P(sum) -> B: all-reduce
            la.sym.diagonal(x),                                      # no rule: S(0) -> B, all-gather
            la.sym.softmax(x, axis=0),                               # S(0) -> S(1): all-to-all
            x * m,                                                   # B -> S(0): local slice of m
            la.sym.sum(x, axis=0) + v]                               # B -> P(sum): local partial
    sym = la.Symbol([o.outputs[0] for o in outs])
    ann = sym.infer_sbp(x=S(0))
    kinds = {n.name.rstrip("0123456789") for n in ann.topo() if n.op is not None and n.op.name == "boxing"}
    assert kinds == {"reduce_scatter", "all_reduce", "all_gather", "all_to_all", "local_slice", "local_partial"}
    rng = np.random.default_rng(6)
    vals = {"x": rng.standard_normal((10, 6)), "v": rng.standard_normal(6), "m": rng.standard_normal((10, 6))}
    want = [o.asnumpy() for o in la.CachedOp(sym)(**vals)]
    got = la.distributed.run(sym, client=client, sbp={"x": S(0)}, compute=True, **vals)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g.asnumpy(), w, rtol=1e-10, atol=1e-12)


def test_more_pieces_than_rows(client, mlp):
    one = np.random.default_rng(8).standard_normal((1, 20)).astype("float32")
    out = la.distributed.run(mlp, client=client, data=one)  # pieces of 1 and 0 rows
    assert out.shape == (1, 10)
    np.testing.assert_allclose(out.compute(), mlp(la.array(one)).asnumpy(), rtol=1e-5, atol=1e-6)
    x = la.sym.var("x", shape=(1, 3))
    got = la.distributed.run(la.sym.mean(x, axis=0), client=client, sbp={"x": S(0)}, x=np.full((1, 3), 2.0))
    np.testing.assert_array_equal(got.compute(), [2.0, 2.0, 2.0])


@pytest.mark.filterwarnings("ignore::lazyarray.ops.sbp_rules.SBPFallbackWarning")
def test_control_flow_runs_on_gathered_inputs(client):
    from lazyarray.executor.call import SubGraph

    v = la.sym.var("v", shape=(6, 3))
    x, p = la.sym.var("x", shape=(6, 3)), la.sym.var("p", shape=(), dtype="bool")
    y = la.sym.cond(p, [x], then_graph=SubGraph(la.sym.exp(v) * 2), else_graph=SubGraph(v - 1)) + 1.0
    data = np.random.default_rng(9).standard_normal((6, 3))
    for flag, want in [(True, np.exp(data) * 2 + 1), (False, data)]:
        out = la.distributed.run(y, client=client, sbp={"x": S(0)}, x=data, p=np.array(flag))
        np.testing.assert_allclose(out.compute(), want)


def test_embedding_lookup_over_a_split_batch_of_indices(client):
    net = nn.HybridSequential()
    net.add(nn.Embedding(50, 8), nn.Dense(4, flatten=False))
    net.initialize()
    net.hybridize()
    idx = np.random.default_rng(10).integers(0, 50, (30, 5)).astype("int64")
    net(la.array(idx))
    out = la.distributed.run(net, client=client, data=da.from_array(idx, chunks=(10, 5)))
    assert len(out.chunks[0]) == 3
    np.testing.assert_allclose(out.compute(), net(la.array(idx)).asnumpy(), rtol=1e-5, atol=1e-6)


class _TwoInputs(nn.HybridBlock):
    def __init__(self):
        super().__init__()
        self.dense = nn.Dense(3, in_units=4)

    def forward(self, a, b):
        return self.dense(a) * b


def test_block_inputs_are_named_data0_to_n_and_parameters_travel_once_per_worker(client, monkeypatch):
    net = _TwoInputs()
    net.initialize()
    net.hybridize()
    a = la.array(np.random.default_rng(11).standard_normal((9, 4)).astype("float32"))
    b = la.array(np.random.default_rng(12).standard_normal((9, 3)).astype("float32"))
    want = net(a, b).asnumpy()
    calls, sources = [], []
    real, real_submit = client.scatter, bounded.BoundedCall.submit

    def scatter(data, **kw):
        calls.append((data, kw.get("broadcast", False)))
        return real(data, **kw)

    def submit(self, fn, *args, **kw):
        if fn is params.source:
            sources.append(args[0].shape)
        return real_submit(self, fn, *args, **kw)

    monkeypatch.setattr(client, "scatter", scatter)
    monkeypatch.setattr(bounded.BoundedCall, "submit", submit)
    out = la.distributed.run(net, client=client, data0=a, data1=b, compute=True)  # la arrays, both split by rows
    np.testing.assert_allclose(out.asnumpy(), want, rtol=1e-5, atol=1e-6)
    weight = net.dense.weight.data().asnumpy()
    assert sources.count(weight.shape) == 1  # sent once (one source task), not one copy per worker or task
    pieces = [p.shape for d, bc in calls if isinstance(d, list) for p in d]  # (each to its piece's worker)
    assert pieces == [(5, 4), (4, 4), (5, 3), (4, 3)]
    calls.clear()
    out = la.distributed.run(net, client=client, data0=a, data1=b)  # compute=False: the graph carries the pieces
    np.testing.assert_allclose(out.compute(), want, rtol=1e-5, atol=1e-6)
    assert calls == [] and sources.count(weight.shape) == 1


@pytest.mark.filterwarnings("ignore::lazyarray.ops.sbp_rules.SBPFallbackWarning")
def test_random_draws_split_with_their_input_and_refuse_broadcast(client):
    x = la.sym.var("x", shape=(40, 50))
    y = x * la.sym.nn.dropout_mask(x, p=0.5)
    out = la.distributed.run(y, client=client, sbp={"x": S(0)}, x=np.ones((40, 50))).compute()
    assert set(np.unique(out)) <= {0.0, 2.0} and 0.35 < (out == 0).mean() < 0.65
    halves = np.array_split(out, 2)
    assert not np.array_equal(halves[0][:20], halves[1][:20])  # the pieces drew their own masks
    z = x + la.sym.random_uniform(shape=(40, 50))
    with pytest.raises(la.sbp.SBPError, match="random_uniform.*broadcast"):
        la.distributed.run(z, client=client, sbp={"x": S(0)}, x=np.ones((40, 50)))


def test_symbolic_graphs_bind_their_sizes_and_pinned_ones_refuse_others(client):
    """A graph with symbolic sizes runs at the global shapes it is given; a pinned one refuses others."""
    b = la.Dim("b")
    x = la.sym.var("x", shape=(b, 4))
    y = la.sym.sum(la.sym.reshape(x, shape=(b, 2, 2)), axis=2)
    v = np.arange(24, dtype=np.float32).reshape(6, 4)
    out = la.distributed.run(y, client=client, sbp={"x": la.sbp.split(0)}, x=v, compute=True)
    np.testing.assert_allclose(out.asnumpy(), v.reshape(6, 2, 2).sum(2))
    pinned = la.sym.reshape(la.sym.var("x", shape=(2, 4), pinned=True), shape=(8,))
    with pytest.raises(la.ShapeError, match="built for 2"):
        la.distributed.run(pinned, client=client, x=v)
