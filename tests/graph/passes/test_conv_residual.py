"""conv_residual: relu(add(conv2d, r)) (either operand order) -> one nn.conv2d_add_relu in inference
graphs, bit for bit the recorded values; only where the convolution and the add feed nothing else, the
residual has the output's shape and dtype (no broadcasting); training graphs keep the recorded ops; the
tuning switch turns it off."""
from __future__ import annotations

import numpy as np
import pytest

import lazyarray as la
from lazyarray import blocks as B
from lazyarray.graph.passes.conv_residual import conv_residual
from lazyarray.graph.symbol import Symbol

RNG = np.random.default_rng(0)
S = la.sym


def _ops(sym):
    return [n.op.name for n in sym.topo() if n.op is not None]


def _graph(dtype="float32", swap=False, bias=True, rshape=(2, 4, 6, 5)):
    x = S.var("x", shape=(2, 3, 6, 5), dtype=dtype)
    w, b = S.var("w", shape=(4, 3, 3, 3), dtype=dtype), S.var("b", shape=(4,), dtype=dtype)
    r = S.var("r", shape=rshape, dtype=dtype)
    c = S.nn.conv2d(x, w, b, padding=(1, 1)) if bias else S.nn.conv2d(x, w, padding=(1, 1))
    return S.relu(S.add(r, c) if swap else S.add(c, r))


def _values(dtype, rshape=(2, 4, 6, 5)):
    r = (RNG.standard_normal(rshape) * 3).astype(dtype)
    r.reshape(-1)[:3] = [np.nan, -np.inf, -0.0]
    return {"x": RNG.standard_normal((2, 3, 6, 5)).astype(dtype), "w": RNG.standard_normal((4, 3, 3, 3)).astype(dtype),
            "b": RNG.standard_normal(4).astype(dtype), "r": r}


@pytest.mark.parametrize("bias", [True, False], ids=["bias", "no-bias"])
@pytest.mark.parametrize("swap", [False, True], ids=["conv-first", "residual-first"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_one_node_and_values_equal_bit_for_bit(dtype, swap, bias, run_symbol):
    sym = _graph(dtype, swap, bias)
    out = conv_residual(sym).check()
    assert _ops(out) == ["conv2d_add_relu"]
    node = [n for n in out.topo() if n.op is not None][0]
    assert [e.node.name for e in node.inputs] == ["x", "w", "r"] + (["b"] if bias else [])
    values = _values(dtype)
    want, got = run_symbol(sym, **values)[0], run_symbol(out, **values)[0]
    np.testing.assert_array_equal(got, want)
    assert np.array_equal(np.signbit(got), np.signbit(want))


def test_not_taken_where_something_else_reads_or_shapes_differ():
    x, w = S.var("x", shape=(2, 3, 6, 5)), S.var("w", shape=(4, 3, 3, 3))
    c = S.nn.conv2d(x, w, padding=(1, 1))
    r = S.var("r", shape=(2, 4, 6, 5))
    shared = S.relu(S.add(c, r))
    assert "conv2d_add_relu" not in _ops(conv_residual(Symbol(shared.outputs + c.outputs)))  # conv read twice
    added = S.add(c, r)
    assert "conv2d_add_relu" not in _ops(conv_residual(Symbol(S.relu(added).outputs + added.outputs)))  # add too
    assert "conv2d_add_relu" not in _ops(conv_residual(_graph(rshape=(1, 4, 6, 5))))  # a broadcast residual
    assert "conv2d_add_relu" not in _ops(conv_residual(_graph(rshape=(4, 1, 1))))
    wide = S.relu(S.add(c, S.var("r64", shape=(2, 4, 6, 5), dtype="float64")))
    assert "conv2d_add_relu" not in _ops(conv_residual(wide))  # (the add widens: dtypes differ)


def test_the_tuning_switch_turns_it_off():
    sym = _graph()
    with la.tuning(conv_residual=False):
        assert conv_residual(sym) is sym
    assert _ops(conv_residual(sym)) == ["conv2d_add_relu"]


class _Block(B.HybridBlock):
    def __init__(self):
        super().__init__()
        self.c1 = B.Conv2D(8, 3, padding=1)
        self.c2 = B.Conv2D(8, 3, padding=1)
        self.down = B.Conv2D(8, 1)

    def forward(self, x):
        y = la.relu(self.down(x) + self.c2(la.relu(self.c1(x))))  # (the residual first, a convolution too)
        return la.relu(self.c2(y) + y)


def _net(seed):
    la.random.seed(seed)
    net = _Block()
    net.initialize()
    return net


@pytest.mark.parametrize("batch", [1, 3])
def test_hybridized_inference_fuses_and_equals_the_unfused_graph_bit_for_bit(batch):
    x = la.array(RNG.standard_normal((batch, 4, 9, 8)).astype("float32"))
    with la.tuning(conv_residual=False):
        plain = _net(1)
        plain.hybridize()
        want = plain(x).asnumpy()
        assert "conv2d_add_relu" not in str(plain.explain(x))
    net = _net(1)
    net.hybridize()
    got = net(x).asnumpy()
    text = str(net.explain(x))
    assert text.count("conv2d_add_relu[") == 2 and "add[" not in text
    assert text.count("conv2d_add_relu[write_out, blocked]") == 2
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(net(x).asnumpy(), want)  # (a later run: the bound steps)


def test_training_graphs_keep_the_recorded_ops(training_graph_ops):
    graphs = training_graph_ops(_net(2), la.array(RNG.standard_normal((2, 4, 9, 8)).astype("float32")))
    assert graphs and all("conv2d_add_relu" not in ops for ops in graphs)
