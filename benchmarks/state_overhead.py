"""Per-call cost of the hot paths that read process-wide state (issue #34: module-level state as
named caches and context variables): the thread count, relu's zero rows, a random draw, a
hybridized call (the block structure epoch), an eager conv2d (scratch arenas), a recorded chain
(chain keys) and an eager dense layer at batch 1.

    python benchmarks/state_overhead.py                      one table, this checkout
    python benchmarks/state_overhead.py --against OTHER      alternating runs of this checkout and
                                                             OTHER (a lazyarray source tree), medians

CPU time (``time.process_time``), the best of ``--rounds`` rounds per row (the machine may be shared).
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

sys.path.insert(0, os.path.dirname(__file__))
from _util import table  # noqa: E402


def per_call_us(fn, number: int, rounds: int) -> float:
    """Best of ``rounds`` rounds of ``number`` calls: CPU microseconds per call."""
    fn()
    best = float("inf")
    for _ in range(rounds):
        t0 = time.process_time()
        for _ in range(number):
            fn()
        best = min(best, (time.process_time() - t0) / number)
    return best * 1e6


def workloads():
    import lazyarray as la
    from lazyarray import threads

    relu_x = la.array(np.random.default_rng(0).standard_normal(1 << 16).astype(np.float32))
    dense = la.blocks.Dense(64, in_units=64)
    dense.initialize()
    one_row = la.array(np.ones((1, 64), np.float32))
    hybrid = la.blocks.Dense(8, in_units=8)
    hybrid.initialize()
    hybrid.hybridize()
    small = la.array(np.ones((2, 8), np.float32))
    conv = la.blocks.Conv2D(8, 3, padding=1, in_channels=4)
    conv.initialize()
    image = la.array(np.ones((1, 4, 16, 16), np.float32))
    leaf = la.array(np.ones((4,), np.float32))

    def chain():
        with la.deferred():
            y = leaf
            for _ in range(12):
                y = la.tanh(y) * 1.0001
        return y.asnumpy()

    return [
        ("threads.num_threads()", threads.num_threads, 20000),
        ("relu 64K float32 (zero rows)", lambda: la.relu(relu_x), 2000),
        ("random.uniform (4,)", lambda: la.random.uniform(size=(4,)), 5000),
        ("hybridized Dense(8) call", lambda: hybrid(small), 3000),
        ("eager Dense(64) batch 1", lambda: dense(one_row), 3000),
        ("eager Conv2D 4->8 16x16", lambda: conv(image), 500),
        ("record + run a 24-op chain", chain, 300),
    ]


def measure(rounds: int) -> dict:
    return {name: per_call_us(fn, number, rounds) for name, fn, number in workloads()}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--against", help="another lazyarray source tree: alternate runs, print medians")
    ap.add_argument("--runs", type=int, default=5, help="alternating runs per tree (with --against)")
    ap.add_argument("--json", action="store_true", help="print one JSON object (used by --against)")
    args = ap.parse_args(argv)
    if args.json:
        print(json.dumps(measure(args.rounds)))
        return 0
    if not args.against:
        rows = [[name, f"{us:.3f}"] for name, us in measure(args.rounds).items()]
        print(table(["workload", "CPU us / call"], rows))
        return 0
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    trees = {"other": os.path.abspath(args.against), "this": here}
    got: dict = {k: [] for k in trees}
    for _ in range(args.runs):
        for label, tree in trees.items():  # (alternating: both see the same machine load)
            env = dict(os.environ, PYTHONPATH=tree)
            out = subprocess.run([sys.executable, os.path.abspath(__file__), "--json", "--rounds", str(args.rounds)],
                                 env=env, capture_output=True, text=True, check=True, cwd=tree).stdout
            got[label].append(json.loads(out.strip().splitlines()[-1]))
    rows = []
    for name in got["this"][0]:
        other = statistics.median(r[name] for r in got["other"])
        this = statistics.median(r[name] for r in got["this"])
        rows.append([name, f"{other:.3f}", f"{this:.3f}", f"{this / other:.2f}x"])
    print(f"medians of {args.runs} alternating runs, each the best of {args.rounds} rounds (CPU us / call)")
    print(table(["workload", "other", "this", "this / other"], rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
