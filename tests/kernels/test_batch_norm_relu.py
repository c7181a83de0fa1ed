"""kernels/batch_norm_relu.py: the compiled pass equals the reference kernel bit for bit in float32 and
float64, for arrays stored C-ordered, batch last, channels last, strided views (declined: the
reference runs), into a given out (x itself included) and with empty dims; the chooser and the binder
name what runs."""
from __future__ import annotations

import numpy as np
import pytest

from lazyarray import jit, kernels
from lazyarray.kernels import batch_norm_relu as K
from lazyarray.ops.batch_norm_relu import batch_norm_relu_kernel

RNG = np.random.default_rng(3)
numba = pytest.importorskip("numba")


def _stats(c, dtype):
    gamma = RNG.standard_normal(c).astype(dtype)
    gamma[: min(c, 1)] = 0.0
    return [gamma, RNG.standard_normal(c).astype(dtype), RNG.standard_normal(c).astype(dtype),
            (RNG.random(c) + 0.1).astype(dtype)]


def _x(shape, dtype, order=None):
    v = (RNG.standard_normal(shape) * 3).astype(dtype)
    if v.size:
        v.reshape(-1)[:4] = (np.nan, np.inf, -np.inf, -0.0)
    if order is None:
        return v
    return np.ascontiguousarray(v.transpose(order)).transpose(np.argsort(order))


LAYOUTS = {"c": ((2, 5, 4, 3), None), "batch-last": ((6, 5, 4, 3), (1, 2, 3, 0)),
           "channels-last": ((2, 5, 4, 3), (0, 2, 3, 1)), "empty": ((0, 5, 4, 3), None),
           "empty-batch-last": ((2, 5, 0, 3), (1, 2, 3, 0)), "2d": ((7, 5), None)}


@pytest.mark.parametrize("layout", list(LAYOUTS))
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("into", ["new", "out", "in-place"])
def test_compiled_equals_the_reference_bit_for_bit(layout, dtype, into):
    shape, order = LAYOUTS[layout]
    x, stats = _x(shape, dtype, order), _stats(shape[1], dtype)
    want = batch_norm_relu_kernel(np, x.copy(order="K"), *stats, 1e-3, 1)
    out = {"new": None, "out": np.empty_like(x, order="K"), "in-place": x}[into]
    got = K._compiled(np, x, *stats, 1e-3, 1, out)
    assert got is not None and (out is None or got is out)
    assert got.strides == want.strides or got.size == 0
    np.testing.assert_array_equal(got, want)
    assert np.array_equal(np.signbit(got), np.signbit(want))  # (-0.0 -> 0.0 as np.maximum)


def test_what_it_declines_runs_the_reference():
    x, stats = _x((2, 6, 4, 4), np.float32), _stats(6, np.float32)
    strided = x[:, ::2]
    s3 = [s[::2].copy() for s in stats]
    assert K._compiled(np, strided, *s3, 1e-5, 1, None) is None  # (not stored in one memory order)
    assert K._compiled(np, x, *[s.astype(np.float64) for s in stats], 1e-5, 1, None) is None
    assert K._compiled(np, x.astype(np.float16), *stats, 1e-5, 1, None) is None
    buf = np.empty(x.size + 4, np.float32)
    buf[4:] = x.reshape(-1)
    shifted_in, shifted_out = buf[4:].reshape(x.shape), buf[:-4].reshape(x.shape)
    assert K._compiled(np, shifted_in, *stats, 1e-5, 1, shifted_out) is None  # (a partial overlap)
    for arr in (strided, shifted_in):
        st = s3 if arr is strided else stats
        want = batch_norm_relu_kernel(np, arr.copy(), *st, 1e-5, 1)
        out = shifted_out if arr is shifted_in else None
        np.testing.assert_array_equal(K.run_batch_norm_relu(np, arr, *st, 1e-5, 1, out=out), want)


def test_choose_and_bind_name_the_compiled_pass(monkeypatch):
    x, stats = _x((1, 4, 3, 3), np.float32), _stats(4, np.float32)
    assert str(kernels.choose("batch_norm_relu", np, x, *stats)) == "batch_norm_relu[compiled]"
    b = kernels.bind("batch_norm_relu", np, x, *stats, out=np.empty_like(x))
    assert b.choice.impl is K.COMPILED
    np.testing.assert_array_equal(b.fn(x, *stats, out=np.empty_like(x)), batch_norm_relu_kernel(np, x, *stats))
    monkeypatch.setattr(jit, "enabled", lambda: False)
    assert str(kernels.choose("batch_norm_relu", np, x, *stats)) == "batch_norm_relu[ufuncs]"


def _images_strided(shape, dtype, spare=3):
    """x (N, C, ...) whose images are C-ordered blocks ``spare`` channels apart more than C (a part of a
    batch's channel concatenation written in place)."""
    n, c = shape[0], shape[1]
    whole = _x((n, c + spare) + tuple(shape[2:]), dtype)
    return whole[:, :c]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(3, 5, 4, 3), (2, 4, 6), (4, 3, 0, 2)])
def test_images_at_a_batch_stride_run_compiled_bit_for_bit(dtype, shape):
    x, stats = _images_strided(shape, dtype), _stats(shape[1], dtype)
    assert x.size == 0 or not x.flags.c_contiguous and x[0].flags.c_contiguous
    want = batch_norm_relu_kernel(np, x.copy(), *stats, 1e-3, 1)
    for out in (None, np.empty(shape, dtype), _images_strided(shape, dtype, spare=1)):
        got = K._compiled(np, x, *stats, 1e-3, 1, out)
        assert (got is not None or x.size == 0) and (out is None or got is out)
        if got is not None:
            np.testing.assert_array_equal(got, want)
            assert np.array_equal(np.signbit(got), np.signbit(want))
    inplace = x.copy()
    view = np.concatenate([inplace, inplace[:, :1]], axis=1)[:, : shape[1]]
    if view.size:
        assert K._compiled(np, view, *stats, 1e-3, 1, view) is view
        np.testing.assert_array_equal(view, want)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("kind", ["c", "images-strided", "1-image", "empty"])
def test_bound_step_runs_compiled_bit_for_bit_and_falls_back(dtype, kind):
    shape = {"c": (2, 5, 4, 3), "images-strided": (3, 5, 4, 3), "1-image": (1, 6, 3, 3), "empty": (2, 5, 0, 3)}[kind]
    x = _images_strided(shape, dtype) if kind == "images-strided" else _x(shape, dtype)
    stats, out = _stats(shape[1], dtype), np.empty(shape, dtype)
    b = kernels.bind("batch_norm_relu", np, x, *stats, out=out, eps=1e-3)
    assert b.choice.impl is K.COMPILED and str(b.choice) == "batch_norm_relu[compiled]"
    assert b.fn.__qualname__.startswith("_fast.")  # (the pass bound once)
    want = batch_norm_relu_kernel(np, x.copy(), *stats, 1e-3, 1)
    assert b.fn(x, *stats, out=out) is out
    np.testing.assert_array_equal(out, want)
    assert np.array_equal(np.signbit(out), np.signbit(want))
    # a call the binding did not see (another layout, another dtype's statistics, x itself as out): the
    # generic binding runs it, the same values
    other = np.ascontiguousarray(x)[:, ::-1][:, ::-1] if kind != "images-strided" else x.copy()
    o2 = np.empty(shape, dtype)
    np.testing.assert_array_equal(b.fn(other, *stats, out=o2), want)
    x2 = x.copy()
    np.testing.assert_array_equal(b.fn(x2, *stats, out=x2), want)


def test_bound_step_declines_what_it_cannot_bind():
    x, stats = _x((2, 6, 4, 4), np.float32), _stats(6, np.float32)
    assert K._fast(x[:, ::2], np.empty((2, 3, 4, 4), np.float32), [s[:3].copy() for s in stats], 1e-5, None) is None
    assert K._fast(x, x, stats, 1e-5, None) is None  # (in place: the generic binding)
    assert K._fast(x, None, stats, 1e-5, None) is None
    assert K._fast(x, np.empty((2, 6, 4, 4), np.float64), stats, 1e-5, None) is None
    b = kernels.bind("batch_norm_relu", np, x, *stats, out=x)
    np.testing.assert_array_equal(b.fn(x.copy(), *stats, out=np.empty_like(x)), batch_norm_relu_kernel(np, x, *stats))
