"""NumPy functions and ufuncs on lazyarray arrays, and DLPack both ways (lazyarray/interop.py)."""
import numpy as np
import pytest

import lazyarray as la


@pytest.fixture
def xy():
    return la.asarray([1.0, 2.0, 3.0]), la.asarray([4.0, -5.0, 6.0])


@pytest.mark.parametrize("call,ref", [
    (lambda x, y: np.exp(x), lambda x, y: np.exp(x)),
    (lambda x, y: np.add(x, y), lambda x, y: x + y),
    (lambda x, y: np.concatenate([x, y]), lambda x, y: np.concatenate([x, y])),
    (lambda x, y: np.mean(x), lambda x, y: np.mean(x)),
    (lambda x, y: np.where(x > 1, x, y), lambda x, y: np.where(x > 1, x, y)),
    (lambda x, y: np.stack([x, y], axis=1), lambda x, y: np.stack([x, y], axis=1)),
    (lambda x, y: np.sum(x, keepdims=True), lambda x, y: np.sum(x, keepdims=True)),
    (lambda x, y: np.clip(y, 0, 5), lambda x, y: np.clip(y, 0, 5)),
    (lambda x, y: np.arctan2(x, y), lambda x, y: np.arctan2(x, y)),
    (lambda x, y: np.matmul(x, y), lambda x, y: np.matmul(x, y)),
    (lambda x, y: np.abs(y), lambda x, y: np.abs(y)),
])
def test_numpy_calls_give_lazyarray_arrays_and_record_lazily(xy, call, ref):
    x, y = xy
    want = ref(x.asnumpy(), y.asnumpy())
    eager = call(x, y)
    assert isinstance(eager, la.NDArray)
    np.testing.assert_allclose(eager.asnumpy(), want, rtol=1e-6)
    with la.deferred():
        lazy = call(x, y)
    assert isinstance(lazy, la.NDArray) and lazy.is_lazy
    np.testing.assert_allclose(lazy.asnumpy(), want, rtol=1e-6)


def test_other_numpy_functions_give_lazyarray_arrays_or_a_named_error(xy):
    # eager arrays follow the same rule as lazy ones (NEP 18): never NumPy's result on the values
    x, y = xy
    assert np.allclose(x, [1.0, 2.0, 3.0]) is True  # a value query: a Python bool for eager arrays
    got = np.linalg.norm(x)
    assert isinstance(got, la.NDArray) and float(got) == pytest.approx(np.sqrt(14.0))
    with pytest.raises(la.NumPyFunctionError, match=r"np\.add .*out= is not supported"):
        np.add(x, y, out=np.empty(3, np.float32))
    with pytest.raises(la.NumPyFunctionError, match=r"np\.median .*no la equivalent"):
        np.median(x)
    np.testing.assert_array_equal(np.asarray(x), [1.0, 2.0, 3.0])  # the explicit conversion
    np.testing.assert_allclose(x, [1.0, 2.0, 3.0])
    assert isinstance(np.array([1.0, 1.0, 1.0], np.float32) + x, la.NDArray)


def test_dlpack_is_zero_copy_both_ways():
    a = np.arange(4.0)
    b = la.from_dlpack(a)
    assert b.dtype == np.float64 and np.shares_memory(b._value, a)
    a[0] = 9.0
    assert b.asnumpy()[0] == 9.0
    x = la.asarray([1.0, 2.0])
    assert x.__dlpack_device__() == (1, 0)
    c = np.from_dlpack(x)
    assert np.shares_memory(c, x._value)
    copied = la.from_dlpack(a, copy=True)
    assert not np.shares_memory(copied._value, a)


def test_dlpack_of_a_lazy_array_computes_it_first():
    x = la.asarray([1.0, 2.0])
    with la.deferred():
        y = x * 3
    assert y.is_lazy
    np.testing.assert_array_equal(np.from_dlpack(y), [3.0, 6.0])
    assert not y.is_lazy
    np.testing.assert_array_equal(la.from_dlpack(y).asnumpy(), [3.0, 6.0])
