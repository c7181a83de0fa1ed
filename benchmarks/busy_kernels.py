"""The threaded kernels beside a process that keeps one core busy: the contention guard on and off.

Issue #35 item 3: a parallel region waits for its slowest thread, and when another process holds
a core the OS holds one back for a time slice (the batch-1 MLP's dense region: 28 us quiet, about
16 ms a call beside a busy core). ``kernels/contention.py`` times each region and, after a stall,
sends the threaded kernels to their one-thread paths for a back-off window. Four rows, one per
threaded kernel:

* **MLP b1**: a hybridized 784-512-512-10 ReLU MLP at batch 1 (``nn.dense[region]``);
* **CNN b64**: the demo CNN (``la.cli.build_model("cnn")``) at batch 64 (``conv2d[region]``);
* **split**: a 64->128 3x3 stride-2 conv of (64, 64, 32, 32) (``conv2d[split]``);
* **winograd**: a 64->64 3x3 conv of (16, 64, 32, 32) (``conv2d[winograd4]``, split over the pool);
* **dense 1 MFLOP**: the batch-8 ConvNeXt's pointwise layer, (512, 16) @ (64, 16).T (``nn.dense[stack]``,
  held at one BLAS thread by ``blas_threads``' size policy unless the small-product probe says OpenBLAS
  runs it on one thread anyway: the probe once said so from a one-thread run, and the product then
  shared BLAS's two threads and took 5-100 ms beside a busy core);
* **dense 67 MFLOP**: (512, 256) @ (256, 256).T, left to BLAS's threads by default; the "2t rows" column
  switches on ``nn.dense[row_blocks]`` (``blas_rows``, tuning ``blas_row_blocks``: row blocks over the pool,
  each on one BLAS thread); by default BLAS's threads (``blas_guard``, timed for the guard with ``contention_blas`` on: the "2t blas" column);
* **dense 210 MFLOP**: (400, 512) @ (512, 512).T, the same.

Per row, rounds alternate the burner (quiet, busy, busy, quiet, ...) and within each the variants
(one thread; two threads, guard as by default; two threads, guard off; two threads, the guard with
``contention_splits`` on, so the splits step aside too; two threads, the guard with ``contention_blas``
on, so BLAS's own threads step aside too); each keeps its median (wall time, a
budget of calls per round). The guard is reset when the burner switches (a window opened while busy
would otherwise run the next quiet round's first calls on one thread). Columns: the quiet
one-thread time, then each variant's time over it ("busy 2t on" is the issue's target: at most
1.3x), and the stalls the guard saw while busy. The machine may be shared: other processes load the quiet
columns too; the ratios come from the same run.

    python benchmarks/busy_kernels.py            # 5 rounds
    python benchmarks/busy_kernels.py --quick    # 2 short rounds: a smoke run
"""
from __future__ import annotations

import argparse
import importlib.util
import statistics
from pathlib import Path

import numpy as np

_spec = importlib.util.spec_from_file_location("_bench_util", Path(__file__).resolve().parent / "_util.py")
_util = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_util)

import lazyarray as la  # noqa: E402
from lazyarray import blocks as B  # noqa: E402
from lazyarray.cli import build_model  # noqa: E402
from lazyarray.kernels import contention  # noqa: E402
from lazyarray.kernels.conv2d import run_conv2d  # noqa: E402
from lazyarray.kernels.dense import run_dense  # noqa: E402


def workloads() -> dict:
    rng = np.random.default_rng(0)
    mlp = B.HybridSequential()
    mlp.add(B.Dense(512, activation="relu"), B.Dense(512, activation="relu"), B.Dense(10))
    mlp.initialize()
    mlp.hybridize()
    x1 = la.array(rng.standard_normal((1, 784)).astype("float32"))
    cnn = build_model("cnn")
    cnn.initialize()
    cnn.hybridize()
    x64 = la.array(rng.standard_normal((64, 1, 12, 12)).astype("float32"))
    xs, ws = rng.standard_normal((64, 64, 32, 32)).astype("float32"), rng.standard_normal((128, 64, 3, 3)).astype("float32")
    xw, ww = rng.standard_normal((16, 64, 32, 32)).astype("float32"), rng.standard_normal((64, 64, 3, 3)).astype("float32")
    xd, wd, bd = (rng.standard_normal(s).astype("float32") for s in ((8, 8, 8, 16), (64, 16), (64,)))
    xl, wl, bl = (rng.standard_normal(s).astype("float32") for s in ((512, 256), (256, 256), (256,)))
    xh, wh, bh = (rng.standard_normal(s).astype("float32") for s in ((400, 512), (512, 512), (512,)))
    return {
        "MLP b1 (dense region)": lambda: mlp(x1).asnumpy(),
        "CNN b64 (conv region)": lambda: cnn(x64).asnumpy(),
        "split 64->128 s2 b64": lambda: run_conv2d(np, xs, ws, None, stride=(2, 2), padding=(1, 1)),
        "winograd 64 b16": lambda: run_conv2d(np, xw, ww, None, stride=(1, 1), padding=(1, 1)),
        "dense 1 MFLOP (ConvNeXt b8)": lambda: run_dense(np, xd, wd, bd, np.empty((8, 8, 8, 64), "float32")),
        "dense 67 MFLOP (row blocks)": lambda: run_dense(np, xl, wl, bl),
        "dense 210 MFLOP (row blocks)": lambda: run_dense(np, xh, wh, bh),
    }


# (name, threads, tuning): one thread; two, the guard as it is by default; two, guard off; two, the guard
# with contention_splits on (the splits step aside too); two, with contention_blas on (BLAS's threads too,
# row blocks off); two, row blocks on (blas_rows.py: large products in row blocks, one BLAS thread each)
VARIANTS = (("1t", 1, {}), ("2t on", 2, {}), ("2t off", 2, {"contention_guard": False}),
            ("2t splits", 2, {"contention_splits": True}), ("2t blas", 2, {"contention_blas": True,
                                                                           "blas_row_blocks": False}),
            ("2t rows", 2, {"blas_row_blocks": True}))


def row(name, fn, burner, rounds, budget) -> list:
    times = {(busy, v): [] for busy in (False, True) for v, _, _ in VARIANTS}
    stalls = 0
    for r in range(rounds):
        for busy in ((False, True) if r % 2 == 0 else (True, False)):
            burner.busy(busy)
            contention.reset()
            k = r % len(VARIANTS)
            for v, n, settings in VARIANTS[k:] + VARIANTS[:k]:  # (each in every place of the order)
                la.set_num_threads(n)
                with la.tuning(**settings):
                    fn()
                    before = contention.guard().stalls
                    times[busy, v].append(_util.timed(fn, budget))
                    stalls += (contention.guard().stalls - before) if busy and v != "2t off" else 0
    burner.busy(False)
    med = {k: statistics.median(v) for k, v in times.items()}
    base = med[False, "1t"]
    return [name, f"{base * 1e3:.3f}", med[False, "2t on"] / base, med[True, "1t"] / base,
            med[True, "2t on"] / base, med[True, "2t off"] / base, med[True, "2t splits"] / base,
            med[True, "2t blas"] / base, med[False, "2t rows"] / base, med[True, "2t rows"] / base, stalls]


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="2 short rounds (a smoke run)")
    ap.add_argument("--rounds", type=int, default=None)
    ap.add_argument("--budget", type=float, default=None, help="seconds of calls per timed round")
    ap.add_argument("--only", default="", help="rows whose name contains this text")
    args = ap.parse_args(argv)
    rounds = args.rounds or (2 if args.quick else 5)
    budget = args.budget or (0.1 if args.quick else 0.3)
    rows = []
    with _util.Burner() as burner:
        for name, fn in workloads().items():
            if args.only in name:
                rows.append(row(name, fn, burner, rounds, budget))
    print("beside a process burning one core: time / quiet one-thread time (median of alternating rounds)")
    print(_util.table(["row", "quiet 1t ms", "quiet 2t", "busy 1t", "busy 2t on", "busy 2t off",
                       "busy 2t splits", "busy 2t blas", "quiet 2t rows", "busy 2t rows", "stalls"], rows))


if __name__ == "__main__":
    main()
