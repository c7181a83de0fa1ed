"""Memory: what the planner promises and what a run really holds.

1. Inference through 50 dense layers (1024 wide, ReLU) at batch 256.
2. A training step of the 784-512-512-10 MLP (forward, backward and SGD update hybridized
   into one CachedOp), batch 256.

For each: the plan's ``peak_bytes`` vs ``lower_bound_bytes`` (largest set of simultaneously
live values) vs ``naive_bytes`` (one buffer per value), and the measured peak (tracemalloc,
bytes beyond the weights and inputs, buffer pools included) of a CachedOp call vs eager
NumPy. Targets: planned peak <= 1.05x the lower bound; measured peak of the hybridized
training step <= eager NumPy's.

    python benchmarks/memory.py
"""
from __future__ import annotations

import gc
import sys
import tracemalloc
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _util import table
from mlp_step import NAMES, hybrid_step_op, init_params, numpy_step

import lazyarray as la

MiB = 1 << 20


def measured_peak(fn, warm=None) -> int:
    """Peak traced bytes while ``fn`` runs, counted from before ``warm`` (so pools it builds count)."""
    gc.collect()
    tracemalloc.start()
    try:
        if warm is not None:
            warm()
            gc.collect()
        tracemalloc.reset_peak()
        out = fn()
        _, peak = tracemalloc.get_traced_memory()
        del out
    finally:
        tracemalloc.stop()
    return peak


def deep_dense():
    rng = np.random.default_rng(0)
    layers = [((rng.standard_normal((1024, 1024)) / 32).astype("float32"), np.zeros(1024, "float32"))
              for _ in range(50)]
    xn = rng.standard_normal((256, 1024)).astype("float32")
    x = la.array(xn)
    ws = [(la.array(w), la.array(b)) for w, b in layers]
    with la.deferred():
        h = x
        for w, b in ws:
            h = la.relu(la.nn.dense(h, w, b))
    op = la.CachedOp(la.get_symbol(h, inputs={"x": x}))
    plan = op.memory_plan(x=(256, 1024))

    def eager_numpy():
        h = xn
        for w, b in layers:
            h = np.maximum(h @ w.T + b, 0)
        return h

    np.testing.assert_allclose(op(x).asnumpy(), eager_numpy(), rtol=1e-3, atol=1e-4)
    m_op = measured_peak(lambda: op(x), warm=lambda: op(x))
    m_np = measured_peak(eager_numpy)
    return plan, m_op, m_np


def train_step(batch=256):
    rng = np.random.default_rng(0)
    xn = rng.standard_normal((batch, 784)).astype("float32")
    ln = rng.integers(0, 10, batch)
    base = init_params(rng)
    x, labels = la.array(xn), la.array(ln)
    ps = [la.array(p) for p in base]
    step = hybrid_step_op(x, labels, ps)
    shapes = dict(zip(NAMES, [(batch, 784)] + [p.shape for p in base] + [(batch,)]))
    plan = step.memory_plan(**shapes)
    state = {"p": ps}

    def hybrid():
        outs = step(x, *state["p"], labels)
        state["p"] = outs[1:]
        return outs[0]

    p_np = [p.copy() for p in base]
    # The warm-up step's outputs are the parameters the measured step reads: weights, not
    # working memory, so they are subtracted (NumPy's parameters exist before tracing starts).
    weights = sum(p.nbytes for p in base)
    m_op = measured_peak(hybrid, warm=hybrid) - weights
    m_np = measured_peak(lambda: numpy_step(xn, ln, p_np), warm=lambda: numpy_step(xn, ln, p_np))
    return plan, m_op, m_np


def main() -> None:
    rows = []
    for name, (plan, m_op, m_np) in (("50 x dense(1024), batch 256", deep_dense()),
                                     ("MLP train step, batch 256", train_step())):
        rows.append([name, f"{plan.peak_bytes / MiB:.2f}", f"{plan.lower_bound_bytes / MiB:.2f}",
                     f"{plan.naive_bytes / MiB:.2f}", f"{plan.peak_bytes / plan.lower_bound_bytes:.3f}",
                     plan.num_buffers, f"{m_op / MiB:.2f}", f"{m_np / MiB:.2f}", f"{m_op / m_np:.2f}"])
    print("Memory (MiB). Targets: planned peak <= 1.05x lower bound; measured train step <= eager NumPy")
    print(table(["workload", "planned peak", "lower bound", "naive", "peak/LB", "buffers",
                 "measured CachedOp", "measured NumPy", "ratio"], rows))


if __name__ == "__main__":
    main()
