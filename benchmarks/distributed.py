"""Global arrays on Dask: batch inference and a data-parallel training step, plus a cost model.

1. Batch inference of the MLP 784-512-512-10 (ReLU) over ``--rows`` rows (default 200,000):
   a single-process ``CachedOp`` against ``la.distributed.run`` on a ``LocalCluster`` of 1 and of 2
   worker processes (one thread each). The rows are made on the workers (``dask.array.random``,
   chunks of ``--chunk`` rows), so the time is compute + scheduling + gathering the 10-column
   result. Columns: time, bytes moved between workers (Dask's ``transfer_outgoing_bytes_total``
   summed over workers), tasks, and the scheduler's overhead per task (no-op tasks timed alone).
2. A data-parallel training step (softmax cross-entropy, SGD) at batch 1024: one process
   (Gluon style, ``record`` / ``backward`` / ``trainer.step``) against ``DataParallel`` with the
   batch split in 2 over 2 workers.
3. The cost model of docs/distributed.md: predicted time per training step for N workers from the
   measured compute time, the scheduler overhead, the parameter bytes and ``--bandwidth`` (GB/s).
4. Scaling of a ``DataParallel`` step with resident replicas (``--scaling``): 2 and 4 worker
   processes, MLPs of 10/40/80/160 parameter arrays holding about the same bytes P (``--param-mb``).
   Per step: bytes each worker sent to the others (Dask's ``transfer_outgoing_bytes_total`` plus the
   peer channel's, ``exchange.py``; max over the workers) against the ring all-reduce bound
   2(N-1)/N * P; bytes from the client (the batch pieces and the pickled task arguments and
   messages, counted where they are sent); tasks submitted and messages sent to workers; median
   step time (A/B rounds alternating with the single-process step of the same model, measured in
   the same run), CPU of the client and of the workers; and ``step_many`` of ``--many`` steps. The
   issue's target: the overhead, step - single - transfer, at most 20 ms, where transfer is the bytes
   a worker sends per step (plus the batch from the client) at the TCP loopback bandwidth measured in
   the same run (``loopback_bandwidth``: 16 MB from this process to a child process on 127.0.0.1).

5. Inference of an exported ResNet-18 (``--resnet``): the zoo's ``resnet18(thumbnail=True)`` exported,
   loaded as a ``SymbolBlock`` and run by ``la.distributed.run`` over a persisted dask array (one
   chunk of the batch on each of 2 worker processes) against the same block in one process: time per
   call (A/B rounds alternating, medians), tasks per call, bytes the client sent per call (the
   parameters go on the first call only), bytes the workers sent.

The machine this runs on has 2 cores (shared), so 2 workers is the most that can show a speedup.

    python benchmarks/distributed.py [--rows 200000] [--chunk 25000] [--bandwidth 1.25]
    python benchmarks/distributed.py --scaling [--param-mb 1.6] [--steps 7] [--many 8] [--many-rounds 3]
    python benchmarks/distributed.py --resnet [--resnet-batch 32] [--resnet-rounds 5]
"""
from __future__ import annotations

import argparse
import math
import pickle
import socket
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np

# dask probes for the optional `sparse` package on import: benchmarks/sparse.py must not answer, so
# dask is imported before the script's folder goes (back) on the path.
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
try:
    import dask.array as da
    from dask.distributed import Client, LocalCluster, SchedulerPlugin
except ImportError:
    sys.exit("benchmarks/distributed.py needs the distributed extra: pip install 'lazyarray[distributed]'")
sys.path.append(str(_HERE))
from _util import table  # noqa: E402

import lazyarray as la  # noqa: E402
from lazyarray import blocks as B  # noqa: E402
from lazyarray.distributed import bounded, params, replica  # noqa: E402


def mlp(seed=0):
    la.random.seed(seed)
    net = B.HybridSequential()
    net.add(B.Dense(512, activation="relu", in_units=784), B.Dense(512, activation="relu", in_units=512),
            B.Dense(10, in_units=512))
    net.initialize()
    net.hybridize()
    net(la.ones((1, 784)))
    return net


def timed(fn, repeat):
    best = math.inf
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def transfer_bytes(client) -> int:
    return sum(client.run(lambda dask_worker: dask_worker.transfer_outgoing_bytes_total).values())


def _process_cpu() -> float:
    return time.process_time()


def _busy_threads() -> int:
    """Threads of this process but the calling one that are running or runnable (Linux: /proc; elsewhere 0)."""
    me, busy = threading.get_native_id(), 0
    for task in Path("/proc/self/task").glob("*") if Path("/proc/self/task").is_dir() else ():
        try:
            state = (task / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:  # (the thread ended)
            continue
        busy += int(task.name) != me and state == "R"
    return busy


def settle(limit=2.0, window=0.01, quiet=3) -> None:
    """Wait (at most ``limit`` seconds) until no other thread of this process has been running for
    ``quiet`` checks in a row, ``window`` seconds apart. After a multithreaded BLAS call OpenBLAS's
    threads spin (about 2**28 cycles, yielding: runnable) before they sleep, so the single-process
    step of a model with large enough products (the 10-array MLP's 282x282 layers) left a BLAS thread
    spinning into the next DataParallel step's timed region: it counted as the client's CPU and took
    a core from the workers."""
    end, calm = time.perf_counter() + limit, 0
    while calm < quiet and time.perf_counter() < end:
        time.sleep(window)
        calm = calm + 1 if _busy_threads() == 0 else 0


def worker_cpu(client) -> float:
    """CPU seconds the worker processes have used, summed (each answers ``time.process_time()``)."""
    return sum(client.run(_process_cpu).values())


def task_overhead(client, n=400) -> float:
    """Seconds per no-op task through this cluster's scheduler (submitted together)."""
    def noop(i):
        return i

    client.gather(client.map(noop, range(50), pure=False))  # warm
    t0 = time.perf_counter()
    client.gather(client.map(noop, range(n), pure=False))
    return (time.perf_counter() - t0) / n


def inference(args):
    net = mlp()
    rows = []
    xa = la.array(np.random.default_rng(0).random((args.rows, 784), dtype=np.float32))
    single = timed(lambda: net(xa).asnumpy(), args.repeat)  # (the hybridized net runs its CachedOp)
    rows.append(["single process (CachedOp)", single, 1.0, "-", "-", "-"])
    xa = None  # (frees the 627 MB of rows before the clusters start)
    overheads = {}
    for workers in (1, 2):
        with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=":0") as cl, \
                Client(cl) as client:
            data = da.random.random((args.rows, 784), chunks=(args.chunk, 784)).astype("float32").persist()
            client.wait_for_workers(workers)
            la.distributed.run(net, client=client, data=data[: args.chunk * 2]).compute()  # warm the workers

            def go(data=data):
                return la.distributed.run(net, client=client, data=data).compute()

            before = transfer_bytes(client)
            t = timed(go, args.repeat)
            moved = (transfer_bytes(client) - before) / args.repeat
            overheads[workers] = task_overhead(client)
            tasks = len(data.chunks[0])
            rows.append([f"LocalCluster, {workers} worker(s)", t, single / t, f"{moved / 1e6:.1f} MB", tasks,
                         f"{overheads[workers] * 1e3:.2f} ms"])
    print(f"Batch inference, MLP 784-512-512-10, {args.rows:,} rows, chunks of {args.chunk:,} rows")
    print(table(["run", "seconds", "speedup", "moved between workers", "region tasks", "sched/task"], rows))
    return overheads


def training(args, overheads):
    batch = 1024
    rng = np.random.default_rng(1)
    x = rng.standard_normal((batch, 784)).astype("float32")
    y = rng.integers(0, 10, batch).astype("int32")
    loss_fn = B.SoftmaxCrossEntropyLoss()
    net = mlp(1)
    trainer = B.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.01})
    xa, ya = la.array(x), la.array(y)

    def step():
        with la.autograd.record():
            loss = loss_fn(net(xa), ya)
        loss.backward()
        trainer.step(batch)

    step()
    single = timed(step, args.repeat * 3)
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0") as cl, \
            Client(cl) as client:
        dnet = mlp(1)
        dp = la.distributed.DataParallel(dnet, loss_fn, B.Trainer(dnet.collect_params(), "sgd",
                                                                   {"learning_rate": 0.01}), client=client)
        dx, dy = da.from_array(x, chunks=(batch // 2, 784)).persist(), da.from_array(y, chunks=batch // 2).persist()
        dp.step(dx, dy)
        before = transfer_bytes(client)
        dist = timed(lambda: dp.step(dx, dy), args.repeat * 3)
        moved = (transfer_bytes(client) - before) / (args.repeat * 3)
    print(f"\nData-parallel training step, batch {batch} (SGD, softmax cross-entropy)")
    print(table(["run", "ms/step", "speedup", "moved between workers"],
                [["single process (Gluon style)", single * 1e3, 1.0, "-"],
                 ["DataParallel, 2 workers x 512 rows", dist * 1e3, single / dist, f"{moved / 1e6:.2f} MB"]]))
    return single


def deep_mlp(arrays: int, param_bytes: float, seed=0):
    """An MLP of ``arrays`` parameter arrays (``arrays / 2`` Dense layers, weights and biases) of square
    layers sized so the parameters hold about ``param_bytes``."""
    layers = arrays // 2
    width = max(4, int(math.sqrt(param_bytes / 4 / layers)))
    la.random.seed(seed)
    net = B.HybridSequential()
    for i in range(layers):
        net.add(B.Dense(width, in_units=width, activation="relu" if i < layers - 1 else None))
    net.initialize()
    return net, width


class Meter:
    """Counts what the client sends in ``DataParallel`` steps: scattered bytes, task arguments and tasks,
    and the messages sent straight to the workers (their batch pieces, the rest of them)."""

    def __init__(self):
        self.scattered = self.args = self.tasks = self.messages = 0

    def install(self):
        each, submit, message = (bounded.BoundedCall.scatter_each, bounded.BoundedCall.submit,
                                 bounded.BoundedCall.message_each)
        meter = self

        def scatter_each(call, items, what, workers):
            meter.scattered += sum(getattr(v, "nbytes", 0) for v in items)
            return each(call, items, what, workers)

        def counted_submit(call, fn, *a, **kw):
            meter.tasks += 1
            meter.args += len(pickle.dumps([x for x in a if type(x).__name__ != "Future"]))
            return submit(call, fn, *a, **kw)

        def counted_message(call, op, msgs, doing):
            for m in msgs.values():
                meter.messages += 1
                steps = m.get("steps", ())
                meter.scattered += sum(d.nbytes + y.nbytes for _, pieces in steps for *_, d, y in pieces)
                meter.args += len(pickle.dumps(({k: v for k, v in m.items() if k != "steps"},
                                                [(r, [p[:3] for p in pieces]) for r, pieces in steps])))
            return message(call, op, msgs, doing)

        bounded.BoundedCall.scatter_each, bounded.BoundedCall.submit = scatter_each, counted_submit
        bounded.BoundedCall.message_each = counted_message
        return lambda: (setattr(bounded.BoundedCall, "scatter_each", each),
                        setattr(bounded.BoundedCall, "submit", submit),
                        setattr(bounded.BoundedCall, "message_each", message))


def sent_bytes(client, prefix: str) -> dict:
    """Bytes each worker has sent to the others: Dask's transfers plus the peer channel's (exchange.py)."""
    def sent(prefix, dask_worker=None):
        try:
            peer = replica.REPLICAS.get(f"{prefix}@{dask_worker.address}").mailbox.sent_bytes
        except la.DistributedError:
            peer = 0
        return dask_worker.transfer_outgoing_bytes_total + peer

    return client.run(sent, prefix)


_SINK = """
import socket, sys
port, size, rounds = map(int, sys.argv[1:])
s = socket.create_connection(("127.0.0.1", port))
buf = bytearray(1 << 20)
for _ in range(rounds):
    left = size
    while left:
        left -= s.recv_into(buf, min(left, len(buf)))
    s.sendall(b"k")
"""


def loopback_bandwidth(size=16 << 20, rounds=5) -> float:
    """Bytes per second through a TCP connection on 127.0.0.1 from this process to a child process:
    ``size`` bytes sent, then a one-byte answer awaited; the median of ``rounds``."""
    with socket.socket() as srv:
        srv.bind(("127.0.0.1", 0))
        srv.listen(1)
        child = subprocess.Popen([sys.executable, "-c", _SINK, str(srv.getsockname()[1]), str(size), str(rounds)])
        conn, _ = srv.accept()
        data, took = bytes(size), []
        with conn:
            for _ in range(rounds):
                t0 = time.perf_counter()
                conn.sendall(data)
                conn.recv(1)
                took.append(time.perf_counter() - t0)
        child.wait(60)
    return size / statistics.median(took)


def scaling_case(workers, arrays, args, loss_fn):
    net, width = deep_mlp(arrays, args.param_mb * 1e6)
    P = sum(p.data().size * 4 for p in net.collect_params().values())
    rng = np.random.default_rng(0)
    x = rng.standard_normal((args.batch, width)).astype("float32")
    y = rng.integers(0, width, args.batch).astype("int32")
    ref, _ = deep_mlp(arrays, args.param_mb * 1e6)
    ref_tr = B.Trainer(ref.collect_params(), "sgd", {"learning_rate": 1e-3})
    xa, ya = la.array(x), la.array(y)

    def single():
        with la.autograd.record():
            loss = loss_fn(ref(xa), ya)
        loss.backward()
        ref_tr.step(args.batch)

    with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=":0") as cl, \
            Client(cl) as client:
        client.wait_for_workers(workers)
        dp = la.distributed.DataParallel(net, loss_fn, B.Trainer(net.collect_params(), "sgd", {"learning_rate": 1e-3}),
                                         client=client)
        for _ in range(2):  # (the first broadcast and the workers' compilations)
            dp.step(x, y)
            single()
        settle()
        meter = Meter()
        restore = meter.install()
        sent0 = sent_bytes(client, dp._key)
        t_dist, t_single, c_dist, c_single, c_workers = [], [], [], [], []
        for _ in range(args.steps):  # A/B rounds
            w0 = worker_cpu(client)
            t0, c0 = time.perf_counter(), time.process_time()
            dp.step(x, y)
            t_dist.append(time.perf_counter() - t0)
            c_dist.append(time.process_time() - c0)
            c_workers.append(worker_cpu(client) - w0)
            t0, c0 = time.perf_counter(), time.process_time()
            single()
            t_single.append(time.perf_counter() - t0)
            c_single.append(time.process_time() - c0)
            settle()
        restore()
        sent1 = sent_bytes(client, dp._key)
        t_many, c_many = [], []
        if hasattr(dp, "step_many"):  # (K steps per message: --many)
            for _ in range(args.many_rounds):  # A/B rounds again: step_many of K steps, then K single steps
                t0, c0 = time.perf_counter(), time.process_time()
                dp.step_many([(x, y)] * args.many)
                t_many.append((time.perf_counter() - t0) / args.many)
                c_many.append((time.process_time() - c0) / args.many)
                for _ in range(args.many):
                    single()
                settle()
        dp.close()
        bandwidth = loopback_bandwidth()  # (in the same run, with the cluster up: the machine as the steps saw it)
    per_worker = max(sent1[w] - sent0[w] for w in sent1) / args.steps
    bound = 2 * (workers - 1) / workers * P
    single_ms, dist_ms = statistics.median(t_single) * 1e3, statistics.median(t_dist) * 1e3
    transfer_ms = (per_worker + meter.scattered / args.steps) / bandwidth * 1e3
    overhead_ms = dist_ms - single_ms - transfer_ms
    control = meter.args / args.steps
    cpu = [statistics.median(c) * 1e3 for c in (c_single, c_dist, c_workers)]
    return [workers, arrays, f"{P / 1e6:.2f}", f"{per_worker / 1e6:.3f}", f"{bound / 1e6:.3f}",
            f"{per_worker / bound:.2f}", f"{meter.scattered / args.steps / 1e3:.1f}",
            f"{control / 1e3:.2f} ({control / P * 100:.2f}%)", f"{meter.tasks / args.steps:g} + {meter.messages / args.steps:g}",
            single_ms, dist_ms, f"{bandwidth / 1e9:.2f}", transfer_ms, overhead_ms,
            "yes" if overhead_ms <= 20 else "NO", cpu[0], cpu[1], cpu[2], cpu[2] / workers - cpu[0],
            (cpu[2] - cpu[0]) / workers,
            statistics.median(t_many) * 1e3 if t_many else "-", statistics.median(c_many) * 1e3 if c_many else "-"]


def scaling(args):
    loss_fn = B.SoftmaxCrossEntropyLoss()
    rows = [scaling_case(workers, arrays, args, loss_fn) for workers in args.workers for arrays in args.arrays]
    print(f"DataParallel step with resident replicas, batch {args.batch}, SGD, softmax cross-entropy; medians of "
          f"{args.steps} A/B rounds (distributed step, then the single-process step of the same model)")
    print(table(["N", "arrays", "P MB", "sent/worker MB", "2(N-1)/N*P MB", "ratio", "batch KB", "control KB (of P)",
                 "tasks+msgs/step", "single ms", "DataParallel ms", "loopback GB/s", "transfer ms",
                 "overhead ms", "<= 20 ms", "single CPU ms", "client CPU ms",
                 "workers CPU ms", "worker-single CPU ms", "CPU overhead/worker ms", f"step_many({args.many}) ms/step",
                 f"step_many({args.many}) client CPU ms/step"], rows))
    print("sent/worker: bytes a worker sent to the other workers per step (max over workers); batch: the NumPy "
          "batch pieces the client sent (scattered, or in its messages); control: the pickled task arguments and "
          "messages but the pieces (keys, step tag, peers, seeds); tasks+msgs: Dask tasks and direct messages to "
          "workers per step; times are "
          "wall medians; loopback: TCP bandwidth 127.0.0.1 from the client to a child process (16 MB, median of "
          "5, measured after the case's rounds); transfer: (sent/worker + batch) / loopback; overhead: "
          "DataParallel - single - transfer (the issue's target: <= 20 ms); CPU: time.process_time() medians of the single-process step, of the client process "
          "over a DataParallel step (the LocalCluster's scheduler runs in it), and summed over the worker "
          "processes; worker-single: the mean worker's CPU per step minus the single-process step's; CPU "
          "overhead/worker: (workers CPU - single CPU) / N, the CPU a worker spends beyond its share of the "
          "single-process step (on an idle machine with a core per process, the wall overhead is about this "
          "plus the latency of 3 message rounds); "
          f"step_many({args.many}): DataParallel.step_many of {args.many} batches per call (one message per "
          f"worker), wall and client CPU per step, medians of {args.many_rounds} rounds, each followed by "
          f"{args.many} single-process steps")


def exported_resnet18(folder: str):
    """The zoo's ResNet-18 (thumbnail stem, 10 classes) exported and loaded back as a ``SymbolBlock``."""
    la.random.seed(0)
    net = B.models.resnet18(classes=10, thumbnail=True)
    net.initialize()
    net.hybridize()
    net(la.ones((1, 3, 32, 32)))
    sym_file, param_file = net.export(str(Path(folder) / "resnet18"))
    loaded = B.SymbolBlock.imports(sym_file, ["data"], param_file)
    loaded.hybridize()
    return loaded


class CallMeter:
    """Tasks the scheduler ran (each transition to ``processing``), bytes the client sent (scattered, or
    carried by a parameter's source task) and the client's CPU seconds spent hashing parameters
    (``params.content_hash``)."""

    def __init__(self, client):
        self.tasks = self.scattered = 0
        self.hashing = 0.0
        meter, real = self, client.scatter
        real_hash = params.content_hash

        def content_hash(value):
            t0 = time.process_time()
            try:
                return real_hash(value)
            finally:
                meter.hashing += time.process_time() - t0

        params.content_hash = content_hash
        real_submit = bounded.BoundedCall.submit

        def submit(call, fn, *a, **kw):  # (parameters go as the argument of one source task each)
            if kw.get("carries_data"):
                meter.scattered += sum(getattr(v, "nbytes", 0) for v in a)
            return real_submit(call, fn, *a, **kw)

        bounded.BoundedCall.submit = submit

        def scatter(data, **kw):
            meter.scattered += sum(getattr(v, "nbytes", 0) for v in (data if isinstance(data, list) else [data]))
            return real(data, **kw)

        client.scatter = scatter
        scheduler = client.cluster.scheduler  # (LocalCluster: the scheduler runs in this process)

        class Count(SchedulerPlugin):
            def transition(self, key, start, finish, *a, **kw):
                meter.tasks += finish == "processing"

        scheduler.add_plugin(Count(), name="benchmark-task-count")


def resnet_inference(args):
    """Section 5: exported ResNet-18 over a persisted dask array, batch split over 2 workers, against
    one process; A/B rounds alternating, medians; bytes and tasks per call."""
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        net = exported_resnet18(folder)
    params = sum(p.data().size * p.data().dtype.itemsize for p in net.collect_params().values())
    n = args.resnet_batch
    x = np.random.default_rng(0).standard_normal((n, 3, 32, 32)).astype("float32")
    xa = la.array(x)
    want = net(xa).asnumpy()
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0") as cl, \
            Client(cl) as client:
        workers = sorted(client.scheduler_info()["workers"])
        halves = [client.persist(da.from_array(x[i * n // 2:(i + 1) * n // 2], chunks=-1), workers=[w])
                  for i, w in enumerate(workers)]
        dx = da.concatenate(halves)  # (one chunk of the batch on each worker)
        meter = CallMeter(client)
        first = meter.scattered
        got = la.distributed.run(net, client=client, data=dx, compute=True).asnumpy()  # (parameters sent)
        first = meter.scattered - first
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
        t_one, t_dist, tasks, scattered, moved, cpu, hashing = [], [], [], [], [], [], []
        for _ in range(args.resnet_rounds):
            t0 = time.perf_counter()
            net(xa).asnumpy()
            t_one.append(time.perf_counter() - t0)
            tasks0, sc0, sent0, h0 = meter.tasks, meter.scattered, transfer_bytes(client), meter.hashing
            t0, c0 = time.perf_counter(), time.process_time()
            la.distributed.run(net, client=client, data=dx, compute=True)
            t_dist.append(time.perf_counter() - t0)
            cpu.append(time.process_time() - c0)
            hashing.append(meter.hashing - h0)
            tasks.append(meter.tasks - tasks0)
            scattered.append(meter.scattered - sc0)
            moved.append(transfer_bytes(client) - sent0)
    one, dist = statistics.median(t_one) * 1e3, statistics.median(t_dist) * 1e3
    client_cpu, hash_cpu = statistics.median(cpu) * 1e3, statistics.median(hashing) * 1e3
    print(f"Exported ResNet-18 (thumbnail, 10 classes; P = {params / 1e6:.2f} MB of parameters), batch {n} of 3x32x32 "
          f"over a persisted dask array (one chunk per worker); medians of {args.resnet_rounds} A/B rounds")
    print(table(["run", "ms/call", "speedup", "client CPU ms/call", "hashing ms/call", "tasks/call",
                 "sent by client/call", "sent by workers/call"],
                [["single process (SymbolBlock)", one, 1.0, "-", "-", "-", "-", "-"],
                 ["la.distributed.run, 2 workers", dist, one / dist, client_cpu, hash_cpu, statistics.median(tasks),
                  f"{statistics.median(scattered) / 1e3:.1f} KB", f"{statistics.median(moved) / 1e3:.1f} KB"]]))
    print("client CPU: time.process_time() of the client process over the call (the LocalCluster's scheduler "
          "runs in it too); hashing: the part spent in params.content_hash (the parameters' hashes are kept "
          "per array and buffer version, so an unchanged model hashes nothing)")
    print(f"first call: {first / 1e6:.2f} MB of parameters sent from the client (once; later calls find them on "
          "the workers by content hash); sent by workers: Dask's transfer_outgoing_bytes_total, the results "
          f"to the client ({n * 10 * 4 / 1e3:.1f} KB) included")


def cost_model(args, compute_s, overhead_s):
    params = sum(p.data().size * 4 for p in mlp().collect_params().values())
    bw = args.bandwidth * 1e9
    print(f"\nCost model (docs/distributed.md): C = {compute_s * 1e3:.1f} ms compute per step (batch 1024, one "
          f"process), s = {overhead_s * 1e3:.2f} ms scheduler time per task, P = {params / 1e6:.2f} MB of "
          f"parameters, {args.bandwidth} GB/s network")
    rows = []
    for n in (2, 4, 8, 16, 32, 64):
        t_compute = compute_s / n
        t_reduce = 2 * (n - 1) / n * params / bw  # reduce-scatter + all-gather among the resident replicas
        t_sched = (2 * n + n * n + n) * overhead_s  # local steps, applies, and per bucket n^2 shards + n sums
        t = t_compute + t_reduce + t_sched
        rows.append([n, t_compute * 1e3, t_reduce * 1e3, t_sched * 1e3, t * 1e3, compute_s / t])
    print(table(["N", "compute ms", "reduce ms", "scheduler ms", "step ms", "speedup"], rows))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=200_000)
    ap.add_argument("--chunk", type=int, default=25_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--bandwidth", type=float, default=1.25, help="network bandwidth in GB/s (1.25 = 10 Gbit/s)")
    ap.add_argument("--scaling", action="store_true", help="only section 4: DataParallel with 2 and 4 workers")
    ap.add_argument("--param-mb", type=float, default=1.6, help="section 4: parameter megabytes of each model")
    ap.add_argument("--batch", type=int, default=64, help="section 4: rows per step")
    ap.add_argument("--steps", type=int, default=7, help="section 4: measured steps (A/B rounds)")
    ap.add_argument("--many", type=int, default=8, help="section 4: steps per DataParallel.step_many call")
    ap.add_argument("--many-rounds", type=int, default=3, help="section 4: step_many rounds (0: none)")
    ap.add_argument("--workers", type=int, nargs="+", default=[2, 4], help="section 4: worker processes per case")
    ap.add_argument("--arrays", type=int, nargs="+", default=[10, 40, 80, 160],
                    help="section 4: parameter arrays per case")
    ap.add_argument("--resnet", action="store_true", help="only section 5: exported ResNet-18 inference, 2 workers")
    ap.add_argument("--resnet-batch", type=int, default=32, help="section 5: images per call")
    ap.add_argument("--resnet-rounds", type=int, default=5, help="section 5: A/B rounds")
    args = ap.parse_args(argv)
    if args.resnet:
        resnet_inference(args)
        return
    if args.scaling:
        scaling(args)
        return
    overheads = inference(args)
    compute = training(args, overheads)
    cost_model(args, compute, overheads[2])


if __name__ == "__main__":
    main()
