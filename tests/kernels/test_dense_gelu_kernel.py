"""kernels/dense_gelu.py's ``dense_gelu`` against the two kernels it replaces (dense, then gelu[compiled]) and
the ops' reference kernels: bit for bit in float32 where its loop runs (in place too), the two kernels
elsewhere (float64, non-C-ordered outputs, empty dims)."""
from __future__ import annotations

import numpy as np
import pytest

import lazyarray as la
from lazyarray.kernels import dense_gelu as kdg
from lazyarray.ops import registry

_DENSE = registry.get("dense").bind(np)
_GELU = registry.get("gelu").bind(np)


@pytest.fixture(autouse=True)
def _weights_through_their_view():
    """Every product here through the weight's transposed view: a packed copy (``ops/weight_pack.py``, a
    weight's second call on) may round the product otherwise on some BLAS builds (OpenBLAS on AMD Zen), and
    these tests compare what comes after the product."""
    with la.tuning(keep_weights=False):
        yield


def _case(rng, shape, units, dtype):
    x = rng.standard_normal(shape).astype(dtype) * 3
    w = rng.standard_normal((units, shape[-1])).astype(dtype)
    b = rng.standard_normal(units).astype(dtype)
    return x, w, b


def _two_steps(x, w, b):
    y = np.empty(x.shape[:-1] + (w.shape[0],), x.dtype)
    _DENSE(x, w, b, out=y)
    return _GELU(y, out=np.empty_like(y))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape,units", [((1, 8, 8, 16), 64), ((7, 32), 128), ((2, 5, 16), 40), ((0, 7, 32), 32),
                                         ((3, 0, 8), 8), ((4, 8), 0)])
@pytest.mark.parametrize("in_place", [False, True])
def test_equals_the_two_kernels_and_the_reference(dtype, shape, units, in_place):
    pytest.importorskip("numba")
    rng = np.random.default_rng(sum(shape) + units)
    x, w, b = _case(rng, shape, units, dtype)
    y = np.empty(shape[:-1] + (units,), dtype)
    g = y if in_place else np.empty_like(y)
    fused = kdg.fused_kernel(y, b, g) is not None
    assert fused == (dtype == np.float32 and y.size > 0)
    got = kdg.dense_gelu(_DENSE, _GELU, x, w, b, y, g)
    assert got is g
    np.testing.assert_array_equal(got, _two_steps(x, w, b))
    ref = registry.get("gelu").kernel(np, registry.get("dense").kernel(np, x, w, b))
    tol = 2e-6 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(got, ref, rtol=tol, atol=tol)


def test_views_and_layouts_it_leaves_to_the_two_kernels():
    rng = np.random.default_rng(4)
    x, w, b = _case(rng, (2, 12, 32), 48, np.float32)
    x, w = x[:, ::2, ::2], w[:, ::2]  # (views: the dense kernel takes them, the loop reads its C-ordered output)
    y = np.empty((2, 6, 48), np.float32)
    g = np.empty((2, 6, 48), np.float32)
    np.testing.assert_array_equal(kdg.dense_gelu(_DENSE, _GELU, x, w, b, y, g), _two_steps(x, w, b))
    yt = np.empty((48, 12), np.float32).T  # (a units-major output: not the loop's)
    assert kdg.fused_kernel(yt, b, np.empty((12, 48), np.float32)) is None
    x2 = np.ascontiguousarray(x.reshape(12, 16))
    want = _GELU(_DENSE(x2, w, b, out=np.empty((48, 12), np.float32).T), out=np.empty((12, 48), np.float32))
    np.testing.assert_array_equal(kdg.dense_gelu(_DENSE, _GELU, x2, w, b, yt, np.empty((12, 48), np.float32)), want)


def test_gelu_erf_float64_and_the_switch_of_compiled_kernels():
    pytest.importorskip("numba")
    rng = np.random.default_rng(5)
    x, w, b = _case(rng, (9, 16), 64, np.float32)
    with la.tuning(gelu_erf_float64=True):
        y = np.empty((9, 64), np.float32)
        np.testing.assert_array_equal(kdg.dense_gelu(_DENSE, _GELU, x, w, b, y, np.empty_like(y)),
                                      _two_steps(x, w, b))
    with la.tuning(jit=False):
        y = np.empty((9, 64), np.float32)
        assert kdg.fused_kernel(y, b, y) is None
        np.testing.assert_array_equal(kdg.dense_gelu(_DENSE, _GELU, x, w, b, y, y), _two_steps(x, w, b))


def test_a_steps_runner_checks_each_set_of_arrays_once_with_the_same_values():
    pytest.importorskip("numba")
    rng = np.random.default_rng(6)
    run = kdg.step_runner()
    x, w, b = _case(rng, (4, 16), 64, np.float32)
    y = np.empty((4, 64), np.float32)
    for _ in range(3):  # (the same planned buffers run after run)
        np.testing.assert_array_equal(run(_DENSE, _GELU, x, w, b, y, y), _two_steps(x, w, b))
    y64 = np.empty((4, 64), np.float64)  # (other arrays: checked again, the two kernels)
    x64, w64, b64 = (a.astype(np.float64) for a in (x, w, b))
    np.testing.assert_array_equal(run(_DENSE, _GELU, x64, w64, b64, y64, y64), _two_steps(x64, w64, b64))
    with la.tuning(jit=False):
        np.testing.assert_array_equal(run(_DENSE, _GELU, x, w, b, y, np.empty_like(y)), _two_steps(x, w, b))
