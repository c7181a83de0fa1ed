"""nn.fused_attention's compiled and batched_blas against the op's reference kernel (the replaced ops'
kernels one after the other): the same values bit for bit, float32 and float64, broadcast batch dims,
views, masks, empty dims (each test on the compiled kernels and on NumPy's: ``kernel_path``); where
each applies, what a compiled step binds, and what explain() and the profile name. ``head_loop`` (not
bit for bit: its own test file, ``test_attention_head_loop.py``) is off here."""
from __future__ import annotations

import numpy as np
import pytest

import lazyarray as la
from lazyarray import kernels
from lazyarray.kernels import attention as A
from lazyarray.ops import registry
from lazyarray.ops.attention import code

RNG = np.random.default_rng(1)
REFERENCE = registry.get("fused_attention").kernel
SCALE_MASK = {"score_ops": (code("multiply", 0), code("add", 0))}


@pytest.fixture(autouse=True)
def _no_head_loop(monkeypatch):
    monkeypatch.setattr(la.config, "attention_head_loop_max_macs", 0)


def _qkv(dtype, batch, s, t, d, e):
    f = lambda *shape: RNG.standard_normal(shape).astype(dtype)  # noqa: E731
    return f(*batch, s, d), f(*batch, d, t), f(*batch, t, e)


@pytest.mark.parametrize("batch", [(1, 2), (3, 4), (2,), (), (1, 1)])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_equal_to_the_reference_bit_for_bit(dtype, batch, kernel_path):
    q, k, v = _qkv(dtype, batch, 7, 9, 16, 5)
    scale = np.array(0.25, dtype)
    mask = np.where(RNG.random((*batch[:1], 1, 1, 9)[-len(batch) - 2:]) > 0.3, 0, np.finfo(dtype).min).astype(dtype)
    got = A.run_attention(np, q, k, v, scale, mask, **SCALE_MASK)
    np.testing.assert_array_equal(got, REFERENCE(np, q, k, v, scale, mask, **SCALE_MASK))
    out = np.empty(got.shape, dtype)
    assert A.run_attention(np, q, k, v, scale, mask, out=out, **SCALE_MASK) is out
    np.testing.assert_array_equal(out, got)


def test_broadcast_batch_dims_and_views(kernel_path):
    q = RNG.standard_normal((2, 7, 3, 16)).astype("float32").transpose(0, 2, 1, 3)  # (2, 3, 7, 16), a view
    k = RNG.standard_normal((1, 3, 9, 16)).astype("float32").transpose(0, 1, 3, 2)  # k^T: column-major stack
    v = RNG.standard_normal((3, 9, 4)).astype("float32")
    got = A.run_attention(np, q, k, v)
    assert got.shape == (2, 3, 7, 4)
    np.testing.assert_array_equal(got, REFERENCE(np, q, k, v))


@pytest.mark.parametrize("ops,extras", [
    ((code("where", 2),), lambda s: (np.triu(np.ones(s, bool), 1), np.array(-np.inf, "float32"))),
    ((code("where", 1),), lambda s: (RNG.random(s) > 0.5, np.array(-1e9, "float32"))),
    ((code("divide", 0), code("subtract", 1)), lambda s: (np.array(3.0, "float32"), np.ones(s, "float32"))),
    ((code("divide", 1),), lambda s: (np.full(s, 2.0, "float32"),)),
], ids=["causal-where", "keep-where", "divide-subtract", "divide-into"])
def test_every_chain_op_in_place(ops, extras, kernel_path):
    q, k, v = _qkv("float32", (2, 2), 6, 6, 8, 8)
    ex = extras((6, 6))
    got = A.run_attention(np, q, k, v, *ex, score_ops=ops)
    np.testing.assert_array_equal(got, REFERENCE(np, q, k, v, *ex, score_ops=ops))


def test_q_and_k_ops_leave_the_operands_alone(kernel_path):
    q, k, v = _qkv("float64", (1, 2), 5, 5, 4, 4)
    r = np.array([0.7])
    before = q.copy(), k.copy()
    ops = {"q_ops": (code("multiply", 0),), "k_ops": (code("multiply", 1),)}
    np.testing.assert_array_equal(A.run_attention(np, q, k, v, r, r, **ops), REFERENCE(np, q, k, v, r, r, **ops))
    np.testing.assert_array_equal(q, before[0])
    np.testing.assert_array_equal(k, before[1])


@pytest.mark.parametrize("s,t,batch", [(0, 5, (1, 2)), (5, 0, (1, 2)), (5, 5, (0, 2))])
def test_empty_dims(s, t, batch, kernel_path):
    q, k, v = _qkv("float32", batch, s, t, 4, 3)
    got = A.run_attention(np, q, k, v)
    want = REFERENCE(np, q, k, v)
    assert got.shape == want.shape
    np.testing.assert_array_equal(got, want)


def test_large_scores_come_from_scratch_and_stay_equal(kernel_path):
    q, k, v = _qkv("float32", (2, 4), 96, 96, 8, 8)  # 295 KB of scores
    assert 4 * 2 * 4 * 96 * 96 >= A.SCRATCH_FROM_BYTES
    for _ in range(2):
        np.testing.assert_array_equal(A.run_attention(np, q, k, v), REFERENCE(np, q, k, v))


def test_where_it_applies(kernel_path):
    q, k, v = _qkv("float32", (1, 2), 4, 4, 4, 4)
    want = "compiled" if kernel_path == "compiled" else "batched_blas"
    assert str(kernels.choose("fused_attention", np, q, k, v)) == f"fused_attention[{want}]"
    with la.tuning(attention_compiled=False):
        assert str(kernels.choose("fused_attention", np, q, k, v)) == "fused_attention[batched_blas]"
    half = [a.astype("float16") for a in (q, k, v)]
    assert kernels.choose("fused_attention", np, *half).impl.name == "reference"
    np.testing.assert_array_equal(A.run_attention(np, *half), REFERENCE(np, *half))


def test_the_profile_names_it(kernel_path):
    q, k, v = _qkv("float32", (1, 2), 4, 4, 4, 4)
    with la.profile() as prof:
        la.nn.fused_attention(q, k, v, [])
    want = "compiled" if kernel_path == "compiled" else "batched_blas"
    assert [e.key for e in prof.events] == [f"nn.fused_attention[{want}]"]


@pytest.mark.parametrize("axes,shape", [((0, 2, 1, 3), (2, 7, 12)), ((2, 0, 1, 3), (7, 2, 12)), ((0, 2, 3, 1), (2, 7, 12))],
                         ids=["heads-merged", "sequence-first", "features-not-last"])
def test_the_result_laid_out_as_transpose_then_reshape(axes, shape, kernel_path):
    q, k, v = _qkv("float32", (2, 3), 7, 5, 8, 4)
    want = REFERENCE(np, q, k, v).transpose(axes).reshape(shape)
    lay = {"out_axes": axes, "out_shape": shape}
    np.testing.assert_array_equal(REFERENCE(np, q, k, v, **lay), want)
    np.testing.assert_array_equal(A.run_attention(np, q, k, v, **lay), want)
    out = np.empty(shape, "float32")
    assert A.run_attention(np, q, k, v, out=out, **lay) is out
    np.testing.assert_array_equal(out, want)


# -- compiled: the chain and the row maxima in one compiled pass, what it declines, what a step binds -------------

def _bert_heads(dtype, batch=1, seq=7):
    """BERT-mini's attention at a program step: q, k, v as views of the projections (heads split off,
    k transposed), a 0-d scale, an additive (batch, 1, seq, seq) mask, the heads merged into ``out``."""
    proj = RNG.standard_normal((batch, seq, 3, 2, 16)).astype(dtype)
    q, k, v = proj[:, :, 0].transpose(0, 2, 1, 3), proj[:, :, 1].transpose(0, 2, 3, 1), proj[:, :, 2].transpose(0, 2, 1, 3)
    mask = np.where(RNG.random((batch, 1, seq, seq)) > 0.3, 0, np.finfo(dtype).min).astype(dtype)
    params = {**SCALE_MASK, "out_axes": (0, 2, 1, 3), "out_shape": (batch, seq, 32)}
    return (q, k, v, np.array(0.25, dtype), mask), params


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("batch,seq", [(1, 7), (8, 7), (2, 17), (0, 7), (2, 0)])
def test_a_bound_step_runs_compiled_with_the_references_values(dtype, batch, seq, kernel_path):
    arrays, params = _bert_heads(dtype, batch, seq)
    want = REFERENCE(np, *arrays, **params)
    out = np.empty(want.shape, dtype)
    bound = kernels.bind("fused_attention", np, *arrays, out=out, **params)
    compiled = kernel_path == "compiled" and seq > 0  # (rows of no values: batched_blas)
    assert bound.choice.impl.name == ("compiled" if compiled else "batched_blas")
    for _ in range(2):  # (the plan made once serves every call)
        assert bound.fn(*arrays, out=out) is out
        np.testing.assert_array_equal(out, want)
    np.testing.assert_array_equal(bound.fn(*arrays), want)


def test_compiled_applies_per_call_where_its_chain_fits(kernel_path):
    """Extras of another dtype than the scores', long rows: batched_blas runs (its values)."""
    (q, k, v, scale, mask), params = _bert_heads("float32")
    fits = kernel_path == "compiled"
    cases = [((q, k, v, scale, mask), fits), ((q, k, v, scale.astype("float64"), mask), False),
             ((q, k, v, scale, mask.astype("float64")), False)]
    for arrays, compiled in cases:
        assert (A._plan(*arrays[:3], arrays[3:], (), (), params["score_ops"], (), ()) is not None) == compiled
        want = A._batched_blas(np, *arrays, **params)
        np.testing.assert_array_equal(A.run_attention(np, *arrays, **params), want)
    q2, k2, v2 = _qkv("float32", (1, 2), 4, 129, 8, 4)  # (rows longer than the softmax pass takes)
    assert A._plan(q2, k2, v2, (), (), (), (), (), ()) is None
    np.testing.assert_array_equal(A.run_attention(np, q2, k2, v2), REFERENCE(np, q2, k2, v2))


def test_a_where_mask_and_a_strided_bias_in_the_compiled_pass(kernel_path):
    """A causal decoder's boolean mask and fill (``where``), a T5 position bias read through a strided view."""
    q, k, v = _qkv("float32", (2, 3), 6, 6, 8, 4)
    bias = RNG.standard_normal((1, 6, 6, 3)).astype("float32").transpose(0, 3, 1, 2)  # (1, 3, 6, 6), a view
    causal, fill = np.triu(np.ones((6, 6), bool), 1), np.array(-np.inf, "float32")
    ops = (code("add", 1), code("divide", 0), code("where", 2), code("where", 1))
    extras = (bias, np.array(2.0, "float32"), causal, fill, RNG.random((2, 1, 1, 6)) > 0.2, np.array(-1e9, "float32"))
    want = REFERENCE(np, q, k, v, *extras, score_ops=ops)
    np.testing.assert_array_equal(A.run_attention(np, q, k, v, *extras, score_ops=ops), want)
    bound = kernels.bind("fused_attention", np, q, k, v, *extras, score_ops=ops)
    assert bound.choice.impl.name == ("compiled" if kernel_path == "compiled" else "batched_blas")
    np.testing.assert_array_equal(bound.fn(q, k, v, *extras), want)


def test_compiled_is_switched_off_in_the_tuning_table(kernel_path):
    arrays, params = _bert_heads("float32")
    with la.tuning(attention_compiled=False):
        bound = kernels.bind("fused_attention", np, *arrays, **params)
        assert A._plan(*arrays[:3], arrays[3:], (), (), params["score_ops"], (), ()) is None
    assert bound.choice.impl.name == "batched_blas"
    np.testing.assert_array_equal(bound.fn(*arrays), REFERENCE(np, *arrays, **params))


def test_a_bound_step_with_q_and_k_ops_and_the_sequence_first_layout(kernel_path):
    """torch's MultiheadAttention export: q and k each scaled by a (1,) extra, an additive mask, the
    heads merged sequence first (``out_axes`` (2, 0, 1, 3))."""
    q, k, v = _qkv("float32", (2, 2), 7, 7, 16, 16)
    r = np.array([0.5], "float32")
    mask = RNG.standard_normal((2, 2, 1, 7)).astype("float32")
    params = {"q_ops": (code("multiply", 0),), "k_ops": (code("multiply", 0),), "score_ops": (code("add", 0),),
              "out_axes": (2, 0, 1, 3), "out_shape": (14, 32)}
    want = REFERENCE(np, q, k, v, r, r, mask, **params)
    bound = kernels.bind("fused_attention", np, q, k, v, r, r, mask, out=np.empty((14, 32), "float32"), **params)
    assert bound.choice.impl.name == ("compiled" if kernel_path == "compiled" else "batched_blas")
    for _ in range(2):
        np.testing.assert_array_equal(bound.fn(q, k, v, r, r, mask, out=np.empty((14, 32), "float32")), want)
