"""nn.fused_attention's ``head_loop`` (the whole attention of small heads as one compiled loop per head)
against the op's reference kernel, float32 and float64: within the bound ``kernels/attention.py`` states
(``64 eps`` of ``|p| @ |v|``: its products and exp are not BLAS's and NumPy's), with views, broadcast
batch dims, masks, every chain op, the result's layouts and empty dims; where it applies and where it
declines, what a compiled step binds, and what explain() and the profile name."""
from __future__ import annotations

import numpy as np
import pytest

import lazyarray as la
from lazyarray import blocks as B
from lazyarray import jit, kernels
from lazyarray.kernels import attention as A
from lazyarray.kernels import attention_jit
from lazyarray.ops import registry
from lazyarray.ops.attention import code

pytest.importorskip("numba")

RNG = np.random.default_rng(3)
REFERENCE = registry.get("fused_attention").kernel
SOFTMAX = registry.get("softmax").kernel
SCALE_MASK = {"score_ops": (code("multiply", 0), code("add", 0))}


@pytest.fixture(autouse=True)
def _compiled_kernels(monkeypatch):
    monkeypatch.setattr(la.config, "jit", True)


def _qkv(dtype, batch, s, t, d, e):
    f = lambda *shape: RNG.standard_normal(shape).astype(dtype)  # noqa: E731
    return f(*batch, s, d), f(*batch, d, t), f(*batch, t, e)


def _close(got, q, k, v, *extras, **params):
    """``got`` within 64 eps of ``|p| @ |v|`` of the reference (``p`` the reference's probabilities), NaN
    where the reference has NaN."""
    want = REFERENCE(np, q, k, v, *extras, **params)
    bare = {n: params[n] for n in ("q_ops", "k_ops", "score_ops") if n in params}
    scale = REFERENCE(np, q, k, np.abs(v), *extras, **bare)  # (|p| @ |v|: p is not negative)
    if params.get("out_axes"):
        scale = scale.transpose(params["out_axes"]).reshape(params["out_shape"])
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    ok = ~np.isnan(want)
    err = np.abs(got[ok] - want[ok])
    bound = 64 * np.finfo(got.dtype).eps * (scale[ok] + np.finfo(got.dtype).tiny)
    assert np.all(err <= bound), float(np.max(err / bound)) if err.size else 0.0


def _views(dtype, batch=1, seq=7, heads=2, d=16):
    """BERT-mini's attention at a program step: q, k, v as views of the projections (heads split off,
    k transposed), a 0-d scale, an additive (batch, 1, 1, seq) mask, the heads merged into ``out``."""
    proj = RNG.standard_normal((batch, seq, 3, heads, d)).astype(dtype)
    q, k, v = proj[:, :, 0].transpose(0, 2, 1, 3), proj[:, :, 1].transpose(0, 2, 3, 1), proj[:, :, 2].transpose(0, 2, 1, 3)
    mask = np.where(RNG.random((batch, 1, 1, seq)) > 0.3, 0, np.finfo(dtype).min).astype(dtype)
    params = {**SCALE_MASK, "out_axes": (0, 2, 1, 3), "out_shape": (batch, seq, heads * d)}
    return (q, k, v, np.array(0.25, dtype), mask), params


@pytest.mark.parametrize("batch", [(1, 2), (3, 4), (2,), (), (1, 1)])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_within_the_bound_of_the_reference(dtype, batch):
    q, k, v = _qkv(dtype, batch, 7, 9, 16, 5)
    scale = np.array(0.25, dtype)
    mask = np.where(RNG.random((*batch[:1], 1, 1, 9)[-len(batch) - 2:]) > 0.3, 0, np.finfo(dtype).min).astype(dtype)
    assert str(kernels.choose("fused_attention", np, q, k, v, scale, mask, **SCALE_MASK)) == "fused_attention[head_loop]"
    got = A.run_attention(np, q, k, v, scale, mask, **SCALE_MASK)
    _close(got, q, k, v, scale, mask, **SCALE_MASK)
    out = np.empty(got.shape, dtype)
    assert A.run_attention(np, q, k, v, scale, mask, out=out, **SCALE_MASK) is out
    np.testing.assert_array_equal(out, got)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_broadcast_batch_dims_and_views(dtype):
    q = RNG.standard_normal((2, 7, 3, 16)).astype(dtype).transpose(0, 2, 1, 3)  # (2, 3, 7, 16), a view
    k = RNG.standard_normal((1, 3, 9, 16)).astype(dtype).transpose(0, 1, 3, 2)  # k^T: column-major stack
    v = RNG.standard_normal((3, 9, 4)).astype(dtype)[:, ::-1]  # (negative strides)
    assert kernels.choose("fused_attention", np, q, k, v).impl.name == "head_loop"
    _close(A.run_attention(np, q, k, v), q, k, v)


@pytest.mark.parametrize("ops,extras", [
    ((code("where", 2),), lambda s: (np.triu(np.ones(s, bool), 1), np.array(-np.inf, "float32"))),
    ((code("where", 1),), lambda s: (RNG.random(s) > 0.5, np.array(-1e9, "float32"))),
    ((code("divide", 0), code("subtract", 1)), lambda s: (np.array(3.0, "float32"), np.ones(s, "float32"))),
    ((code("divide", 1),), lambda s: (np.full(s, 2.0, "float32"),)),
], ids=["causal-where", "keep-where", "divide-subtract", "divide-into"])
def test_every_chain_op(ops, extras):
    q, k, v = _qkv("float32", (2, 2), 6, 6, 8, 8)
    ex = extras((6, 6))
    _close(A.run_attention(np, q, k, v, *ex, score_ops=ops), q, k, v, *ex, score_ops=ops)


def test_a_fully_masked_row_gives_the_references_nan():
    q, k, v = _qkv("float64", (1, 2), 4, 4, 4, 4)
    keep = RNG.random((4, 4)) > 0.3
    keep[1] = False
    ex, ops = (keep, np.array(-np.inf)), (code("where", 1),)
    got = A.run_attention(np, q, k, v, *ex, score_ops=ops)
    assert np.isnan(got[:, :, 1]).all()
    _close(got, q, k, v, *ex, score_ops=ops)


def test_q_and_k_ops_leave_the_operands_alone():
    q, k, v = _qkv("float64", (1, 2), 5, 5, 4, 4)
    r = np.array([0.7])
    before = q.copy(), k.copy()
    ops = {"q_ops": (code("multiply", 0),), "k_ops": (code("multiply", 1),)}
    _close(A.run_attention(np, q, k, v, r, r, **ops), q, k, v, r, r, **ops)
    np.testing.assert_array_equal(q, before[0])
    np.testing.assert_array_equal(k, before[1])


@pytest.mark.parametrize("s,e,batch", [(0, 3, (1, 2)), (5, 0, (1, 2)), (5, 3, (0, 2)), (5, 3, (2, 0))])
def test_empty_dims(s, e, batch):
    q, k, v = _qkv("float32", batch, s, 5, 4, e)
    assert kernels.choose("fused_attention", np, q, k, v).impl.name == "head_loop"
    _close(A.run_attention(np, q, k, v), q, k, v)


def test_no_keys_and_many_keys_take_compiled():
    """Rows of no keys or of more than 128 (NumPy's one block of its row sum): ``compiled``'s case, its
    values (and batched_blas's) bit for bit."""
    for t in (0, 129):
        q, k, v = _qkv("float32", (1, 1), 2, t, 2, 2)
        with la.tuning(attention_head_loop_max_macs=1 << 20):
            assert kernels.choose("fused_attention", np, q, k, v).impl.name != "head_loop"
            np.testing.assert_array_equal(A.run_attention(np, q, k, v), REFERENCE(np, q, k, v))


@pytest.mark.parametrize("axes,shape", [((0, 2, 1, 3), (2, 7, 12)), ((2, 0, 1, 3), (7, 2, 12)), ((0, 2, 3, 1), (2, 7, 12))],
                         ids=["heads-merged", "sequence-first", "features-not-last"])
def test_the_result_laid_out_as_transpose_then_reshape(axes, shape):
    q, k, v = _qkv("float64", (2, 3), 7, 5, 8, 4)
    lay = {"out_axes": axes, "out_shape": shape}
    _close(A.run_attention(np, q, k, v, **lay), q, k, v, **lay)
    out = np.empty(shape, "float64")
    assert A.run_attention(np, q, k, v, out=out, **lay) is out
    _close(out, q, k, v, **lay)
    strided = np.empty(shape + (2,), "float64")[..., 0]  # (an out that is not C-ordered: written through)
    assert A.run_attention(np, q, k, v, out=strided, **lay) is strided
    _close(strided, q, k, v, **lay)


def test_where_it_applies_and_the_switches():
    (q, k, v, scale, mask), params = _views("float32")
    assert kernels.choose("fused_attention", np, q, k, v, scale, mask, **params).impl.name == "head_loop"
    macs = 2 * 7 * 7 * (16 + 16)
    with la.tuning(attention_head_loop_max_macs=macs - 1):
        assert kernels.choose("fused_attention", np, q, k, v, scale, mask, **params).impl.name == "compiled"
    with la.tuning(attention_head_loop_max_macs=macs):
        assert kernels.choose("fused_attention", np, q, k, v, scale, mask, **params).impl.name == "head_loop"
    with la.tuning(jit=False):
        assert kernels.choose("fused_attention", np, q, k, v, scale, mask, **params).impl.name == "batched_blas"
    # a chain the compiled pass does not take (a float extra of another dtype): head_loop declines per call
    odd = scale.astype("float64")
    got = A.run_attention(np, q, k, v, odd, mask, **params)
    with la.tuning(attention_head_loop_max_macs=0):
        np.testing.assert_array_equal(got, A.run_attention(np, q, k, v, odd, mask, **params))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("batch,seq", [(1, 7), (8, 7), (1, 17), (0, 7)])
def test_a_bound_step_runs_head_loop_within_the_bound(dtype, batch, seq):
    arrays, params = _views(dtype, batch, seq)
    want_shape = (batch, seq, 32)
    out = np.empty(want_shape, dtype)
    bound = kernels.bind("fused_attention", np, *arrays, out=out, **params)
    assert bound.choice.impl.name == "head_loop"
    for _ in range(2):  # (the plan made once serves every call)
        assert bound.fn(*arrays, out=out) is out
        _close(out, *arrays, **params)
    _close(bound.fn(*arrays), *arrays, **params)


class _Attention(B.HybridBlock):
    def __init__(self):
        super().__init__()
        self.attn = B.MultiHeadAttention(16, 2)

    def forward(self, x):
        return self.attn(x)


def test_a_hybridized_block_runs_it_and_explain_and_the_profile_name_it():
    la.random.seed(0)
    x = la.array(RNG.standard_normal((2, 6, 16)).astype("float32"))
    net = _Attention()
    net.initialize()
    want = net(x).asnumpy()  # (eager: the recorded ops' kernels)
    net.hybridize()
    got = net(x).asnumpy()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    assert "nn.fused_attention[head_loop]" in str(net.explain(x))
    with la.profile() as prof:
        net(x)
    assert "nn.fused_attention[head_loop]" in [e.key for e in prof.events]


def test_a_programs_first_run_loads_no_numba_for_it_and_the_next_runs_take_it():
    """Tiered: a program's first run takes the NumPy path (``batched_blas``; head_loop's kernel is not looked
    up), its values within head_loop's bound of the later runs'; the next runs take head_loop."""
    la.random.seed(0)
    x = la.array(RNG.standard_normal((1, 5, 16)).astype("float32"))
    net = _Attention()
    net.initialize()
    net.hybridize()
    with jit.first_run():
        assert attention_jit.heads_kernel() is None
    first, second = net(x).asnumpy(), net(x).asnumpy()
    np.testing.assert_allclose(first, second, rtol=1e-5, atol=1e-6)
    with la.profile() as prof:
        third = net(x).asnumpy()
    np.testing.assert_array_equal(second, third)
    assert "nn.fused_attention[head_loop]" in [e.key for e in prof.events]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_a_bound_step_called_with_other_arrays_views_them_again(dtype):
    """The views a bound step keeps from its last call (``_heads_args``) are used only for the same arrays: a
    scale, a mask and a result buffer swapped between calls (same shapes, other values) give each call's values;
    a result not given comes new each call."""
    (q, k, v, scale, mask), params = _views(dtype, batch=2)
    outs = [np.empty(params["out_shape"], dtype) for _ in range(2)]
    bound = kernels.bind("fused_attention", np, q, k, v, scale, mask, out=outs[0], **params)
    assert bound.choice.impl.name == "head_loop"
    scales = [scale, np.array(0.5, dtype), np.array(0.5, dtype)]
    masks = [mask, np.zeros_like(mask), mask]
    for n in range(6):
        arrays = (q, k, v, scales[n % 3], masks[n % 3])
        got = bound.fn(*arrays, out=outs[n % 2])
        assert got is outs[n % 2]
        _close(got, *arrays, **params)
        again = bound.fn(*arrays)
        assert again is not got
        np.testing.assert_array_equal(again, got)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("s", [0, 1, 7])
def test_the_few_slots_kernel_gives_heads_pass_bits(dtype, s):
    """``heads_few`` (chains of at most two ops: eight arguments) against ``heads_pass`` with the dummies in
    the unused slots, on views (k transposed) and empty query dims: the same bits."""
    q, k, v = _qkv(dtype, (1, 2), s, 7, 16, 16)
    k = np.ascontiguousarray(k.transpose(0, 1, 3, 2)).transpose(0, 1, 3, 2)  # (a strided view)
    fill, no_mask = A._DUMMIES[np.dtype(dtype).type]
    scale = np.full((1, 1, 1, 1), 0.25, dtype)
    mask = (RNG.random((1, 1, 1, 7)) > 0.3)
    codes = np.array([code("multiply", 0), code("where", 1)], np.int64)
    fill_value = np.full((1, 1, 1, 1), np.finfo(dtype).min, dtype)
    few, full = np.full((1, 2, s, 16), np.nan, dtype), np.full((1, 2, s, 16), np.nan, dtype)
    attention_jit.heads_kernel(True)(q, k, v, few, codes, scale, fill_value, mask)
    attention_jit.heads_kernel()(q, k, v, full, codes, scale, fill_value, fill, fill, mask, no_mask, np.dtype(dtype).type(0))
    np.testing.assert_array_equal(few, full)
    assert not np.isnan(full).any()


def test_a_chain_of_three_ops_takes_the_twelve_argument_kernel():
    q, k, v = _qkv("float32", (1, 2), 5, 5, 8, 8)
    ops = (code("multiply", 0), code("add", 0), code("subtract", 0))
    ex = (np.array(0.5, "float32"), np.ones((5, 5), "float32"), np.full((1, 5), 0.25, "float32"))
    p = A._heads_plan(q, k, v, ex, (), (), ops, (), ())
    assert p is not None and not p.few
    _close(A.run_attention(np, q, k, v, *ex, score_ops=ops), q, k, v, *ex, score_ops=ops)
    assert A._heads_plan(q, k, v, ex[:2], (), (), ops[:2], (), ()).few
