"""Array creation: ``array``, ``zeros``/``ones``/``full``, ``arange`` and ``la.random``."""
from __future__ import annotations

import numpy as np
import pytest

import lazyarray as la


def test_python_floats_default_to_float32():
    assert la.array([1.0, 2.0]).dtype == np.float32
    assert la.array(3.5).dtype == np.float32 and la.array(3.5).shape == ()
    assert la.array([[1, 2]]).dtype == np.array([[1, 2]]).dtype
    assert la.array([True, False]).dtype == np.bool_


@pytest.mark.parametrize("dtype", ["float64", "float16", "int8", "uint32", "bool"])
def test_numpy_arrays_keep_their_dtype(dtype):
    x = np.ones((2, 2), dtype=dtype)
    a = la.array(x)
    assert a.dtype == np.dtype(dtype)
    assert not np.shares_memory(a._value, x)  # always a copy


def test_explicit_dtype_and_device():
    a = la.array([1, 2], dtype="float64", device=la.cpu(1))
    assert a.dtype == np.float64 and a.device == la.cpu(1)
    b = la.array(a)  # from an NDArray: a copy on the default device
    assert b.device == la.cpu(0) and not np.shares_memory(a._value, b._value)


def test_unsupported_dtypes_are_rejected():
    with pytest.raises(la.DTypeError, match="complex256 is not supported"):
        la.array(np.array([1j], np.clongdouble))
    with pytest.raises(la.DTypeError, match="object is not supported"):
        la.array(np.array([1, "a"], dtype=object))
    with pytest.raises(la.DTypeError, match="not a dtype"):
        la.zeros(2, dtype="nonsense")


@pytest.mark.parametrize("fn,fill", [(la.zeros, 0), (la.ones, 1)])
def test_zeros_ones(fn, fill):
    a = fn((2, 3))
    assert a.dtype == np.float32 and a.shape == (2, 3)
    np.testing.assert_array_equal(a.asnumpy(), np.full((2, 3), fill, np.float32))
    assert fn(4, dtype="int32").dtype == np.int32 and fn(4).shape == (4,)


def test_full():
    a = la.full((2, 2), 7, dtype="int64", device=la.cpu(1))
    assert a.device == la.cpu(1) and a.dtype == np.int64
    np.testing.assert_array_equal(a.asnumpy(), np.full((2, 2), 7))
    with pytest.raises(la.ShapeError, match="full: shape must be non-negative"):
        la.full((2, -1), 0)


def test_arange_like_numpy():
    np.testing.assert_array_equal(la.arange(5).asnumpy(), np.arange(5))
    assert la.arange(5).dtype == np.arange(5).dtype
    a = la.arange(0, 1, 0.25)
    assert a.dtype == np.float32
    np.testing.assert_array_equal(a.asnumpy(), np.arange(0, 1, 0.25, dtype=np.float32))
    assert la.arange(2, 8, 2, dtype="float64").asnumpy().tolist() == [2.0, 4.0, 6.0]


def test_random_is_reproducible_after_seed():
    la.random.seed(42)
    a = la.random.uniform(-1, 1, shape=(3, 4)).asnumpy()
    b = la.random.normal(0, 2, shape=(5,)).asnumpy()
    la.random.seed(42)
    np.testing.assert_array_equal(la.random.uniform(-1, 1, shape=(3, 4)).asnumpy(), a)
    np.testing.assert_array_equal(la.random.normal(0, 2, shape=(5,)).asnumpy(), b)
    assert not np.array_equal(la.random.uniform(-1, 1, shape=(3, 4)).asnumpy(), a)


def test_random_devices_have_their_own_streams():
    la.random.seed(1)
    a = la.random.uniform(shape=(8,)).asnumpy()
    la.random.seed(1)
    b = la.random.uniform(shape=(8,), device=la.cpu(1))
    assert b.device == la.cpu(1) and not np.array_equal(a, b.asnumpy())


def test_random_distributions():
    la.random.seed(0)
    u = la.random.uniform(2.0, 3.0, shape=(20000,), dtype="float64").asnumpy()
    assert u.dtype == np.float64 and u.min() >= 2.0 and u.max() < 3.0
    assert abs(u.mean() - 2.5) < 0.01
    n = la.random.normal(1.0, 2.0, shape=(20000,)).asnumpy()
    assert n.dtype == np.float32
    assert abs(n.mean() - 1.0) < 0.05 and abs(n.std() - 2.0) < 0.05


def test_numpy_scalars_keep_their_dtype_python_floats_do_not():
    assert la.array(np.float64(1.5)).dtype == np.float64
    assert la.array(np.float16(1.5)).dtype == np.float16
    assert la.array(1.5).dtype == np.float32
