"""MXNet 1.x models in lazyarray: load time and hybridized inference time, next to MXNet 1.9.1.

For each fixture model of ``tests/data/mxnet/models`` (real ``HybridBlock.export`` output of
MXNet 1.9.1: ResNet-18 v1 at 1/8 width and mobilenet0.25 on 3x64x64 images, an MLP, an
Embedding text classifier):

* load: ``SymbolBlock.imports(symbol, ["data"], params)`` (parse, convert, check, bind);
* inference at batch 1 and 32: a hybridized call, value materialized (best of 3 rounds).

MXNet's column comes from ``tests/data/mxnet/mxnet_timings.json``, recorded by
``make_fixtures.py`` on this machine (``gluon.SymbolBlock.imports``; ``hybridize(static_alloc=True,
static_shape=True)``, ``wait_to_read``), in the same way: a warm-up call, then best of 3 rounds.

    python benchmarks/mxnet_models.py [--quick]
"""
from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _util import table

import lazyarray as la

DATA = Path(__file__).resolve().parent.parent / "tests" / "data" / "mxnet"


def best(fn, repeat: int) -> float:
    fn()
    times = []
    for _ in range(3):
        t0 = time.perf_counter()
        for _ in range(repeat):
            fn()
        times.append((time.perf_counter() - t0) / repeat)
    return min(times)


def main(quick: bool = False) -> None:
    with open(DATA / "mxnet_timings.json") as f:
        ref = json.load(f)
    rows = []
    for name, mx in ref["models"].items():
        prefix = str(DATA / "models" / name)
        files = (prefix + "-symbol.json", prefix + "-0000.params")
        t0 = time.perf_counter()
        n_load = 2 if quick else 5
        for _ in range(n_load):
            net = la.blocks.SymbolBlock.imports(files[0], ["data"], files[1])
        load_s = (time.perf_counter() - t0) / n_load
        net.hybridize()
        x = np.load(prefix + "-input.npy")
        row = [name, f"{mx['params']:,}", load_s * 1e3, mx["load_s"] * 1e3]
        for batch in (1, 32):
            xb = la.array(np.resize(x, (batch,) + x.shape[1:]))
            t = best(lambda v=xb, m=net: m(v).asnumpy(), (3 if quick else 20) if batch == 1 else (1 if quick else 5))
            ref_t = mx[f"infer_b{batch}_s"]
            row += [t * 1e3, ref_t * 1e3, f"{t / ref_t:.1f}x"]
        rows.append(row)
    print(f"MXNet column: MXNet {ref['mxnet']} (NumPy {ref['numpy']}, Python {ref['python']}), recorded by "
          f"tests/data/mxnet/make_fixtures.py; lazyarray: NumPy {np.__version__}, {os.cpu_count()} CPUs visible")
    print(table(["model", "params", "load ms", "MXNet load ms", "b1 ms", "MXNet b1 ms", "b1 ratio",
                 "b32 ms", "MXNet b32 ms", "b32 ratio"], rows))


if __name__ == "__main__":
    main(quick="--quick" in sys.argv)
