"""batch_norm_relu: relu(batch_norm(x)) -> nn.batch_norm_relu in inference graphs, bit for bit the
recorded values (NCHW, batch last, float32/float64, NaN and inf, empty dims), only where the batch
norm feeds nothing but the relu, never in graphs that train; and DenseNet's fixture equal to the pass
switched off and to onnxruntime."""
from __future__ import annotations

import numpy as np
import pytest

import lazyarray as la
from lazyarray import blocks as B
from lazyarray.graph.passes.batch_norm_relu import batch_norm_relu
from lazyarray.graph.symbol import Symbol

RNG = np.random.default_rng(0)
# every test twice: the NumPy kernels and the compiled one pass (kernels/batch_norm_relu.py)
pytestmark = pytest.mark.usefixtures("kernel_path")
STATS = ("gamma", "beta", "mean", "var")


def _ops(sym):
    return [n.op.name for n in sym.topo() if n.op is not None]


def _graph(shape=(2, 3, 5, 4), dtype="float32", axis=1):
    x = la.sym.var("x", shape=shape, dtype=dtype)
    stats = [la.sym.var(n, shape=(shape[axis],), dtype=dtype) for n in STATS]
    return la.sym.relu(la.sym.nn.batch_norm(x, *stats, eps=1e-3, axis=axis))


def _values(shape, dtype, axis=1):
    c = shape[axis]
    v = (RNG.standard_normal(shape) * 3).astype(dtype)
    if v.size:
        v.reshape(-1)[:4] = (np.nan, np.inf, -np.inf, -0.0)
    gamma = RNG.standard_normal(c).astype(dtype)
    gamma[0] = 0.0
    return {"x": v, "gamma": gamma, "beta": RNG.standard_normal(c).astype(dtype),
            "mean": RNG.standard_normal(c).astype(dtype), "var": (RNG.random(c) + 0.1).astype(dtype)}


@pytest.mark.parametrize("shape,axis", [((2, 3, 5, 4), 1), ((1, 6, 3, 3), 1), ((0, 3, 4, 4), 1), ((2, 3, 0, 4), 1),
                                        ((5, 4), 1), ((2, 3, 4), -1)],
                         ids=["nchw", "one-image", "empty-batch", "empty-height", "nc", "axis-1"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_one_node_and_values_equal_bit_for_bit(shape, axis, dtype, run_symbol):
    sym = _graph(shape, dtype, axis)
    out = batch_norm_relu(sym).check()
    assert _ops(out) == ["batch_norm_relu"]
    node = [n for n in out.topo() if n.op is not None][0]
    assert node.params["eps"] == 1e-3 and node.params["axis"] == axis
    values = _values(shape, dtype, axis)
    got, want = run_symbol(out, **values)[0], run_symbol(sym, **values)[0]
    np.testing.assert_array_equal(got, want)


def test_what_it_leaves_alone():
    x = la.sym.var("x", shape=(2, 3, 6, 6))
    stats = [la.sym.var(n, shape=(3,)) for n in STATS]
    bn = la.sym.nn.batch_norm(x, *stats)
    read_twice = la.sym.sum(la.sym.relu(bn)) + la.sym.sum(bn)  # the norm has a second reader
    assert _ops(batch_norm_relu(read_twice)) == _ops(read_twice)
    stats64 = [la.sym.var(n, shape=(3,), dtype="float64") for n in STATS]
    mixed = la.sym.relu(la.sym.nn.batch_norm(x, *stats64))  # statistics of another dtype
    assert "batch_norm_relu" not in _ops(batch_norm_relu(mixed))
    other = la.sym.sigmoid(bn)  # not a relu
    assert _ops(batch_norm_relu(other)) == _ops(other)
    as_output = Symbol([bn.outputs[0], la.sym.relu(bn).outputs[0]])  # the norm is a graph output too
    assert "batch_norm_relu" not in _ops(batch_norm_relu(as_output))


def test_the_tuning_switch_turns_it_off():
    sym = _graph()
    with la.tuning(fuse_batch_norm_relu=False):
        assert batch_norm_relu(sym) is sym
    assert _ops(batch_norm_relu(sym)) == ["batch_norm_relu"]


class _PreAct(B.HybridBlock):
    """DenseNet's pre-activation: batch norm and relu on a concatenation, then a convolution."""

    def __init__(self):
        super().__init__()
        self.c1 = B.Conv2D(4, 3, padding=1)
        self.bn = B.BatchNorm()
        self.c2 = B.Conv2D(4, 1)

    def forward(self, x):
        y = la.concatenate([x, self.c1(x)], axis=1)
        return self.c2(la.relu(self.bn(y)))


@pytest.mark.parametrize("batch", [1, 20], ids=["one-image", "batch-last-sized"])
def test_hybridized_inference_fuses_and_equals_the_imperative_block(batch):
    net = _PreAct()
    net.initialize()
    x = la.array(RNG.standard_normal((batch, 3, 8, 8)).astype("float32"))
    net(x)
    c = net.bn.gamma.shape[0]
    net.bn.gamma.set_data(la.array(np.linspace(-1, 2, c).astype("float32")))
    net.bn.running_mean.set_data(la.array(RNG.standard_normal(c).astype("float32")))
    want = net(x).asnumpy()
    net.hybridize()
    np.testing.assert_allclose(net(x).asnumpy(), want, rtol=1e-5, atol=1e-6)
    ops = _ops(next(iter(net._by_sig.values())).run.compiled(data=(batch, 3, 8, 8)))
    assert "batch_norm_relu" in ops and "batch_norm" not in ops and "relu" not in ops


def test_training_graphs_keep_the_recorded_ops(training_graph_ops):
    net = _PreAct()
    net.initialize()
    graphs = training_graph_ops(net, la.array(RNG.standard_normal((2, 3, 8, 8)).astype("float32")))
    assert graphs and all("batch_norm_relu" not in ops for ops in graphs)


def test_densenet_equals_the_pass_switched_off_bit_for_bit_and_onnxruntime(pass_on_off):
    """The fixture DenseNet (issue #35) at every size: its eight pre-activation norms made one step each,
    the values the pass-off program's bit for bit (a compiled program's first run and a later one), and
    onnxruntime's within the convolutions' rounding."""
    run = pass_on_off("densenet_mini", "fuse_batch_norm_relu", runs=2)
    for case, on, off, refs in run.cases:
        for a, b, r in zip(on, off, refs):
            np.testing.assert_array_equal(a, b, err_msg=case)
            np.testing.assert_allclose(a, r, rtol=1e-3, atol=1e-4, err_msg=case)
    on, off = run.on_ops, run.off_ops
    assert on.count("batch_norm_relu") == off.count("batch_norm") > 0 and "batch_norm" not in on
    assert len(off) - len(on) == on.count("batch_norm_relu")
