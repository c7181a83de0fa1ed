import numpy as np
import pytest

import lazyarray as la
from lazyarray import blocks as B
from lazyarray.graph.passes.fold_batch_norm import fold_batch_norm

RNG = np.random.default_rng(0)


def _ops(sym):
    return [n.op.name for n in sym.topo() if n.op is not None]


def _stats(c):
    return {"g": RNG.standard_normal(c), "b": RNG.standard_normal(c), "m": RNG.standard_normal(c),
            "v": RNG.random(c) + 0.5}


def _bn_vars(c, dtype="float64"):
    return [la.sym.var(n, shape=(c,), dtype=dtype) for n in ("g", "b", "m", "v")]


@pytest.mark.parametrize("bias", [True, False])
def test_conv_then_batch_norm_folds_and_keeps_values(bias, run_symbol):
    x = la.sym.var("x", shape=(2, 3, 7, 7), dtype="float64")
    w = la.sym.var("w", shape=(4, 3, 3, 3), dtype="float64")
    args = [x, w] + ([la.sym.var("cb", shape=(4,), dtype="float64")] if bias else [])
    conv = la.sym.nn.conv2d(*args, padding=(1, 1), stride=(2, 2))
    sym = la.sym.nn.batch_norm(conv, *_bn_vars(4), eps=1e-3)
    out = fold_batch_norm(sym).check()
    assert "batch_norm" not in _ops(out) and _ops(out)[-1] == "conv2d"
    vals = {"x": RNG.standard_normal((2, 3, 7, 7)), "w": RNG.standard_normal((4, 3, 3, 3)), **_stats(4)}
    if bias:
        vals["cb"] = RNG.standard_normal(4)
    np.testing.assert_allclose(run_symbol(out, **vals)[0], run_symbol(sym, **vals)[0], rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("groups,dilation", [(2, (1, 1)), (4, (2, 2))], ids=["groups2", "depthwise-dil2"])
def test_grouped_dilated_conv_then_batch_norm_folds(groups, dilation, run_symbol):
    x = la.sym.var("x", shape=(2, 4, 7, 7), dtype="float64")
    w = la.sym.var("w", shape=(4, 4 // groups, 3, 3), dtype="float64")
    conv = la.sym.nn.conv2d(x, w, padding=(1, 1), dilation=dilation, groups=groups)
    sym = la.sym.nn.batch_norm(conv, *_bn_vars(4))
    out = fold_batch_norm(sym).check()
    assert "batch_norm" not in _ops(out) and _ops(out)[-1] == "conv2d"
    vals = {"x": RNG.standard_normal((2, 4, 7, 7)), "w": RNG.standard_normal((4, 4 // groups, 3, 3)), **_stats(4)}
    np.testing.assert_allclose(run_symbol(out, **vals)[0], run_symbol(sym, **vals)[0], rtol=1e-10, atol=1e-12)


def test_dense_then_batch_norm_folds(run_symbol):
    x = la.sym.var("x", shape=(8, 6), dtype="float64")  # 24 activations > 18 weights: folding pays
    w = la.sym.var("w", shape=(3, 6), dtype="float64")
    bias = la.sym.var("db", shape=(3,), dtype="float64")
    sym = la.sym.nn.batch_norm(la.sym.nn.dense(x, w, bias), *_bn_vars(3), axis=1)
    out = fold_batch_norm(sym)
    assert _ops(out)[-1] == "dense"
    vals = {"x": RNG.standard_normal((8, 6)), "w": RNG.standard_normal((3, 6)), "db": RNG.standard_normal(3),
            **_stats(3)}
    np.testing.assert_allclose(run_symbol(out, **vals)[0], run_symbol(sym, **vals)[0], rtol=1e-10)


def test_no_fold_when_the_layer_output_is_used_elsewhere_or_the_axis_differs():
    x = la.sym.var("x", shape=(2, 3, 5, 5), dtype="float64")
    w = la.sym.var("w", shape=(3, 3, 1, 1), dtype="float64")
    conv = la.sym.nn.conv2d(x, w)
    shared = la.sym.nn.batch_norm(conv, *_bn_vars(3)) + conv  # conv read twice
    assert "batch_norm" in _ops(fold_batch_norm(shared))
    other_axis = la.sym.nn.batch_norm(la.sym.nn.conv2d(x, w), *_bn_vars(5), axis=3)
    assert "batch_norm" in _ops(fold_batch_norm(other_axis))


def test_hybridized_cnn_in_inference_folds_and_equals_the_imperative_block():
    net = B.HybridSequential()
    net.add(B.Conv2D(4, 3, padding=1, in_channels=3), B.BatchNorm(in_channels=4), B.Activation("relu"))
    net.initialize()
    bn = list(net.children())[1][1]
    bn.running_mean.set_data(la.array(RNG.standard_normal(4).astype("float32")))
    bn.running_var.set_data(la.array((RNG.random(4) + 0.5).astype("float32")))
    x = la.array(RNG.standard_normal((2, 3, 6, 6)).astype("float32"))
    want = net(x).asnumpy()
    net.hybridize()
    np.testing.assert_allclose(net(x).asnumpy(), want, rtol=1e-5, atol=1e-6)
    compiled = net.inference_symbol()
    names = [n.label() for n in la.CachedOp(compiled.symbol).compiled(data=x.shape).topo() if n.op is not None]
    assert "conv2d_act" in names and not any("batch_norm" in nm for nm in names)  # (the relu joins the conv)


def test_a_weight_larger_than_the_activation_is_not_folded_unless_constant():
    # a late ResNet layer at batch 1: rescaling 4x4x3x3 weights each call costs more than the 4x2x2 pass
    x = la.sym.var("x", shape=(1, 4, 2, 2), dtype="float64")
    w = la.sym.var("w", shape=(4, 4, 3, 3), dtype="float64")
    sym = la.sym.nn.batch_norm(la.sym.nn.conv2d(x, w, padding=(1, 1)), *_bn_vars(4))
    assert _ops(fold_batch_norm(sym))[-1] == "batch_norm"
    # a constant weight (captured by a trace; constant folding folds it once): always pays
    xa = la.array(RNG.standard_normal((1, 4, 2, 2)))
    stats = [la.array(v) for v in _stats(4).values()]
    with la.deferred():
        y = la.nn.batch_norm(la.nn.conv2d(xa, la.array(RNG.standard_normal((4, 4, 3, 3))), padding=(1, 1)), *stats)
    const = la.get_symbol(y, inputs={"x": xa})
    assert _ops(fold_batch_norm(const))[-1] == "conv2d"
