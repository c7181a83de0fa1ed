"""The standard's spellings written out in ``array_api.py`` (``dtype=``, ``device=``, ``sorter=``,
``copy=``, ``axis=None``) and its special cases where NumPy differs, against NumPy references."""
import math

import numpy as np
import pytest

import lazyarray as la


@pytest.mark.parametrize("fn,npfn", [(la.sum, np.sum), (la.prod, np.prod)])
def test_reductions_accumulate_in_the_requested_dtype(fn, npfn):
    x = np.array([100, 100, 100], dtype=np.int8)
    got = fn(la.asarray(x), dtype=la.int8)
    assert got.dtype == np.int8 and got.item() == npfn(x, dtype=np.int8)  # wraps like NumPy
    assert fn(la.asarray(x)).dtype == np.int64  # default: the default integer
    f = fn(la.asarray(np.ones((2, 3), np.float32)), axis=1, dtype=la.float64)
    assert f.dtype == np.float64 and f.shape == (2,)


def test_cumulative_sum_dtype_and_include_initial():
    x = np.array([1, 2, 3], dtype=np.uint8)
    got = la.cumulative_sum(la.asarray(x), include_initial=True, dtype=la.uint16)
    assert got.dtype == np.uint16
    np.testing.assert_array_equal(got.asnumpy(), [0, 1, 3, 6])
    np.testing.assert_array_equal(la.cumulative_prod(la.asarray([1.0, 2.0, 3.0]), dtype=la.float64).asnumpy(),
                                  [1.0, 2.0, 6.0])


def test_dtype_rewrites_record_under_deferred():
    with la.deferred():
        y = la.sum(la.asarray(np.arange(4, dtype=np.int16)), dtype=la.int16)
    assert y.dtype == np.int16 and y.item() == 6


def test_like_functions_take_device_and_complex_fill():
    x = la.ones((2, 2))
    z = la.zeros_like(x, device=la.cpu(1))
    assert z.device == la.cpu(1) and z.dtype == np.float32
    c = la.full_like(la.zeros((2,), dtype=la.complex64), 1 - 2j)
    np.testing.assert_array_equal(c.asnumpy(), np.full(2, 1 - 2j, np.complex64))
    with pytest.raises(la.DTypeError, match="complex dtype"):
        la.full_like(x, 1j)


def test_full_keeps_the_api_contract_float32_default_and_zeros_accept_none():
    # API.md: la.full(shape, fill, dtype="float32"); the standard would give int64 for an int fill
    assert la.full((2,), 3).dtype == np.float32 and la.full((2,), True).dtype == np.float32
    assert la.full((2,), 3, dtype=la.int64).dtype == np.int64 and la.full((2,), 1j).dtype == np.complex64
    assert la.zeros((2,), dtype=None).dtype == la.ones((), dtype=None).dtype == np.float32


def test_searchsorted_with_a_sorter_matches_numpy():
    a, v = np.array([3, 1, 2, 5]), np.array([0, 2, 4, 9])
    s = np.argsort(a)
    got = la.searchsorted(la.asarray(a), la.asarray(v), side="right", sorter=la.asarray(s))
    np.testing.assert_array_equal(got.asnumpy(), np.searchsorted(a, v, side="right", sorter=s))


def test_reshape_copy_flags():
    x = la.asarray(np.arange(6.0).reshape(2, 3))
    y = la.reshape(x, (3, 2), copy=True)
    assert not np.shares_memory(y.asnumpy(), x.asnumpy())
    with pytest.raises(ValueError, match="needs a copy"):
        la.reshape(la.matrix_transpose(x), (6,), copy=False)


def test_concat_axis_none_flattens_first():
    a, b = np.ones((2, 2)), np.arange(3.0)
    np.testing.assert_array_equal(la.concat([la.asarray(a), la.asarray(b)], axis=None).asnumpy(),
                                  np.concatenate([a.ravel(), b]))


def test_linalg_trace_dtype():
    x = np.array([[100, 1], [2, 100]], dtype=np.int8)
    assert la.linalg.trace(la.asarray(x)).item() == 200
    assert la.linalg.trace(la.asarray(x), dtype=la.int8).item() == np.int8(np.int64(200).astype(np.int8))


def test_vecdot_conjugates_keeps_the_dtype_and_checks_lengths():
    a, b = np.array([1j, 2.0], np.complex64), np.array([1.0, 1j], np.complex64)
    np.testing.assert_allclose(la.vecdot(la.asarray(a), la.asarray(b)).asnumpy(), np.vecdot(a, b))
    u = np.array([200, 100], np.uint8)
    assert la.vecdot(la.asarray(u), la.asarray(u)).dtype == np.uint8
    with pytest.raises(la.ShapeError, match="differ in length"):
        la.vecdot(la.ones((2, 3)), la.ones((2, 1)))


def test_finfo_fields_are_python_floats():
    f = la.finfo(la.complex64)
    assert f.dtype == np.float32 and isinstance(f.eps, float) and f.eps == float(np.finfo(np.float32).eps)
    assert f.bits == 32 and f.max == float(np.finfo(np.float32).max)


@pytest.mark.parametrize("a,b", [(math.inf, 2.0), (-math.inf, 3.0), (math.inf, -2.0), (-1.0, math.inf),
                                 (1.0, -math.inf), (5.0, 2.0), (-5.0, 2.0), (7.5, -2.0)])
def test_float_floor_divide_follows_floor_of_the_quotient(a, b):
    want = math.floor(a / b) if math.isfinite(a / b) else a / b
    got = la.floor_divide(la.asarray(a), la.asarray(b)).item()
    assert got == want and math.copysign(1, got) == math.copysign(1, want if want else a / b)
    x = la.asarray(np.array([a]))
    x //= b  # in place gives the same value
    assert x.item() == got


def test_complex_expm1_at_infinities_and_signed_zero_follows_c99():
    z = np.array([complex(np.inf, 0), complex(-np.inf, np.inf), complex(np.nan, 0), complex(-0.0, 0.0), 1e-10 + 0j])
    got = la.expm1(la.asarray(z)).asnumpy()
    want = [complex(np.inf, 0), complex(-1, 0), complex(np.nan, 0), complex(0, 0), np.expm1(1e-10 + 0j)]
    np.testing.assert_array_equal(got, want)
    assert math.copysign(1, got[3].real) == 1.0  # +0, not NumPy's -0


def test_dtype_on_a_python_scalar_operand():
    assert la.sum(3, dtype=la.int8).dtype == np.int8 and la.sum(3, dtype=la.int8).item() == 3
    assert la.cast(3, dtype=la.int8).dtype == np.int8  # cast's kernel takes a Python scalar too
