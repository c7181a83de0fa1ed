"""DataLoader throughput: images per second of ``la.data.DataLoader`` over in-memory images against a
bare NumPy slicing loop, with 0 workers, 2 worker threads and 2 worker processes.

Both sides hand out the same thing, a batch of lazyarray arrays ``(x, y)`` that the caller owns: the
bare loop is ``la.array(X[i:i + b]), la.array(Y[i:i + b])`` (sequential) or the same with a slice of a
permutation (shuffled). Every variant runs one epoch per round, the variants alternating within a
round; the table gives the median epoch of each and its ratio to the matching bare loop, measured
in the same run. Target: the 0-worker loader within 10% of the bare loop at batch 64.

    python benchmarks/data_loader.py            # 10,000 images 3x32x32 float32, batch 64
    python benchmarks/data_loader.py --quick    # a smoke run (the test suite's)
"""
from __future__ import annotations

import argparse
import importlib.util
import statistics
import time
from pathlib import Path

import numpy as np

import lazyarray as la

_spec = importlib.util.spec_from_file_location("_bench_util", Path(__file__).resolve().parent / "_util.py")
_util = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_util)


def bare_loop(images: np.ndarray, labels: np.ndarray, batch: int, order: np.ndarray | None) -> int:
    """One epoch by hand: slices (or permutation slices) copied into lazyarray arrays."""
    n = len(images)
    for i in range(0, n, batch):
        if order is None:
            x, y = la.array(images[i:i + batch]), la.array(labels[i:i + batch])
        else:
            idx = order[i:i + batch]
            x, y = la.array(images[idx]), la.array(labels[idx])
    assert x.shape[0] == y.shape[0]
    return n


def loader_epoch(loader, n: int) -> int:
    """One epoch of ``loader``, doing per batch what the bare loop does (nothing), so the loop's own
    work is what is compared."""
    for x, y in loader:
        pass
    assert x.shape[0] == y.shape[0]
    return n


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="1,000 images, 3 rounds, no process workers")
    ap.add_argument("--images", type=int, default=None)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=None)
    args = ap.parse_args(argv)
    n = args.images or (1000 if args.quick else 10_000)
    rounds = args.rounds or (3 if args.quick else 9)
    rng = np.random.default_rng(0)
    images = rng.standard_normal((n, 3, 32, 32), dtype=np.float32)
    labels = rng.integers(0, 10, n)
    ds = la.data.ArrayDataset(images, labels)
    b = args.batch

    loaders = {
        "DataLoader, 0 workers": (la.data.DataLoader(ds, batch_size=b), "sequential"),
        "DataLoader shuffle, 0 workers": (la.data.DataLoader(ds, batch_size=b, shuffle=True, seed=0), "shuffled"),
        "DataLoader shuffle, 2 threads": (la.data.DataLoader(ds, batch_size=b, shuffle=True, seed=0, num_workers=2),
                                          "shuffled"),
    }
    if not args.quick:
        loaders["DataLoader shuffle, 2 processes"] = (
            la.data.DataLoader(ds, batch_size=b, shuffle=True, seed=0, num_workers=2, thread_pool=False), "shuffled")
    perm = np.random.default_rng(1)
    variants = {"bare NumPy slicing": lambda: bare_loop(images, labels, b, None),
                "bare NumPy slicing, shuffled": lambda: bare_loop(images, labels, b, perm.permutation(n))}
    variants.update({name: (lambda ld=ld: loader_epoch(ld, n)) for name, (ld, _) in loaders.items()})
    for fn in variants.values():  # warm-up: workers start, caches fill
        assert fn() == n
    times: dict[str, list[float]] = {name: [] for name in variants}
    for r in range(rounds):
        names = list(variants) if r % 2 == 0 else list(reversed(variants))  # alternate the order too
        for name in names:
            t0 = time.perf_counter()
            variants[name]()
            times[name].append(time.perf_counter() - t0)
    for ld, _ in loaders.values():
        ld.close()

    med = {name: statistics.median(ts) for name, ts in times.items()}
    base = {"sequential": med["bare NumPy slicing"], "shuffled": med["bare NumPy slicing, shuffled"]}
    kind = {"bare NumPy slicing": "sequential", "bare NumPy slicing, shuffled": "shuffled",
            **{name: k for name, (_, k) in loaders.items()}}
    rows = [[name, f"{n / med[name]:,.0f}", f"{med[name] * 1e3:.1f}", f"{med[name] / base[kind[name]]:.2f}x"]
            for name in variants]
    print(f"{n} images 3x32x32 float32, batch {b}, median of {rounds} epochs per variant (alternating)")
    print(_util.table(["loop", "images/s", "epoch ms", "time vs bare loop"], rows))
    overhead = med["DataLoader, 0 workers"] / base["sequential"] - 1
    print(f"overhead of the 0-worker DataLoader at batch {b}: {overhead * 100:+.1f}% (target <= +10%)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
