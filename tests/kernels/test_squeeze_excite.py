"""kernels/squeeze_excite.py: the compiled pass equals the reference kernel (the recorded ops' kernels)
within float rounding in float32 and float64 (its means bit for bit), written new, into a given out and
into x itself, for rows of one or two pairwise blocks and empty batches; strided views, other dtypes and
rows of three blocks are declined (the reference runs); the chooser and the binder name what runs."""
from __future__ import annotations

import numpy as np
import pytest

import lazyarray as la
from lazyarray import jit, kernels
from lazyarray.kernels import squeeze_excite as K
from lazyarray.ops.squeeze_excite import squeeze_excite_kernel

RNG = np.random.default_rng(5)
numba = pytest.importorskip("numba")
TOL = {np.float32: {"rtol": 1e-5, "atol": 1e-6}, np.float64: {"rtol": 1e-12, "atol": 1e-14}}
ALPHA, BETA = 1 / 6, 0.5


def _arrays(shape, r, dtype):
    n, c, h, w = shape
    x = (RNG.standard_normal(shape) * 2).astype(dtype)
    return [x, (RNG.standard_normal((r, c, 1, 1)) / np.sqrt(c)).astype(dtype), RNG.standard_normal(r).astype(dtype),
            (RNG.standard_normal((c, r, 1, 1)) * 3 / np.sqrt(r)).astype(dtype), RNG.standard_normal(c).astype(dtype)]


SHAPES = {"8x8": ((2, 32, 8, 8), 8), "one-image-16x16": ((1, 16, 16, 16), 4), "12x12": ((3, 6, 12, 12), 2),
          "3x5": ((2, 5, 3, 5), 3), "1x1": ((4, 7, 1, 1), 7), "empty-batch": ((0, 8, 4, 4), 2)}


@pytest.mark.parametrize("name", list(SHAPES))
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("into", ["new", "out", "in-place"])
def test_compiled_equals_the_reference_within_rounding(name, dtype, into):
    shape, r = SHAPES[name]
    x, *params = _arrays(shape, r, dtype)
    want = squeeze_excite_kernel(np, x.copy(), *params, ALPHA, BETA)
    out = {"new": None, "out": np.empty_like(x), "in-place": x}[into]
    got = K._compiled(np, x, *params, ALPHA, BETA, out)
    assert got is not None and (out is None or got is out)
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_allclose(got, want, **TOL[dtype])


@pytest.mark.parametrize("name", list(SHAPES))
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_ordered_is_compiled_bit_for_bit(name, dtype):
    """``ordered`` (NumPy calls: where the tiered kernel is not loaded) gives the compiled pass's values,
    NaN, saturated gates and -0.0 included, into x itself too."""
    shape, r = SHAPES[name]
    x, *params = _arrays(shape, r, dtype)
    if x.size:
        x[0, 0, 0, 0], x[-1, -1, -1, -1] = np.nan, -0.0
        params[3][0] = 50.0
    want = K._compiled(np, x, *params, ALPHA, BETA, None)
    got = K._ordered(np, x, *params, ALPHA, BETA, None)
    np.testing.assert_array_equal(got, want)
    assert np.array_equal(np.signbit(got), np.signbit(want))
    assert K._ordered(np, x, *params, ALPHA, BETA, x) is x
    np.testing.assert_array_equal(x, want)


def test_a_first_run_gives_the_later_runs_values():
    """In a compiled program's first run the tiered kernel is neither loaded nor compiled: ``ordered`` runs,
    and the values are those every later call gives."""
    x, *params = _arrays((2, 16, 8, 8), 4, np.float32)
    run = lambda: K.run_squeeze_excite(np, x, *params, ALPHA, BETA)  # noqa: E731
    jit.clear()
    try:
        with la.tuning(jit=True):
            with jit.first_run():
                assert K.with_row_sum(K._squeeze_excite_with) is None
                first = run()
            later = run()
    finally:
        jit.clear()
    np.testing.assert_array_equal(first, later)


def test_the_gate_saturates_and_nan_stays():
    """A gate past 1 or below 0 is clipped as hardsigmoid clips it (exactly 1 or 0: the product is x or 0);
    a NaN in an image makes its means, and so its gate and values, NaN, as the reference's."""
    x, w1, b1, w2, b2 = _arrays((2, 4, 3, 3), 2, np.float32)
    b2[:] = (100.0, -100.0, 100.0, -100.0)
    w2[:] = 0.0
    x[1, 0, 0, 0] = np.nan
    got = K._compiled(np, x, w1, b1, w2, b2, ALPHA, BETA, None)
    want = squeeze_excite_kernel(np, x, w1, b1, w2, b2, ALPHA, BETA)
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_array_equal(got[0, 0], x[0, 0])
    assert np.isnan(got[1]).all() and np.isnan(want[1]).all()


def test_the_means_are_np_means_bit_for_bit():
    """Identity weights, zero biases, alpha 1, beta 0 and values in (0, 1): the gate is each channel's
    mean itself (every other product adds zero), so the result is ``x * np.mean(x)`` bit for bit, for
    rows of one pairwise block, of two, and under eight values."""
    for shape in ((1, 3, 8, 8), (2, 3, 16, 16), (1, 3, 11, 13), (1, 3, 2, 3)):
        x = RNG.random(shape).astype(np.float32)
        eye = np.eye(3, dtype=np.float32).reshape(3, 3, 1, 1)
        zero = np.zeros(3, np.float32)
        got = K._compiled(np, x, eye, zero, eye, zero, 1.0, 0.0, None)
        np.testing.assert_array_equal(got, x * np.mean(x, axis=(2, 3), keepdims=True))
        np.testing.assert_array_equal(got, squeeze_excite_kernel(np, x, eye, zero, eye, zero, 1.0, 0.0))


def test_what_it_declines_runs_the_reference():
    x, *params = _arrays((2, 6, 4, 4), 2, np.float32)
    strided = np.ascontiguousarray(np.concatenate([x, x], axis=3))[..., ::2]
    assert K._compiled(np, strided, *params, ALPHA, BETA, None) is None  # (not C-ordered)
    assert K._compiled(np, x, *[p.astype(np.float64) for p in params], ALPHA, BETA, None) is None
    assert K._compiled(np, x.astype(np.float16), *params, ALPHA, BETA, None) is None
    big = _arrays((1, 2, 20, 20), 2, np.float32)  # (400 values a row: three pairwise blocks)
    assert K._compiled(np, *big, ALPHA, BETA, None) is None
    assert K._compiled(np, x, *params, ALPHA, BETA, np.empty_like(x)[:, :, ::-1]) is None
    for args in ((strided, *params), tuple(big)):
        choice = kernels.choose("squeeze_excite", np, *args, alpha=ALPHA, beta=BETA)
        assert choice.impl is K.REFERENCE
        got = K.run_squeeze_excite(np, *args, ALPHA, BETA)
        np.testing.assert_array_equal(got, squeeze_excite_kernel(np, *args, ALPHA, BETA))


def test_the_chooser_and_the_binder_name_the_compiled_pass():
    x, *params = _arrays((1, 16, 8, 8), 4, np.float64)
    assert repr(kernels.choose("squeeze_excite", np, x, *params, alpha=ALPHA, beta=BETA)) == \
        "squeeze_excite[compiled]"
    out = np.empty_like(x)
    bound = kernels.bind("squeeze_excite", np, x, *params, out=out, alpha=ALPHA, beta=BETA)
    assert bound.choice.impl is K.COMPILED
    assert bound.fn(x, *params, out=out) is out
    np.testing.assert_allclose(out, squeeze_excite_kernel(np, x, *params, ALPHA, BETA), **TOL[np.float64])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_compiled_steps_binding_runs_the_pass_into_x_as_compiled_does(dtype):
    """``bind_squeeze_excite``'s step into x itself (``_bound_in_place``: the kernel and plan fetched once)
    gives ``compiled``'s values bit for bit; calls into another buffer, without one, or of a strided view
    go to the generic binding, with the same values; an empty batch too."""
    for shape, r in (((2, 16, 16, 16), 4), ((3, 32, 8, 8), 8), ((0, 8, 4, 4), 2)):
        x, *params = _arrays(shape, r, dtype)
        want = K._compiled(np, x, *params, ALPHA, BETA, None)
        bound = kernels.bind("squeeze_excite", np, x, *params, out=x, alpha=ALPHA, beta=BETA)
        assert bound.choice.impl is K.COMPILED and "_bound_in_place" in bound.fn.__qualname__
        for out in (np.full_like(x, np.nan), None):
            got = bound.fn(x, *params, out=out)
            assert (out is None or got is out) and got.tobytes() == want.tobytes()
        view = np.repeat(x, 2, axis=3)[..., ::2]
        np.testing.assert_allclose(bound.fn(view, *params, out=None), want, **TOL[dtype])
        assert bound.fn(x, *params, out=x) is x and x.tobytes() == want.tobytes()
