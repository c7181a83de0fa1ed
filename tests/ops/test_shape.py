"""Registry-driven checks of the shape ops: NumPy values and dtypes, deferred recording,
finite-difference gradients."""
from __future__ import annotations

import numpy as np
import pytest

import lazyarray as la

from .cases import EXPAND_CASES, REPEAT_CASES, expand_ref, repeat_ref
from .checks import family_tests

FAMILY = ("shape",)


test_forward_matches_numpy, test_deferred_matches_eager, test_gradient_matches_finite_differences = \
    family_tests(FAMILY)


# -- expand / repeat: PyTorch semantics ------------------------------------------------------------


@pytest.mark.parametrize("src,sizes", EXPAND_CASES, ids=[f"{s}->{t}" for s, t in EXPAND_CASES])
def test_expand_method_and_function_forms(src, sizes):
    x = np.arange(int(np.prod(src)), dtype=np.float32).reshape(src)
    a = la.array(x)
    want = expand_ref(x, sizes)
    for got in (a.expand(*sizes), a.expand(sizes), la.expand(a, *sizes)):
        assert got.shape == want.shape
        np.testing.assert_array_equal(got.asnumpy(), want)


def test_expand_of_size_one_dims_does_not_copy():
    a = la.array(np.arange(3, dtype=np.float32).reshape(3, 1))
    y = a.expand(2, 3, 1000)
    assert y.shape == (2, 3, 1000)
    v = y._value
    assert np.shares_memory(v, a._value)
    assert v.strides[0] == 0 and v.strides[2] == 0
    assert v.nbytes == 6000 * 4 and v.base is not None


@pytest.mark.parametrize("src,sizes,fragment", [
    ((2, 3), (3, 3), "cannot expand dim 0 of size 2 to 3"),
    ((2, 3), (3,), "got 1 sizes (3,) for an array of 2 dims [2,3]"),
    ((2, 3), (-1, 2, 3), "new dims need an explicit size"),
    ((2, 1), (2, -2), "size -2"),
])
@pytest.mark.parametrize("deferred", [False, True], ids=["eager", "deferred"])
def test_expand_rejects_illegal_sizes(src, sizes, fragment, deferred):
    with la.deferred(deferred), pytest.raises(la.ShapeError) as info:
        la.ones(src).expand(*sizes)
    assert str(info.value).startswith("expand:") and fragment in str(info.value)
    assert isinstance(info.value, ValueError)


@pytest.mark.parametrize("src,sizes", REPEAT_CASES, ids=[f"{s}x{t}" for s, t in REPEAT_CASES])
def test_repeat_tiles_with_new_dims_in_front(src, sizes):
    x = np.arange(int(np.prod(src)), dtype=np.int64).reshape(src)
    got = la.array(x).repeat(*sizes)
    np.testing.assert_array_equal(got.asnumpy(), repeat_ref(x, sizes))
    assert not np.shares_memory(got._value, x)


def test_repeat_known_values():
    # torch.tensor([1, 2, 3]).repeat(2, 2) -> [[1,2,3,1,2,3],[1,2,3,1,2,3]]
    got = la.array(np.array([1, 2, 3])).repeat(2, 2).asnumpy()
    np.testing.assert_array_equal(got, np.array([[1, 2, 3] * 2] * 2))


def test_fewer_repeats_than_dims_tile_the_trailing_dims_like_numpy():
    x = np.arange(6.0).reshape(2, 3)
    np.testing.assert_array_equal(la.tile(la.array(x), 2).asnumpy(), np.tile(x, 2))


@pytest.mark.parametrize("sizes,fragment", [((2, -1), "must be >= 0"), ((-1,), "must be >= 0")])
def test_repeat_rejects_illegal_sizes(sizes, fragment):
    with pytest.raises(la.ShapeError, match="repeat") as info:
        la.ones((2, 3)).repeat(*sizes)
    assert fragment in str(info.value) and str(info.value).startswith("repeat:")


# -- bad input ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("deferred", [False, True], ids=["eager", "deferred"])
def test_reshape_size_mismatch_names_shapes_and_fix(deferred):
    with la.deferred(deferred), pytest.raises(la.ShapeError) as info:
        la.ones((2, 3)).reshape(4, 2)
    msg = str(info.value)
    assert msg.startswith("reshape:") and "[2,3]" in msg and "[4,2]" in msg and "-1" in msg


def test_concatenate_mismatch_names_every_shape():
    with pytest.raises(la.ShapeError) as info:
        la.concatenate([la.ones((2, 3)), la.ones((2, 4))], axis=0)
    msg = str(info.value)
    assert msg.startswith("concatenate:") and "[2,3]" in msg and "[2,4]" in msg and "axis 0" in msg


@pytest.mark.parametrize("call,fragment", [
    (lambda x: x.transpose(0, 2), "transpose: axis 2 is out of range"),
    (lambda x: x.squeeze(0), "squeeze: cannot squeeze axis 0 of size 2"),
    (lambda x: x.expand_dims(4), "expand_dims: axis 4 is out of range"),
    (lambda x: la.stack([x, x], axis=3), "stack: axis 3 is out of range"),
    (lambda x: x[2], "getitem: index [2] does not fit shape [2,3]"),
    (lambda x: la.take(x, la.array(np.array([0])), axis=2), "take: axis 2 is out of range"),
], ids=["transpose", "squeeze", "expand_dims", "stack", "getitem", "take"])
def test_illegal_axis_names_the_op(call, fragment):
    with pytest.raises(la.LazyArrayError) as info:
        call(la.ones((2, 3)))
    assert fragment in str(info.value) and isinstance(info.value, ValueError)


def test_take_with_float_indices_is_a_dtype_error():
    with pytest.raises(la.DTypeError, match=r"take: indices must be integers, got float32.*astype") as info:
        la.take(la.ones((2, 3)), la.ones((2,)))
    assert isinstance(info.value, TypeError) and "[2,3]" in str(info.value)


def test_boolean_mask_has_a_data_dependent_static_dim():
    x = la.array(np.arange(6.0).reshape(2, 3))
    with la.deferred():
        y = x[x > 2.0]
        assert y.static_shape == (None,)
    assert y.shape == (3,)  # reading .shape computes
    np.testing.assert_array_equal(y.asnumpy(), [3.0, 4.0, 5.0])


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("axis", [0, 1])
def test_take_grad_of_many_indices_sums_repeated_rows_like_add_at(dtype, axis):
    # 300 indices into 40 rows (negative ones too): the sparse-product path; add.at is the reference
    rng = np.random.default_rng(3)
    idx = rng.integers(-40, 40, (3, 100))
    like = np.zeros((40, 6) if axis == 0 else (6, 40), dtype)
    g = rng.standard_normal((3, 100, 6) if axis == 0 else (6, 3, 100)).astype(dtype)
    ref = np.zeros_like(like)
    np.add.at(np.moveaxis(ref, axis, 0), idx.reshape(-1), np.moveaxis(g.reshape(like.shape[:axis] + (300,)
                                                                               + like.shape[axis + 1:]), axis, 0))
    got = la.take_grad(la.array(g), la.array(like), la.array(idx), axis=axis).asnumpy()
    np.testing.assert_allclose(got, ref, rtol=1e-6 if dtype == "float32" else 1e-12, atol=1e-6)


def test_take_grad_of_many_indices_out_of_range_raises():
    idx = np.full(100, 40)
    with pytest.raises(Exception, match="out of bounds|out of range"):
        la.take_grad(la.ones((100, 3)), la.zeros((40, 3)), la.array(idx)).asnumpy()
