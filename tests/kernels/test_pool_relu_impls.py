"""kernels/pool.py's max_pool2d_relu: windows, compiled and "pool, then relu" give the op's reference
(max_pool2d's reference kernel, then ``maximum(y, 0)``) bit for bit where max_pool2d's implementations
give its reference's values, views and empty dims included; each is chosen where max_pool2d's
counterpart is, falls back where it declines, and is visible and switchable off."""
from __future__ import annotations

import numpy as np
import pytest

import lazyarray as la
from lazyarray import kernels
from lazyarray.kernels import pool_windows
from lazyarray.kernels.pool import (
    RELU_AFTER,
    RELU_COMPILED,
    RELU_WINDOWS,
    choose_max_pool2d_relu,
    run_max_pool2d_relu,
)
from lazyarray.ops import registry

pytest.importorskip("numba")

REFERENCE = registry.get("max_pool2d_relu").kernel
# (kernel, stride, padding, ceil_mode, the implementation max_pool2d's chooser picks for a C-ordered float x)
POOLS = [((3, 3), (2, 2), (0, 0), False, RELU_WINDOWS), ((3, 3), (2, 2), (1, 1), False, RELU_WINDOWS),
         ((3, 2), (2, 2), (1, 0), True, RELU_WINDOWS), ((3, 2), (2, 2), (0, 1), True, RELU_COMPILED), ((2, 2), (2, 2), (0, 0), False, RELU_COMPILED),
         ((3, 3), (1, 1), (1, 1), False, RELU_COMPILED)]


def _inputs(dtype):
    x = np.random.default_rng(7).standard_normal((2, 4, 14, 13)).astype(dtype)
    x[0, 0, 0, :4] = [np.nan, -np.inf, np.inf, 1.0]
    x[1, 2] = -np.abs(x[1, 2])  # a channel of negatives only: every value 0
    yield "c-order", x
    big = np.zeros((2, 8, 14, 26), dtype)
    big[:, ::2, :, ::2] = x
    yield "strided view", big[:, ::2, :, ::2]
    yield "batch last", np.ascontiguousarray(x.transpose(1, 2, 3, 0)).transpose(3, 0, 1, 2)
    yield "empty batch", x[:0]
    yield "empty channels", x[:, :0]


def _want(x, kernel, stride, padding, ceil):
    return REFERENCE(np, np.ascontiguousarray(x), kernel, stride, padding, ceil)


@pytest.mark.parametrize("pool", POOLS, ids=lambda p: f"k{p[0]}-s{p[1]}-p{p[2]}-c{int(p[3])}")
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_each_implementation_equals_the_reference_bit_for_bit(monkeypatch, pool, dtype):
    monkeypatch.setattr(la.config, "jit", True)
    kernel, stride, padding, ceil, impl = pool
    for what, x in _inputs(dtype):
        want = _want(x, kernel, stride, padding, ceil)
        chosen = choose_max_pool2d_relu(np, x, kernel, stride, padding, ceil).impl
        assert chosen is (RELU_COMPILED if what == "batch last" else impl), what
        got = run_max_pool2d_relu(np, x, kernel, stride, padding, ceil)
        assert got.shape == want.shape and got.dtype == want.dtype, what
        assert got.tobytes() == want.tobytes(), what
        for each in (RELU_WINDOWS, RELU_COMPILED, RELU_AFTER):  # (each that takes x, run on its own)
            y = each.run(np, x, kernel, stride, padding, ceil, np.full(want.shape, 5, want.dtype))
            assert y is None or y.tobytes() == want.tobytes(), (what, each.name)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_a_bound_step_writes_its_planned_buffer_and_falls_back(monkeypatch, dtype):
    monkeypatch.setattr(la.config, "jit", True)
    x = np.random.default_rng(8).standard_normal((1, 16, 15, 15)).astype(dtype)
    want = _want(x, (3, 3), (2, 2), (0, 0), False)
    out = np.full(want.shape, 7, dtype)
    bound = kernels.bind("max_pool2d_relu", np, x, out=out, kernel=(3, 3), stride=(2, 2))
    assert str(bound.choice) == "max_pool2d_relu[windows]"
    assert bound.fn(x, out=out) is out and out.tobytes() == want.tobytes()
    strided = np.zeros(want.shape[:3] + (14,), dtype)[..., ::2]
    assert bound.fn(x, out=strided) is strided and strided.tobytes() == np.ascontiguousarray(want).tobytes()
    calls = []
    fn = pool_windows.bound(x, out, (3, 3), (2, 2), (0, 0), (7, 7), lambda x, out=None: calls.append(out) or "other",
                            relu=True)
    buf = np.zeros(x.size + out.size, dtype)  # an out overlapping x, or none: the step's generic binding
    ob = buf[x.size - 16:x.size - 16 + out.size].reshape(out.shape)
    assert fn(buf[:x.size].reshape(x.shape), out=ob) == "other" and fn(x) == "other" and len(calls) == 2
    np.testing.assert_array_equal(bound.fn(x), want)  # (no out: a new array)


def test_not_compiled_runs_the_pool_then_the_relu_and_windows_switches_off(monkeypatch):
    monkeypatch.setattr(la.config, "jit", True)
    x = np.random.default_rng(9).standard_normal((2, 3, 9, 9)).astype(np.float32)
    with la.tuning(max_pool_windows=False):
        assert choose_max_pool2d_relu(np, x, (3, 3), (2, 2)).impl is RELU_COMPILED
    xi = (x * 10).astype(np.int32)
    assert choose_max_pool2d_relu(np, xi, (3, 3), (2, 2)).impl is RELU_AFTER
    np.testing.assert_array_equal(run_max_pool2d_relu(np, xi, (3, 3), (2, 2)), _want(xi, (3, 3), (2, 2), (0, 0), False))
    assert pool_windows.max_pool(x, np.empty((2, 3, 4, 4), np.float64), (3, 3), (2, 2), (0, 0), (4, 4), True) is None
    monkeypatch.setattr(la.config, "jit", False)
    assert choose_max_pool2d_relu(np, x, (3, 3), (2, 2)).impl is RELU_AFTER
    np.testing.assert_array_equal(run_max_pool2d_relu(np, x, (3, 3), (2, 2)), _want(x, (3, 3), (2, 2), (0, 0), False))
