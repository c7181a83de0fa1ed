"""pool_relu: relu(max_pool2d(x)) -> nn.max_pool2d_relu(x) in inference graphs, with equal values bit
for bit (NaN, -inf, padding and ceil-mode windows included), only where the pool feeds nothing else,
and off with the tuning table's ``pool_relu``."""
from __future__ import annotations

import numpy as np
import pytest

import lazyarray as la
from lazyarray import blocks as B
from lazyarray.graph.passes.pool_relu import pool_relu

RNG = np.random.default_rng(1)


def _ops(sym):
    return [n.op.name for n in sym.topo() if n.op is not None]


@pytest.mark.parametrize("params", [
    {},
    {"kernel": (3, 3), "stride": (2, 2)},
    {"kernel": (3, 3), "stride": (2, 2), "padding": (1, 1)},
    {"kernel": (3, 2), "stride": (2, 2), "ceil_mode": True},
], ids=["2x2", "3x3-s2", "3x3-s2-p1", "ceil"])
@pytest.mark.parametrize("dtype", ["float32", "float64", "int32"])
def test_fused_and_values_equal(params, dtype, run_symbol):
    x = la.sym.var("x", shape=(2, 3, 7, 7), dtype=dtype)
    sym = la.sym.relu(la.sym.nn.max_pool2d(x, **params))
    out = pool_relu(sym).check()
    assert _ops(out) == ["max_pool2d_relu"]
    v = (RNG.standard_normal((2, 3, 7, 7)) * 4).astype(dtype)
    if v.dtype.kind == "f":
        v[0, 0, :3, :3] = -np.inf
        v[0, 1, 2, 2] = np.nan
        v[1, 2] = -np.abs(v[1, 2])
    got, want = run_symbol(out, x=v)[0], run_symbol(sym, x=v)[0]
    assert got.dtype == want.dtype and got.tobytes() == want.tobytes()


def test_a_pool_read_elsewhere_or_switched_off_stays():
    x = la.sym.var("x", shape=(2, 3, 6, 6))
    p = la.sym.nn.max_pool2d(x)
    sym = la.sym.sum(la.sym.relu(p)) + la.sym.sum(p)  # the pool has a second reader
    assert _ops(pool_relu(sym)) == _ops(sym)
    plain = la.sym.relu(la.sym.nn.max_pool2d(x))
    with la.tuning(pool_relu=False):
        assert _ops(pool_relu(plain)) == ["max_pool2d", "relu"]
    for other in (la.sym.relu(la.sym.nn.avg_pool2d(x)), la.sym.tanh(la.sym.nn.max_pool2d(x))):
        assert _ops(pool_relu(other)) == _ops(other)


def test_hybridized_inference_fuses_explains_and_equals_the_imperative_block():
    net = B.HybridSequential()
    net.add(B.Conv2D(8, 3, activation="relu"), B.MaxPool2D(3, 2), B.Flatten(), B.Dense(3))
    net.initialize()
    x = la.array(RNG.standard_normal((1, 1, 17, 17)).astype("float32"))
    want = net(x).asnumpy()
    net.hybridize()
    for _ in range(3):  # (past the compiled program's first run: the compiled kernels)
        got = net(x).asnumpy()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    text = str(net.explain(x))
    assert "max_pool2d_relu[" in text and "relu[" not in text.replace("max_pool2d_relu[", "")


def test_the_fused_op_exports_to_onnx_as_maxpool_then_relu(tmp_path, run_symbol):
    ort = pytest.importorskip("onnxruntime")
    x = la.sym.var("x", shape=(1, 3, 9, 9))
    sym = la.sym.nn.max_pool2d_relu(x, kernel=(3, 3), stride=(2, 2), padding=(1, 1))
    path = tmp_path / "pool_relu.onnx"
    la.onnx.export(sym, str(path))
    v = RNG.standard_normal((1, 3, 9, 9)).astype("float32")
    got = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, {"x": v})[0]
    np.testing.assert_array_equal(got, run_symbol(sym, x=v)[0])
