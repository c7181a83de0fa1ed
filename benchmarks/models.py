"""The model zoo, imperative vs hybridized: training steps, inference, memory, trace time.

For each model of ``la.blocks.models``:

* ``resnet18``: ``resnet18(classes=10, thumbnail=True)`` on 3x32x32 images (CIFAR-style);
* ``transformer``: ``transformer_encoder(1000, classes=2)`` (BERT-tiny: 2 layers, 128 units,
  2 heads) on token ids of length 64;
* ``lstm``: ``lstm_lm(1000, units=256, num_layers=2)`` on token ids of length 35.

A training step is Gluon's: ``with record(): loss = loss_fn(net(x), y).mean()``, ``backward()``,
``trainer.step(1)`` (Adam). Both modes start from the same weights (``la.random.seed(0)``) and
data (NumPy rng seed 0), so their first losses agree (printed as a check). Tables:

1. step ms, imperative vs hybridized, at batch 32 and 64 (median of ``--repeat`` steps after two
   warm-up steps), and the speed-up. Targets (issue #14): >= 1.3x for the Transformer and the
   LSTM, >= 1.0x for ResNet.
2. inference at batch 1 (``net(x).asnumpy()``), and the first hybridized training call (trace,
   compile and run) against a steady step.
3. memory of a training step at batch 32: the planned peak of the hybridized network's forward
   and backward (``net.cached_op.memory_plan(wrt=params, data=shape)``) against the plan's lower
   bound (target <= 1.1x) and against the measured peak (tracemalloc, weights excluded) of an
   imperative step on NumPy (target: below it), plus the measured peak of the hybridized step.
4. the LSTM graph size (nodes) at sequence lengths 35 and 350 (target: equal).

BLAS runs on one thread (``la.set_num_threads(1)``): with two, the matmul timings of this 2-core
machine swing 2x from run to run.

    python benchmarks/models.py            # every model, batch 32 and 64
    python benchmarks/models.py --quick    # batch 8, smaller sizes, a few steps (a smoke run)
"""
from __future__ import annotations

import argparse
import gc
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

MiB = 1 << 20
VOCAB = 1000


def make_model(name: str, quick: bool):
    """``(net, make_batch(batch, rng) -> (x, y))`` for a model of the zoo."""
    M = B.models
    if name == "resnet18":
        net = M.resnet18(classes=10, thumbnail=True)
        size = 16 if quick else 32
        return net, lambda b, rng: (rng.standard_normal((b, 3, size, size)).astype("float32"),
                                    rng.integers(0, 10, b))
    if name == "transformer":
        net = M.transformer_encoder(VOCAB, classes=2, units=128, num_layers=2, num_heads=2, max_length=128)
        seq = 16 if quick else 64
        return net, lambda b, rng: (rng.integers(0, VOCAB, (b, seq)), rng.integers(0, 2, b))
    if name == "lstm":
        net = M.lstm_lm(VOCAB, units=64 if quick else 256, num_layers=2)
        seq = 12 if quick else 35
        return net, lambda b, rng: (rng.integers(0, VOCAB, (b, seq)), rng.integers(0, VOCAB, (b, seq)))
    raise ValueError(name)


class Run:
    """One model in one mode: the net, its trainer and a batch."""

    def __init__(self, name: str, hybrid: bool, batch: int, quick: bool):
        la.random.seed(0)
        self.net, make_batch = make_model(name, quick)
        self.net.initialize()
        xn, yn = make_batch(batch, np.random.default_rng(0))
        self.x, self.y = la.array(xn), la.array(yn)
        # One imperative call first: deferred parameters are initialized in call order, so both
        # modes draw the same initial weights (a first traced call initializes them in another order).
        self.net(self.x)
        if hybrid:
            self.net.hybridize()
        self.trainer = B.Trainer(self.net.collect_params(), "adam", {"learning_rate": 1e-3})
        self.loss_fn = B.SoftmaxCrossEntropyLoss()

    def step(self) -> float:
        with la.autograd.record():
            loss = self.loss_fn(self.net(self.x), self.y).mean()
        loss.backward()
        self.trainer.step(1)
        return loss.item()


def timed(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def measured_peak(fn) -> int:
    """Peak bytes traced by tracemalloc while ``fn`` runs (what was held before is excluded)."""
    gc.collect()
    tracemalloc.start()
    try:
        base, _ = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        fn()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return peak - base


def step_rows(names, batches, repeat, quick):
    rows, first = [], {}
    for name in names:
        for batch in batches:
            imp, hyb = Run(name, False, batch, quick), Run(name, True, batch, quick)
            l_imp = imp.step()
            t0 = time.perf_counter()
            l_hyb = hyb.step()  # trace + compile + run
            t_first = time.perf_counter() - t0
            imp.step(), hyb.step()
            t_imp, t_hyb = timed(imp.step, repeat), timed(hyb.step, repeat)
            rows.append([name, batch, f"{t_imp * 1e3:.1f}", f"{t_hyb * 1e3:.1f}", f"{t_imp / t_hyb:.2f}",
                         f"{abs(l_imp - l_hyb):.1e}"])
            first.setdefault(name, (t_first, t_hyb))
    return rows, first


def inference_rows(names, first, repeat, quick):
    rows = []
    for name in names:
        runs = [Run(name, h, 1, quick) for h in (False, True)]
        ts = []
        for r in runs:
            r.net(r.x).asnumpy()
            ts.append(timed(lambda r=r: r.net(r.x).asnumpy(), repeat * 4))
        t_first, t_step = first[name]
        rows.append([name, f"{ts[0] * 1e3:.2f}", f"{ts[1] * 1e3:.2f}", f"{ts[0] / ts[1]:.2f}",
                     f"{t_first * 1e3:.0f}", f"{t_step * 1e3:.1f}"])
    return rows


def memory_rows(names, batch, quick):
    rows = []
    for name in names:
        imp, hyb = Run(name, False, batch, quick), Run(name, True, batch, quick)
        imp.step(), hyb.step(), imp.step(), hyb.step()
        m_imp, m_hyb = measured_peak(imp.step), measured_peak(hyb.step)
        op = hyb.net.cached_op
        params = [n for n in op._names if n != "data" and not n.startswith("data")]
        shapes = {n: tuple(a.shape) for n, a in zip(["data"], [hyb.x]) if n in op._names}
        plan = op.memory_plan(wrt=params, **shapes)
        rows.append([name, batch, f"{plan.peak_bytes / MiB:.1f}", f"{plan.lower_bound_bytes / MiB:.1f}",
                     f"{plan.peak_bytes / plan.lower_bound_bytes:.3f}", f"{m_imp / MiB:.1f}",
                     f"{plan.peak_bytes / m_imp:.2f}", f"{m_hyb / MiB:.1f}"])
    return rows


def lstm_graph_rows():
    rows = []
    for seq in (35, 350):
        la.random.seed(0)
        net = B.models.lstm_lm(VOCAB, units=32, num_layers=2)
        net.initialize()
        net.hybridize()
        net(la.array(np.random.default_rng(0).integers(0, VOCAB, (2, seq))))
        rows.append([seq, len(net.cached_op.sym.topo())])
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="small sizes, batch 8, a few steps")
    ap.add_argument("--models", default="resnet18,transformer,lstm")
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args(argv)
    la.set_num_threads(1)
    names = args.models.split(",")
    batches = [8] if args.quick else [32, 64]
    repeat = 2 if args.quick else args.repeat

    rows, first = step_rows(names, batches, repeat, args.quick)
    print("Training step (forward, loss, backward, Adam), median ms")
    print(table(["model", "batch", "imperative", "hybridized", "speed-up", "|first loss diff|"], rows))
    print()
    print("Inference at batch 1 (ms) and the first hybridized training call (trace + compile + run)")
    print(table(["model", "imperative", "hybridized", "speed-up", "first call ms", "steady step ms"],
                inference_rows(names, first, repeat, args.quick)))
    print()
    print(f"Memory of a training step at batch {batches[0]} (MiB; planned: the hybridized network's forward "
          "and backward)")
    print(table(["model", "batch", "planned peak", "lower bound", "peak/LB", "imperative measured",
                 "planned/imperative", "hybridized measured"], memory_rows(names, batches[0], args.quick)))
    if "lstm" in names:
        print()
        print("LSTM graph size (nodes of the hybridized symbol)")
        print(table(["sequence length", "nodes"], lstm_graph_rows()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
