"""Write the golden files of the current schema version (run once per version, by hand).

    python tests/graph/make_golden.py 3

Files of a version are written by the release that introduced it and never regenerated
(tests/graph/test_golden_files.py). v2 adds graphs whose op attributes hold sub-graphs:
control flow (cond, while_loop, foreach) and a fused elementwise group. v3 adds symbolic dims
(la.Dim) in shapes and size attributes, and pinned graph inputs.
"""
from __future__ import annotations

import json
import os
import sys

import numpy as np

import lazyarray as la
from lazyarray import blocks as B

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "golden")


def _cnn(rng):
    """The golden CNN, hybridized and called once: (net, x, its output)."""
    net = B.HybridSequential()
    net.add(B.Conv2D(3, 3, in_channels=2), B.Activation("relu"), B.Flatten(), B.Dense(4, in_units=3 * 4 * 4))
    net.initialize()
    net.hybridize()
    x = rng.standard_normal((2, 2, 6, 6)).astype(np.float32)
    return net, x, net(la.array(x)).asnumpy()


def main_v3() -> None:
    """v3: symbolic dims. A CNN exported to ONNX with a dynamic batch and loaded back (its symbol's
    data input is ``(batch, 2, 6, 6)``), and a graph whose shapes and size attributes are ``la.Dim``
    expressions (reshape to ``2*n``, iota of ``n``, a slice to ``n - 1``, fill, dim_values)."""
    version = 3
    rng = np.random.default_rng(version)
    av = rng.standard_normal((3, 4)).astype(np.float32)
    bv = rng.standard_normal(4).astype(np.float32)
    n = la.Dim("n")
    a, b = la.sym.var("a", shape=(n, 4)), la.sym.var("b", shape=(4,))
    r = la.sym.reshape(la.sym.multiply(a, b), shape=(2 * n, 2))
    i = la.sym.cast(la.sym.iota(bounds=(0, n, 1)), dtype="float32")
    s = la.sym.getitem(a, key=(slice(1, None),))
    f = la.sym.add(la.sym.fill(shape=(n, 2), value=1.5, dtype="float32"), la.sym.getitem(r, key=(slice(0, n),)))
    d = la.sym.cast(la.sym.dim_values(values=(n, 4), shape=(2,)), dtype="float32")
    sym = la.Symbol([e for x in (r, i, s, f, d) for e in x.outputs])
    path = os.path.join(HERE, f"v{version}-ops-symbol.json")
    sym.save(path)
    got = la.CachedOp(la.load_symbol(path))(a=la.array(av), b=la.array(bv))
    net, x, yn = _cnn(rng)
    onnx_path = os.path.join(HERE, "cnn.onnx")
    la.onnx.export(net, onnx_path)
    loaded = B.SymbolBlock.imports(onnx_path, ["data"])
    os.remove(onnx_path)
    loaded.export(os.path.join(HERE, f"v{version}-cnn"))
    expected = {"cnn": {"x": x.tolist(), "y": yn.tolist()},
                "ops": {"a": av.tolist(), "b": bv.tolist(), "outputs": [g.asnumpy().tolist() for g in got]}}
    with open(os.path.join(HERE, f"v{version}-expected.json"), "w") as f:
        json.dump(expected, f)
    print(json.load(open(path))["version"], [n["op"] for n in json.load(open(path))["nodes"] if n["op"]])


def main(version: int) -> None:
    if version == 3:
        return main_v3()
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
    net, x, yn = _cnn(rng)
    net.export(os.path.join(HERE, f"v{version}-cnn"))
    expected = {"cnn": {"x": x.tolist(), "y": yn.tolist()},
                "ops": {"a": av.tolist(), "b": bv.tolist(), "outputs": [g.asnumpy().tolist() for g in got]}}
    with open(os.path.join(HERE, f"v{version}-expected.json"), "w") as f:
        json.dump(expected, f)
    print(json.load(open(path))["version"], [n["op"] for n in json.load(open(path))["nodes"] if n["op"]])


if __name__ == "__main__":
    main(int(sys.argv[1]))
