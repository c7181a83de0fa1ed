"""fuse_attention: matmul, score ops, softmax, matmul -> one nn.fused_attention in inference graphs,
bit for bit the values of the ops it replaces (scales, additive and boolean masks that broadcast,
causal masks, fully masked rows), and only where the replaced values feed nothing else. (The kernel
``head_loop``, within a few ulps, is off here: ``tests/kernels/test_attention_head_loop.py``.)"""
from __future__ import annotations

import numpy as np
import pytest

import lazyarray as la
from lazyarray import blocks as B
from lazyarray import jit
from lazyarray.graph.passes.attention import fuse_attention
from lazyarray.graph.symbol import Symbol
from lazyarray.ops.attention import code

RNG = np.random.default_rng(0)
S = la.sym


@pytest.fixture(autouse=True)
def _no_head_loop(monkeypatch):
    monkeypatch.setattr(la.config, "attention_head_loop_max_macs", 0)


def _ops(sym):
    return [n.op.name for n in sym.topo() if n.op is not None]


def _vars(dtype, b, h, s, t, d):
    q = S.var("q", shape=(b, h, s, d), dtype=dtype)
    k = S.var("k", shape=(b, h, t, d), dtype=dtype)
    v = S.var("v", shape=(b, h, t, d + 3), dtype=dtype)
    return q, k, v


def _values(dtype, b, h, s, t, d, **extra):
    vals = {"q": RNG.standard_normal((b, h, s, d)), "k": RNG.standard_normal((b, h, t, d)),
            "v": RNG.standard_normal((b, h, t, d + 3))}
    vals = {n: a.astype(dtype) for n, a in vals.items()}
    vals.update(extra)
    return vals


def _kt(k):
    return S.transpose(k, axes=(0, 1, 3, 2))


def _scaled_additive(dtype, b, h, s, t, d):
    """HF BERT: (q @ k^T) * scale + mask (batch, 1, 1, keys), padding as a large negative."""
    q, k, v = _vars(dtype, b, h, s, t, d)
    m = S.var("mask", shape=(b, 1, 1, t), dtype=dtype)
    p = S.nn.softmax(S.add(S.multiply(S.matmul(q, _kt(k)), 0.25), m), axis=-1)
    mask = np.zeros((b, 1, 1, t), dtype)
    mask[..., t // 2:] = np.finfo(dtype).min
    return S.matmul(p, v), {"mask": mask}, [code("multiply", 0), code("add", 0)]


def _causal_where(dtype, b, h, s, t, d):
    """A causal decoder: where(causal, -inf, scores / scale), the mask (queries, keys) boolean."""
    q, k, v = _vars(dtype, b, h, s, t, d)
    c = S.var("causal", shape=(s, t), dtype="bool")
    sc = S.divide(S.matmul(q, _kt(k)), 4.0)
    p = S.nn.softmax(S.where(c, S.var("fill", shape=(), dtype=dtype), sc), axis=3)
    return S.matmul(p, v), {"causal": np.triu(np.ones((s, t), bool), 1),
                            "fill": np.array(-np.inf, dtype)}, [code("divide", 0), code("where", 2)]


def _keep_where(dtype, b, h, s, t, d):
    """where(keep, scores, fill): the running value at where's second input; a mask row all False
    gives softmax's NaN row, as the ops did."""
    q, k, v = _vars(dtype, b, h, s, t, d)
    keep = S.var("keep", shape=(b, 1, s, t), dtype="bool")
    p = S.nn.softmax(S.where(keep, S.matmul(q, _kt(k)), S.var("fill", shape=(), dtype=dtype)), axis=-1)
    mask = RNG.random((b, 1, s, t)) > 0.3
    mask[0, 0, 0] = False
    return S.matmul(p, v), {"keep": mask, "fill": np.array(-np.inf, dtype)}, [code("where", 1)]


def _split_scale(dtype, b, h, s, t, d):
    """torch's scaled_dot_product_attention export: q and k^T each times sqrt(scale) (a (1,)
    array), plus a (batch, heads, 1, keys) bias, scores added on the right."""
    q, k, v = _vars(dtype, b, h, s, t, d)
    r = S.var("root", shape=(1,), dtype=dtype)
    bias = S.var("bias", shape=(b, h, 1, t), dtype=dtype)
    sc = S.matmul(S.multiply(q, r), S.multiply(r, _kt(k)))
    p = S.nn.softmax(S.add(bias, sc), axis=-1)
    return S.matmul(p, v), {"root": np.array([d ** -0.25], dtype),
                            "bias": RNG.standard_normal((b, h, 1, t)).astype(dtype)}, [code("add", 1)]


def _two_biases_and_casts(dtype, b, h, s, t, d):
    """T5: a position bias of the scores' shape, then a mask; HF ViT: casts to the same dtype after
    the softmax; a subtract with the scores second."""
    q, k, v = _vars(dtype, b, h, s, t, d)
    pos = S.var("pos", shape=(b, h, s, t), dtype=dtype)
    m = S.var("mask", shape=(1, 1, s, t), dtype=dtype)
    sc = S.subtract(m, S.add(S.matmul(q, _kt(k)), pos))
    p = S.cast(S.cast(S.nn.softmax(sc, axis=-1), dtype=dtype), dtype=dtype)
    return S.matmul(p, v), {"pos": RNG.standard_normal((b, h, s, t)).astype(dtype),
                            "mask": RNG.standard_normal((1, 1, s, t)).astype(dtype)}, \
        [code("add", 0), code("subtract", 1)]


def _bare(dtype, b, h, s, t, d):
    q, k, v = _vars(dtype, b, h, s, t, d)
    return S.matmul(S.nn.softmax(S.matmul(q, _kt(k)), axis=-1), v), {}, []


PATTERNS = [_scaled_additive, _causal_where, _keep_where, _split_scale, _two_biases_and_casts, _bare]
SHAPES = [(1, 2, 7, 7, 16), (3, 4, 5, 9, 8), (2, 1, 1, 1, 4), (1, 2, 65, 65, 16)]


@pytest.mark.parametrize("shape", SHAPES, ids=["bert-b1", "batch3-4heads", "one-key", "vit"])
@pytest.mark.parametrize("pattern", PATTERNS, ids=lambda f: f.__name__.strip("_"))
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_one_node_and_values_equal_bit_for_bit(pattern, shape, dtype, run_symbol):
    sym, extra, score_ops = pattern(dtype, *shape)
    out = fuse_attention(sym).check()
    assert _ops(out).count("fused_attention") == 1 and "softmax" not in _ops(out)
    node = next(n for n in out.topo() if n.op is not None and n.op.name == "fused_attention")
    assert list(node.params["score_ops"]) == score_ops
    assert node.avals == sym.outputs[0].node.avals
    values = _values(dtype, *shape, **extra)
    got, want = run_symbol(out, **values)[0], run_symbol(sym, **values)[0]
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_heads_merged_after_it_become_its_layout(dtype, run_symbol):
    sym, extra, _ = _scaled_additive(dtype, 2, 3, 7, 7, 8)
    merged = S.reshape(S.transpose(sym, axes=(0, 2, 1, 3)), shape=(2, 7, 33))
    out = fuse_attention(merged).check()
    assert _ops(out) == ["transpose", "fused_attention"]  # (k's transpose stays: a view)
    node = out.outputs[0].node
    assert node.params["out_axes"] == (0, 2, 1, 3) and node.params["out_shape"] == (2, 7, 33)
    values = _values(dtype, 2, 3, 7, 7, 8, **extra)
    np.testing.assert_array_equal(run_symbol(out, **values)[0], run_symbol(merged, **values)[0])


def test_a_transpose_read_elsewhere_stays_a_step():
    sym, _, _ = _bare("float32", 1, 2, 5, 5, 4)
    t = S.transpose(sym, axes=(0, 2, 1, 3))
    out = fuse_attention(_group(S.reshape(t, shape=(1, 5, 14)), S.sum(t)))
    assert "reshape" in _ops(out) and _ops(out).count("fused_attention") == 1


def test_split_scale_takes_the_operands_ops(run_symbol):
    sym, _, _ = _split_scale("float32", 1, 2, 7, 7, 16)
    node = next(n for n in fuse_attention(sym).topo() if n.op is not None and n.op.name == "fused_attention")
    assert node.params["q_ops"] == (code("multiply", 0),) and node.params["k_ops"] == (code("multiply", 1),)


def test_a_fully_masked_row_gives_what_softmax_gave(run_symbol):
    sym, extra, _ = _causal_where("float32", 1, 2, 4, 4, 8)
    extra["causal"] = np.ones((4, 4), bool)  # every score -inf: softmax's NaN rows
    values = _values("float32", 1, 2, 4, 4, 8, **extra)
    got = run_symbol(fuse_attention(sym), **values)[0]
    assert np.isnan(got).all()
    np.testing.assert_array_equal(got, run_symbol(sym, **values)[0])


def _group(*syms):
    return Symbol([s.outputs[0] for s in syms])


def _not_fused(sym):
    assert "fused_attention" not in _ops(fuse_attention(sym))


def test_a_softmax_read_elsewhere_is_kept():
    q, k, v = _vars("float32", 1, 2, 5, 5, 4)
    p = S.nn.softmax(S.matmul(q, _kt(k)), axis=-1)
    _not_fused(_group(S.matmul(p, v), p))


def test_scores_read_elsewhere_are_kept():
    q, k, v = _vars("float32", 1, 2, 5, 5, 4)
    sc = S.multiply(S.matmul(q, _kt(k)), 0.5)
    _not_fused(_group(S.matmul(S.nn.softmax(sc, axis=-1), v), S.sum(sc)))


def test_softmax_over_another_axis_is_kept():
    q, k, v = _vars("float32", 1, 2, 5, 5, 4)
    _not_fused(S.matmul(S.nn.softmax(S.matmul(q, _kt(k)), axis=2), v))


def test_an_extra_that_grows_the_scores_is_kept():
    q, k, v = _vars("float32", 1, 2, 5, 5, 4)
    m = S.var("mask", shape=(3, 2, 5, 5))  # broadcasting the scores to batch 3
    _not_fused(S.matmul(S.nn.softmax(S.add(S.matmul(q, _kt(k)), m), axis=-1), v))


def test_mixed_dtypes_are_kept():
    q, k, _ = _vars("float32", 1, 2, 5, 5, 4)
    v = S.var("v", shape=(1, 2, 5, 4), dtype="float64")
    _not_fused(S.matmul(S.nn.softmax(S.matmul(q, _kt(k)), axis=-1), v))


def test_switched_off_by_the_tuning_table():
    sym, _, _ = _bare("float32", 1, 2, 5, 5, 4)
    with la.tuning(fuse_attention=False):
        assert fuse_attention(sym) is sym


class _Attention(B.HybridBlock):
    def __init__(self):
        super().__init__()
        self.attn = B.MultiHeadAttention(16, 2)

    def forward(self, x):
        return self.attn(x)


def test_a_hybridized_block_runs_it_in_inference_and_explain_names_it():
    la.random.seed(0)
    x = la.array(RNG.standard_normal((2, 6, 16)).astype("float32"))
    net = _Attention()
    net.initialize()
    want = net(x).asnumpy()
    net.hybridize()
    got = net(x).asnumpy()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    impl = "compiled" if jit.enabled() else "batched_blas"  # (kernels/attention.py)
    assert f"nn.fused_attention[{impl}]" in str(net.explain(x))


def test_training_keeps_the_recorded_ops():
    la.random.seed(0)
    x = la.array(RNG.standard_normal((2, 6, 16)).astype("float32"))
    net = _Attention()
    net.initialize()
    net.hybridize()
    with la.autograd.record():
        text = str(net.explain(x))
    assert "nn.softmax" in text and "fused_attention" not in text
