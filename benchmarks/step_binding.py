"""The fixed cost of a compiled program's replay, where each step calls its bound choice
(``kernels.bind``, ``executor/binding.py``) instead of its op's runner and chooser.

Per workload, CPU microseconds per call (``time.process_time`` over many calls, the best of
``--rounds`` rounds):

* demo CNN, batch 1, hybridized (``lazyarray.cli.build_model("cnn")``, x (1, 1, 12, 12)): the row of
  issue #34 ("every benchmark within 3% of b166d05");
* the MLP 784-512-512-10, batch 1, hybridized;
* the 1,000-op chain's cached replay (``small_graphs.py``'s ``CachedOp`` column; #40's target 0.1 ms);
* the MLP's Gluon-style training step at batch 64 (``training_loop.py``'s ``gluon_setup``).

``--against DIR [DIR ...]`` runs the same measurement in fresh processes for this checkout and each
other lazyarray source tree, alternating (every tree sees the same machine load), and prints the
medians of ``--runs`` runs with each tree's ratio to this one.

    python benchmarks/step_binding.py
    python benchmarks/step_binding.py --against /work/wt-base166 /work/main --runs 5
    python benchmarks/step_binding.py --against /work/main --only CNN,chain --threads 1
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _util import table

import lazyarray as la


def _cnn():
    from lazyarray.cli import build_model
    la.random.seed(0)
    net = build_model("cnn")
    net.initialize()
    net.hybridize()
    x = la.array(np.random.default_rng(0).random((1, 1, 12, 12)).astype("float32"))
    return lambda: net(x)


def _mlp():
    net = la.blocks.HybridSequential()
    net.add(la.blocks.Dense(512, activation="relu"), la.blocks.Dense(512, activation="relu"), la.blocks.Dense(10))
    net.initialize()
    net.hybridize()
    x = la.array(np.random.default_rng(1).random((1, 784)).astype("float32"))
    return lambda: net(x)


def _chain():
    x = la.sym.var("x", shape=(4, 4), dtype="float32")
    y = x
    for _ in range(500):
        y = y * 0.999
        y = y + 0.001
    op = la.CachedOp(y)
    xa = la.array(np.random.default_rng(2).random((4, 4)).astype("float32"))
    return lambda: op(xa)


def _training_step():
    import training_loop
    from mlp_step import init_params
    rng = np.random.default_rng(0)
    step, _, _ = training_loop.gluon_setup(64, rng, init_params(rng))
    return step


WORKLOADS = (("demo CNN b1 hybridized call", _cnn, 1500), ("MLP 784-512-512-10 b1 hybridized call", _mlp, 500),
             ("chain of 1000 ops, cached replay", _chain, 1500),
             ("MLP training step b64 (training_loop.py's Gluon style)", _training_step, 40))


def per_call_us(fn, number: int, rounds: int) -> float:
    for _ in range(min(200, number)):
        fn()
    best = float("inf")
    for _ in range(rounds):
        start = time.process_time()
        for _ in range(number):
            fn()
        best = min(best, (time.process_time() - start) / number * 1e6)
    return best


def measure(rounds: int, only: str = "") -> dict:
    return {name: per_call_us(make(), number, rounds) for name, make, number in WORKLOADS
            if not only or any(w in name for w in only.split(","))}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--against", nargs="+", help="other lazyarray source trees: alternate runs, print medians")
    ap.add_argument("--runs", type=int, default=3, help="alternating runs per tree (with --against)")
    ap.add_argument("--json", action="store_true", help="print one JSON object (used by --against)")
    ap.add_argument("--only", default="", help="workloads whose name contains one of these words (comma-separated)")
    ap.add_argument("--threads", type=int, default=0,
                    help="with --against: OMP_NUM_THREADS for the children (1: no BLAS threads spinning on a busy machine)")
    args = ap.parse_args(argv)
    if args.json:
        print(json.dumps(measure(args.rounds, args.only)))
        return 0
    if not args.against:
        print(table(["workload", "CPU us / call"], [[k, f"{v:.2f}"] for k, v in measure(args.rounds, args.only).items()]))
        return 0
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    trees = {"this": here, **{os.path.basename(os.path.abspath(d)): os.path.abspath(d) for d in args.against}}
    got: dict = {k: [] for k in trees}
    for _ in range(args.runs):
        for label, tree in trees.items():  # (alternating: every tree sees the same machine load)
            env = dict(os.environ, PYTHONPATH=tree, **({"OMP_NUM_THREADS": str(args.threads)} if args.threads else {}))
            out = subprocess.run([sys.executable, os.path.abspath(__file__), "--json", "--rounds", str(args.rounds),
                                  "--only", args.only],
                                 env=env, capture_output=True, text=True, check=True, cwd=tree).stdout
            got[label].append(json.loads(out.strip().splitlines()[-1]))
            print(label, got[label][-1], file=sys.stderr, flush=True)  # (progress, for long runs)
    head = ["workload"] + [f"{k} (us)" for k in trees] + [f"this / {k}" for k in trees if k != "this"]
    rows = []
    for name in got["this"][0]:
        med = {k: statistics.median(r[name] for r in runs) for k, runs in got.items()}
        rows.append([name] + [f"{med[k]:.2f}" for k in trees] + [f"{med['this'] / med[k]:.3f}x" for k in trees
                                                                  if k != "this"])
    threads = f", OMP_NUM_THREADS={args.threads}" if args.threads else ""
    print(f"medians of {args.runs} alternating fresh-process runs, each the best of {args.rounds} rounds "
          f"(CPU us / call{threads})")
    print(table(head, rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
