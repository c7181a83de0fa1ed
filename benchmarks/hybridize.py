"""Imperative vs hybridized blocks: the demo CNN and the 784-512-512-10 MLP.

Per model and batch size (1 and 64), measured in the same run with interleaved rounds:

* inference call: ``net(x)`` (predict mode), values materialized;
* training step: ``with autograd.record(): loss = loss_fn(net(x), y)``; ``loss.backward()``;
  ``trainer.step(batch)`` (SGD with momentum);
* first call of a freshly hybridized block: trace + compile + run, inference and training.

Targets: hybridized inference at batch 1 at least 2x faster than imperative; hybridized
training step no slower than imperative at batch 64.

    python benchmarks/hybridize.py [--quick]
"""
from __future__ import annotations

import statistics
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _util import table

import lazyarray as la
from lazyarray import blocks as B
from lazyarray.cli import build_model

MODELS = {
    "demo CNN (1x12x12)": (lambda: build_model("cnn"), (1, 12, 12), 4),
    "MLP 784-512-512-10": (lambda: _mlp(), (784,), 10),
}


def _mlp():
    net = B.HybridSequential()
    net.add(B.Dense(512, activation="relu"), B.Dense(512, activation="relu"), B.Dense(10))
    return net


def _numpy_mlp(x, ws):
    h = np.maximum(x @ ws[0].T + ws[1], 0)
    h = np.maximum(h @ ws[2].T + ws[3], 0)
    return h @ ws[4].T + ws[5]


def make(factory, shape, hybridize):
    la.random.seed(0)
    net = factory()
    net.initialize()
    net(la.ones((1,) + shape))  # create the lazy-shaped parameters
    if hybridize:
        net.hybridize()
    return net


def workloads(net, x, y, trainer, loss_fn, batch):
    def infer():
        net(x).asnumpy()

    def train():
        with la.autograd.record():
            loss = loss_fn(net(x), y)
        loss.backward()
        trainer.step(batch)

    return infer, train


def interleaved(fns: dict, rounds: int, number: int) -> dict:
    """Median seconds per call of each function, rounds interleaved so load spikes hit all."""
    times = {k: [] for k in fns}
    for _ in range(rounds):
        for k, fn in fns.items():
            t0 = time.perf_counter()
            for _ in range(number):
                fn()
            times[k].append((time.perf_counter() - t0) / number)
    return {k: statistics.median(v) for k, v in times.items()}


def first_call(factory, shape, classes, batch, training) -> float:
    net = make(factory, shape, True)
    x = la.array(np.random.default_rng(0).standard_normal((batch,) + shape).astype(np.float32))
    y = la.array(np.zeros(batch, np.int64))
    t0 = time.perf_counter()
    if training:
        with la.autograd.record():
            loss = B.SoftmaxCrossEntropyLoss()(net(x), y)
        loss.backward()
    else:
        net(x).asnumpy()
    return time.perf_counter() - t0


def main(quick: bool = False) -> None:
    rounds, number = (5, 5) if quick else (15, 20)
    rows = []
    verdicts = []
    for name, (factory, shape, classes) in MODELS.items():
        for batch in (1, 64):
            rng = np.random.default_rng(batch)
            x = la.array(rng.standard_normal((batch,) + shape).astype(np.float32))
            y = la.array(rng.integers(0, classes, batch))
            fns = {}
            for mode in ("imperative", "hybridized"):
                net = make(factory, shape, mode == "hybridized")
                trainer = B.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.01, "momentum": 0.9})
                infer, train = workloads(net, x, y, trainer, B.SoftmaxCrossEntropyLoss(), batch)
                infer(), train()  # warm up: trace and compile both modes
                fns[(mode, "infer")], fns[(mode, "train")] = infer, train
            if name.startswith("MLP"):  # the floor: the same inference in NumPy by hand
                ws = [p.data().asnumpy() for p in make(factory, shape, False).collect_params().values()]
                xv = x.asnumpy()
                fns[("numpy", "infer")] = lambda ws=ws, xv=xv: _numpy_mlp(xv, ws)
            t = interleaved(fns, rounds, number if batch == 1 else max(number // 4, 2))
            if ("numpy", "infer") in t:
                rows.append([name, batch, "inference, NumPy by hand", "", "",
                             f"floor {t[('numpy', 'infer')] * 1e3:.3f}"])
            for what in ("infer", "train"):
                imp, hyb = t[("imperative", what)], t[("hybridized", what)]
                label = "inference call" if what == "infer" else "training step"
                rows.append([name, batch, label, f"{imp * 1e3:.3f}", f"{hyb * 1e3:.3f}", f"{imp / hyb:.2f}x"])
                if what == "infer" and batch == 1:
                    verdicts.append(f"{name}: hybridized inference at batch 1 is {imp / hyb:.2f}x faster "
                                    f"({'meets' if imp / hyb >= 2 else 'MISSES'} the 2x target)")
                if what == "train" and batch == 64:
                    verdicts.append(f"{name}: hybridized training step at batch 64 is {imp / hyb:.2f}x "
                                    f"imperative speed ({'meets' if hyb <= imp * 1.02 else 'MISSES'} 'no slower')")
        for batch in (1, 64):
            fi = statistics.median(first_call(factory, shape, classes, batch, False) for _ in range(3))
            ft = statistics.median(first_call(factory, shape, classes, batch, True) for _ in range(3))
            rows.append([name, batch, "first call: trace+compile+run", "", f"infer {fi * 1e3:.1f}",
                         f"train {ft * 1e3:.1f}"])
    print("imperative vs hybridized blocks, ms per call (median of interleaved rounds)")
    print(table(["model", "batch", "workload", "imperative ms", "hybridized ms", "speedup"], rows))
    print()
    for v in verdicts:
        print(v)
    print()
    guards_table()


class _Guarded(B.HybridBlock):
    """Reads the batch size in Python: guarded on input 0 dim 0, one trace per batch size."""

    def __init__(self):
        super().__init__()
        self.fc = B.Dense(64, in_units=32)

    def forward(self, x):
        return self.fc(x).sum(axis=1) / x.shape[0]


def guards_table() -> None:
    """Sound traces over batch sizes 1..64: traces made, and what the guard check costs per call."""
    from lazyarray.guards import Guard

    rows = []
    for label, make in (("shape-generic MLP 32-64-10", _small_mlp), ("guarded block (x.shape[0])", _Guarded)):
        net = make()
        net.initialize()
        net.hybridize()
        t0 = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", la.RecompileWarning)  # 64 signatures on purpose
            for b in range(1, 65):
                net(la.ones((b, 32)))
        sweep = (time.perf_counter() - t0) / 64
        x = la.ones((16, 32))
        net(x)
        steady = min(_timed(lambda net=net, x=x: net(x), 300) for _ in range(5))
        rows.append([label, net.trace_count, f"{sweep * 1e3:.2f}", f"{steady * 1e6:.1f}"])
    guards = [Guard(0, 0, 16), Guard(0, 1, 32)]
    sig = (((16, 32), np.dtype("float32"), la.cpu()),)
    check = min(_timed(lambda: all(g.holds(sig) for g in guards), 20000) for _ in range(5))
    print("hybridized blocks over batch sizes 1..64 (sound traces; target: guard check < 2 us per call)")
    print(table(["block", "traces", "ms per call over the sweep", "us per call, steady"], rows))
    print(f"guard check for a new signature (2 guards): {check * 1e6:.2f} us; a repeated signature checks "
          "nothing (one dict lookup)")


def _small_mlp():
    net = B.HybridSequential()
    net.add(B.Dense(64, in_units=32, activation="relu"), B.Dense(10, in_units=64))
    return net


def _timed(fn, n: int) -> float:
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - t0) / n


if __name__ == "__main__":
    if "--guards" in sys.argv:
        guards_table()
    else:
        main(quick="--quick" in sys.argv)
