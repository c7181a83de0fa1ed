"""kernels/layer_scale.py: layer_scale_residual[compiled] equals the reference kernel (the recorded multiply,
transpose, add) bit for bit in float32 and float64, for ConvNeXt's shapes, strided views, NaN / -0 / inf and
empty dims, new or into a given out (r's own memory too); what it declines (other axes, a gamma not per
channel, mixed dtypes, an out overlapping y, numba off, the tuning switch off) runs the reference; the
chooser and the binder name what runs."""
from __future__ import annotations

import numpy as np
import pytest

import lazyarray as la
from lazyarray import kernels
from lazyarray.kernels import layer_scale as K
from lazyarray.ops.layer_scale import layer_scale_residual_kernel

RNG = np.random.default_rng(11)
numba = pytest.importorskip("numba")


def _r(shape, dtype):
    v = RNG.standard_normal(shape).astype(dtype)
    if v.size >= 3:
        v.reshape(-1)[:3] = (np.nan, -0.0, np.inf)
    return v


SHAPES = {"convnext-b1": (1, 8, 8, 16), "convnext-b8": (8, 4, 4, 32), "odd": (2, 3, 5, 7),
          "empty-batch": (0, 8, 8, 16), "empty-channels": (2, 3, 3, 0)}


def _inputs(shape, dtype, view):
    n, h, w, c = shape
    y = _r((n, h, 2 * w, c), dtype)[:, :, ::2] if view else _r(shape, dtype)  # (a strided view of a wider array)
    r = _r((n, c, h, 2 * w), dtype)[..., 1::2] if view else _r((n, c, h, w), dtype)
    return y, _r((c,), dtype), r


def _same(got, want):
    assert got.dtype == want.dtype and got.shape == want.shape
    bits = np.dtype(f"u{got.dtype.itemsize}")  # (bit patterns: -0.0 and NaN compared as bits)
    np.testing.assert_array_equal(np.ascontiguousarray(got).view(bits), np.ascontiguousarray(want).view(bits))


@pytest.mark.parametrize("name", list(SHAPES))
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("view", [False, True], ids=["c-order", "view"])
@pytest.mark.parametrize("into", ["new", "out", "r"])
def test_compiled_equals_the_reference_bit_for_bit(name, dtype, view, into):
    y, g, r = _inputs(SHAPES[name], dtype, view)
    want = layer_scale_residual_kernel(np, y, g, r)
    out = {"new": None, "out": np.full(r.shape, 7, dtype), "r": r}[into]
    got = K._compiled(np, y, g, r, (0, 3, 1, 2), out)
    assert got is not None and (out is None or got is out)
    _same(got, want)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_runner_and_the_binder_name_compiled_and_equal_the_reference(dtype):
    y, g, r = _inputs(SHAPES["convnext-b1"], dtype, False)
    want = layer_scale_residual_kernel(np, y, g, r)
    assert kernels.choose("layer_scale_residual", np, y, g, r).impl is K.COMPILED
    _same(K.run_layer_scale_residual(np, y, g, r), want)
    out = np.empty_like(r)
    bound = kernels.bind("layer_scale_residual", np, y, g, r, out=out, axes=(0, 3, 1, 2))
    assert bound.choice.impl is K.COMPILED
    _same(bound.fn(y, g, r, out=out), want)


def test_what_it_declines_runs_the_reference():
    y, g, r = _inputs(SHAPES["odd"], np.float32, False)
    cases = {
        "other axes": (y, g, np.ascontiguousarray(np.transpose(r, (0, 1, 3, 2))), (0, 3, 2, 1)),
        "gamma not per channel": (y, _r((5, 7), np.float32), r, (0, 3, 1, 2)),
        "mixed dtypes": (y, g.astype(np.float64), r, (0, 3, 1, 2)),
        "r broadcast": (y, g, r[:1], (0, 3, 1, 2)),
    }
    for what, (yy, gg, rr, axes) in cases.items():
        assert K.choose_layer_scale_residual(np, yy, gg, rr, axes).impl is K.REFERENCE, what
        assert K._compiled(np, yy, gg, rr, axes, None) is None, what
        _same(K.run_layer_scale_residual(np, yy, gg, rr, axes), layer_scale_residual_kernel(np, yy, gg, rr, axes))
    square, g4, r4 = _r((2, 4, 4, 4), np.float32), _r((4,), np.float32), _r((2, 4, 4, 4), np.float32)
    want = layer_scale_residual_kernel(np, square.copy(), g4, r4)  # (an out overlapping y: the ufuncs buffer it)
    assert K._compiled(np, square, g4, r4, (0, 3, 1, 2), square) is None
    _same(K.run_layer_scale_residual(np, square, g4, r4, out=square), want)


def test_numba_off_and_the_tuning_switch_run_the_reference():
    y, g, r = _inputs(SHAPES["convnext-b1"], np.float32, False)
    want = layer_scale_residual_kernel(np, y, g, r)
    with la.tuning(layer_scale_compiled=False):
        assert K.choose_layer_scale_residual(np, y, g, r).impl is K.REFERENCE
        _same(K.run_layer_scale_residual(np, y, g, r), want)
    with la.tuning(jit=False):
        assert K.choose_layer_scale_residual(np, y, g, r).impl is K.REFERENCE
        _same(K.run_layer_scale_residual(np, y, g, r), want)
