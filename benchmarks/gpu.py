"""The GPU backend measured on the GPU, every ratio from one run.

Rows (arrays on ``la.gpu(0)``; ``--device cpu`` runs the same script on ``cpu(0)`` as a smoke run):

* **copy bandwidth**: ``xp.copyto`` of a float32 array (read + write), the yardstick of the
  elementwise rows: each row prints its effective bandwidth (bytes an ideal kernel must move over
  the time) and its share of the copy bandwidth;
* **elementwise chain** ``x * 0.999 + 0.001`` four times (8 ops) on 64M float32: eager (each op
  moves the array twice), hybridized without fusion, hybridized fused (one pass);
* **GELU** (tanh form) on 64M float32: eager, hybridized fused;
* **MLP training step** (784-512-512-10, batch 1024, SGD): lazyarray hybridized against PyTorch
  eager and ``torch.compile`` on the same device, when torch (with CUDA for ``--device gpu``) is
  importable;
* **zoo models**: ``resnet18(thumbnail=True)`` at batch 64 and ``transformer_encoder`` at batch 64,
  sequence 64: inference and training step, eager against hybridized;
* **memory**: the hybridized GELU's and the MLP step's planned device peak against CuPy's memory
  pool (``total_bytes`` after ``free_all_blocks``) or, on a CPU, tracemalloc.

Targets (the GPU issue): eager elementwise ≥ 80% of copy bandwidth on large arrays, fused GELU
≥ 70%, hybridized MLP step no slower than PyTorch eager, planned peak within 10% of the pool's.

    python benchmarks/gpu.py                    # on a GPU machine (tools/gpu_check.sh runs it)
    python benchmarks/gpu.py --device cpu --quick   # a smoke run anywhere (tests/test_gpu_benchmark.py)
"""
from __future__ import annotations

import argparse
import gc
import importlib.util
import statistics
import sys
import time
import tracemalloc
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _util import table  # noqa: E402

import lazyarray as la  # noqa: E402
from lazyarray import blocks as B  # noqa: E402

C = 0.7978845608


class Device:
    """The device under test: its ``la`` device, array module and a barrier for timing."""

    def __init__(self, kind: str):
        self.kind = kind
        self.dev = la.gpu(0) if kind == "gpu" else la.cpu(0)
        self.xp = self.dev.xp

    def sync(self) -> None:
        if self.kind == "gpu":
            self.xp.cuda.Device(0).synchronize()

    def timed(self, fn, repeat: int) -> float:
        """Median seconds of ``fn`` over ``repeat`` calls, after one warm-up call."""
        fn()
        self.sync()
        times = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            fn()
            self.sync()
            times.append(time.perf_counter() - t0)
        return statistics.median(times)

    def peak_bytes(self, fn) -> int:
        """Device bytes held at the peak while ``fn`` runs, beyond what was held before."""
        gc.collect()
        if self.kind == "gpu":
            pool = self.xp.get_default_memory_pool()
            self.sync()
            pool.free_all_blocks()
            before = pool.total_bytes()
            fn()
            self.sync()
            return pool.total_bytes() - before
        tracemalloc.start()
        try:
            base, _ = tracemalloc.get_traced_memory()
            tracemalloc.reset_peak()
            fn()
            return tracemalloc.get_traced_memory()[1] - base
        finally:
            tracemalloc.stop()


def chain(x):
    for _ in range(4):
        x = x * 0.999 + 0.001
    return x


def gelu(x):
    return 0.5 * x * (1.0 + la.tanh(C * (x + 0.044715 * x ** 3)))


def compiled(fn, x, fuse: bool):
    with la.deferred():
        y = fn(x)
    return la.CachedOp(la.get_symbol(y, inputs={"x": x}), fuse=fuse)


def bandwidth_rows(d: Device, n: int, repeat: int):
    """Copy bandwidth, then the chain and GELU rows as a share of it."""
    src = d.xp.ones(n, d.xp.float32)
    dst = d.xp.empty_like(src)
    nbytes = 4 * n
    t_copy = d.timed(lambda: d.xp.copyto(dst, src), repeat)
    copy_bw = 2 * nbytes / t_copy
    x = la.array(src, device=d.dev)
    rows = [["copy (xp.copyto)", t_copy * 1e3, copy_bw / 1e9, "1.00"]]
    cases = [
        ("chain 8 ops eager", lambda: chain(x), 8 * 2 * nbytes),
        ("chain hybridized, no fusion", compiled(chain, x, False), 8 * 2 * nbytes),
        ("chain hybridized, fused", compiled(chain, x, True), 2 * nbytes),
        ("GELU eager", lambda: gelu(x), 2 * nbytes),
        ("GELU hybridized, fused", compiled(gelu, x, True), 2 * nbytes),
    ]
    for name, fn, ideal in cases:
        call = fn if not isinstance(fn, la.CachedOp) else (lambda op=fn: op(x))
        t = d.timed(call, repeat)
        rows.append([name, t * 1e3, ideal / t / 1e9, f"{ideal / t / copy_bw:.2f}"])
    return ["row", "ms", "GB/s (ideal bytes)", "of copy bw"], rows


def mlp_la(d: Device, batch: int):
    """A hybridized 784-512-512-10 MLP and one SGD training step on ``d``."""
    net = B.HybridSequential()
    net.add(B.Dense(512, activation="relu", in_units=784), B.Dense(512, activation="relu", in_units=512),
            B.Dense(10, in_units=512))
    net.initialize(device=d.dev)
    net.hybridize()
    trainer = B.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.01})
    loss_fn = B.SoftmaxCrossEntropyLoss()
    rng = np.random.default_rng(0)
    x = la.array(rng.standard_normal((batch, 784)).astype("float32"), device=d.dev)
    y = la.array(rng.integers(0, 10, batch), device=d.dev)

    def step():
        with la.autograd.record():
            loss = loss_fn(net(x), y).mean()
        loss.backward()
        trainer.step(1)
    return step


def mlp_torch(kind: str, batch: int, compile_it: bool):
    """The same MLP step in PyTorch (None when torch, or CUDA for a GPU run, is missing)."""
    if importlib.util.find_spec("torch") is None:
        return None
    import torch
    if kind == "gpu" and not torch.cuda.is_available():
        return None
    dev = "cuda" if kind == "gpu" else "cpu"
    net = torch.nn.Sequential(torch.nn.Linear(784, 512), torch.nn.ReLU(), torch.nn.Linear(512, 512),
                              torch.nn.ReLU(), torch.nn.Linear(512, 10)).to(dev)
    opt = torch.optim.SGD(net.parameters(), lr=0.01)
    x = torch.randn(batch, 784, device=dev)
    y = torch.randint(0, 10, (batch,), device=dev)

    def step():
        opt.zero_grad(set_to_none=True)
        torch.nn.functional.cross_entropy(net(x), y).backward()
        opt.step()
    if compile_it:
        try:
            step = torch.compile(step)
            step()
        except Exception as exc:  # (no compiler toolchain on the machine: say so in the table)
            print(f"torch.compile unavailable: {type(exc).__name__}: {str(exc)[:120]}")
            return None
    return step


def mlp_rows(d: Device, batch: int, repeat: int):
    t_la = d.timed(mlp_la(d, batch), repeat)
    rows = [["lazyarray hybridized", t_la * 1e3, "1.00"]]
    for name, compile_it in (("PyTorch eager", False), ("torch.compile", True)):
        step = mlp_torch(d.kind, batch, compile_it)
        if step is None:
            rows.append([name, "-", "(torch not usable here)"])
            continue
        t = d.timed(step, repeat)
        rows.append([name, t * 1e3, f"{t_la / t:.2f}"])
    return [f"MLP step, batch {batch}", "ms", "lazyarray / this"], rows


def zoo_rows(d: Device, batch: int, repeat: int, quick: bool):
    rng = np.random.default_rng(0)
    size, seq = (16, 16) if quick else (32, 64)
    models = {
        "resnet18": (lambda: B.models.resnet18(classes=10, thumbnail=True),
                     rng.standard_normal((batch, 3, size, size)).astype("float32"), rng.integers(0, 10, batch)),
        "transformer": (lambda: B.models.transformer_encoder(1000, classes=2, units=128, num_layers=2, num_heads=2,
                                                            max_length=128),
                        rng.integers(0, 1000, (batch, seq)), rng.integers(0, 2, batch)),
    }
    rows = []
    for name, (make, xn, yn) in models.items():
        times = {}
        for hybrid in (False, True):
            la.random.seed(0)
            net = make()
            net.initialize(device=d.dev)
            x, y = la.array(xn, device=d.dev), la.array(yn, device=d.dev)
            net(x)
            if hybrid:
                net.hybridize()
            trainer = B.Trainer(net.collect_params(), "adam", {"learning_rate": 1e-3})
            loss_fn = B.SoftmaxCrossEntropyLoss()

            def step(net=net, x=x, y=y, trainer=trainer, loss_fn=loss_fn):
                with la.autograd.record():
                    loss = loss_fn(net(x), y).mean()
                loss.backward()
                trainer.step(1)
            times[hybrid, "infer"] = d.timed(lambda net=net, x=x: net(x), repeat)
            times[hybrid, "train"] = d.timed(step, repeat)
        for what in ("infer", "train"):
            e, h = times[False, what], times[True, what]
            rows.append([f"{name} {what}", e * 1e3, h * 1e3, f"{h / e:.2f}"])
    return [f"zoo model, batch {batch}", "eager ms", "hybridized ms", "hybridized / eager"], rows


def memory_rows(d: Device, n: int, batch: int):
    """Planned device bytes against the bytes the first call takes (the executor keeps its planned
    buffers for later calls, so the first call's growth is what the plan holds)."""
    x = la.array(d.xp.ones(n, d.xp.float32), device=d.dev)
    op = compiled(gelu, x, True)
    plan = op.memory_plan()
    planned = sum(s for s, dev in zip(plan.buffer_size, plan.buffer_device) if dev == d.dev)
    measured = d.peak_bytes(lambda: op(x))
    rows = [["GELU hybridized, first call", planned / 2**20, measured / 2**20, f"{measured / max(planned, 1):.2f}"]]
    step = mlp_la(d, batch)
    measured = d.peak_bytes(step)
    rows.append(["MLP step, first call (measured only)", "-", measured / 2**20, "-"])
    return ["graph", "planned MiB", "measured MiB", "measured / planned"], rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", choices=("gpu", "cpu"), default="gpu")
    ap.add_argument("--quick", action="store_true", help="small sizes, few rounds (a smoke run)")
    ap.add_argument("--size", type=int, default=None, help="elements of the elementwise rows (64M)")
    ap.add_argument("--only", default="bandwidth,mlp,zoo,memory", help="the sections to run, comma-separated")
    args = ap.parse_args(argv)
    if args.device == "gpu" and not la.gpu_available():
        print("no usable GPU here (CuPy and a GPU are needed); run with --device cpu for a smoke run")
        return 0
    d = Device(args.device)
    n = args.size or (1 << 16 if args.quick else 64 << 20)
    repeat = 2 if args.quick else 10
    batch = 32 if args.quick else 1024
    print(f"device {d.dev}, {n:,} float32 elements, {repeat} timed rounds (medians)\n")
    sections = {"bandwidth": lambda: bandwidth_rows(d, n, repeat), "mlp": lambda: mlp_rows(d, batch, repeat),
                "zoo": lambda: zoo_rows(d, 4 if args.quick else 64, repeat, args.quick),
                "memory": lambda: memory_rows(d, n, batch)}
    for name in args.only.split(","):  # (each printed as soon as it is measured)
        headers, rows = sections[name.strip()]()
        print(table(headers, rows) + "\n", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
