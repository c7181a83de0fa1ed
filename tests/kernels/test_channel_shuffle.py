"""kernels/channel_shuffle.py: the compiled copies and the NumPy copies equal the reference kernel (the
recorded concatenate, reshape, transpose, reshape) bit for bit in float32 and float64, for inputs across
group bounds, strided views, one input, (N, C, L) values and empty dims, new or into a given out; what
they decline runs the reference; the chooser and the binder name what runs."""
from __future__ import annotations

import numpy as np
import pytest

from lazyarray import kernels
from lazyarray.kernels import channel_shuffle as K
from lazyarray.ops.channel_shuffle import channel_shuffle_kernel

RNG = np.random.default_rng(7)
numba = pytest.importorskip("numba")


def _r(shape, dtype):
    v = RNG.standard_normal(shape).astype(dtype)
    if v.size:
        v.reshape(-1)[:3] = (np.nan, -0.0, np.inf)
    return v


CASES = {
    "halves": ([(2, 4, 3, 3), (2, 4, 3, 3)], 2),
    "one-input": ([(1, 6, 2, 2)], 3),
    "across-groups": ([(1, 2, 2, 3), (1, 4, 2, 3), (1, 6, 2, 3)], 3),
    "empty-batch": ([(0, 4, 2, 2), (0, 4, 2, 2)], 2),
    "empty-width": ([(2, 4, 3, 0), (2, 4, 3, 0)], 4),
}


def _inputs(name, dtype, view):
    shapes, groups = CASES[name]
    xs = [_r(s, dtype) for s in shapes]
    if view:  # (the first input a strided view: every other column of a wider array)
        s = shapes[0]
        xs[0] = _r(s[:3] + (2 * s[3],), dtype)[..., ::2]
    return xs, groups


@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("impl", ["compiled", "copies"])
@pytest.mark.parametrize("into", ["new", "out"])
@pytest.mark.parametrize("view", [False, True], ids=["c-order", "view"])
def test_equal_to_the_reference_bit_for_bit(name, dtype, impl, into, view):
    xs, groups = _inputs(name, dtype, view)
    want = channel_shuffle_kernel(np, *xs, groups=groups)
    out = None if into == "new" else np.empty(want.shape, dtype)
    got = {"compiled": K._compiled, "copies": K._copies}[impl](np, tuple(xs), groups, out)
    assert got is not None and (out is None or got is out)
    assert got.flags.c_contiguous
    np.testing.assert_array_equal(got, want)
    assert np.array_equal(np.signbit(got), np.signbit(want))


def test_values_of_three_axes_take_the_copies():
    xs = [_r((2, 4, 5), np.float32), _r((2, 2, 5), np.float32)]
    assert K._compiled(np, tuple(xs), 2, None) is None  # (the compiled copy is 4-D)
    assert repr(kernels.choose("channel_shuffle", np, *xs, groups=2)) == "channel_shuffle[copies]"
    np.testing.assert_array_equal(K.run_channel_shuffle(np, *xs, groups=2),
                                  channel_shuffle_kernel(np, *xs, groups=2))


def test_what_it_declines_runs_the_reference():
    a, b = _r((2, 4, 3, 3), np.float32), _r((2, 4, 3, 3), np.float64)
    assert K._copies(np, (a, b), 2, None) is None and K._compiled(np, (a, b), 2, None) is None  # (two dtypes)
    assert repr(kernels.choose("channel_shuffle", np, a, b, groups=2)) == "channel_shuffle[reference]"
    np.testing.assert_array_equal(K.run_channel_shuffle(np, a, b, groups=2), channel_shuffle_kernel(np, a, b, groups=2))
    x = _r((2, 8, 3, 3), np.float32)
    strided_out = np.empty((2, 8, 3, 6), np.float32)[..., ::2]
    assert K._compiled(np, (x,), 2, strided_out) is None and K._copies(np, (x,), 2, strided_out) is None
    assert K._copies(np, (x,), 2, x) is None  # (an out over an input)


def test_the_chooser_and_the_binder_name_what_runs():
    xs = [_r((1, 8, 4, 4), np.float32), _r((1, 8, 4, 4), np.float32)]
    out = np.empty((1, 16, 4, 4), np.float32)
    assert repr(kernels.choose("channel_shuffle", np, *xs, groups=2)) == "channel_shuffle[compiled]"
    bound = kernels.bind("channel_shuffle", np, *xs, out=out, groups=2)
    assert bound.choice.impl is K.COMPILED
    assert bound.fn(*xs, out=out) is out
    np.testing.assert_array_equal(out, channel_shuffle_kernel(np, *xs, groups=2))
    fresh = bound.fn(*xs)
    np.testing.assert_array_equal(fresh, out)


PAIRS = {"halves": ([(2, 4, 3, 3), (2, 4, 3, 3)], 2), "uneven": ([(1, 2, 2, 3), (1, 4, 2, 3)], 3),
         "empty-batch": ([(0, 4, 2, 2), (0, 4, 2, 2)], 2), "empty-width": ([(2, 4, 3, 0), (2, 4, 3, 0)], 4)}


@pytest.mark.parametrize("name", list(PAIRS))
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("view", [False, True], ids=["c-order", "view"])
def test_a_bound_pair_copies_both_inputs_in_one_call(name, dtype, view):
    """Two inputs: the bound step's one call of ``_shuffle_pair`` (into the planned output; a new or a
    strided output takes the per-input path) gives the reference's values bit for bit."""
    shapes, groups = PAIRS[name]
    xs = [_r(s, dtype) for s in shapes]
    if view:
        xs[1] = _r(shapes[1][:3] + (2 * shapes[1][3],), dtype)[..., ::2]
    want = channel_shuffle_kernel(np, *xs, groups=groups)
    out = np.empty(want.shape, dtype)
    bound = kernels.bind("channel_shuffle", np, *xs, out=out, groups=groups)
    assert bound.choice.impl is K.COMPILED
    assert bound.fn(*xs, out=out) is out
    np.testing.assert_array_equal(out, want)
    assert np.array_equal(np.signbit(out), np.signbit(want))
    np.testing.assert_array_equal(bound.fn(*xs), want)
    strided = np.empty(want.shape[:3] + (2 * want.shape[3],), dtype)[..., ::2]
    assert bound.fn(*xs, out=strided) is strided
    np.testing.assert_array_equal(strided, want)
