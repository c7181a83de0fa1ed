"""``x[key]`` for tuple keys holding integer arrays (the ``advanced_index`` op), against NumPy."""
import numpy as np
import pytest

import lazyarray as la

A = np.arange(60, dtype=np.float32).reshape(3, 4, 5)
KEYS = [
    (0, np.array([0])),  # an int then a 1-element array: once silently read as x[0, 0]
    (slice(None), [0, 2], [1, 1]),
    ([0, 1], slice(None), [2, 3]),  # arrays apart: the broadcast dims go first
    (1, Ellipsis, [0, 4]),
    (None, [2], slice(1, 3), 0),
    ([[0], [1]], [0, 1, 2]),  # broadcasting index arrays
    (np.array([], dtype=np.int64), 0),
]


@pytest.mark.parametrize("key", KEYS, ids=range(len(KEYS)))
def test_values_and_shapes_match_numpy_eager_and_deferred(key):
    want = A[key]
    got = la.asarray(A)[key]
    assert got.shape == want.shape
    np.testing.assert_array_equal(got.asnumpy(), want)
    with la.deferred():
        lazy = la.asarray(A)[key]
        assert lazy.shape == want.shape  # the shape rule, before anything runs
    np.testing.assert_array_equal(lazy.asnumpy(), want)


def test_lazy_index_arrays():
    with la.deferred():
        idx = la.asarray(np.array([2, 0], dtype=np.int32)) + 0
        y = la.asarray(A)[1, idx]
    np.testing.assert_array_equal(y.asnumpy(), A[1, [2, 0]])


def test_gradient_accumulates_repeated_indices():
    w = la.asarray(np.ones((3, 4)))
    w.attach_grad()
    with la.autograd.record():
        loss = (w[[0, 0, 2], [1, 1, 3]] * 2).sum()
    loss.backward()
    want = np.zeros((3, 4))
    np.add.at(want, ([0, 0, 2], [1, 1, 3]), 2.0)
    np.testing.assert_array_equal(w.grad.asnumpy(), want)


def test_out_of_range_int_names_the_axis():
    with pytest.raises(IndexError, match="out of range for axis 0 of size 3"):
        la.asarray(A)[3, [0]]


def test_boolean_mask_inside_a_tuple_is_refused_with_the_fix():
    with pytest.raises(la.LazyArrayError, match=r"x\[mask\]"):
        la.asarray(A)[0, np.array([True, False, True, False])]


def test_index_protocol_takes_only_0d_integer_arrays():
    assert [10, 20, 30][la.asarray(1)] == 20
    with pytest.raises(TypeError, match="0-d integer"):
        [10, 20][la.asarray([1])]
    with pytest.raises(TypeError, match="0-d integer"):
        [10, 20][la.asarray(True)]


def test_boolean_mask_with_a_zero_length_dim_selects_nothing():
    x = np.zeros((2, 3), np.float32)
    m = np.zeros((2, 0), bool)
    assert la.asarray(x)[la.asarray(m)].shape == x[m].shape == (0,)
    with pytest.raises(IndexError, match="does not match"):
        la.asarray(x)[la.asarray(np.zeros((2, 2), bool))]
