"""Eager dispatch overhead: 1000 sequential ``y = y + x`` on 4x4 and on 1M-element float32 arrays.

Targets (issue 2): tiny arrays <= 3x raw NumPy per op; 1M-element ops within 1.1x of NumPy.

    python benchmarks/eager_dispatch.py
"""
from __future__ import annotations

import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from _util import best_of, table  # noqa: E402

import lazyarray as la  # noqa: E402

N_OPS = 1000


def chain_numpy(x, y):
    for _ in range(N_OPS):
        y = y + x
    return y


def chain_lazyarray(x, y):
    for _ in range(N_OPS):
        y = y + x
    return y


def main():
    rows = []
    for label, shape, repeat in (("4x4", (4, 4), 31), ("1M", (1000, 1000), 5)):
        xn = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
        yn = np.zeros(shape, np.float32)
        xl, yl = la.array(xn), la.array(yn)
        # Interleaved rounds, fastest kept: both sides see the same machine state, and the
        # minimum is the least noisy estimate of a tight loop's cost on a shared machine.
        t_np = t_la = float("inf")
        for _ in range(repeat):
            t_np = min(t_np, best_of(lambda xn=xn, yn=yn: chain_numpy(xn, yn), repeat=1) / N_OPS * 1e6)
            t_la = min(t_la, best_of(lambda xl=xl, yl=yl: chain_lazyarray(xl, yl), repeat=1) / N_OPS * 1e6)
        np.testing.assert_allclose(chain_lazyarray(xl, yl).asnumpy(), chain_numpy(xn, yn), rtol=1e-5)
        target = 3.0 if label == "4x4" else 1.1
        rows.append([f"add {label} f32", t_np, t_la, t_la / t_np, f"<= {target}x",
                     "ok" if t_la / t_np <= target else "MISSED"])
    print(table(["workload", "numpy us/op", "lazyarray us/op", "ratio", "target", ""], rows))


if __name__ == "__main__":
    main()
