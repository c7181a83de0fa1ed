"""shape_fills: zeros_like / ones_like / full_like of a concrete shape become a fill (then folded
by constant_fold in a CachedOp), with equal values and dtypes and gradients; symbolic shapes stay."""
from __future__ import annotations

import numpy as np
import pytest

import lazyarray as la
from lazyarray.graph.passes.shape_fills import shape_fills

RNG = np.random.default_rng(0)
S = la.sym


def _ops(sym):
    return [n.op.name for n in sym.topo() if n.op is not None]


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32"])
@pytest.mark.parametrize("make", [
    lambda x: S.ones_like(x), lambda x: S.zeros_like(x), lambda x: S.full_like(x, fill_value=2.5),
    lambda x: S.ones_like(x, dtype="float64"), lambda x: S.full_like(x, fill_value=-3, dtype="int8"),
], ids=["ones", "zeros", "full", "ones-f64", "full-int8"])
def test_like_ops_become_fills_with_equal_values(make, dtype, run_symbol):
    x = S.var("x", shape=(2, 3, 0, 4) if dtype == "int32" else (2, 3, 4), dtype=dtype)
    y = make(x)
    out = shape_fills(y).check()
    assert _ops(out) == ["fill"]
    v = RNG.standard_normal((2, 3, 0, 4) if dtype == "int32" else (2, 3, 4)).astype(dtype)
    got, = run_symbol(out, x=v)
    want, = run_symbol(y, x=v)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)


def test_symbolic_shapes_stay():
    x = S.var("x", shape=(la.Dim("b"), 3))
    y = S.ones_like(x)
    assert _ops(shape_fills(y)) == ["ones_like"]


def test_a_cached_op_folds_the_count_of_an_average_pool():
    x = S.var("x", shape=(1, 4, 1, 7))
    count = S.nn.avg_pool2d(S.pad(S.ones_like(x), pad_width=((0, 0), (0, 0), (0, 0), (1, 1))), kernel=(1, 3), stride=(1, 1))
    y = S.divide(S.nn.avg_pool2d(S.pad(x, pad_width=((0, 0), (0, 0), (0, 0), (1, 1))), kernel=(1, 3), stride=(1, 1)), count)
    op = la.CachedOp(y)
    v = RNG.standard_normal((1, 4, 1, 7)).astype("float32")
    ops = _ops(op.compiled(x=v.shape))
    assert "ones_like" not in ops and ops.count("pad") == 1
    xp = np.pad(v, ((0, 0), (0, 0), (0, 0), (1, 1)))
    cp = np.pad(np.ones_like(v), ((0, 0), (0, 0), (0, 0), (1, 1)))
    want = sum(xp[..., k:k + 7] for k in range(3)) / sum(cp[..., k:k + 7] for k in range(3))
    np.testing.assert_allclose(op(la.array(v)).asnumpy(), want, rtol=1e-6)


def test_gradients_through_a_replaced_like_op():
    x = S.var("x", shape=(5,), dtype="float64")
    op = la.CachedOp(S.sum(S.multiply(S.multiply(x, x), S.full_like(x, fill_value=3.0))))
    w = la.array(RNG.standard_normal(5))
    w.attach_grad()
    with la.autograd.record():
        y = op(w)
    y.backward()
    np.testing.assert_allclose(w.grad.asnumpy(), 6 * w.asnumpy(), rtol=1e-12)
