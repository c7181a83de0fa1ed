"""Record a 1000-op elementwise chain under ``la.deferred()``, then ``asnumpy()`` (issue #16).

The chain alternates ``la.tanh(y)`` and ``y * 1.0001`` on 1000 float32. Reported in µs per op:

* **record**: the ``with la.deferred():`` block alone;
* **cold**: ``asnumpy()`` the first time this structure is seen (the graph cache is cleared
  before each cold round);
* **warm**: ``asnumpy()`` of the same structure recorded again on new input values;
* the same chain run eagerly by lazyarray and by NumPy, for reference.

Rounds alternate cold and warm; each phase reports the median and the fastest of its rounds (a
busy, shared machine slows some rounds: the fastest shows the cost without the neighbours). Run it against another checkout for a
before/after table: ``PYTHONPATH=/work/main python benchmarks/deferred_chain.py`` (a checkout
without the graph cache runs every round cold).

Target: record + warm asnumpy() <= 3 µs per op.

    OMP_NUM_THREADS=1 python benchmarks/deferred_chain.py [--ops 1000] [--rounds 15]
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _util import table  # noqa: E402

import lazyarray as la  # noqa: E402

try:
    from lazyarray.executor.recorded import clear as clear_cache
except ImportError:  # a checkout without the graph cache: every round is cold
    def clear_cache():
        pass

TITLE = "record 1000-op elementwise chain under la.deferred() then asnumpy(), µs/op"


def chain(mod, x, n_ops):
    y = x
    for i in range(n_ops):
        y = mod.tanh(y) if i % 2 == 0 else y * 1.0001
    return y


def one_round(n_ops, size, seed, cold):
    """(record s, asnumpy s) of one recording on fresh input values."""
    xn = np.random.default_rng(seed).random(size).astype("float32")
    x = la.array(xn)
    if cold:
        clear_cache()
    t0 = time.perf_counter()
    with la.deferred():
        y = chain(la, x, n_ops)
    t1 = time.perf_counter()
    out = y.asnumpy()
    t2 = time.perf_counter()
    if seed < 2:  # the values are NumPy's (checked outside the timed rounds' statistics)
        np.testing.assert_allclose(out, chain(np, xn, n_ops), rtol=1e-5)
    return t1 - t0, t2 - t1


def measure(n_ops=1000, size=1000, rounds=15):
    xn = np.random.default_rng(0).random(size).astype("float32")
    x = la.array(xn)
    for seed in range(3):  # warm up imports, the rule memo and the cache
        one_round(n_ops, size, seed, cold=False)
    rec, cold, warm, eager, numpy_t = [], [], [], [], []
    for r in range(rounds):
        t_rec, t_cold = one_round(n_ops, size, 10 + 2 * r, cold=True)
        rec.append(t_rec)
        cold.append(t_cold)
        one_round(n_ops, size, 11 + 2 * r, cold=False)  # seen twice: compiled and cached
        t_rec, t_warm = one_round(n_ops, size, 12 + 2 * r, cold=False)
        rec.append(t_rec)
        warm.append(t_warm)
        t0 = time.perf_counter()
        chain(la, x, n_ops)
        t1 = time.perf_counter()
        chain(np, xn, n_ops)
        t2 = time.perf_counter()
        eager.append(t1 - t0)
        numpy_t.append(t2 - t1)
    us = 1e6 / n_ops
    series = (("record", rec), ("cold", cold), ("warm", warm), ("eager", eager), ("numpy", numpy_t))
    return {k: statistics.median(v) * us for k, v in series}, {k: min(v) * us for k, v in series}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ops", type=int, default=1000)
    ap.add_argument("--size", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=15)
    args = ap.parse_args()
    m, best = measure(args.ops, args.size, args.rounds)
    print(TITLE if args.ops == 1000 else TITLE.replace("1000-op", f"{args.ops}-op"))
    print(f"({args.size} float32 values, {args.rounds} rounds, lazyarray from {os.path.dirname(la.__file__)})")
    phases = [("record (with la.deferred(): ...)", ("record",)),
              ("asnumpy(), cold (structure not seen before)", ("cold",)),
              ("asnumpy(), warm (same structure, new values)", ("warm",)),
              ("record + asnumpy(), cold", ("record", "cold")),
              ("record + asnumpy(), warm", ("record", "warm")),
              ("eager lazyarray", ("eager",)),
              ("eager NumPy", ("numpy",))]
    rows = [[name, f"{sum(m[k] for k in keys):.2f}", f"{sum(best[k] for k in keys):.2f}"] for name, keys in phases]
    print(table(["phase", "median µs / op", "fastest µs / op"], rows))
    print(f"\nrecord + warm asnumpy() = {(m['record'] + m['warm']) / m['numpy']:.1f}x eager NumPy "
          f"(medians; target: <= 3 µs per op)")


if __name__ == "__main__":
    main()
