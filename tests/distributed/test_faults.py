"""Bounded, named failures on a cluster of real processes: a worker killed (SIGKILL) with the only copy
of a scattered piece, a worker frozen (SIGSTOP), no workers, the scheduler killed. Each call ends within
its ``timeout`` with ``la.DistributedError`` naming what was lost and the fix, or with the right result."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from contextlib import contextmanager

import numpy as np
import pytest

import lazyarray as la
from lazyarray import blocks as nn
from lazyarray.distributed import bounded
from lazyarray.distributed import replica as R

pytest.importorskip("dask.distributed")
import dask.array as da  # noqa: E402
from dask.distributed import Client, LocalCluster  # noqa: E402

S = la.sbp.split
SLACK = 4.0  # seconds past the timeout that a call may take to give up (a loaded 2-core machine)


@pytest.fixture
def client(client):  # (conftest.py's module cluster of 2 worker processes)
    client.wait_for_workers(2, timeout=60)  # (a killed worker's nanny starts a new one)
    yield client
    client.wait_for_workers(2, timeout=60)


def _graph():
    x = la.sym.var("x", shape=(8, 4))
    return la.sym.exp(x) * 2.0


X = np.random.default_rng(0).standard_normal((8, 4))


@contextmanager
def _before_compute(monkeypatch, action):
    """Run ``action(call)`` between the scatters and the computation of every ``BoundedCall``."""
    real = bounded.BoundedCall.compute

    def compute(self, outs, watch=None):
        action(self)
        return real(self, outs, watch)

    monkeypatch.setattr(bounded.BoundedCall, "compute", compute)
    yield
    monkeypatch.setattr(bounded.BoundedCall, "compute", real)


def _kill_worker_holding(client, futures):
    """SIGKILL the worker process that holds ``futures[0]``; return once the scheduler has removed it."""
    addr = next(iter(client.who_has(futures[:1]).values()))[0]
    os.kill(client.run(os.getpid)[addr], signal.SIGKILL)
    deadline = time.monotonic() + 30
    while addr in client.scheduler_info(n_workers=-1)["workers"] and time.monotonic() < deadline:
        time.sleep(0.05)
    return addr


def test_a_killed_worker_with_a_scattered_piece_names_the_input_piece_and_the_fix(client, monkeypatch):
    pieces = []
    real_scatter = bounded.BoundedCall.scatter

    def scatter(self, data, what, **kw):
        out = real_scatter(self, data, what, **kw)
        if isinstance(what, list) and what[0].startswith("input 'x'"):
            pieces.extend(out)
        return out

    real_each = bounded.BoundedCall.scatter_each

    def scatter_each(self, items, what, workers):
        out = real_each(self, items, what, workers)
        if what[0].startswith("input 'x'"):
            pieces.extend(out)
        return out

    monkeypatch.setattr(bounded.BoundedCall, "scatter", scatter)
    monkeypatch.setattr(bounded.BoundedCall, "scatter_each", scatter_each)
    with _before_compute(monkeypatch, lambda call: _kill_worker_holding(client, pieces)):
        start = time.monotonic()
        with pytest.raises(la.DistributedError, match=r"lost input 'x' piece 0 of 2 \(a NumPy piece scattered to one "
                                                      r"worker, its only copy\).*Scattered NumPy pieces must be "
                                                      r"scattered again: call la.distributed.run again.*dask.array"):
            la.distributed.run(_graph(), client=client, sbp={"x": S(0)}, x=X, compute=True, timeout=20)
    assert time.monotonic() - start < 20 + SLACK


def test_a_killed_worker_with_a_dask_piece_recomputes_it(client, monkeypatch):
    killed = []

    computes = []

    def kill_one(call):  # (once: the call plans again over the workers left, and computes again)
        computes.append(call)
        if not killed:
            addr = sorted(client.scheduler_info(n_workers=-1)["workers"])[0]
            os.kill(client.run(os.getpid)[addr], signal.SIGKILL)
            killed.append(addr)

    with _before_compute(monkeypatch, kill_one):
        out = la.distributed.run(_graph(), client=client, x=da.from_array(X, chunks=(4, 4)), compute=True, timeout=30)
    np.testing.assert_allclose(out.asnumpy(), np.exp(X) * 2.0)
    assert len(computes) == 2  # the pieces were pinned to the killed worker: planned again, once


@contextmanager
def _stopped(client, every=False):
    """One worker process (``every``: all of them) stopped (SIGSTOP) for the block, always resumed
    (SIGCONT) after it."""
    pids = client.run(os.getpid)
    pids = list(pids.values()) if every else [pids[sorted(pids)[0]]]
    stopped = []
    try:
        for pid in pids:
            os.kill(pid, signal.SIGSTOP)
            stopped.append(pid)
        yield
    finally:
        for pid in stopped:
            os.kill(pid, signal.SIGCONT)


def test_a_frozen_worker_ends_the_scatter_at_the_timeout(client):
    with _stopped(client):
        start = time.monotonic()
        with pytest.raises(la.DistributedError, match=r"no result within timeout=2 s while scattering input 'x' "
                                                      r"piece 0 of 2.*stopped answering.*larger timeout="):
            la.distributed.run(_graph(), client=client, sbp={"x": S(0)}, x=X, compute=True, timeout=2)
        assert time.monotonic() - start < 2 + SLACK


def test_a_frozen_worker_ends_the_computation_at_the_timeout(client, monkeypatch):
    stopped = []

    def stop_all(call):  # (all: whichever worker the scheduler gives the tasks to, it does not answer)
        stopped.append(_stopped(client, every=True))
        stopped[-1].__enter__()

    try:
        with _before_compute(monkeypatch, stop_all):
            start = time.monotonic()
            with pytest.raises(la.DistributedError, match=r"no result within timeout=3 s while computing \(1 of 1 "
                                                          r"results pending\); still running on tcp://\S+ \(\d tasks?\)"):
                la.distributed.run(_graph(), client=client, sbp={"x": S(0)}, x=da.from_array(X, chunks=(4, 4)),
                                   compute=True, timeout=3)
            assert time.monotonic() - start < 3 + SLACK
    finally:
        for s in stopped:
            s.__exit__(None, None, None)


def _mlp():
    la.random.seed(0)
    net = nn.HybridSequential()
    net.add(nn.Dense(3, in_units=4))
    net.initialize()
    return net


def _trainer(client):
    """A small SGD ``DataParallel`` on ``client`` (timeout 60 s) and a batch for it: (net, dp, x, y)."""
    net = _mlp()
    dp = la.distributed.DataParallel(net, nn.SoftmaxCrossEntropyLoss(),
                                     nn.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1}),
                                     client=client, timeout=60)
    return net, dp, np.ones((8, 4), "float32"), np.zeros(8, "int32")


def test_data_parallel_step_with_a_frozen_worker_ends_at_its_timeout_and_leaves_the_parameters(client):
    net, dp, x, y = _trainer(client)
    dp.step(x, y)
    before = {k: p.data().asnumpy().copy() for k, p in net.collect_params().items()}
    with _stopped(client):
        start = time.monotonic()
        with pytest.raises(la.DistributedError, match=r"DataParallel.step: no result within timeout=2 s"):
            dp.step(x, y, timeout=2)
        assert time.monotonic() - start < 2 + SLACK
    for k, p in net.collect_params().items():
        np.testing.assert_array_equal(p.data().asnumpy(), before[k])
    # resumed: the step given up is not applied anywhere (the worker that waited for its frozen peer was told
    # to stop; the resumed one's late attempt gives way), and the next steps run on both replicas
    while dp.steps < 3:
        try:
            dp.step(x, y)
        except la.DistributedError as exc:  # (both replicas finished the step given up just after the timeout:
            # it counts, and the next call, which runs nothing, says so)
            assert "applied after all" in str(exc)
    assert dp.steps == 3
    first, second = [client.run(lambda key: R.state(key)[0], dp._rkey(w), workers=[w])[w] for w in dp._holders]
    want = net.collect_params()
    for _ in range(3):
        with la.autograd.record():
            loss = nn.SoftmaxCrossEntropyLoss()(net(la.array(x)), la.array(y))
        loss.backward()
        dp.trainer.step(len(x))
    for k in first:
        assert first[k].tobytes() == second[k].tobytes(), k
        np.testing.assert_allclose(first[k], want[k].data().asnumpy(), rtol=1e-5, atol=1e-6, err_msg=k)
    dp.close()


def test_a_step_every_replica_finished_after_the_client_gave_up_counts_and_the_next_call_runs_nothing(client):
    """Where every replica finished the step the client gave up on (a worker answered just after the
    timeout), that step counts, and the next call says so and runs nothing: were its batch the same one
    again (the error's advice), running it would apply the step twice."""
    net, dp, x, y = _trainer(client)
    dp.step(x, y)
    for w in dp._holders:
        assert client.run(_run_ahead, dp._rkey(w), workers=[w])[w] == 2
    dp._suspect = True  # (as after a step that raised)
    with pytest.raises(la.DistributedError, match=r"DataParallel.step: step 1 was applied after all by every "
                                                  r"surviving replica, though the last call raised.*steps is now "
                                                  r"2.*ran nothing"):
        dp.step(x, y)
    have = [client.run(R.steps_of, dp._rkey(w), workers=[w])[w] for w in dp._holders]
    assert dp.steps == 2 and have == [2, 2]  # (the call ran nothing)
    dp.step(x, y)
    assert dp.steps == 3
    dp.close()


def test_no_workers_is_named_within_the_timeout():
    with LocalCluster(n_workers=0, processes=True, dashboard_address=None) as cl, Client(cl) as c:
        start = time.monotonic()
        with pytest.raises(la.DistributedError, match=r"has no workers.*timeout=1\).*start workers"):
            la.distributed.run(_graph(), client=c, sbp={"x": S(0)}, x=X, compute=True, timeout=1)
        net = _mlp()
        dp = la.distributed.DataParallel(net, nn.SoftmaxCrossEntropyLoss(),
                                         nn.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1}),
                                         client=c, timeout=1)
        with pytest.raises(la.DistributedError, match=r"DataParallel.step: the cluster at tcp://.* has no workers"):
            dp.step(np.ones((8, 4), "float32"), np.zeros(8, "int32"))
        assert time.monotonic() - start < 2 + 2 * SLACK


def test_timeouts_are_checked():
    with pytest.raises(la.ParamValueError, match="timeout must be a positive number"):
        la.distributed.run(_graph(), x=X, timeout=0)
    with pytest.raises(la.ParamValueError, match="timeout must be a positive number"):
        la.distributed.DataParallel(None, None, None, timeout="soon")
    assert bounded.check_timeout(None, "f") == bounded.DEFAULT_TIMEOUT == 300.0
    assert issubclass(la.DistributedError, la.LazyArrayError) and issubclass(la.DistributedError, RuntimeError)


def _start(args, tmp_path, name):
    log = open(tmp_path / f"{name}.log", "w")
    return subprocess.Popen([sys.executable, "-m", *args], stdout=log, stderr=subprocess.STDOUT)


def test_a_killed_scheduler_is_named(tmp_path):
    """Scheduler and worker in processes of their own; the scheduler is killed (SIGKILL) between calls."""
    file = tmp_path / "scheduler.json"
    scheduler = _start(["distributed.cli.dask_scheduler", "--scheduler-file", str(file), "--port", "0",
                        "--no-dashboard"], tmp_path, "scheduler")
    worker = None
    try:
        deadline = time.monotonic() + 60
        while not file.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        worker = _start(["distributed.cli.dask_worker", "--scheduler-file", str(file), "--nthreads", "1",
                         "--no-nanny", "--no-dashboard"], tmp_path, "worker")
        with Client(scheduler_file=str(file), timeout=5) as c:
            c.wait_for_workers(1, timeout=60)
            ok = la.distributed.run(_graph(), client=c, sbp={"x": S(0)}, x=X, compute=True, timeout=30)
            np.testing.assert_allclose(ok.asnumpy(), np.exp(X) * 2.0)
            scheduler.kill()
            scheduler.wait()
            start = time.monotonic()
            with pytest.raises(la.DistributedError, match=r"lost the scheduler at tcp://.*connect a new Client"):
                la.distributed.run(_graph(), client=c, sbp={"x": S(0)}, x=X, compute=True, timeout=5)
            assert time.monotonic() - start < 5 + SLACK
    finally:
        for p in (scheduler, worker):
            if p is not None and p.poll() is None:
                p.kill()
                p.wait()


def _run_ahead(key: str) -> int:
    """On a worker: its replica as if it had finished one more step than the client counted."""
    replica = R.REPLICAS.get(key)
    replica.steps += 1
    return replica.steps


def test_a_replica_that_finished_a_step_the_client_gave_up_is_set_back(client):
    """A frozen worker that resumes with its peers' shards in hand may finish the step the client gave
    up; the next step copies a replica at the client's count to it, so that step is applied nowhere
    (re-running the same batch, as the error advises, does not apply it twice)."""
    net, dp, x, y = _trainer(client)
    dp.step(x, y)
    ahead = dp._holders[0]
    assert client.run(_run_ahead, dp._rkey(ahead), workers=[ahead])[ahead] == 2
    dp._suspect = True  # (as after a step that raised)
    dp.step(x, y)
    assert dp.steps == 2
    have = [client.run(R.steps_of, dp._rkey(w), workers=[w])[w] for w in dp._holders]
    assert have == [2, 2]
