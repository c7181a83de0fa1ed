"""NDArray: attributes, conversions, operators, repr, in-place operators and ``__setitem__``."""
from __future__ import annotations

import operator

import numpy as np
import pytest

import lazyarray as la

X = np.arange(1.0, 7.0, dtype=np.float32).reshape(2, 3)


def test_attributes():
    a = la.array(X)
    assert a.shape == (2, 3) and a.static_shape == (2, 3)
    assert a.ndim == 2 and a.size == 6 and len(a) == 2
    assert a.dtype == np.dtype("float32") and isinstance(a.dtype, np.dtype)
    assert a.device == la.cpu(0) and a.stype == "default" and not a.is_lazy
    assert a.aval == la.Aval((2, 3), np.dtype("float32"), la.cpu(0))


def test_values():
    a = la.array(X)
    v = a.asnumpy()
    np.testing.assert_array_equal(v, X)
    v[0, 0] = 100  # a copy
    assert a.asnumpy()[0, 0] == 1
    np.testing.assert_array_equal(np.asarray(a), X)
    assert la.array([[2.5]]).item() == 2.5
    assert float(la.array(2.5)) == 2.5 and int(la.array(3)) == 3
    assert bool(la.array([1.0])) and not bool(la.array(0.0))
    assert [r.asnumpy().tolist() for r in a] == X.tolist()
    assert operator.index(la.array(2)) == 2


def test_scalar_conversions_of_many_elements_are_errors():
    a = la.array(X)
    with pytest.raises(la.ShapeError, match=r"item: only arrays of one element.*\[2,3\]"):
        a.item()
    with pytest.raises(la.ShapeError, match=r"bool: the truth value of an array of shape \[2,3\] is ambiguous"):
        bool(a)
    with pytest.raises(TypeError, match="integer"):
        operator.index(la.array(2.0))


def test_conversions():
    a = la.array(X)
    b = a.astype("int32")
    assert b.dtype == np.int32 and b.asnumpy().tolist() == X.astype(np.int32).tolist()
    c = a.copy()
    assert not np.shares_memory(c._value, a._value)
    d = a.detach()
    np.testing.assert_array_equal(d.asnumpy(), X)
    s = a.tostype("csr")
    assert s.stype == "csr" and s.shape == (2, 3)
    np.testing.assert_array_equal(s.tostype("default").asnumpy(), X)
    r = a.tostype("row_sparse")
    assert r.stype == "row_sparse"
    np.testing.assert_array_equal(r.asnumpy(), X)


BINOPS = [operator.add, operator.sub, operator.mul, operator.truediv, operator.pow,
          operator.eq, operator.ne, operator.lt, operator.le, operator.gt, operator.ge]


@pytest.mark.parametrize("op", BINOPS, ids=lambda f: f.__name__)
@pytest.mark.parametrize("other", [np.float32(2.0), 2, 1.5, np.array([1.0, 2.0, 3.0], np.float32)],
                         ids=["np-f32", "int", "float", "np-array"])
def test_binary_operators_match_numpy(op, other):
    a = la.array(X)
    for got, want in ((op(a, other), op(X, other)), (op(other, a), op(other, X)),
                      (op(a, la.array(X[::-1].copy())), op(X, X[::-1]))):
        assert isinstance(got, la.NDArray)
        assert got.dtype == want.dtype, f"{op.__name__}: {got.dtype} != {want.dtype}"
        np.testing.assert_allclose(got.asnumpy(), want, rtol=1e-6)


def test_comparisons_give_bool():
    assert (la.array(X) > 2).dtype == np.bool_


def test_unary_operators_and_matmul():
    a = la.array(X)
    np.testing.assert_array_equal((-a).asnumpy(), -X)
    np.testing.assert_array_equal(abs(-a).asnumpy(), X)
    assert +a is a
    np.testing.assert_allclose((a @ a.T).asnumpy(), X @ X.T)
    np.testing.assert_allclose((X.T @ a).asnumpy(), X.T @ X)


def test_basic_indexing():
    a = la.array(X)
    np.testing.assert_array_equal(a[1].asnumpy(), X[1])
    np.testing.assert_array_equal(a[:, 1:].asnumpy(), X[:, 1:])
    np.testing.assert_array_equal(a[..., None, ::-1].asnumpy(), X[..., None, ::-1])
    np.testing.assert_array_equal(a[a > 3].asnumpy(), X[X > 3])
    np.testing.assert_array_equal(a[[1, 0, 1]].asnumpy(), X[[1, 0, 1]])


def test_methods():
    a = la.array(X)
    np.testing.assert_allclose(a.sum(axis=0).asnumpy(), X.sum(axis=0))
    np.testing.assert_allclose(a.mean().asnumpy(), X.mean())
    assert a.argmax(axis=1).asnumpy().tolist() == [2, 2]
    assert a.reshape(3, 2).shape == (3, 2) and a.reshape((6,)).shape == (6,)
    assert a.transpose().shape == (3, 2) and a.T.shape == (3, 2) and a.transpose(1, 0).shape == (3, 2)
    assert a.flatten().shape == (2, 3) and la.array(np.ones((2, 3, 4))).flatten().shape == (2, 12)
    assert a.expand_dims(0).squeeze().shape == (2, 3)
    np.testing.assert_allclose(a.exp().log().asnumpy(), X, rtol=1e-6)


def test_repr():
    a = la.array([[1.0, 2.0]])
    assert repr(a) == "array([[1., 2.]], dtype=float32, device=cpu(0))"
    assert str(la.array([1, 2], device=la.cpu(1))).endswith("dtype=int64, device=cpu(1))")
    assert "stype=csr" in repr(a.tostype("csr"))
    with la.deferred():
        y = a * 2
    assert repr(y) == "lazy array(shape=(1, 2), dtype=float32, device=cpu(0))"
    assert repr(la.array([1.0]) * 1).startswith("array([1.]")


@pytest.mark.parametrize("sym,fn", [("+=", operator.iadd), ("-=", operator.isub), ("*=", operator.imul),
                                    ("/=", operator.itruediv), ("**=", operator.ipow)])
def test_inplace_operators_write_the_buffer(sym, fn):
    a = la.array(X)
    buf = a._value
    b = fn(a, la.array(np.full(3, 2.0, np.float32)))
    assert b is a and a._value is buf
    np.testing.assert_allclose(a.asnumpy(), fn(X.copy(), np.float32(2.0)), rtol=1e-6)
    a2 = la.array(X)
    a2 = fn(a2, 2)
    np.testing.assert_allclose(a2.asnumpy(), fn(X.copy(), 2), rtol=1e-6)


def test_inplace_that_cannot_fit_the_left_operand_is_a_shape_error():
    a = la.array(np.ones(3, np.float32))
    with pytest.raises(la.ShapeError, match=r"add \(in place, \+=\).*\[3\].*\[2,3\].*x = x \+ y"):
        a += la.ones((2, 3))


def test_inplace_that_would_change_the_dtype_kind_is_a_dtype_error():
    i = la.array(np.ones(3, np.int64))
    for write in (lambda: i.__itruediv__(2), lambda: i.__iadd__(1.5)):
        with pytest.raises(la.DTypeError, match="same_kind"):
            write()
    np.testing.assert_array_equal(i.asnumpy(), [1, 1, 1])


def test_inplace_on_lazy_arrays_raises_deferred_compute_error():
    a = la.array(X)
    with la.deferred():
        y = a * 2
        with pytest.raises(la.DeferredComputeError, match=r"in-place writes.*x = x \+ y"):
            y += 1
        with pytest.raises(la.DeferredComputeError):
            a[0] = 1.0
    with pytest.raises(la.DeferredComputeError, match=r"x\[key\] = v.*la.where"):
        y[0] = 1.0


def test_setitem():
    a = la.array(X)
    buf = a._value
    a[0, 1] = 10.0
    a[1] = la.array([7.0, 8.0, 9.0])
    a[a > 8] = 0.0
    want = X.copy()
    want[0, 1] = 10
    want[1] = [7, 8, 9]
    want[want > 8] = 0
    np.testing.assert_array_equal(a.asnumpy(), want)
    assert a._value is buf
    with pytest.raises(la.ShapeError, match=r"setitem: cannot assign .*\[2,3\]"):
        a[0] = np.ones(5)


def test_out_parameter_writes_into_an_existing_array():
    a, out = la.array(X), la.zeros((2, 3))
    buf = out._value
    r = la.add(a, 1, out=out)
    assert r is out and out._value is buf
    np.testing.assert_array_equal(out.asnumpy(), X + 1)
    with pytest.raises(la.ShapeError, match=r"add: out= has shape \[3\]"):
        la.add(a, 1, out=la.zeros(3))


def test_unhashable_like_numpy():
    with pytest.raises(TypeError):
        hash(la.ones(2))
