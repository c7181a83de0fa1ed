"""pool_before_batch_norm: max_pool2d(batch_norm([relu](x))) -> nn.batch_norm_max_pool2d in inference
graphs, bit for bit the recorded values for any statistics (negative scales run the recorded order),
and only where the batch norm (and the relu) feed nothing else."""
from __future__ import annotations

import numpy as np
import pytest

import lazyarray as la
from lazyarray import blocks as B
from lazyarray.graph.passes.pool_before_batch_norm import pool_before_batch_norm

RNG = np.random.default_rng(0)
# every test twice: the NumPy kernels and the compiled one pass (kernels/pool_jit.py)
pytestmark = pytest.mark.usefixtures("kernel_path")


def _ops(sym):
    return [n.op.name for n in sym.topo() if n.op is not None]


def _graph(relu: bool, dtype="float32", shape=(2, 3, 7, 7), **pool):
    x = la.sym.var("x", shape=shape, dtype=dtype)
    stats = [la.sym.var(n, shape=(shape[1],), dtype=dtype) for n in ("gamma", "beta", "mean", "var")]
    h = la.sym.relu(x) if relu else x
    return la.sym.nn.max_pool2d(la.sym.nn.batch_norm(h, *stats, eps=1e-3), **pool)


def _stats(gamma, dtype="float32"):
    c = len(gamma)
    return {"gamma": np.asarray(gamma, dtype), "beta": RNG.standard_normal(c).astype(dtype),
            "mean": RNG.standard_normal(c).astype(dtype), "var": (RNG.random(c) + 0.1).astype(dtype)}


@pytest.mark.parametrize("pool", [
    {},
    {"kernel": (3, 3), "stride": (2, 2), "padding": (1, 1)},
    {"kernel": (3, 2), "stride": (2, 2), "ceil_mode": True},
    {"kernel": (2, 2), "stride": (1, 1)},
], ids=["2x2", "3x3-s2-p1", "ceil", "overlapping"])
@pytest.mark.parametrize("gamma", [[0.5, 2.0, 1e-3], [0.5, 0.0, 3.0], [0.5, -2.0, 1.0], [-1.0, -0.5, -3.0]],
                         ids=["positive", "a-zero-scale", "one-negative", "all-negative"])
@pytest.mark.parametrize("relu", [True, False])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_one_node_and_values_equal_bit_for_bit(pool, gamma, relu, dtype, run_symbol):
    sym = _graph(relu, dtype, **pool)
    out = pool_before_batch_norm(sym).check()
    assert _ops(out) == ["batch_norm_max_pool2d"]
    node = [n for n in out.topo() if n.op is not None][0]
    assert node.params["relu"] is relu and node.params["eps"] == 1e-3
    v = (RNG.standard_normal((2, 3, 7, 7)) * 4).astype(dtype)
    v[0, 0, :3, :3] = -np.inf
    v[0, 1, 2, 2] = np.nan
    v[1, 2] = -np.abs(v[1, 2])
    values = dict(x=v, **_stats(gamma, dtype))
    got, want = run_symbol(out, **values)[0], run_symbol(sym, **values)[0]
    np.testing.assert_array_equal(got, want)


def test_a_nan_scale_runs_the_recorded_order(run_symbol):
    sym = _graph(True)
    values = dict(x=RNG.standard_normal((2, 3, 7, 7)).astype("float32"), **_stats([1.0, np.nan, 2.0]))
    got, want = run_symbol(pool_before_batch_norm(sym), **values)[0], run_symbol(sym, **values)[0]
    np.testing.assert_array_equal(got, want)


def test_a_norm_or_relu_read_elsewhere_stays():
    x = la.sym.var("x", shape=(2, 3, 6, 6))
    stats = [la.sym.var(n, shape=(3,)) for n in ("gamma", "beta", "mean", "var")]
    bn = la.sym.nn.batch_norm(x, *stats)
    sym = la.sym.sum(la.sym.nn.max_pool2d(bn)) + la.sym.sum(bn)  # the norm has a second reader
    assert _ops(pool_before_batch_norm(sym)) == _ops(sym)
    r = la.sym.relu(x)
    sym = la.sym.sum(la.sym.nn.max_pool2d(la.sym.nn.batch_norm(r, *stats))) + la.sym.sum(r)
    out = pool_before_batch_norm(sym)
    node = [n for n in out.topo() if n.op is not None and n.op.name == "batch_norm_max_pool2d"][0]
    assert node.params["relu"] is False and _ops(out).count("relu") == 1  # the relu runs once, for both


def test_other_axes_dtypes_and_pools_are_left_alone():
    x = la.sym.var("x", shape=(2, 3, 6, 6))
    stats6 = [la.sym.var(n, shape=(6,)) for n in ("gamma", "beta", "mean", "var")]
    on_width = la.sym.nn.max_pool2d(la.sym.nn.batch_norm(x, *stats6, axis=3))
    stats = [la.sym.var(n, shape=(3,), dtype="float64") for n in ("gamma", "beta", "mean", "var")]
    mixed = la.sym.nn.max_pool2d(la.sym.nn.batch_norm(x, *stats))
    stats32 = [la.sym.var(n, shape=(3,)) for n in ("gamma", "beta", "mean", "var")]
    avg = la.sym.nn.avg_pool2d(la.sym.nn.batch_norm(x, *stats32))
    for sym in (on_width, mixed, avg):
        assert _ops(pool_before_batch_norm(sym)) == _ops(sym)


def _cnn():
    """The demo CNN's stack: conv, relu, batch norm, max pool."""
    net = B.HybridSequential()
    net.add(B.Conv2D(8, 3, padding=1, activation="relu"), B.BatchNorm(), B.MaxPool2D(), B.Flatten(), B.Dense(3))
    net.initialize()
    return net


@pytest.mark.parametrize("batch", [20, 3], ids=["batch-last", "nchw"])
def test_hybridized_inference_pools_first_and_equals_the_imperative_block(batch):
    net = _cnn()
    x = la.array(RNG.standard_normal((batch, 1, 8, 8)).astype("float32"))
    net(x)  # (the parameters' shapes)
    bn = net[1]
    c = bn.gamma.shape[0]
    bn.gamma.set_data(la.array(np.linspace(-1, 2, c).astype("float32")))  # one negative scale, then not
    bn.running_mean.set_data(la.array(RNG.standard_normal(c).astype("float32")))
    want = net(x).asnumpy()
    net.hybridize()
    np.testing.assert_allclose(net(x).asnumpy(), want, rtol=1e-5, atol=1e-6)
    ops = _ops(next(iter(net._by_sig.values())).run.compiled(data=(batch, 1, 8, 8)))
    assert "batch_norm_max_pool2d" in ops and "batch_norm" not in ops and "relu" not in ops[:2]
    bn.gamma.set_data(la.array(np.linspace(0.5, 2, c).astype("float32")))  # every scale positive now
    net.hybridize(False)
    want = net(x).asnumpy()
    net.hybridize()
    np.testing.assert_allclose(net(x).asnumpy(), want, rtol=1e-5, atol=1e-6)


def test_training_graphs_keep_the_recorded_ops():
    net = _cnn()
    net.hybridize()
    x = la.array(RNG.standard_normal((4, 1, 8, 8)).astype("float32"))
    with la.autograd.record():
        loss = net(x).sum()
    loss.backward()
    op = next(iter(net._by_sig.values())).run
    compiled = [c for c in op._cache.values() if c.backward is not None]
    assert compiled and all("batch_norm_max_pool2d" not in _ops(c.sym) for c in compiled)
