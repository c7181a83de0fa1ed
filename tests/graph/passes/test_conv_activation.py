"""conv_activation: relu, hardsigmoid and hardswish of a conv2d (as the ONNX importer writes them, any
operand order) -> one nn.conv2d_act in inference graphs, bit for bit the recorded values; only where
the convolution (and each op of the chain) feeds nothing else, the constants are the pattern's, and the
dtypes agree; training graphs keep the recorded ops."""
from __future__ import annotations

import numpy as np
import pytest

import lazyarray as la
from lazyarray import blocks as B
from lazyarray.graph.passes.conv_activation import conv_activation
from lazyarray.graph.symbol import Symbol

RNG = np.random.default_rng(0)
S = la.sym


def _group(syms):
    return Symbol([e for s in syms for e in s.outputs])


def _ops(sym):
    return [n.op.name for n in sym.topo() if n.op is not None]


def _hard_sigmoid(c, alpha, beta, swap=False):
    if swap:  # every op with its operands the other way round
        return S.maximum(0.0, S.minimum(1.0, S.add(beta, S.multiply(alpha, c))))
    return S.maximum(S.minimum(S.add(S.multiply(c, alpha), beta), 1.0), 0.0)


def _graph(act, dtype="float32", swap=False, **conv):
    x = S.var("x", shape=(2, 3, 7, 6), dtype=dtype)
    w, b = S.var("w", shape=(5, 3, 3, 3), dtype=dtype), S.var("b", shape=(5,), dtype=dtype)
    c = S.nn.conv2d(x, w, b, **conv)
    if act == "relu":
        return S.relu(c)
    if act == "hardsigmoid":
        return _hard_sigmoid(c, 0.2, 0.5, swap)
    h = _hard_sigmoid(c, 1 / 6, 0.5, swap)
    return S.multiply(h, c) if swap else S.multiply(c, h)


def _values(dtype):
    x = (RNG.standard_normal((2, 3, 7, 6)) * 3).astype(dtype)
    x[0, 0, 0, 0] = np.nan  # (a NaN runs through every op, as recorded)
    return {"x": x, "w": RNG.standard_normal((5, 3, 3, 3)).astype(dtype), "b": RNG.standard_normal(5).astype(dtype)}


@pytest.mark.parametrize("swap", [False, True], ids=["x-op-k", "k-op-x"])
@pytest.mark.parametrize("act", ["relu", "hardsigmoid", "hardswish"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_one_node_and_values_equal_bit_for_bit(act, dtype, swap, run_symbol):
    sym = _graph(act, dtype, swap, stride=(2, 1), padding=(1, 1))
    out = conv_activation(sym).check()
    assert _ops(out) == ["conv2d_act"]
    node = [n for n in out.topo() if n.op is not None][0]
    assert node.params["act"] == act and tuple(node.params["stride"]) == (2, 1)
    if act != "relu":
        assert node.params["alpha"] == float(np.dtype(dtype).type(1 / 6 if act == "hardswish" else 0.2))
        assert node.params["beta"] == 0.5
    values = _values(dtype)
    got, want = run_symbol(out, **values)[0], run_symbol(sym, **values)[0]
    assert np.isnan(want).any() and (want == 0).any()  # (clipped and NaN values both ways)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("view", ["squeeze", "reshape", "expand_dims"])
def test_relu_of_a_reshaped_convolution_is_the_reshape_of_one_node(view, dtype, run_symbol):
    """A 1-D net's squeeze between its convolution and its relu (conv1d_net): the reshape moves after
    one conv2d_act; read elsewhere, the reshape (or the convolution) keeps the recorded ops."""
    x = S.var("x", shape=(2, 3, 1, 9), dtype=dtype)
    w, b = S.var("w", shape=(5, 3, 1, 3), dtype=dtype), S.var("b", shape=(5,), dtype=dtype)
    c = S.nn.conv2d(x, w, b, padding=(0, 1))
    v = {"squeeze": lambda: S.squeeze(c, axis=2), "reshape": lambda: S.reshape(c, shape=(2, 45)),
         "expand_dims": lambda: S.expand_dims(c, axis=0)}[view]()
    sym = S.relu(v)
    out = conv_activation(sym).check()
    assert _ops(out) == ["conv2d_act", view]
    values = {"x": (RNG.standard_normal((2, 3, 1, 9)) * 3).astype(dtype),
              "w": RNG.standard_normal((5, 3, 1, 3)).astype(dtype), "b": RNG.standard_normal(5).astype(dtype)}
    values["x"][0, 0, 0, 0] = np.nan
    got, want = run_symbol(out, **values)[0], run_symbol(sym, **values)[0]
    assert got.shape == want.shape and (want == 0).any()
    np.testing.assert_array_equal(got, want)
    assert _ops(conv_activation(_group([sym, v]))) == ["conv2d", view, "relu"]  # the reshape is read elsewhere
    assert _ops(conv_activation(_group([sym, c]))) == ["conv2d", view, "relu"]  # the convolution is


def test_what_it_leaves_alone():
    x, w = S.var("x", shape=(1, 2, 5, 5)), S.var("w", shape=(3, 2, 3, 3))
    c = S.nn.conv2d(x, w)
    assert _ops(conv_activation(_group([S.relu(c), c]))) == ["conv2d", "relu"]  # the conv is read elsewhere
    hs = S.multiply(c, _hard_sigmoid(c, 1 / 6, 0.5))
    assert "conv2d_act" not in _ops(conv_activation(_group([hs, c])))  # ... by a third reader
    clip2 = S.maximum(S.minimum(S.add(S.multiply(c, 0.2), 0.5), 2.0), 0.0)  # not clipped at 1
    assert "conv2d_act" not in _ops(conv_activation(clip2))
    neg0 = S.maximum(S.minimum(S.add(S.multiply(c, 0.2), 0.5), 1.0), -0.0)  # -0.0 is not max(t, 0)'s zero
    assert "conv2d_act" not in _ops(conv_activation(neg0))
    inner = S.add(S.multiply(c, 0.2), 0.5)  # a chain op read twice
    shared = _group([S.maximum(S.minimum(inner, 1.0), 0.0), inner])
    assert "conv2d_act" not in _ops(conv_activation(shared))
    assert _ops(conv_activation(S.relu(S.relu(x)))) == ["relu", "relu"]  # no convolution
    wide = S.nn.conv2d(S.var("h", shape=(1, 2, 5, 5), dtype="float16"), S.var("k", shape=(3, 2, 3, 3), dtype="float16"))
    assert _ops(conv_activation(S.cast(S.relu(wide), dtype="float32"))) == ["conv2d_act", "cast"]  # float16 too
    sym = S.relu(c)
    assert conv_activation(x) is x and conv_activation(sym) is not sym


class _Net(B.HybridBlock):
    def __init__(self):
        super().__init__()
        self.c1 = B.Conv2D(6, 3, padding=1)
        self.c2 = B.Conv2D(4, 1)

    def forward(self, x):
        y = self.c1(x)
        y = y * la.maximum(la.minimum(y * (1 / 6) + 0.5, 1.0), 0.0)  # hardswish
        return la.relu(self.c2(y))


@pytest.mark.parametrize("batch", [1, 20], ids=["one-image", "batch-last-sized"])
def test_hybridized_inference_fuses_and_equals_the_imperative_block(batch):
    net = _Net()
    net.initialize()
    x = la.array(RNG.standard_normal((batch, 3, 8, 8)).astype("float32"))
    want = net(x).asnumpy()
    net.hybridize()
    np.testing.assert_allclose(net(x).asnumpy(), want, rtol=1e-5, atol=1e-6)
    text = str(net.explain(x))
    assert text.count("conv2d_act[") == 2 and "relu[" not in text and "fused[" not in text
    assert text.count("conv2d_act[loop, pointwise]") == (batch == 1)  # (c2: 1x1 with a bias, one small image)
    ops = _ops(next(iter(net._by_sig.values())).run.compiled(data=(batch, 3, 8, 8)))
    assert ops.count("conv2d_act") == 2 and "relu" not in ops and "maximum" not in ops


def test_training_graphs_keep_the_recorded_ops(training_graph_ops):
    net = _Net()
    net.initialize()
    graphs = training_graph_ops(net, la.array(RNG.standard_normal((2, 3, 8, 8)).astype("float32")))
    assert graphs and all("conv2d_act" not in ops for ops in graphs)


def test_the_tuning_switch_turns_it_off():
    sym = _graph("relu")
    with la.tuning(conv_activation=False):
        assert conv_activation(sym) is sym
    assert _ops(conv_activation(sym)) == ["conv2d_act"]


@pytest.mark.parametrize("name", ["conv1d_net", "mobilenetv3_mini", "squeezenet_mini", "shufflenet_mini"])
def test_the_real_cnns_equal_the_pass_switched_off_and_onnxruntime(name, pass_on_off):
    """The fixture CNNs (issue #35) at every size: with the pass, fewer steps (conv1d_net's relus after
    a squeeze included) and the values of the recorded ops within the convolutions' rounding, and
    onnxruntime's."""
    run = pass_on_off(name, "conv_activation")
    for case, on, off, refs in run.cases:
        for a, b, r in zip(on, off, refs):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6, err_msg=case)
            np.testing.assert_allclose(a, r, rtol=1e-3, atol=1e-4, err_msg=case)
    on, off = run.on_ops, run.off_ops
    assert len(on) < len(off) and on.count("relu") < off.count("relu"), (on, off)
    assert name != "conv1d_net" or "relu" not in on  # (its relus read a squeeze of the convolution)
