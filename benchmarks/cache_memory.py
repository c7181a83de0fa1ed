"""Compile caches under many input shapes: one ``CachedOp`` fed 5,500 distinct shapes, and a
hybridized CNN fed 500 batch sizes, with the default bounded cache against an unbounded one.

Reports the programs kept and the memory they hold (tracemalloc, MiB). Target: memory bounded
by the cache size (default 64 signatures, ``LAZYARRAY_CACHE_SIZE``), not by the shapes seen.

    python benchmarks/cache_memory.py
"""
from __future__ import annotations

import gc
import os
import sys
import time
import tracemalloc
import warnings

sys.path.insert(0, os.path.dirname(__file__))
from _util import table  # noqa: E402

import lazyarray as la  # noqa: E402
from lazyarray import blocks as nn  # noqa: E402

SHAPES = 5500
BATCHES = 500


def cached_op_run(cache_size):
    x = la.sym.var("x")
    op = la.CachedOp(la.sym.sum(la.sym.relu(la.sym.tanh(x) * 2 + 1)), cache_size=cache_size)
    gc.collect()
    tracemalloc.start()
    t0 = time.perf_counter()
    for n in range(1, SHAPES + 1):
        op(la.ones((n % 110 + 1, n // 110 + 1)))
    secs = time.perf_counter() - t0
    gc.collect()
    mem = tracemalloc.get_traced_memory()[0] / 2**20
    tracemalloc.stop()
    return len(op._cache), op.num_compiles, mem, secs


def cnn_run(cache_size):
    net = nn.HybridSequential()
    net.add(nn.Conv2D(8, 3, in_channels=1, padding=1, activation="relu"), nn.MaxPool2D(2), nn.Flatten(), nn.Dense(10))
    net.initialize()
    net.hybridize(cache_size=cache_size)
    gc.collect()
    tracemalloc.start()
    t0 = time.perf_counter()
    for b in range(1, BATCHES + 1):
        net(la.ones((b, 1, 8, 8)))
    secs = time.perf_counter() - t0
    gc.collect()
    mem = tracemalloc.get_traced_memory()[0] / 2**20
    tracemalloc.stop()
    return len(net._by_sig), net.cached_op.num_compiles, mem, secs


def main() -> None:
    rows = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", la.RecompileWarning)
        for label, fn, n in (("CachedOp", cached_op_run, SHAPES), ("hybridized CNN", cnn_run, BATCHES)):
            for size in (None, 10**9):
                kept, compiles, mem, secs = fn(size)
                rows.append([f"{label}, {n} shapes", "default (64)" if size is None else "unbounded", kept,
                             compiles, f"{mem:.1f}", f"{secs:.1f}"])
    print("Compile caches under many shapes. Target: memory bounded by the cache size")
    print(table(["workload", "cache", "signatures kept", "compiles", "MiB held after", "seconds"], rows))


if __name__ == "__main__":
    main()
