"""``DataParallel`` with replicas resident on worker processes: the gradients reduced among the workers in
buckets, the replicas equal bit for bit, nothing of the model through the client after the first broadcast."""
from __future__ import annotations

import os
import pickle
import signal
import time

import numpy as np
import pytest

import lazyarray as la
from lazyarray import blocks as nn
from lazyarray.distributed import bounded
from lazyarray.distributed import data_parallel as DP
from lazyarray.distributed import replica as R

pytest.importorskip("dask.distributed")
import dask.array as da  # noqa: E402
from dask.distributed import Future  # noqa: E402


def _net(layers: int, seed: int = 0):
    la.random.seed(seed)
    net = nn.HybridSequential()
    for i in range(layers):
        net.add(nn.Dense(6, in_units=5 if i == 0 else 6, activation="tanh"))
    net.add(nn.Dense(3, in_units=6))
    net.initialize()
    return net


def _batch(seed=0, rows=24):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((rows, 5)).astype("float32"), rng.integers(0, 3, rows).astype("int32")


def _replica_values(client, dp) -> list[dict]:
    """Every worker's replica, read on the worker (test only: the trainer never does this)."""
    return [client.run(lambda key: R.state(key)[0], dp._rkey(w), workers=[w])[w] for w in dp._holders]


def _single_process(layers, batches, opt, settings):
    net = _net(layers)
    trainer = nn.Trainer(net.collect_params(), opt, settings)
    loss_fn = nn.SoftmaxCrossEntropyLoss()
    for x, y in batches:
        with la.autograd.record():
            loss = loss_fn(net(la.array(x)), la.array(y))
        loss.backward()
        trainer.step(len(x))
    return {k: p.data().asnumpy() for k, p in net.collect_params().items()}


def test_ten_adam_steps_leave_bit_identical_replicas_equal_to_one_process(client):
    batches = [_batch(i) for i in range(10)]
    net = _net(2)
    before = {k: p.data().asnumpy().copy() for k, p in net.collect_params().items()}
    dp = la.distributed.DataParallel(net, nn.SoftmaxCrossEntropyLoss(),
                                     nn.Trainer(net.collect_params(), "adam", {"learning_rate": 0.01}), client=client)
    with la.tuning(dp_bucket_bytes=64):  # (several buckets, one array straddling two)
        for x, y in batches:
            dp.step(x, y)
    assert len(dp._plan.layout.buckets) > 3
    first, second = _replica_values(client, dp)
    for k in first:
        assert first[k].tobytes() == second[k].tobytes(), k
    for k, p in net.collect_params().items():  # the client's copy moves only when asked
        np.testing.assert_array_equal(p.data().asnumpy(), before[k])
    dp.sync_to_client()
    want = _single_process(2, batches, "adam", {"learning_rate": 0.01})
    for k, p in net.collect_params().items():
        np.testing.assert_array_equal(p.data().asnumpy(), first[k])
        np.testing.assert_allclose(p.data().asnumpy(), want[k], rtol=1e-5, atol=2e-6, err_msg=k)
    # the client's trainer took the optimizer states too: one more step here equals one more there
    x, y = _batch(10)
    with la.autograd.record():
        loss = nn.SoftmaxCrossEntropyLoss()(net(la.array(x)), la.array(y))
    loss.backward()
    dp.trainer.step(len(x))
    dp.step(x, y)
    again = _replica_values(client, dp)[0]
    for k, p in net.collect_params().items():
        np.testing.assert_allclose(p.data().asnumpy(), again[k], rtol=1e-5, atol=2e-6, err_msg=k)
    dp.close()


def _spied_step(monkeypatch, dp, x, y):
    """One step; what it scattered (names, bytes), what it submitted (task kind, bytes of its
    arguments other than futures) and the messages it sent to the workers (handler, bytes of the
    message but the batch pieces, bytes of the batch pieces)."""
    scattered, submitted, messages = [], [], []
    real_scatter, real_each, real_submit, real_message = (
        bounded.BoundedCall.scatter, bounded.BoundedCall.scatter_each, bounded.BoundedCall.submit,
        bounded.BoundedCall.message_each)

    def scatter(self, data, what, **kw):
        scattered.append((what, len(pickle.dumps(data))))
        return real_scatter(self, data, what, **kw)

    def scatter_each(self, items, what, workers):
        scattered.extend((w, len(pickle.dumps(v))) for v, w in zip(items, what))
        return real_each(self, items, what, workers)

    def submit(self, fn, *args, key, worker, **kw):
        plain = [a for a in args if not isinstance(a, Future)]
        submitted.append((fn.__name__, len(pickle.dumps(plain))))
        return real_submit(self, fn, *args, key=key, worker=worker, **kw)

    def message_each(self, op, msgs, doing):
        for m in msgs.values():
            rest = {k: v for k, v in m.items() if k != "steps"}
            control = [(rows, [p[:3] for p in pieces]) for rows, pieces in m["steps"]]
            batch = sum(d.nbytes + lab.nbytes for _, pieces in m["steps"] for _, _, _, d, lab in pieces)
            messages.append((op, len(pickle.dumps((rest, control))), batch))
        return real_message(self, op, msgs, doing)

    monkeypatch.setattr(bounded.BoundedCall, "scatter", scatter)
    monkeypatch.setattr(bounded.BoundedCall, "scatter_each", scatter_each)
    monkeypatch.setattr(bounded.BoundedCall, "submit", submit)
    monkeypatch.setattr(bounded.BoundedCall, "message_each", message_each)
    dp.step(x, y)
    monkeypatch.undo()
    return scattered, submitted, messages


@pytest.mark.parametrize("layers", [1, 6])
def test_a_step_is_one_message_per_worker_holding_only_the_batch_whatever_the_arrays(client, monkeypatch, layers):
    net = _net(layers)
    dp = la.distributed.DataParallel(net, nn.SoftmaxCrossEntropyLoss(),
                                     nn.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1}), client=client)
    x, y = _batch()
    first, _, sent = _spied_step(monkeypatch, dp, x, y)
    assert any("replica" in str(w) for w, _ in first)  # the one broadcast of the model
    assert all(size > 1000 for _, size, _ in sent)  # (the first step's messages carry the training graph)
    scattered, submitted, sent = _spied_step(monkeypatch, dp, x, y)
    n = len(dp._holders)
    assert scattered == [] and submitted == []  # no scattered key, no task: 1 layer or 6 alike
    assert [op for op, _, _ in sent] == ["la_dp_step"] * n
    assert sum(b for _, _, b in sent) == x.nbytes + y.nbytes  # the batch, each row once
    assert max(size for _, size, _ in sent) < 600  # keys, step tag, peers, seeds: no parameter, no graph
    dp.close()


def test_checkpoints_are_written_from_a_worker(client, tmp_path):
    net = _net(1)
    dp = la.distributed.DataParallel(net, nn.SoftmaxCrossEntropyLoss(),
                                     nn.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.5}), client=client)
    for i in range(2):
        dp.step(*_batch(i))
    path = dp.save_parameters(tmp_path / "ckpt.safetensors")
    on_worker = _replica_values(client, dp)[0]
    fresh = _net(1, seed=3)
    fresh.load_parameters(str(path))
    for k, p in fresh.collect_params().items():
        np.testing.assert_array_equal(p.data().asnumpy(), on_worker[k])
        assert not np.array_equal(net.collect_params()[k].data().asnumpy(), on_worker[k])  # (not from the client)
    dp.close()


def test_a_bucket_size_of_zero_is_refused(client):
    net = _net(1)
    dp = la.distributed.DataParallel(net, nn.SoftmaxCrossEntropyLoss(),
                                     nn.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.5}), client=client)
    with la.tuning(dp_bucket_bytes=0), pytest.raises(la.ParamValueError, match="dp_bucket_bytes must be positive"):
        dp.step(*_batch())


def test_flat_layout_packs_and_unpacks_exactly():
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal(s).astype(d) for s, d in [((), "float32"), ((3, 4), "float32"), ((5,), "float64"),
                                                             ((2, 2, 2), "float32")]]
    for bucket in (4, 20, 1 << 20):
        layout = R.FlatLayout([a.shape for a in arrays], [a.dtype for a in arrays], bucket)
        packed = layout.pack(arrays)
        assert all(b.nbytes <= max(bucket, b.itemsize) for b in packed) or bucket >= 1 << 20
        for a, b in zip(arrays, layout.unpack(packed)):
            assert a.dtype == b.dtype and a.tobytes() == b.tobytes()
        shards = [list(np.array_split(b, 3)) for b in packed]  # (as a step unpacks its reduced shards)
        unpacked = layout.unpack(shards)
        for a, b in zip(arrays, unpacked):
            assert a.dtype == b.dtype and a.tobytes() == b.tobytes()
        assert not any(np.shares_memory(b, p) for b in unpacked for p in packed)  # (a copy: written in place later)


def _kill(client, addr):
    os.kill(client.run(os.getpid)[addr], signal.SIGKILL)
    deadline = time.monotonic() + 60
    while addr in client.scheduler_info(n_workers=-1)["workers"] and time.monotonic() < deadline:
        time.sleep(0.05)


def _die_in_step():
    """On a worker (``client.run``): the next step there kills this worker process once it has its message."""
    def local(*args):
        os.kill(os.getpid(), signal.SIGKILL)

    R.local = local  # (this process dies with the patch)


@pytest.mark.slow
@pytest.mark.parametrize("when", ["before", "in"])
def test_a_worker_killed_mid_step_is_named_and_the_next_step_resyncs_from_the_survivor(client, monkeypatch, when):
    """The first replica's worker is killed (SIGKILL) before the step's message reaches it, or once it has it
    (its peer then waits for its gradients: the client ends that wait when the connection closes)."""
    client.wait_for_workers(2, timeout=60)  # (a worker killed by an earlier test is back)
    net = _net(1)
    dp = la.distributed.DataParallel(net, nn.SoftmaxCrossEntropyLoss(),
                                     nn.Trainer(net.collect_params(), "adam", {"learning_rate": 0.01}), client=client,
                                     timeout=60)
    dp.step(*_batch(0))
    dead = dp._holders[0]
    if when == "in":
        client.run(_die_in_step, workers=[dead])
    else:
        real, pid = bounded.BoundedCall.message_each, client.run(os.getpid)[dead]

        def message_each(self, op, msgs, doing):  # (the step has its workers: the scheduler may not know yet)
            monkeypatch.setattr(bounded.BoundedCall, "message_each", real)
            os.kill(pid, signal.SIGKILL)
            return real(self, op, msgs, doing)

        monkeypatch.setattr(bounded.BoundedCall, "message_each", message_each)
    start = time.monotonic()
    with pytest.raises(la.DistributedError, match=r"DataParallel.step: lost replica 0 of the model on worker "
                                                  r"tcp://\S+: the worker left the cluster.*surviving replica"):
        dp.step(*_batch(1))
    assert time.monotonic() - start < 30  # (named at once, not at the 60 s timeout)
    client.wait_for_workers(2, timeout=60)  # (the nanny starts a new worker process)
    try:
        dp.step(*_batch(1))
    except la.DistributedError:  # (the cluster still settling: a step may fail, named; the next one re-syncs)
        dp.step(*_batch(1))
    assert dead not in dp._holders and dp.steps == 2
    first, second = _replica_values(client, dp)
    want = _single_process(1, [_batch(0), _batch(1)], "adam", {"learning_rate": 0.01})
    for k in first:
        assert first[k].tobytes() == second[k].tobytes(), k
        np.testing.assert_allclose(first[k], want[k], rtol=1e-5, atol=2e-6, err_msg=k)
    dp.close()


def test_more_pieces_than_workers_run_in_order_on_their_replicas(client):
    """A dask-array batch of 3 uneven chunks on 2 workers: one worker sums two pieces, seeds and row weights
    stay per piece, and the result equals one process."""
    batches = [_batch(i, rows=21) for i in range(2)]
    net = _net(1)
    dp = la.distributed.DataParallel(net, nn.SoftmaxCrossEntropyLoss(),
                                     nn.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.5}), client=client)
    for x, y in batches:
        loss = dp.step(da.from_array(x, chunks=((8, 7, 6), (5,))), da.from_array(y, chunks=((8, 7, 6),)))
    dp.sync_to_client()
    want = _single_process(1, batches, "sgd", {"learning_rate": 0.5})
    for k, p in net.collect_params().items():
        np.testing.assert_allclose(p.data().asnumpy(), want[k], rtol=1e-5, atol=2e-6, err_msg=k)
    assert np.isfinite(loss)
    dp.close()


AMP_SCALES = {"float16": 2.0 ** 14, "bfloat16": 2.0 ** 122}  # (bfloat16 gradients are float32: overflow at 3e38)


def _amp_net(dtype: str, seed=0):
    la.random.seed(seed)
    net = nn.HybridSequential()
    net.add(nn.Dense(16, activation="relu", in_units=8), nn.Dense(4, in_units=16))
    net.initialize(la.init.Xavier())
    la.amp.convert_block(net, dtype)
    trainer = nn.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.05, "momentum": 0.9, "multi_precision": True})
    scaler = la.amp.init_trainer(trainer, net, target_dtype=dtype,
                                 scaler=la.amp.LossScaler(init_scale=AMP_SCALES[dtype], growth_interval=2))
    return net, trainer, scaler


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_amp_loss_scaling_skips_the_same_steps_as_one_process_and_keeps_the_replicas_bit_identical(client, dtype):
    """A float16 (bfloat16: float32 storage, float32 master weights) network with dynamic loss scaling:
    the replicas scale the loss by their scaler's scale, skip the steps whose reduced gradients overflow
    and move the scale as one process does (the same skipped steps, the same scale after every step),
    and stay equal bit for bit."""
    rng = np.random.default_rng(0)
    batches = [((rng.standard_normal((16, 8)) * 30).astype("float32"), rng.integers(0, 4, 16).astype("int32"))
               for _ in range(10)]
    loss_fn = nn.SoftmaxCrossEntropyLoss()
    ref, ref_tr, ref_scaler = _amp_net(dtype)
    want, want_losses = [], []
    for x, y in batches:
        with la.autograd.record():
            loss = loss_fn(ref(la.array(x)), la.array(y))
            with la.amp.scale_loss(loss, ref_tr) as scaled:
                scaled.backward()
        ref_tr.step(len(x))
        want.append((ref_scaler.scale, ref_scaler.skipped))
        want_losses.append(float(loss.asnumpy().mean()))
    assert 0 < ref_scaler.skipped < len(batches) and max(s for s, _ in want) > want[-1][0] / 2  # skips, then growth
    net, trainer, scaler = _amp_net(dtype)
    dp = la.distributed.DataParallel(net, loss_fn, trainer, client=client)
    got, losses = [], []
    for x, y in batches:
        losses.append(dp.step(x, y))
        scalers = [client.run(lambda key: R.state(key)[2][0], dp._rkey(w), workers=[w])[w] for w in dp._holders]
        assert scalers[0] == scalers[1]
        got.append((scalers[0]["scale"], scalers[0]["skipped"]))
    assert got == want
    np.testing.assert_allclose(losses, want_losses, rtol=1e-3)
    first, second = _replica_values(client, dp)
    for k in first:
        assert first[k].dtype == np.dtype(dtype if dtype == "float16" else "float32"), k
        assert first[k].tobytes() == second[k].tobytes(), k
    assert scaler.scale == AMP_SCALES[dtype] and scaler.skipped == 0  # the client's copy moves only when asked
    dp.sync_to_client()
    assert (scaler.scale, scaler.skipped, scaler.good_steps) == (ref_scaler.scale, ref_scaler.skipped,
                                                                 ref_scaler.good_steps)
    for (k, p), q in zip(ref.collect_params().items(), net.collect_params().values()):
        np.testing.assert_allclose(q.data().asnumpy().astype("float32"), p.data().asnumpy().astype("float32"),
                                   rtol=2e-3, atol=1e-3, err_msg=k)
    dp.close()


def test_step_many_takes_k_steps_in_one_message_per_worker_equal_to_k_steps(client, monkeypatch):
    batches = [_batch(0), _batch(1, rows=21), _batch(2), _batch(3, rows=9)]  # (new piece sizes on the way)
    trainers = []
    for _ in range(2):
        net = _net(2)
        trainers.append(la.distributed.DataParallel(net, nn.SoftmaxCrossEntropyLoss(), nn.Trainer(
            net.collect_params(), "adam", {"learning_rate": 0.01}), client=client, seed=5))
    many, one = trainers
    one_losses = [one.step(x, y) for x, y in batches]
    sent = []
    real = bounded.BoundedCall.message_each

    def message_each(self, op, msgs, doing):
        sent.extend((op, len(m["steps"])) for m in msgs.values())
        return real(self, op, msgs, doing)

    monkeypatch.setattr(bounded.BoundedCall, "message_each", message_each)
    many_losses = many.step_many(batches)
    monkeypatch.undo()
    assert sent == [("la_dp_step", len(batches))] * len(many._holders)
    assert many_losses == one_losses and many.steps == one.steps == len(batches)
    mine, theirs = _replica_values(client, many), _replica_values(client, one)
    for k in mine[0]:
        assert mine[0][k].tobytes() == mine[1][k].tobytes() == theirs[0][k].tobytes(), k
    assert many.step_many([]) == [] and many.steps == len(batches)
    many.step(*_batch(4))  # (a step after step_many continues from it)
    one.step(*_batch(4))
    assert _replica_values(client, many)[0]["0.weight"].tobytes() == _replica_values(client, one)[0]["0.weight"].tobytes()
    for dp in trainers:
        dp.close()


def test_step_many_of_dask_batches_is_one_task_per_worker_equal_to_k_steps(client, monkeypatch):
    """Dask-array batches (2, 3 and 1 row chunks; one persisted on the workers): step_many submits one step
    task per worker for all of them (no client round trip per step); the persisted batch's pieces run on
    the workers holding them; the losses and replicas equal K single steps bit for bit; a step with fewer
    pieces than workers leaves the worker without a piece adding nothing."""
    xs = [_batch(i) for i in range(4)]
    persisted = client.persist([da.from_array(xs[1][0], chunks=(12, 5)), da.from_array(xs[1][1], chunks=12)])
    batches = [(da.from_array(xs[0][0], chunks=(12, 5)), da.from_array(xs[0][1], chunks=12)), tuple(persisted),
               (da.from_array(xs[2][0], chunks=(8, 5)), da.from_array(xs[2][1], chunks=8)),
               (da.from_array(xs[3][0], chunks=(24, 5)), da.from_array(xs[3][1], chunks=24))]
    trainers = []
    for _ in range(2):
        net = _net(2)
        trainers.append(la.distributed.DataParallel(net, nn.SoftmaxCrossEntropyLoss(), nn.Trainer(
            net.collect_params(), "adam", {"learning_rate": 0.01}), client=client, seed=5))
    many, one = trainers
    one_losses = [one.step(x, y) for x, y in batches]
    submitted, owners = [], []
    real_submit, real_owners = bounded.BoundedCall.submit, DP._owners

    def submit(self, fn, *args, **kw):
        submitted.append(fn.__name__)
        return real_submit(self, fn, *args, **kw)

    def spy(call, workers, bs, rows):
        owners.append(real_owners(call, workers, bs, rows))
        return owners[-1]

    monkeypatch.setattr(bounded.BoundedCall, "submit", submit)
    monkeypatch.setattr(DP, "_owners", spy)
    many_losses = many.step_many(batches)
    monkeypatch.undo()
    assert submitted.count("step_task") == len(many._holders) == 2
    holders = client.who_has(persisted[0])
    keys = list(da.core.flatten(persisted[0].__dask_keys__()))
    # (each piece on a worker holding it: an earlier step may have copied a piece, so a key can have two holders)
    assert len(owners[0][1]) == len(keys) and all(w in holders[k] for w, k in zip(owners[0][1], keys))
    assert many_losses == one_losses and many.steps == one.steps == len(batches)
    mine, theirs = _replica_values(client, many), _replica_values(client, one)
    for k in mine[0]:
        assert mine[0][k].tobytes() == mine[1][k].tobytes() == theirs[0][k].tobytes(), k
    want = _single_process(2, xs, "adam", {"learning_rate": 0.01})
    for k in want:
        np.testing.assert_allclose(mine[0][k], want[k], rtol=1e-5, atol=2e-6, err_msg=k)
    for dp in trainers:
        dp.close()


def test_owners_keep_persisted_pieces_where_they_are_within_a_fair_share():
    """``_owners``: a persisted batch's pieces go to the workers holding them, but no worker takes more than
    ``ceil(pieces / workers)`` of a step; pieces nobody holds go to the least loaded worker, in turn."""

    class Call:
        def __init__(self, where):
            self.where = where

        def who_has(self, _):
            return self.where

    x = da.from_array(np.zeros((6, 2), "float32"), chunks=(2, 2))
    keys = list(da.core.flatten(x.__dask_keys__()))
    ws = ["a", "b", "c"]
    assert DP._owners(Call({}), ws, [(x, None)], [[2, 2, 2]]) == [["a", "b", "c"]]
    assert DP._owners(Call({k: ["c"] for k in keys}), ws, [(x, None)], [[2, 2, 2]]) == [["c", "b", "a"]]
    assert DP._owners(Call(dict(zip(keys, [["b"], ["a"], ["gone"]]))), ws, [(x, None)], [[2, 2, 2]]) == \
        [["b", "a", "c"]]
    y = da.from_array(np.zeros((6, 2), "float32"), chunks=(4, 2))  # (rechunked to pieces: no holder applies)
    assert DP._owners(Call({k: ["c"] for k in da.core.flatten(y.__dask_keys__())}), ws, [(y, None)], [[2, 2, 2]]) \
        == [["a", "b", "c"]]


def test_each_worker_gets_the_graph_of_each_piece_size_it_runs(client):
    """21 rows: pieces of 11 and 10 rows; 19 rows: 10 and 9 (the first worker now runs 10 rows: its graph
    is sent to it then, though the other worker had it); the result equals one process."""
    batches = [_batch(0, rows=21), _batch(1, rows=19), _batch(2, rows=21)]
    net = _net(1)
    dp = la.distributed.DataParallel(net, nn.SoftmaxCrossEntropyLoss(),
                                     nn.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.5}), client=client)
    for x, y in batches:
        dp.step(x, y)
    want = _single_process(1, batches, "sgd", {"learning_rate": 0.5})
    first, second = _replica_values(client, dp)
    for k in first:
        assert first[k].tobytes() == second[k].tobytes(), k
        np.testing.assert_allclose(first[k], want[k], rtol=1e-5, atol=1e-6, err_msg=k)
    dp.close()
