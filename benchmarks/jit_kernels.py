"""Compiled CPU kernels (``lazyarray/jit.py``, numba) against the NumPy path they stand for.

Per kernel, on the demo CNN's shapes at batch 64 (float32): the op's kernel with compiled loops
on and off (``jit.set_enabled``), alternating rounds, medians, the ratio in the same run. Then the
demo CNN itself (``lazyarray demo``'s model): hybridized inference at batch 64 and a Gluon-style
training step (``record``, loss, ``backward``, ``trainer.step``), on and off. Both paths give
equal values (the tests check that bit for bit; to rounding where a convolution runs as one
parallel region, ``ops/conv_regions.py``); this script checks it again before timing.

    OMP_NUM_THREADS=1 python benchmarks/jit_kernels.py     # (needs numba: pip install -e ".[jit]")
    python benchmarks/jit_kernels.py --quick                # one short round each: a smoke run
"""
from __future__ import annotations

import argparse
import importlib.util
import statistics
import time
from pathlib import Path

import numpy as np

import lazyarray as la
from lazyarray import blocks as B
from lazyarray import jit
from lazyarray.cli import build_model
from lazyarray.kernels import conv2d_grad, elementwise, pool
from lazyarray.kernels.conv2d import run_conv2d  # noqa: E402

# (``_util`` loaded from its file: importing this script, as its smoke test does, leaves sys.path alone)
_spec = importlib.util.spec_from_file_location("_bench_util", Path(__file__).resolve().parent / "_util.py")
_util = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_util)
table = _util.table


ROUNDS = [9]  # (--quick: 1)
BUDGET = [1.0]  # scale of each round's seconds (--quick: 0.05)


def alternating(fn, rounds=None, budget=0.05):
    """Median seconds per call of ``fn()`` with compiled kernels off and on (rounds alternate)."""
    times = {False: [], True: []}
    rounds, budget = rounds or ROUNDS[0], budget * BUDGET[0]
    for r in range(rounds):
        for on in ((False, True) if r % 2 else (True, False)):
            jit.set_enabled(on)
            fn()
            number, t0 = 0, time.perf_counter()
            while time.perf_counter() - t0 < budget:
                fn()
                number += 1
            times[on].append((time.perf_counter() - t0) / number)
    jit.set_enabled(None)
    return statistics.median(times[False]), statistics.median(times[True])


def same_values(fn, exact=True):
    """Equal values on both paths: bit for bit, or (``exact=False``: where a convolution runs as the
    parallel region, ``ops/conv_regions.py``, whose products are blocked differently) to rounding."""
    jit.set_enabled(False)
    want = fn()
    jit.set_enabled(True)
    got = fn()
    jit.set_enabled(None)
    if exact:
        np.testing.assert_array_equal(got, want)
    else:
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def kernel_rows():
    rng = np.random.default_rng(0)

    def batch_last(a):
        return np.ascontiguousarray(a.transpose(1, 2, 3, 0)).transpose(3, 0, 1, 2)

    x1 = batch_last(rng.standard_normal((64, 8, 12, 12)).astype(np.float32))  # after the first conv
    x2 = batch_last(rng.standard_normal((64, 16, 6, 6)).astype(np.float32))  # after the second
    stats = [rng.random(8).astype(np.float32) + 0.1 for _ in range(4)]
    xin = rng.standard_normal((64, 1, 12, 12)).astype(np.float32)
    c1 = rng.standard_normal((64, 8, 12, 12)).astype(np.float32)
    c2 = rng.standard_normal((64, 8, 6, 6)).astype(np.float32)
    w2 = rng.standard_normal((16, 8, 3, 3)).astype(np.float32)
    g2 = rng.standard_normal((64, 16, 6, 6)).astype(np.float32)
    g1 = rng.standard_normal((64, 8, 12, 12)).astype(np.float32)
    gp = rng.standard_normal((64, 8, 6, 6)).astype(np.float32)
    out2 = batch_last(np.empty((64, 16, 6, 6), np.float32))
    h = rng.standard_normal((1024, 512)).astype(np.float32)
    gh = rng.standard_normal((1024, 512)).astype(np.float32)
    cases = [
        ("max_pool2d 2x2, (64,16,6,6) batch last", lambda: pool.run_max_pool2d(np, x2)),
        ("batch_norm_max_pool2d + relu, (64,8,12,12)", lambda: pool.run_norm(np, x1, *stats, 1e-5, True)),
        ("relu (64,16,6,6) batch last", lambda: elementwise.run_relu(np, x2)),
        ("relu (1024,512)", lambda: elementwise.run_relu(np, h)),
        ("relu_grad (1024,512)", lambda: elementwise.run_relu_grad(np, h, gh)),
        ("conv2d 8->16 3x3, (64,8,6,6) batch last", lambda: run_conv2d(np, batch_last(c2), w2, None, padding=(1, 1))),
        ("  the same into a batch-last out (parallel region)",
         lambda: run_conv2d(np, batch_last(c2), w2, None, padding=(1, 1), out=out2)),
        ("conv2d_weight_grad 1->8, (64,1,12,12)", lambda: conv2d_grad.run_weight_grad(np, g1, xin, (3, 3), padding=(1, 1))),
        ("conv2d_weight_grad 8->16, (64,8,6,6)", lambda: conv2d_grad.run_weight_grad(np, g2, c2, (3, 3), padding=(1, 1))),
        ("conv2d_input_grad 8->16, (64,8,6,6)", lambda: conv2d_grad.run_input_grad(np, g2, w2, c2, padding=(1, 1))),
        ("max_pool2d_grad 2x2, (64,8,12,12)", lambda: pool.run_max_pool2d_grad(np, gp, c1)),
    ]
    rows = []
    for name, fn in cases:
        same_values(fn, exact="parallel" not in name)
        off, on = alternating(fn)
        rows.append([name, f"{off * 1e6:.1f}", f"{on * 1e6:.1f}", f"{off / on:.2f}x"])
    return rows


def model_rows():
    rng = np.random.default_rng(1)
    net = build_model("cnn")
    net.initialize()
    net.hybridize()
    x = la.array(rng.random((64, 1, 12, 12)).astype(np.float32))
    same_values(lambda: net(x).asnumpy(), exact=False)
    rows = []
    off, on = alternating(lambda: net(x).asnumpy(), budget=0.2)
    rows.append(["demo CNN inference, batch 64", f"{off * 1e6:.1f}", f"{on * 1e6:.1f}", f"{off / on:.2f}x"])
    loss_fn = B.SoftmaxCrossEntropyLoss()
    trainer = B.Trainer(net.collect_params(), B.SGD(learning_rate=0.01))
    y = la.array(rng.integers(0, 4, 64))

    def step():
        with la.autograd.record():
            loss = loss_fn(net(x), y)
        loss.backward()
        trainer.step(64)

    off, on = alternating(step, budget=0.3)
    rows.append(["demo CNN training step, batch 64", f"{off * 1e6:.1f}", f"{on * 1e6:.1f}", f"{off / on:.2f}x"])
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="one short round per row (a smoke run)")
    args = ap.parse_args(argv)
    if args.quick:
        ROUNDS[0], BUDGET[0] = 1, 0.05
    jit.set_enabled(True)
    if not jit.enabled():
        print("numba is not installed: nothing compiled to compare (pip install -e '.[jit]')")
        return
    headers = ["kernel (float32)", "NumPy us", "compiled us", "speedup"]
    print(table(headers, kernel_rows()))
    print()
    print(table(["model", "NumPy us", "compiled us", "speedup"], model_rows()))


if __name__ == "__main__":
    main()
