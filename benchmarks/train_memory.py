"""Memory of a training loop written with blocks: eager vs hybridized.

A ``HybridSequential`` of Dense(512, relu), Dense(512, relu), Dense(10) trained with
``SoftmaxCrossEntropyLoss`` and ``Trainer`` (SGD, learning rate 0.01) on one random float32
batch (256 x 784, integer labels, NumPy rng seed 0; weights from ``la.random.seed(0)``) for
20 steps of ``with autograd.record(): loss = ...``; ``loss.backward()``; ``trainer.step(256)``.
Two runs: eager (nothing hybridized) and hybridized (network and loss).

tracemalloc is started before the inputs and the model are built, so everything is counted:
weights, gradients, inputs, optimizer state, caches and buffer pools. After 2 warm-up steps
(deferred parameter init, tracing and compiling) the peak is reset; the table gives the peak
traced MiB over the 20 steps, the traced MiB still held after them, and the weights' MiB
for reference with the ratio peak / weights. Target: a training loop holds a few copies of
the weights plus activations, so peak / weights should stay small (no per-step growth:
current after the loop close to the warm-up level) and hybridized <= eager.

    python benchmarks/train_memory.py
"""
from __future__ import annotations

import gc
import sys
import time
import tracemalloc
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _util import table  # noqa: E402

import lazyarray as la  # noqa: E402
from lazyarray import blocks as nn  # noqa: E402

MiB = 1 << 20
BATCH, FEATURES, CLASSES = 256, 784, 10
WARMUP, STEPS = 2, 20
LR = 0.01


def nbytes(arr) -> int:
    return int(np.prod(arr.shape)) * np.dtype(arr.dtype).itemsize


def run(hybridize: bool) -> dict:
    """Train for ``WARMUP + STEPS`` steps under tracemalloc; the measurements in MiB."""
    rng = np.random.default_rng(0)
    xn = rng.standard_normal((BATCH, FEATURES)).astype("float32")
    ln = rng.integers(0, CLASSES, BATCH)
    la.random.seed(0)  # the same initial weights in both modes: same final loss
    gc.collect()
    tracemalloc.start()
    try:
        x, labels = la.array(xn), la.array(ln)
        net = nn.HybridSequential()
        net.add(nn.Dense(512, activation="relu"), nn.Dense(512, activation="relu"), nn.Dense(CLASSES))
        net.initialize()
        loss_fn = nn.SoftmaxCrossEntropyLoss()
        if hybridize:
            net.hybridize()
            loss_fn.hybridize()
        trainer = nn.Trainer(net.collect_params(), "sgd", {"learning_rate": LR})

        def step():
            with la.autograd.record():
                loss = loss_fn(net(x), labels)
            loss.backward()
            trainer.step(BATCH)
            return loss

        for _ in range(WARMUP):
            step()
        gc.collect()
        warm_current, _ = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        t0 = time.perf_counter()
        for _ in range(STEPS):
            loss = step()
        seconds = time.perf_counter() - t0
        current, peak = tracemalloc.get_traced_memory()
        gc.collect()
        current_gc, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    weights = sum(nbytes(p.data()) for p in net.collect_params().values())
    inputs = nbytes(x) + nbytes(labels)
    final_loss = float(np.mean(loss.asnumpy()))
    return {"weights": weights / MiB, "inputs": inputs / MiB, "warm": warm_current / MiB,
            "peak": peak / MiB, "current": current / MiB, "current_gc": current_gc / MiB,
            "ms": seconds / STEPS * 1e3, "loss": final_loss}


def main() -> None:
    rows = []
    for name, hybrid in (("eager", False), ("hybridized", True)):
        m = run(hybrid)
        rows.append([name, f"{m['weights']:.2f}", f"{m['inputs']:.2f}", f"{m['warm']:.2f}",
                     f"{m['peak']:.2f}", f"{m['current']:.2f}", f"{m['current_gc']:.2f}",
                     f"{m['peak'] / m['weights']:.2f}", f"{m['ms']:.1f}", f"{m['loss']:.4f}"])
    print(f"Training loop memory, MLP 784-512-512-10, batch {BATCH}, SGD, {STEPS} steps after "
          f"{WARMUP} warm-up (tracemalloc MiB; target: small peak / weights, hybridized <= eager)")
    print(table(["mode", "weights", "inputs", "after warm-up", "peak in loop", "current after",
                 "current after gc", "peak / weights", "ms / step (traced)", "final loss"], rows))


if __name__ == "__main__":
    main()
