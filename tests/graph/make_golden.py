"""Write the golden files of the current schema version (run once per version, by hand).

    python tests/graph/make_golden.py 2

Files of a version are written by the release that introduced it and never regenerated
(tests/graph/test_golden_files.py). v2 adds graphs whose op attributes hold sub-graphs:
control flow (cond, while_loop, foreach) and a fused elementwise group.
"""
from __future__ import annotations

import json
import os
import sys

import numpy as np

import lazyarray as la
from lazyarray import blocks as B

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "golden")


def main(version: int) -> None:
    rng = np.random.default_rng(version)
    av = rng.standard_normal((3, 4)).astype(np.float32)
    bv = rng.standard_normal(4).astype(np.float32)
    a, b = la.array(av), la.array(bv)
    with la.deferred():
        y = la.cond(la.sum(a) > 0, lambda u, v: u * v, lambda u, v: u - v, a, b)
        outs, h = la.foreach(lambda row, s: (la.tanh(row + s), row + s), a, b)
        i, s = la.while_loop(lambda i, s: i < 3, lambda i, s: (i + 1, s * 1.5), (la.array(0), la.sum(y)))
        z = la.tanh(a * b) + 1  # an elementwise group: a fused node in the compiled graph
    sym = la.CachedOp(la.get_symbol([y, outs, h, s, z], inputs={"a": a, "b": b})).compiled()
    path = os.path.join(HERE, f"v{version}-ops-symbol.json")
    sym.save(path)
    got = la.CachedOp(la.load_symbol(path))(a=a, b=b)
    net = B.HybridSequential()
    net.add(B.Conv2D(3, 3, in_channels=2), B.Activation("relu"), B.Flatten(), B.Dense(4, in_units=3 * 4 * 4))
    net.initialize()
    net.hybridize()
    x = rng.standard_normal((2, 2, 6, 6)).astype(np.float32)
    yn = net(la.array(x)).asnumpy()
    net.export(os.path.join(HERE, f"v{version}-cnn"))
    expected = {"cnn": {"x": x.tolist(), "y": yn.tolist()},
                "ops": {"a": av.tolist(), "b": bv.tolist(), "outputs": [g.asnumpy().tolist() for g in got]}}
    with open(os.path.join(HERE, f"v{version}-expected.json"), "w") as f:
        json.dump(expected, f)
    print(json.load(open(path))["version"], [n["op"] for n in json.load(open(path))["nodes"] if n["op"]])


if __name__ == "__main__":
    main(int(sys.argv[1]))
