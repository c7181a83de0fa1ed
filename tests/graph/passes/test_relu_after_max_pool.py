"""relu_after_max_pool: max_pool2d(relu(x)) -> relu(max_pool2d(x)) in inference graphs, with equal
values (NaN, -inf, padding and ceil-mode windows included), and only where relu feeds nothing else."""
from __future__ import annotations

import numpy as np
import pytest

import lazyarray as la
from lazyarray import blocks as B
from lazyarray.graph.passes.relu_after_max_pool import relu_after_max_pool

RNG = np.random.default_rng(0)


def _ops(sym):
    return [n.op.name for n in sym.topo() if n.op is not None]


@pytest.mark.parametrize("params", [
    {},
    {"kernel": (3, 3), "stride": (2, 2), "padding": (1, 1)},
    {"kernel": (3, 2), "stride": (2, 2), "ceil_mode": True},
    {"kernel": (2, 2), "stride": (1, 1)},
], ids=["2x2", "3x3-s2-p1", "ceil", "overlapping"])
@pytest.mark.parametrize("dtype", ["float32", "float64", "int32"])
def test_swapped_and_values_equal(params, dtype, run_symbol):
    x = la.sym.var("x", shape=(2, 3, 7, 7), dtype=dtype)
    sym = la.sym.nn.max_pool2d(la.sym.relu(x), **params)
    out = relu_after_max_pool(sym).check()
    assert _ops(out) == ["max_pool2d", "relu"]
    v = (RNG.standard_normal((2, 3, 7, 7)) * 4).astype(dtype)
    if v.dtype.kind == "f":
        v[0, 0, :3, :3] = -np.inf  # a window of -inf (relu: 0)
        v[0, 1, 2, 2] = np.nan  # NaN stays NaN
        v[1, 2] = -np.abs(v[1, 2])  # a channel of negatives only
    got, want = run_symbol(out, x=v)[0], run_symbol(sym, x=v)[0]
    np.testing.assert_array_equal(got, want)


def test_a_relu_read_elsewhere_stays():
    x = la.sym.var("x", shape=(2, 3, 6, 6))
    r = la.sym.relu(x)
    sym = la.sym.sum(la.sym.nn.max_pool2d(r)) + la.sym.sum(r)  # the relu has a second reader
    assert _ops(relu_after_max_pool(sym)) == _ops(sym)


def test_average_pools_and_other_producers_are_left_alone():
    x = la.sym.var("x", shape=(2, 3, 6, 6))
    for sym in (la.sym.nn.avg_pool2d(la.sym.relu(x)), la.sym.nn.max_pool2d(la.sym.tanh(x))):
        assert _ops(relu_after_max_pool(sym)) == _ops(sym)


def _cnn():
    net = B.HybridSequential()
    net.add(B.Conv2D(8, 3, padding=1, activation="relu"), B.MaxPool2D(), B.Flatten(), B.Dense(3))
    net.initialize()
    return net


def test_hybridized_inference_swaps_and_equals_the_imperative_block():
    net = _cnn()
    x = la.array(RNG.standard_normal((20, 1, 8, 8)).astype("float32"))
    want = net(x).asnumpy()
    net.hybridize()
    np.testing.assert_allclose(net(x).asnumpy(), want, rtol=1e-5, atol=1e-6)
    ops = _ops(next(iter(net._by_sig.values())).run.compiled(data=(20, 1, 8, 8)))
    assert "max_pool2d_relu" in ops and "relu" not in ops  # (moved after the pool, then its epilogue: pool_relu)
    with la.tuning(pool_relu=False):
        net = _cnn()
        net.hybridize()
        net(x)
        ops = _ops(next(iter(net._by_sig.values())).run.compiled(data=(20, 1, 8, 8)))
    assert ops.index("relu") > ops.index("max_pool2d")

