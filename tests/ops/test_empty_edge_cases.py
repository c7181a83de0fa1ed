"""Zero-size operands of matmul, nn.dense, nn.softmax and nn.log_softmax (issue #33): NumPy's
values (zeros for an empty contraction, plus the bias for dense; an empty array for an empty
softmax) eagerly, deferred, through la.CachedOp, and their gradients."""
from __future__ import annotations

import numpy as np
import pytest

import lazyarray as la


def _ref_softmax(x, axis):
    with np.errstate(all="ignore"):  # (an empty array: nothing to compute, but NumPy may still warn)
        if x.size == 0:
            return np.exp(x)  # an empty array of x's shape: what softmax over nothing holds
        e = np.exp(x - x.max(axis=axis, keepdims=True))
        return e / e.sum(axis=axis, keepdims=True)


def _ref_log_softmax(x, axis):
    if x.size == 0:
        return np.log1p(x)
    return np.log(_ref_softmax(x, axis))


def _three_ways(fn, *arrays):
    """``fn`` of ``arrays`` eagerly, deferred, and through a CachedOp of its symbol."""
    eager = fn(*[la.array(a) for a in arrays]).asnumpy()
    with la.deferred():
        ins = [la.array(a) for a in arrays]
        y = fn(*ins)
    deferred = y.asnumpy()
    with la.deferred():
        ins = [la.array(a) for a in arrays]
        sym = la.get_symbol(fn(*ins), inputs={f"x{i}": t for i, t in enumerate(ins)})
    cached = la.CachedOp(sym)(**{f"x{i}": la.array(a) for i, a in enumerate(arrays)}).asnumpy()
    return eager, deferred, cached


def _rand(shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


MATMUL_SHAPES = [
    ((4, 2, 0), (0, 3)),
    ((2, 0), (0, 3)),
    ((3, 2, 0), (3, 0, 5)),
    ((0,), (0, 3)),
    ((4, 2, 0), (0,)),
    ((0, 2, 3), (3, 4)),
    ((4, 2, 3), (3, 0)),
    ((4, 0, 3), (3, 2)),
]


@pytest.mark.parametrize("sa,sb", MATMUL_SHAPES, ids=str)
def test_matmul_with_a_zero_size_dim_equals_numpy(sa, sb):
    a, b = _rand(sa), _rand(sb, 1)
    want = np.matmul(a, b)
    for got in _three_ways(la.matmul, a, b):
        assert got.shape == want.shape
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("sx,units", [((4, 2, 0), 3), ((2, 0), 3), ((0, 2, 5), 3), ((4, 2, 5), 0),
                                      ((2, 3, 4, 0), 6)], ids=str)
@pytest.mark.parametrize("bias", [True, False], ids=["bias", "no_bias"])
def test_dense_with_a_zero_size_dim_equals_numpy(sx, units, bias):
    x, w, b = _rand(sx), _rand((units, sx[-1]), 1), _rand((units,), 2)
    want = np.matmul(x, w.T) + (b if bias else 0)
    args = (x, w, b) if bias else (x, w)
    for got in _three_ways(la.nn.dense, *args):
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-6)


@pytest.mark.parametrize("sa,sb", [((4, 2, 0), (0, 3)), ((2, 0), (0, 3)), ((3, 2, 0), (3, 0, 5))], ids=str)
def test_matmul_gradient_with_an_empty_contraction_is_empty(sa, sb):
    a, b = la.array(_rand(sa)), la.array(_rand(sb, 1))
    a.attach_grad()
    b.attach_grad()
    with la.autograd.record():
        y = la.matmul(a, b).sum()
    y.backward()
    np.testing.assert_array_equal(a.grad.asnumpy(), np.zeros(sa, np.float32))
    np.testing.assert_array_equal(b.grad.asnumpy(), np.zeros(sb, np.float32))


@pytest.mark.parametrize("sx,units", [((4, 2, 0), 3), ((2, 0), 3)], ids=str)
def test_dense_gradient_with_an_empty_contraction(sx, units):
    x, w, b = la.array(_rand(sx)), la.array(_rand((units, sx[-1]), 1)), la.array(_rand((units,), 2))
    for t in (x, w, b):
        t.attach_grad()
    with la.autograd.record():
        y = la.nn.dense(x, w, b).sum()
    y.backward()
    assert y.item() == pytest.approx(float(np.broadcast_to(b.asnumpy(), sx[:-1] + (units,)).sum()), rel=1e-6)
    np.testing.assert_array_equal(x.grad.asnumpy(), np.zeros(sx, np.float32))
    np.testing.assert_array_equal(w.grad.asnumpy(), np.zeros((units, 0), np.float32))
    np.testing.assert_array_equal(b.grad.asnumpy(), np.full((units,), np.prod(sx[:-1]), np.float32))


SOFTMAX_CASES = [((0, 7, 5), 0), ((0, 7, 5), -1), ((7, 0, 5), 0), ((7, 0, 5), 1), ((3, 0), -1),
                 ((0,), -1), ((0,), 0), ((2, 3, 0), 1)]


@pytest.mark.parametrize("op,ref", [(la.nn.softmax, _ref_softmax), (la.nn.log_softmax, _ref_log_softmax)],
                         ids=["softmax", "log_softmax"])
@pytest.mark.parametrize("shape,axis", SOFTMAX_CASES, ids=str)
def test_softmax_of_an_empty_array_is_empty(op, ref, shape, axis):
    x = _rand(shape)
    want = ref(x, axis)
    for got in _three_ways(lambda t: op(t, axis=axis), x):
        assert got.shape == want.shape and got.dtype == want.dtype


@pytest.mark.parametrize("op", [la.nn.softmax, la.nn.log_softmax], ids=["softmax", "log_softmax"])
def test_softmax_gradient_of_an_empty_array_is_empty(op):
    x = la.array(_rand((0, 7, 5)))
    x.attach_grad()
    with la.autograd.record():
        y = (op(x, axis=0) * 2.0).sum()
    y.backward()
    assert x.grad.shape == (0, 7, 5)


def test_softmax_still_matches_numpy_on_nonempty_arrays():
    x = _rand((3, 7, 5))
    for axis in (0, 1, -1):
        np.testing.assert_allclose(la.nn.softmax(la.array(x), axis=axis).asnumpy(), _ref_softmax(x, axis), rtol=1e-6)
        np.testing.assert_allclose(la.nn.log_softmax(la.array(x), axis=axis).asnumpy(),
                                   _ref_log_softmax(x, axis), rtol=1e-5, atol=1e-6)
