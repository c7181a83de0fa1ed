"""nn.fused_attention's batched_blas against the op's reference kernel (the replaced ops' kernels one
after the other): the same values bit for bit, float32 and float64, broadcast batch dims, views,
masks, empty dims; where it applies and what explain() and the profile name."""
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


def _qkv(dtype, batch, s, t, d, e):
    f = lambda *shape: RNG.standard_normal(shape).astype(dtype)  # noqa: E731
    return f(*batch, s, d), f(*batch, d, t), f(*batch, t, e)


@pytest.mark.parametrize("batch", [(1, 2), (3, 4), (2,), (), (1, 1)])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_equal_to_the_reference_bit_for_bit(dtype, batch):
    q, k, v = _qkv(dtype, batch, 7, 9, 16, 5)
    scale = np.array(0.25, dtype)
    mask = np.where(RNG.random((*batch[:1], 1, 1, 9)[-len(batch) - 2:]) > 0.3, 0, np.finfo(dtype).min).astype(dtype)
    got = A.run_attention(np, q, k, v, scale, mask, **SCALE_MASK)
    np.testing.assert_array_equal(got, REFERENCE(np, q, k, v, scale, mask, **SCALE_MASK))
    out = np.empty(got.shape, dtype)
    assert A.run_attention(np, q, k, v, scale, mask, out=out, **SCALE_MASK) is out
    np.testing.assert_array_equal(out, got)


def test_broadcast_batch_dims_and_views():
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
def test_every_chain_op_in_place(ops, extras):
    q, k, v = _qkv("float32", (2, 2), 6, 6, 8, 8)
    ex = extras((6, 6))
    got = A.run_attention(np, q, k, v, *ex, score_ops=ops)
    np.testing.assert_array_equal(got, REFERENCE(np, q, k, v, *ex, score_ops=ops))


def test_q_and_k_ops_leave_the_operands_alone():
    q, k, v = _qkv("float64", (1, 2), 5, 5, 4, 4)
    r = np.array([0.7])
    before = q.copy(), k.copy()
    ops = {"q_ops": (code("multiply", 0),), "k_ops": (code("multiply", 1),)}
    np.testing.assert_array_equal(A.run_attention(np, q, k, v, r, r, **ops), REFERENCE(np, q, k, v, r, r, **ops))
    np.testing.assert_array_equal(q, before[0])
    np.testing.assert_array_equal(k, before[1])


@pytest.mark.parametrize("s,t,batch", [(0, 5, (1, 2)), (5, 0, (1, 2)), (5, 5, (0, 2))])
def test_empty_dims(s, t, batch):
    q, k, v = _qkv("float32", batch, s, t, 4, 3)
    got = A.run_attention(np, q, k, v)
    want = REFERENCE(np, q, k, v)
    assert got.shape == want.shape
    np.testing.assert_array_equal(got, want)


def test_large_scores_come_from_scratch_and_stay_equal():
    q, k, v = _qkv("float32", (2, 4), 96, 96, 8, 8)  # 295 KB of scores
    assert 4 * 2 * 4 * 96 * 96 >= A.SCRATCH_FROM_BYTES
    for _ in range(2):
        np.testing.assert_array_equal(A.run_attention(np, q, k, v), REFERENCE(np, q, k, v))


def test_where_it_applies():
    q, k, v = _qkv("float32", (1, 2), 4, 4, 4, 4)
    assert str(kernels.choose("fused_attention", np, q, k, v)) == "fused_attention[batched_blas]"
    half = [a.astype("float16") for a in (q, k, v)]
    assert kernels.choose("fused_attention", np, *half).impl.name == "reference"
    np.testing.assert_array_equal(A.run_attention(np, *half), REFERENCE(np, *half))


def test_the_profile_names_it():
    q, k, v = _qkv("float32", (1, 2), 4, 4, 4, 4)
    with la.profile() as prof:
        la.nn.fused_attention(q, k, v, [])
    assert [e.key for e in prof.events] == ["nn.fused_attention[batched_blas]"]


@pytest.mark.parametrize("axes,shape", [((0, 2, 1, 3), (2, 7, 12)), ((2, 0, 1, 3), (7, 2, 12)), ((0, 2, 3, 1), (2, 7, 12))],
                         ids=["heads-merged", "sequence-first", "features-not-last"])
def test_the_result_laid_out_as_transpose_then_reshape(axes, shape):
    q, k, v = _qkv("float32", (2, 3), 7, 5, 8, 4)
    want = REFERENCE(np, q, k, v).transpose(axes).reshape(shape)
    lay = {"out_axes": axes, "out_shape": shape}
    np.testing.assert_array_equal(REFERENCE(np, q, k, v, **lay), want)
    np.testing.assert_array_equal(A.run_attention(np, q, k, v, **lay), want)
    out = np.empty(shape, "float32")
    assert A.run_attention(np, q, k, v, out=out, **lay) is out
    np.testing.assert_array_equal(out, want)
