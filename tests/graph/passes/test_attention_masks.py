"""narrow_attention_masks: a fused attention's extra that is ``broadcast_to(v)`` reads ``v``, one that is
``where(broadcast_to(c), x, y)`` reads ``where(c, x, y)`` (the attention broadcasts it), the values bit for
bit; kept where something else reads the broadcast value (``graph/passes/attention_masks.py``)."""
from __future__ import annotations

import numpy as np
import pytest

import lazyarray as la
from lazyarray.graph.passes.attention import fuse_attention
from lazyarray.graph.passes.attention_masks import narrow_attention_masks
from lazyarray.graph.symbol import Symbol

RNG = np.random.default_rng(5)
S = la.sym


@pytest.fixture(autouse=True)
def _no_head_loop(monkeypatch):
    """``head_loop`` is within a few ulps of the reference (``tests/kernels/test_attention_head_loop.py``): off
    here, so both programs run kernels that give the reference's bits."""
    monkeypatch.setattr(la.config, "attention_head_loop_max_macs", 0)


def _ops(sym):
    return [n.op.name for n in sym.topo() if n.op is not None]


def _attention(dtype, b, h, s, t, d, bias):
    q = S.var("q", shape=(b, h, s, d), dtype=dtype)
    k = S.var("k", shape=(b, h, t, d), dtype=dtype)
    v = S.var("v", shape=(b, h, t, d), dtype=dtype)
    scores = S.multiply(S.matmul(q, S.transpose(k, axes=(0, 1, 3, 2))), np.dtype(dtype).type(0.25))
    return S.matmul(S.nn.softmax(S.add(scores, bias), axis=-1), v)


def _values(dtype, b, h, s, t, d):
    vals = {n: RNG.standard_normal((b, h, s if n == "q" else t, d)).astype(dtype) for n in ("q", "k", "v")}
    vals["m"] = RNG.random((b, 1, 1, t)) > 0.3
    vals["m"][..., 0] = True  # (no row fully masked)
    vals["bias"] = RNG.standard_normal((b, 1, 1, t)).astype(dtype)
    return vals


def _where_mask(dtype, b, h, s, t, d):
    """BART's padding mask: where(broadcast_to(mask, (b, 1, s, t)), 0, min)."""
    m = S.var("m", shape=(b, 1, 1, t), dtype="bool")
    t_ = np.dtype(dtype).type
    bias = S.where(S.broadcast_to(m, shape=(b, 1, s, t)), t_(0), t_(np.finfo(dtype).min))
    return _attention(dtype, b, h, s, t, d, bias)


def _broadcast_bias(dtype, b, h, s, t, d):
    """A float bias broadcast to the scores' rows before the add."""
    bias = S.broadcast_to(S.var("bias", shape=(b, 1, 1, t), dtype=dtype), shape=(b, 1, s, t))
    return _attention(dtype, b, h, s, t, d, bias)


SHAPES = [(1, 2, 7, 7, 16), (3, 2, 5, 9, 8), (2, 1, 1, 1, 4)]


@pytest.mark.parametrize("shape", SHAPES, ids=["bart-b1", "batch3", "one-key"])
@pytest.mark.parametrize("pattern", [_where_mask, _broadcast_bias], ids=lambda f: f.__name__.strip("_"))
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_the_broadcast_leaves_and_the_values_stay_bit_for_bit(pattern, shape, dtype, run_symbol):
    sym = fuse_attention(pattern(dtype, *shape)).check()
    assert "broadcast_to" in _ops(sym) and "fused_attention" in _ops(sym)
    out = narrow_attention_masks(sym).check()
    assert "broadcast_to" not in _ops(out) and _ops(out).count("fused_attention") == 1
    node = next(n for n in out.topo() if n.op is not None and n.op.name == "fused_attention")
    assert node.inputs[-1].aval.shape[-2] == 1  # (the mask's own rows: one, not seq)
    assert node.avals == sym.outputs[0].node.avals
    values = _values(dtype, *shape)
    want = run_symbol(sym, **values)[0]
    np.testing.assert_array_equal(run_symbol(out, **values)[0], want)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_compiled_programs_with_and_without_it_agree_bit_for_bit(dtype):
    """Through ``CachedOp`` (the attention's kernels: head loop, compiled, BLAS) at two calls each, the
    mask's values from a view (not C-ordered) and an empty batch too."""
    shape = (2, 2, 6, 6, 8)
    op = la.CachedOp(_where_mask(dtype, *shape))
    values = _values(dtype, *shape)
    values["q"] = np.ascontiguousarray(values["q"].transpose(0, 2, 1, 3)).transpose(0, 2, 1, 3)  # (a view)
    feeds = {k: la.array(v) for k, v in values.items() if k != "bias"}
    got = [op(**feeds).asnumpy() for _ in range(2)]
    with la.tuning(attention_masks_narrow=False):
        want = [la.CachedOp(_where_mask(dtype, *shape))(**feeds).asnumpy() for _ in range(2)]
    for g, w in zip(got, want):
        assert g.dtype == np.dtype(dtype)
        np.testing.assert_array_equal(g, w)
    sym = op._cache[op._last_key].sym
    assert "broadcast_to" not in _ops(sym)
    empty = (0, 2, 6, 6, 8)
    e = la.CachedOp(_where_mask(dtype, *empty))
    ev = _values(dtype, *empty)
    y = e(**{k: la.array(v) for k, v in ev.items() if k != "bias"}).asnumpy()
    assert y.shape == (0, 2, 6, 8)


def test_a_mask_read_elsewhere_and_the_switch_keep_the_graph():
    dtype, shape = "float32", (1, 2, 5, 5, 8)
    m = S.var("m", shape=(1, 1, 1, 5), dtype="bool")
    bias = S.where(S.broadcast_to(m, shape=(1, 1, 5, 5)), np.float32(0), np.float32(-1e9))
    y = _attention(dtype, *shape, bias)
    sym = fuse_attention(Symbol([y.outputs[0], bias.outputs[0]]))  # (the broadcast bias is an output too)
    assert narrow_attention_masks(sym) is sym
    alone = fuse_attention(_where_mask(dtype, *shape))
    with la.tuning(attention_masks_narrow=False):
        assert narrow_attention_masks(alone) is alone
    assert narrow_attention_masks(alone) is not alone
