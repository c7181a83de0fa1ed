"""Executor overhead: a 200-node elementwise graph on 4x4 float32 arrays.

Prints microseconds per node through a CachedOp, eager lazyarray and raw NumPy (measured
in the same run, medians of repeats), and the CachedOp's overhead beyond the kernels.
Target: <= 1.5 us per node of overhead beyond raw NumPy.

    python benchmarks/executor_overhead.py
"""
from __future__ import annotations

import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))

from _util import best_of  # noqa: E402

import lazyarray as la  # noqa: E402

NODES = 200
OPS = ("add", "multiply", "tanh", "subtract", "maximum")


def chain(mod, x, y):
    """The same 200-op chain for lazyarray (``la``) or NumPy (``np``)."""
    h = x
    for i in range(NODES):
        k = OPS[i % len(OPS)]
        if k == "tanh":
            h = mod.tanh(h)
        else:
            h = getattr(mod, k)(h, y if i % 2 else x)
    return h


def main() -> None:
    rng = np.random.default_rng(0)
    xn = rng.standard_normal((4, 4)).astype("float32")
    yn = rng.standard_normal((4, 4)).astype("float32")
    x, y = la.array(xn), la.array(yn)
    with la.deferred():
        out = chain(la, x, y)
    op = la.CachedOp(la.get_symbol(out, inputs={"x": x, "y": y}))
    np.testing.assert_allclose(op(x, y).asnumpy(), chain(np, xn, yn), rtol=1e-5)
    steps = len(next(iter(op._cache.values())).program.steps)

    t_np = best_of(lambda: chain(np, xn, yn), repeat=15, number=20)
    t_eager = best_of(lambda: chain(la, x, y), repeat=15, number=20)
    t_cached = best_of(lambda: op(x, y), repeat=15, number=20)
    us = 1e6 / NODES
    rows = [("raw NumPy", t_np), ("eager lazyarray", t_eager), ("CachedOp", t_cached)]
    print(f"{NODES}-node elementwise graph on 4x4 float32 ({steps} compiled steps)")
    print(f"{'engine':<18}{'us / node':>10}{'x NumPy':>10}")
    for name, t in rows:
        print(f"{name:<18}{t * us:>10.3f}{t / t_np:>10.2f}")
    overhead = (t_cached - t_np) * us
    print(f"CachedOp overhead beyond the kernels: {overhead:.3f} us / node (target <= 1.5)")
    print(f"CachedOp vs eager lazyarray: {t_eager / t_cached:.2f}x faster")


if __name__ == "__main__":
    main()
