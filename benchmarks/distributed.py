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

The machine this runs on has 2 cores (shared), so 2 workers is the most that can show a speedup.

    python benchmarks/distributed.py [--rows 200000] [--chunk 25000] [--bandwidth 1.25]
"""
from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np

# dask probes for the optional `sparse` package on import: benchmarks/sparse.py must not answer, so
# dask is imported before the script's folder goes (back) on the path.
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
try:
    import dask.array as da
    from dask.distributed import Client, LocalCluster
except ImportError:
    sys.exit("benchmarks/distributed.py needs the distributed extra: pip install 'lazyarray[distributed]'")
sys.path.append(str(_HERE))
from _util import table  # noqa: E402

import lazyarray as la  # noqa: E402
from lazyarray import blocks as B  # noqa: E402


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


def cost_model(args, compute_s, overhead_s):
    params = sum(p.data().size * 4 for p in mlp().collect_params().values())
    bw = args.bandwidth * 1e9
    print(f"\nCost model (docs/distributed.md): C = {compute_s * 1e3:.1f} ms compute per step (batch 1024, one "
          f"process), s = {overhead_s * 1e3:.2f} ms scheduler time per task, P = {params / 1e6:.2f} MB of "
          f"parameters, {args.bandwidth} GB/s network")
    rows = []
    for n in (2, 4, 8, 16, 32, 64):
        t_compute = compute_s / n
        t_reduce = math.ceil(math.log2(n)) * params / bw
        t_bcast = n * params / bw
        t_sched = (2 * n - 1 + n) * overhead_s  # n step tasks, n-1 additions, n parameter copies
        t = t_compute + t_reduce + t_bcast + t_sched
        rows.append([n, t_compute * 1e3, t_reduce * 1e3, t_bcast * 1e3, t_sched * 1e3, t * 1e3, compute_s / t])
    print(table(["N", "compute ms", "reduce ms", "broadcast ms", "scheduler ms", "step ms", "speedup"], rows))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=200_000)
    ap.add_argument("--chunk", type=int, default=25_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--bandwidth", type=float, default=1.25, help="network bandwidth in GB/s (1.25 = 10 Gbit/s)")
    args = ap.parse_args(argv)
    overheads = inference(args)
    compute = training(args, overheads)
    cost_model(args, compute, overheads[2])


if __name__ == "__main__":
    main()
