"""conv2d on two threads: ResNet-18 CIFAR's convolutions at batch 64, one call per layer shape.

Three variants, like with like in one run: one thread; two threads where only BLAS uses them
(the tuning table's ``min_split_macs`` set out of reach: the products threaded, the padding, im2col and
Winograd transforms on one core, as before issue #15's thread splits); and two threads with the
batch split into chunks of images over the pool (``threads.split``, BLAS on one thread inside).
Rounds alternate the variants and each keeps its median; speedups are against one thread.

The machine is shared: a first row times two independent single-threaded matmuls on the pool
against the same two in a row. Near 2.0x both cores were free; near 1.0x another process held
one, and the two-thread columns say nothing (OpenBLAS's own threads then collapse: they spin).

    python benchmarks/conv_threads.py            # run WITHOUT OMP_NUM_THREADS=1 in the environment
    python benchmarks/conv_threads.py --quick    # small batch, few rounds
"""
from __future__ import annotations

import argparse
import importlib.util
import statistics
import sys
from pathlib import Path

import numpy as np

_spec = importlib.util.spec_from_file_location("_bench_util", Path(__file__).resolve().parent / "_util.py")
_util = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_util)

import lazyarray as la  # noqa: E402
from lazyarray import threads  # noqa: E402
from lazyarray.kernels.conv2d import run_conv2d as _conv2d  # noqa: E402

# (name, input (C, H, W), weight (O, C, kh, kw), stride, padding): every distinct conv of ResNet-18 CIFAR
LAYERS = [
    ("stem 3->64 3x3", (3, 32, 32), (64, 3, 3, 3), 1, 1),
    ("64 3x3 (winograd)", (64, 32, 32), (64, 64, 3, 3), 1, 1),
    ("64->128 3x3 s2", (64, 32, 32), (128, 64, 3, 3), 2, 1),
    ("64->128 1x1 s2", (64, 32, 32), (128, 64, 1, 1), 2, 0),
    ("128 3x3 (winograd)", (128, 16, 16), (128, 128, 3, 3), 1, 1),
    ("128->256 3x3 s2", (128, 16, 16), (256, 128, 3, 3), 2, 1),
    ("256 3x3 (winograd)", (256, 8, 8), (256, 256, 3, 3), 1, 1),
    ("256->512 3x3 s2", (256, 8, 8), (512, 256, 3, 3), 2, 1),
    ("512 3x3 (winograd)", (512, 4, 4), (512, 512, 3, 3), 1, 1),
]


def core_check(rounds: int) -> float:
    """Serial time / pooled time of two independent one-thread matmuls (2.0: two free cores)."""
    a = np.random.default_rng(0).standard_normal((384, 384)).astype(np.float32)

    def mm(_=None):
        for _ in range(20):
            a @ a

    serial, pooled = [], []
    la.set_num_threads(2)
    for _ in range(rounds):
        with threads._BLAS:
            serial.append(_util.best_of(lambda: (mm(), mm()), 1))
            pooled.append(_util.best_of(lambda: list(threads._pool().map(mm, range(2))), 1))
    return statistics.median(serial) / statistics.median(pooled)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--batch", type=int, default=None)
    ap.add_argument("--rounds", type=int, default=None)
    args = ap.parse_args(argv)
    batch = args.batch or (8 if args.quick else 64)
    rounds, reps = (args.rounds or (3 if args.quick else 7)), (2 if args.quick else 3)
    rng = np.random.default_rng(0)
    split_at = la.config.min_split_macs
    variants = [("1t", 1, split_at), ("2t BLAS only", 2, 1 << 62), ("2t split", 2, split_at)]
    before = threads.num_threads()
    rows, totals = [], {v[0]: 0.0 for v in variants}
    print(f"core check: two one-thread matmuls pooled vs in a row: {core_check(rounds):.2f}x (2.0 = two free cores)")
    try:
        for name, xs, ws, s, p in LAYERS:
            x = rng.standard_normal((batch, *xs)).astype(np.float32)
            w = (rng.standard_normal(ws) / np.sqrt(np.prod(ws[1:]))).astype(np.float32)
            ho = (xs[1] + 2 * p - ws[2]) // s + 1
            out = np.empty((batch, ws[0], ho, ho), np.float32)
            ref = _conv2d(np, x, w, stride=(s, s), padding=(p, p))

            def call(x=x, w=w, s=s, p=p, out=out):
                return _conv2d(np, x, w, stride=(s, s), padding=(p, p), out=out)

            times = {v[0]: [] for v in variants}
            for r in range(rounds):
                for label, t, macs in (variants if r % 2 == 0 else variants[::-1]):
                    la.set_num_threads(t)
                    la.config.min_split_macs = macs
                    np.testing.assert_allclose(call(), ref, rtol=1e-4, atol=1e-4)
                    times[label].append(_util.best_of(call, reps))
            m = {k: statistics.median(v) * 1e3 for k, v in times.items()}
            for k in totals:
                totals[k] += m[k]
            rows.append([name, *(f"{m[k]:.2f}" for k in m), f"{m['1t'] / m['2t BLAS only']:.2f}x",
                         f"{m['1t'] / m['2t split']:.2f}x"])
    finally:
        la.config.min_split_macs = split_at
        la.set_num_threads(before)
    rows.append(["sum of one call per shape", *(f"{v:.2f}" for v in totals.values()),
                 f"{totals['1t'] / totals['2t BLAS only']:.2f}x", f"{totals['1t'] / totals['2t split']:.2f}x"])
    print(f"conv2d at batch {batch}, ms per call (median of {rounds} alternating rounds)")
    print(_util.table(["layer", "1 thread", "2t BLAS only", "2t split", "speedup BLAS only", "speedup split"], rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
