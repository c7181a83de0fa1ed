import numpy as np
import pytest

import lazyarray as la
from lazyarray import blocks as B
from lazyarray.graph.passes.forward_saves import forward_saves
from lazyarray.graph.passes.gradient import gradient
from lazyarray.graph.symbol import Symbol


def _ops(entries):
    return [n.op.name for n in Symbol([e for e in entries if e is not None]).topo() if n.op]


def _grads(y, x, heads):
    return gradient(list(y.outputs), [h for s in heads for h in s.outputs], list(x.outputs))


@pytest.mark.parametrize("approximation", ["none", "tanh"])
def test_forward_computes_the_slope_and_backward_multiplies(run_symbol, approximation):
    x = la.sym.var("x", shape=(3, 5))
    y = la.sym.exp(la.sym.nn.gelu(x * 2, approximation=approximation))
    head = la.sym.var("head", shape=(3, 5))
    grads = _grads(y, x, [head])
    fwd, bwd = forward_saves(list(y.outputs), grads)
    assert _ops(fwd).count("gelu_with_grad") == 1 and "gelu" not in _ops(fwd)
    assert "gelu_grad" not in _ops(bwd) and "gelu_with_grad" in _ops(bwd)  # read from the forward
    Symbol(fwd + bwd).check()
    xv = np.random.default_rng(0).standard_normal((3, 5)).astype("float32")
    hv = np.random.default_rng(1).standard_normal((3, 5)).astype("float32")
    with la.tuning(gelu_tanh_compiled=False):  # (gelu[compiled_tanh] rounds once, not as gelu_with_grad's ops)
        before = run_symbol(Symbol(list(y.outputs) + grads), x=xv, head=hv)
    after = run_symbol(Symbol(fwd + bwd), x=xv, head=hv)
    for a, b in zip(before, after):
        np.testing.assert_array_equal(a, b)  # the same operations: equal, not just close
    for a, b in zip(run_symbol(Symbol(list(y.outputs) + grads), x=xv, head=hv), after):
        np.testing.assert_allclose(a, b, rtol=2e-7)  # (with it: within float32 rounding)


def test_leaves_graphs_without_a_matching_pair_alone():
    x = la.sym.var("x", shape=(4,))
    w = la.sym.var("w", shape=(4,))
    head = la.sym.var("head", shape=(4,))
    # gelu of something no gradient flows through: the backward has no gelu_grad
    y = la.sym.nn.gelu(w) * x
    fwd, bwd = forward_saves(list(y.outputs), _grads(y, x, [head]))
    assert "gelu_with_grad" not in _ops(fwd + bwd) and _ops(fwd).count("gelu") == 1
    # no backward at all (an inference graph)
    fwd, bwd = forward_saves(list(y.outputs), [None])
    assert fwd == list(y.outputs) and bwd == [None]


def test_a_backward_gelu_grad_with_another_approximation_is_not_paired():
    x = la.sym.var("x", shape=(4,))
    head = la.sym.var("head", shape=(4,))
    y = la.sym.nn.gelu(x)
    grads = [la.sym.nn.gelu_grad(head, x, approximation="tanh").outputs[0]]
    fwd, bwd = forward_saves(list(y.outputs), grads)
    assert _ops(fwd) == ["gelu"] and "gelu_grad" in _ops(bwd)


def test_a_broadcast_head_gradient_is_not_paired():
    x = la.sym.var("x", shape=(3, 4))
    head = la.sym.var("head", shape=(4,))
    y = la.sym.nn.gelu(x)
    grads = [la.sym.nn.gelu_grad(head, x).outputs[0]]
    fwd, bwd = forward_saves(list(y.outputs), grads)
    assert _ops(fwd) == ["gelu"] and "gelu_grad" in _ops(bwd)


def _mlp(approximation):
    net = B.HybridSequential()
    net.add(B.Dense(32, flatten=False), B.GELU(approximation), B.Dense(4, flatten=False))
    return net


@pytest.mark.parametrize("approximation", ["none", "tanh"])
def test_hybridized_training_uses_it_and_gradients_equal_eager(approximation):
    # (2, 300, 8) -> 19200 hidden values per GELU: the chunked kernels run
    x = la.array(np.random.default_rng(0).standard_normal((2, 300, 8)).astype("float32"))
    grads = []
    for hybrid in (False, True):
        la.random.seed(0)
        net = _mlp(approximation)
        net.initialize()
        net(x)
        if hybrid:
            net.hybridize()
        with la.autograd.record():
            loss = (net(x) ** 2).mean()
        loss.backward()
        grads.append([p.grad().asnumpy() for p in net.collect_params().values()])
    op = net.cached_op
    c = op._cache[op._last_key]
    fwd_ops = [n.op.name for n in c.program.nodes if n.op is not None]
    bwd_ops = [n.op.name for n in c.backward[0].nodes if n.op is not None]
    assert "gelu_with_grad" in fwd_ops and "gelu" not in fwd_ops and "gelu_grad" not in bwd_ops
    for a, b in zip(*grads):
        np.testing.assert_allclose(b, a, rtol=1e-6, atol=1e-7)


def test_inference_signatures_keep_gelu():
    la.random.seed(0)
    net = _mlp("none")
    net.initialize()
    net.hybridize()
    net(la.ones((2, 3, 8)))
    c = net.cached_op._cache[net.cached_op._last_key]
    assert "gelu" in [n.op.name for n in c.program.nodes if n.op is not None]


def _ln_graph(x_dtype="float32", gamma_dtype="float32", axis=-1):
    x = la.sym.var("x", shape=(4, 6), dtype=x_dtype)
    gamma = la.sym.var("gamma", shape=(4 if axis == 0 else 6,), dtype=gamma_dtype)
    beta = la.sym.var("beta", shape=(4 if axis == 0 else 6,), dtype=gamma_dtype)
    y = la.sym.tanh(la.sym.nn.layer_norm(x * 3, gamma, beta, axis=axis, eps=1e-3))
    return x, gamma, beta, y


@pytest.mark.parametrize("axis", [-1, 0])
def test_layer_norm_forward_saves_its_statistics(run_symbol, axis):
    x, gamma, beta, y = _ln_graph(axis=axis)
    head = la.sym.var("head", shape=(4, 6))
    grads = gradient(list(y.outputs), list(head.outputs), [e for s in (x, gamma, beta) for e in s.outputs])
    fwd, bwd = forward_saves(list(y.outputs), grads)
    assert "layer_norm_with_stats" in _ops(fwd) and "layer_norm" not in _ops(fwd)
    assert "layer_norm_grad" not in _ops(bwd) and "layer_norm_grad_saved" in _ops(bwd)
    Symbol(fwd + bwd).check()
    rng = np.random.default_rng(2)
    vals = {"x": rng.standard_normal((4, 6)).astype("float32"), "head": rng.standard_normal((4, 6)).astype("float32"),
            "gamma": rng.standard_normal(gamma.outputs[0].aval.shape).astype("float32"),
            "beta": rng.standard_normal(gamma.outputs[0].aval.shape).astype("float32")}
    before = run_symbol(Symbol(list(y.outputs) + grads), **vals)
    after = run_symbol(Symbol(fwd + bwd), **vals)
    for a, b in zip(before, after):
        np.testing.assert_array_equal(a, b)


def test_layer_norm_of_mixed_dtypes_is_left_alone():
    x, gamma, beta, y = _ln_graph(gamma_dtype="float64")
    head = la.sym.var("head", shape=(4, 6), dtype="float64")
    grads = gradient(list(y.outputs), list(head.outputs), list(x.outputs))
    fwd, bwd = forward_saves(list(y.outputs), grads)
    assert "layer_norm_with_stats" not in _ops(fwd + bwd) and "layer_norm_grad" in _ops(bwd)


def test_a_backward_layer_norm_grad_with_another_eps_is_not_paired():
    x, gamma, beta, y = _ln_graph()
    head = la.sym.var("head", shape=(4, 6))
    grads = list(la.sym.nn.layer_norm_grad(head, x, gamma, eps=1e-5).outputs)  # the forward used 1e-3
    fwd, bwd = forward_saves(list(y.outputs), grads)
    assert "layer_norm_with_stats" not in _ops(fwd + bwd) and "layer_norm_grad" in _ops(bwd)


def test_hybridized_transformer_gradients_equal_eager(train_tiny_transformer):
    rng = np.random.default_rng(0)
    x, y = la.array(rng.integers(0, 50, (4, 12))), la.array(rng.integers(0, 3, 4))
    grads = []
    for hybrid in (False, True):
        net, _, g = train_tiny_transformer(hybrid, x, y)
        grads.append(g)
    c = net.cached_op._cache[net.cached_op._last_key]
    fwd_ops = [n.op.name for n in c.program.nodes if n.op is not None]
    bwd_ops = [n.op.name for n in c.backward[0].nodes if n.op is not None]
    assert fwd_ops.count("layer_norm_with_stats") == 5 and fwd_ops.count("gelu_with_grad") == 2
    assert "layer_norm_grad" not in bwd_ops and "gelu_grad" not in bwd_ops
    for k in grads[0]:
        np.testing.assert_allclose(grads[1][k], grads[0][k], rtol=1e-6, atol=1e-7, err_msg=k)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_softmax_cross_entropy_saves_its_probabilities(run_symbol, dtype):
    """``softmax_cross_entropy_rows`` -> loss and probabilities; its gradient scales the saved
    probabilities and subtracts at the labels: the same operations, equal values bit for bit."""
    z = la.sym.var("z", shape=(6, 5), dtype=dtype)
    labels = la.sym.var("labels", shape=(6,), dtype="int64")
    y = la.sym.nn.softmax_cross_entropy_rows(z * 2, labels)
    head = la.sym.var("head", shape=(6,), dtype=dtype)
    grads = _grads(y, z, [head])
    fwd, bwd = forward_saves(list(y.outputs), grads)
    assert _ops(fwd) == ["multiply", "softmax_cross_entropy_rows_with_probs"]
    assert "softmax_cross_entropy_rows_grad" not in _ops(bwd) and "softmax_cross_entropy_rows_grad_saved" in _ops(bwd)
    Symbol(fwd + bwd).check()
    rng = np.random.default_rng(0)
    feeds = dict(z=rng.standard_normal((6, 5)).astype(dtype), labels=rng.integers(0, 5, 6),
                 head=rng.standard_normal(6).astype(dtype))
    before = run_symbol(Symbol(list(y.outputs) + grads), **feeds)
    after = run_symbol(Symbol(fwd + bwd), **feeds)
    for a, b in zip(before, after):
        np.testing.assert_array_equal(a, b)


def test_softmax_cross_entropy_with_other_labels_or_a_float16_head_is_not_paired():
    z = la.sym.var("z", shape=(6, 5))
    labels, other = la.sym.var("labels", shape=(6,), dtype="int64"), la.sym.var("other", shape=(6,), dtype="int64")
    head = la.sym.var("head", shape=(6,))
    y = la.sym.nn.softmax_cross_entropy_rows(z, labels)
    grads = [la.sym.nn.softmax_cross_entropy_rows_grad(z, other, head).outputs[0]]
    fwd, bwd = forward_saves(list(y.outputs), grads)
    assert _ops(fwd) == ["softmax_cross_entropy_rows"] and "softmax_cross_entropy_rows_grad" in _ops(bwd)
    h16 = la.sym.var("h16", shape=(6,), dtype="float16")
    grads = [la.sym.nn.softmax_cross_entropy_rows_grad(z, labels, h16).outputs[0]]
    fwd, bwd = forward_saves(list(y.outputs), grads)
    assert _ops(fwd) == ["softmax_cross_entropy_rows"]
