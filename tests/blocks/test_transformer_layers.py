"""Transformer layers (lazyarray/blocks/transformer.py) against NumPy references written here:
LayerNorm, GELU, MultiHeadAttention (explicit per-head softmax(Q K^T / sqrt(d)) V with padding and
causal masks), TransformerEncoderLayer, PositionalEmbedding; hybridized == imperative (outputs and
gradients); export -> SymbolBlock.imports."""
from __future__ import annotations

import math

import numpy as np
import pytest

import lazyarray as la
from lazyarray import blocks as B

RNG = np.random.default_rng(14)


def arr(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def p(block, name):
    return block.collect_params()[name].data().asnumpy().astype(np.float64)


# -- NumPy references --------------------------------------------------------------------------------
def ln_ref(x, gamma, beta, eps=1e-5, axis=-1):
    mean = x.mean(axis=axis, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=axis, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * gamma + beta


def gelu_ref(x, approximation="none"):
    if approximation == "tanh":
        return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))
    return 0.5 * x * (1 + np.vectorize(math.erf)(x / math.sqrt(2)))


def dense_ref(block, prefix, x):
    return x @ p(block, prefix + "weight").T + p(block, prefix + "bias")


def mha_ref(block, query, key, value, mask=None, prefix=""):
    """Explicit attention, one head at a time; ``mask`` bool broadcastable to (b, h, q, k)."""
    query, key, value = (np.asarray(a, np.float64) for a in (query, key, value))
    h = block.num_heads if not prefix else block.attention.num_heads
    q = dense_ref(block, prefix + "query_proj.", query)
    k = dense_ref(block, prefix + "key_proj.", key)
    v = dense_ref(block, prefix + "value_proj.", value)
    b, lq, units = q.shape
    lk, d = k.shape[1], units // h
    full = np.ones((b, h, lq, lk), bool) if mask is None else np.broadcast_to(mask, (b, h, lq, lk))
    out = np.zeros((b, lq, units))
    for bi in range(b):
        for hi in range(h):
            cols = slice(hi * d, (hi + 1) * d)
            s = q[bi, :, cols] @ k[bi, :, cols].T / math.sqrt(d)
            s = np.where(full[bi, hi], s, -np.inf)
            for i in range(lq):
                if not full[bi, hi, i].any():
                    continue  # a query with no key: zero weights
                e = np.exp(s[i] - s[i].max())
                out[bi, i, cols] = (e / e.sum()) @ v[bi, :, cols]
    return dense_ref(block, prefix + "out_proj.", out)


def encoder_layer_ref(layer, x, mask=None):
    a = mha_ref(layer, x, x, x, mask, prefix="attention.")
    h = ln_ref(x + a, p(layer, "attention_norm.gamma"), p(layer, "attention_norm.beta"))
    f = dense_ref(layer, "ffn_out.", gelu_ref(dense_ref(layer, "ffn_in.", h)))
    return ln_ref(h + f, p(layer, "ffn_norm.gamma"), p(layer, "ffn_norm.beta"))


def init(block, *inputs):
    la.random.seed(3)
    block.initialize()
    block(*inputs)
    for prm in block.collect_params().values():  # non-trivial LayerNorm parameters too
        prm.set_data(la.array(RNG.standard_normal(prm.shape).astype(np.float32) * 0.5
                              + (1.0 if prm.name == "gamma" else 0.0)))
    return block


# -- LayerNorm, GELU -----------------------------------------------------------------------------------------
def test_layer_norm_matches_numpy_and_learns_its_size():
    x = arr(3, 4, 6)
    ln = init(B.LayerNorm(), la.array(x))
    assert ln.gamma.shape == (6,) and ln.beta.shape == (6,)
    got = ln(la.array(x)).asnumpy()
    np.testing.assert_allclose(got, ln_ref(x.astype(np.float64), p(ln, "gamma"), p(ln, "beta")), rtol=1e-4,
                               atol=1e-5)


def test_layer_norm_on_another_axis():
    x = arr(2, 5, 3)
    ln = init(B.LayerNorm(axis=1, epsilon=1e-3), la.array(x))
    want = ln_ref(x.astype(np.float64), p(ln, "gamma")[:, None], p(ln, "beta")[:, None], eps=1e-3, axis=1)
    np.testing.assert_allclose(ln(la.array(x)).asnumpy(), want, rtol=1e-4, atol=1e-5)


def test_layer_norm_center_and_scale_false_freeze_beta_and_gamma():
    ln = B.LayerNorm(center=False, scale=False, in_channels=4)
    ln.initialize()
    assert ln.gamma.grad_req == "null" and ln.beta.grad_req == "null"
    x = arr(3, 4)
    np.testing.assert_allclose(ln(la.array(x)).asnumpy(), ln_ref(x, 1.0, 0.0), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("approximation", ["none", "tanh"])
def test_gelu_layer_and_activation_match_numpy(approximation):
    x = arr(4, 7) * 3
    want = gelu_ref(x.astype(np.float64), approximation)
    np.testing.assert_allclose(B.GELU(approximation)(la.array(x)).asnumpy(), want, rtol=1e-5, atol=1e-6)
    act = B.Activation("gelu" if approximation == "none" else "gelu_tanh")
    np.testing.assert_allclose(act(la.array(x)).asnumpy(), want, rtol=1e-5, atol=1e-6)


def test_gelu_rejects_an_unknown_approximation():
    with pytest.raises(la.LazyArrayError, match="GELU: approximation"):
        B.GELU("erf")


# -- masks --------------------------------------------------------------------------------------------------
def test_causal_and_padding_masks():
    np.testing.assert_array_equal(B.causal_mask(4).asnumpy(), np.tril(np.ones((4, 4), bool)))
    got = B.padding_mask(la.array([2, 0, 4]), 4).asnumpy()
    assert got.shape == (3, 1, 1, 4) and got.dtype == bool
    np.testing.assert_array_equal(got[:, 0, 0], np.arange(4)[None, :] < np.array([2, 0, 4])[:, None])
    with pytest.raises(la.LazyArrayError, match="padding_mask: valid_length must be 1-D"):
        B.padding_mask(la.array([[2]]), 4)


# -- MultiHeadAttention ----------------------------------------------------------------------------------------
def _mha(units=8, heads=2, *inputs):
    return init(B.MultiHeadAttention(units, heads), *inputs)


def test_self_attention_matches_the_per_head_reference():
    x = arr(3, 5, 6)
    mha = _mha(8, 2, la.array(x))
    got = mha(la.array(x)).asnumpy()
    assert got.shape == (3, 5, 8)
    np.testing.assert_allclose(got, mha_ref(mha, x, x, x), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("kind", ["padding", "causal", "both", "3d"])
def test_masked_attention_matches_the_reference(kind):
    x = arr(3, 5, 8)
    mha = _mha(8, 4, la.array(x))
    valid = np.array([5, 2, 3])
    pad = np.arange(5)[None, None, None, :] < valid[:, None, None, None]
    causal = np.tril(np.ones((5, 5), bool))
    mask = {"padding": pad, "causal": causal, "both": pad & causal,
            "3d": np.broadcast_to(pad[:, 0] & causal, (3, 5, 5))}[kind]
    lmask = {"padding": B.padding_mask(la.array(valid), 5), "causal": B.causal_mask(5),
             "both": la.logical_and(B.padding_mask(la.array(valid), 5), B.causal_mask(5)),
             "3d": la.array(np.ascontiguousarray(mask))}[kind]
    ref_mask = mask[:, None] if kind == "3d" else mask
    got = mha(la.array(x), la.array(x), la.array(x), lmask).asnumpy()
    np.testing.assert_allclose(got, mha_ref(mha, x, x, x, ref_mask), rtol=1e-4, atol=1e-5)


def test_cross_attention_with_other_lengths_and_sizes():
    q, kv = arr(2, 3, 4), arr(2, 6, 5)
    mha = _mha(6, 3, la.array(q), la.array(kv))
    assert mha.key_proj.weight.shape == (6, 5) and mha.query_proj.weight.shape == (6, 4)
    got = mha(la.array(q), la.array(kv)).asnumpy()
    assert got.shape == (2, 3, 6)
    np.testing.assert_allclose(got, mha_ref(mha, q, kv, kv), rtol=1e-4, atol=1e-5)


def test_a_query_with_every_key_masked_gets_zero_attention_not_nan():
    x = arr(2, 4, 8)
    mha = _mha(8, 2, la.array(x))
    mask = np.ones((2, 1, 4, 4), bool)
    mask[1, :, 2] = False
    got = mha(la.array(x), la.array(x), la.array(x), la.array(mask)).asnumpy()
    assert np.isfinite(got).all()
    np.testing.assert_allclose(got[1, 2], p(mha, "out_proj.bias"), rtol=1e-5)  # zero heads -> bias only
    np.testing.assert_allclose(got, mha_ref(mha, x, x, x, mask), rtol=1e-4, atol=1e-5)


def test_attention_errors_name_the_layer_and_the_fix():
    with pytest.raises(la.LazyArrayError, match="units .*multiple of num_heads"):
        B.MultiHeadAttention(10, 3)
    mha = B.MultiHeadAttention(8, 2)
    mha.initialize()
    x = la.ones((2, 3, 8))
    with pytest.raises(la.LazyArrayError, match="mask must be bool"):
        mha(x, x, x, la.ones((3, 3)))
    with pytest.raises(la.LazyArrayError, match="query must be \\(batch, length, features\\)"):
        mha(la.ones((3, 8)))


# -- encoder layer, positions --------------------------------------------------------------------------------
def test_encoder_layer_matches_the_reference():
    x = arr(2, 5, 8)
    layer = init(B.TransformerEncoderLayer(8, 16, 2), la.array(x))
    valid = np.array([5, 3])
    mask = np.arange(5)[None, None, None, :] < valid[:, None, None, None]
    got = layer(la.array(x), B.padding_mask(la.array(valid), 5)).asnumpy()
    np.testing.assert_allclose(got, encoder_layer_ref(layer, x.astype(np.float64), mask), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(layer(la.array(x)).asnumpy(), encoder_layer_ref(layer, x.astype(np.float64)),
                               rtol=1e-4, atol=1e-4)


def test_positional_embedding_adds_the_first_rows_and_only_they_get_gradients():
    pos = B.PositionalEmbedding(6, 3)
    pos.initialize()
    x = la.array(arr(2, 4, 3))
    with la.autograd.record():
        y = pos(x)
        y.sum().backward()
    table = pos.embedding.weight.data().asnumpy()
    np.testing.assert_allclose(y.asnumpy(), x.asnumpy() + table[:4], rtol=1e-6)
    grad = pos.embedding.weight.grad().asnumpy()
    np.testing.assert_array_equal(grad[:4], 2.0)
    np.testing.assert_array_equal(grad[4:], 0.0)
    with pytest.raises(la.LazyArrayError, match="length 7 exceeds max_length 6"):
        pos(la.ones((1, 7, 3)))


# -- hybridized == imperative; export ---------------------------------------------------------------------------
def _outputs_and_grads(factory, inputs, hybridize):
    la.random.seed(5)
    net = factory()
    net.initialize()
    if hybridize:
        net.hybridize()
    xs = [la.array(a) for a in inputs]
    for x in xs:
        if x.dtype.kind == "f":
            x.attach_grad()
    outs = []
    for _ in range(2):  # the second call runs from the cache
        with la.autograd.record():
            y = net(*xs)
            (y * la.array(np.linspace(-1, 1, y.size).reshape(y.shape).astype(np.float32))).sum().backward()
        outs.append(y.asnumpy())
    grads = {n: prm.grad().asnumpy() for n, prm in net.collect_params().items()}
    return outs, grads, [x.grad.asnumpy() for x in xs if x.dtype.kind == "f"], net


def _mask_input():
    return B.padding_mask(la.array([4, 2]), 4).asnumpy() & np.tril(np.ones((4, 4), bool))


LAYERS = {
    "layer_norm": (lambda: B.LayerNorm(), lambda: [arr(2, 3, 5)]),
    "gelu": (lambda: B.GELU(), lambda: [arr(3, 4)]),
    "gelu_tanh": (lambda: B.GELU("tanh"), lambda: [arr(3, 4)]),
    "attention": (lambda: B.MultiHeadAttention(8, 2), lambda: [arr(2, 4, 6)]),
    "attention_masked": (lambda: B.MultiHeadAttention(8, 2), lambda: [arr(2, 4, 6), arr(2, 4, 6), arr(2, 4, 6),
                                                                       _mask_input()]),
    "encoder_layer": (lambda: B.TransformerEncoderLayer(8, 16, 2), lambda: [arr(2, 4, 8), _mask_input()]),
    "positions": (lambda: B.PositionalEmbedding(6, 3), lambda: [arr(2, 4, 3)]),
}


@pytest.mark.parametrize("name", sorted(LAYERS))
def test_hybridized_equals_imperative_outputs_and_gradients(name):
    factory, make = LAYERS[name]
    inputs = make()
    imp_out, imp_g, imp_x, _ = _outputs_and_grads(factory, inputs, False)
    hyb_out, hyb_g, hyb_x, net = _outputs_and_grads(factory, inputs, True)
    assert net.trace_count == 1
    for a, b in zip(imp_out, hyb_out):
        np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-6)
    assert imp_g.keys() == hyb_g.keys()
    for n in imp_g:
        np.testing.assert_allclose(hyb_g[n], imp_g[n], rtol=1e-4, atol=1e-5, err_msg=n)
    for a, b in zip(imp_x, hyb_x):
        np.testing.assert_allclose(b, a, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("name", ["encoder_layer", "attention_masked", "layer_norm", "gelu_tanh"])
def test_export_then_imports_gives_equal_outputs(name, tmp_path):
    factory, make = LAYERS[name]
    inputs = [la.array(a) for a in make()]
    la.random.seed(5)
    net = factory()
    net.initialize()
    net.hybridize()
    want = net(*inputs).asnumpy()
    sym_file, param_file = net.export(str(tmp_path / name))
    names = ["data"] if len(inputs) == 1 else [f"data{i}" for i in range(len(inputs))]
    back = B.SymbolBlock.imports(sym_file, names, param_file)
    np.testing.assert_allclose(back(*inputs).asnumpy(), want, rtol=1e-6, atol=1e-7)
