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
