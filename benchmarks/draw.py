"""Graph drawing: time and SVG size for 100 / 1,000 / 10,000-node graphs.

Two graph shapes: a residual stack (a weight input per block, so no long linear chains)
and a plain elementwise chain (which collapses to a handful of boxes). Each is drawn with
the default box limit (collapsed beyond 200 boxes) and in full (``max_nodes=None``).

Run: ``python benchmarks/draw.py``
"""
from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _util import best_of, table

import lazyarray as la
from lazyarray.graph import draw


def residual(n_nodes: int):
    x = la.sym.var("x", shape=(8, 16))
    h = x
    for i in range((n_nodes - 1) // 4):
        h = h + la.sym.relu(la.sym.nn.dense(h, la.sym.var(f"w{i}", shape=(16, 16))))
    return h


def chain(n_nodes: int):
    x = la.sym.var("x", shape=(4, 4))
    y = x
    for i in range(n_nodes - 1):
        y = (y + x) if i % 2 else la.sym.relu(y)
    return y


def main() -> None:
    rows = []
    for shape, build in (("residual", residual), ("chain", chain)):
        for n in (100, 1_000, 10_000):
            sym = build(n)
            names = sym.names()
            nodes = len(sym.topo())
            for label, limit in (("default (200)", draw.DEFAULT_MAX_NODES), ("full", None)):
                svg = draw.to_svg(sym.outputs, names=names, max_nodes=limit)
                secs = best_of(lambda s=sym, nm=names, m=limit: draw.to_svg(s.outputs, names=nm, max_nodes=m),
                               repeat=3)
                boxes = svg.count("<title>")
                rows.append([shape, f"{nodes:,}", label, f"{boxes:,}", f"{secs * 1e3:.1f}",
                             f"{len(svg.encode()) / 1024:.0f}"])
    print(table(["graph", "nodes", "max_nodes", "boxes", "ms", "KiB"], rows))


if __name__ == "__main__":
    main()
