"""kernels/pool_windows.py: max_pool2d[windows] gives the compiled row loop's values bit for bit (and
the folds', the reference, up to signed zeros' ties), takes views and empty dims, is chosen only where
it applies, falls back otherwise and is switched off by the tuning table."""
from __future__ import annotations

import numpy as np
import pytest

import lazyarray as la
from lazyarray import kernels
from lazyarray.kernels import pool_jit, pool_windows
from lazyarray.kernels.pool import WINDOWS, choose_max_pool2d, run_max_pool2d
from lazyarray.ops.pool import jit_geometry, max_pool2d_kernel

pytest.importorskip("numba")

# (kernel, stride, output) of pools without padding whose windows lie inside a 15 x 13 input
GEOMETRIES = [((3, 3), (2, 2), (7, 6)), ((2, 3), (2, 1), (7, 11)), ((1, 2), (1, 2), (15, 6)), ((3, 3), (3, 3), (5, 4)),
              ((4, 2), (2, 3), (6, 4))]


def _rows(x, kernel, stride, shape):
    """The compiled row loop (``max_pool2d[compiled]``'s reference order) of ``x``."""
    want = np.full(x.shape[:2] + shape, 5, x.dtype)
    empty = np.empty(0, x.dtype)
    la.jit.compiled(pool_jit._pool_rows)(x, want, *kernel, *stride, 0, 0, x.dtype.type(-np.inf), False, False,
                                         empty, empty, x.dtype.type(0))
    return want


def _inputs(dtype):
    x = np.random.default_rng(3).standard_normal((3, 4, 15, 13)).astype(dtype)
    x[0, 0, 0, :4] = [np.nan, -np.inf, np.inf, 1.0]
    x[1, 2, 4:7, 2:5] = -np.inf
    yield "c-order", x
    big = np.zeros((3, 8, 15, 26), dtype)
    big[:, ::2, :, ::2] = x
    yield "strided view", big[:, ::2, :, ::2]
    yield "channels last", np.ascontiguousarray(x.transpose(0, 2, 3, 1)).transpose(0, 3, 1, 2)
    yield "empty batch", x[:0]
    yield "empty channels", x[:, :0]


@pytest.mark.parametrize("geometry", GEOMETRIES, ids=lambda g: f"k{g[0]}-s{g[1]}")
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_windows_equal_the_row_loop_bit_for_bit_and_the_folds(monkeypatch, geometry, dtype):
    monkeypatch.setattr(la.config, "jit", True)
    kernel, stride, shape = geometry
    for what, x in _inputs(dtype):
        assert choose_max_pool2d(np, x, kernel, stride).impl is WINDOWS, what
        got = run_max_pool2d(np, x, kernel, stride)
        assert got.shape == x.shape[:2] + shape and got.dtype == x.dtype, what
        assert got.tobytes() == _rows(x, kernel, stride, shape).tobytes(), what
        np.testing.assert_array_equal(got, max_pool2d_kernel(np, np.ascontiguousarray(x), kernel, stride), what)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_a_bound_step_writes_its_planned_buffer_and_falls_back(monkeypatch, dtype):
    monkeypatch.setattr(la.config, "jit", True)
    x = np.random.default_rng(5).standard_normal((8, 16, 15, 15)).astype(dtype)
    want = _rows(x, (3, 3), (2, 2), (7, 7))
    out = np.full((8, 16, 7, 7), 7, dtype)
    bound = kernels.bind("max_pool2d", np, x, out=out, kernel=(3, 3), stride=(2, 2))
    assert str(bound.choice) == "max_pool2d[windows]"
    assert bound.fn(x, out=out) is out and out.tobytes() == want.tobytes()
    strided = np.zeros((8, 16, 7, 14), dtype)[..., ::2]  # (a planned view with strides)
    assert bound.fn(x, out=strided) is strided and np.array_equal(strided, want)
    calls = []
    fn = pool_windows.bound(x, out, (3, 3), (2, 2), (0, 0), (7, 7), lambda x, out=None: calls.append(out) or "other")
    buf = np.zeros(x.size + out.size, dtype)  # an out overlapping x, or none: the step's generic binding
    ob = buf[x.size - 16:x.size - 16 + out.size].reshape(out.shape)
    assert fn(buf[:x.size].reshape(x.shape), out=ob) == "other" and fn(x) == "other" and len(calls) == 2
    assert fn(x.astype(np.float16), out=out) == "other" and fn(x[:, :, 1:], out=out) == "other"
    last = np.ascontiguousarray(x.transpose(1, 2, 3, 0)).transpose(3, 0, 1, 2)  # (x's shape, stored batch last)
    view = np.repeat(x, 2, axis=3)[..., ::2]  # (x's shape, other strides)
    assert fn(last, out=out) == "other" and fn(view, out=out) == "other" and len(calls) == 6
    np.testing.assert_array_equal(bound.fn(x), want)  # (no out: a new array)


def test_what_windows_does_not_take_keeps_compiled(monkeypatch):
    monkeypatch.setattr(la.config, "jit", True)
    x = np.ones((2, 3, 8, 8), np.float32)
    assert choose_max_pool2d(np, x, (3, 3), (2, 2)).impl.name == "windows"
    assert choose_max_pool2d(np, x, (3, 3), (2, 2), (1, 1)).impl.name == "windows"  # padding: the padded loop
    assert choose_max_pool2d(np, x, (2, 2), (2, 2)).impl.name == "compiled"  # 2 x 2 tiles
    assert choose_max_pool2d(np, x, (2, 2), (1, 1)).impl.name == "compiled"  # stride 1
    assert choose_max_pool2d(np, x, (3, 3), (2, 2), (0, 0), True).impl.name == "windows"  # a window past x (ceil)
    last = np.ascontiguousarray(x.transpose(1, 2, 3, 0)).transpose(3, 0, 1, 2)
    assert choose_max_pool2d(np, last, (3, 3), (2, 2)).impl.name == "compiled"  # batch last
    assert choose_max_pool2d(np, x.astype(np.int32), (3, 3), (2, 2)).impl.name == "folds"  # (as before)
    assert pool_windows.max_pool(x, np.empty((2, 3, 3, 3), np.float64), (3, 3), (2, 2), (0, 0), (3, 3)) is None
    with la.tuning(max_pool_windows=False):
        assert choose_max_pool2d(np, x, (3, 3), (2, 2)).impl.name == "compiled"
    monkeypatch.setattr(la.config, "jit", False)
    assert choose_max_pool2d(np, x, (3, 3), (2, 2)).impl.name == "folds"
    assert pool_windows.bound(x, np.empty((2, 3, 3, 3), np.float32), (3, 3), (2, 2), (0, 0), (3, 3), None) is None


def test_explain_shows_windows_in_a_hybridized_pool(monkeypatch):
    monkeypatch.setattr(la.config, "jit", True)
    net = la.blocks.MaxPool2D(3, 2)
    net.hybridize()
    x = la.array(np.random.default_rng(6).standard_normal((2, 4, 15, 15)).astype(np.float32))
    for _ in range(3):
        y = net(x)
    want = _rows(x.asnumpy(), (3, 3), (2, 2), (7, 7))
    assert y.asnumpy().tobytes() == want.tobytes()
    assert "max_pool2d[windows]" in str(net.explain(x))


# (kernel, stride, padding, ceil_mode) of pools the padded loop runs on a 15 x 13 input: padding, windows past x
PADDED = [((3, 3), (2, 2), (1, 1), False), ((3, 3), (2, 2), (1, 0), True), ((2, 3), (3, 2), (1, 1), False),
          ((3, 3), (2, 2), (0, 0), True), ((5, 4), (2, 3), (2, 1), True)]


@pytest.mark.parametrize("pool", PADDED, ids=lambda g: f"k{g[0]}-s{g[1]}-p{g[2]}-c{int(g[3])}")
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_padded_windows_equal_the_compiled_loops_bit_for_bit_and_the_folds(monkeypatch, pool, dtype):
    monkeypatch.setattr(la.config, "jit", True)
    kernel, stride, padding, ceil = pool
    for what, x in _inputs(dtype):
        assert choose_max_pool2d(np, x, kernel, stride, padding, ceil).impl is WINDOWS, what
        got = run_max_pool2d(np, x, kernel, stride, padding, ceil)
        k, s, p, shape = jit_geometry(x, kernel, stride, padding, ceil)
        want = pool_jit.max_pool(np.ascontiguousarray(x), None, k, s, p, shape)  # (the phase planes or the rows)
        assert got.shape == want.shape and got.tobytes() == want.tobytes(), what
        np.testing.assert_array_equal(got, max_pool2d_kernel(np, np.ascontiguousarray(x), kernel, stride, padding,
                                                             ceil), what)
        bound = kernels.bind("max_pool2d", np, x, out=np.empty_like(want), kernel=kernel, stride=stride,
                             padding=padding, ceil_mode=ceil)
        assert str(bound.choice) == "max_pool2d[windows]", what
        assert bound.fn(x, out=np.full_like(want, 9)).tobytes() == want.tobytes(), what


@pytest.mark.parametrize("stride", [(2, 2), (1, 2), (2, 1), (3, 3)])
@pytest.mark.parametrize("pad", [((0, 0), False), ((1, 1), False), ((1, 0), True), ((0, 0), True)],
                         ids=["inside", "padded", "padded-ceil", "ceil"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_three_by_three_row_folds_keep_ties_and_nan_payloads_bit_for_bit(monkeypatch, stride, pad, dtype):
    """``_pool_windows3`` / ``_pool_windows3_flat`` (a C-ordered x) / ``_pool_windows3_padded`` (each row's three
    taps folded once, then the rows):
    signed zeros' ties take the later tap and a window's first NaN (by its payload) wins, as the compiled
    loops' (row, column) order has it; with relu, the relu's values; views and empty dims too."""
    monkeypatch.setattr(la.config, "jit", True)
    bits = np.uint32 if dtype == "float32" else np.uint64
    pick = np.array([0.0, -0.0, 1.0, -1.0, np.nan, np.nan], dtype)
    pick.view(bits)[5] |= 1  # (a second NaN payload)
    x = pick[np.random.default_rng(11).integers(0, 6, (2, 3, 15, 13))]
    k, s, p, shape = jit_geometry(x, (3, 3), stride, *pad)
    inside = pool_windows._inside(x, k, s, p, shape)  # (ceil_mode adds a window past x for some strides)
    assert inside or pad != ((0, 0), False)
    assert not inside or tuple(p) == (0, 0)
    flat = not inside or dtype == "float32"  # (x C-ordered: float64 windows inside x keep the row loops)
    three = pool_windows._pool_windows3_flat if flat else pool_windows._pool_windows3
    assert pool_windows._kernel(x, k, s, p, shape) is three
    view = np.repeat(x, 2, axis=3)[..., ::2]
    assert pool_windows._kernel(view, k, s, p, shape) is (pool_windows._pool_windows3 if inside else pool_windows._pool_windows3_padded)
    for what, v in [("c-order", x), ("strided view", view), ("empty batch", x[:0])]:
        want = pool_jit.max_pool(np.ascontiguousarray(v), None, k, s, p, shape)  # (the phase planes or the rows)
        got = pool_windows.max_pool(v, None, k, s, p, shape)
        assert got.shape == want.shape and got.tobytes() == want.tobytes(), what
        relu = pool_windows.max_pool(v, np.full_like(want, 4), k, s, p, shape, relu=True)
        assert relu.tobytes() == np.maximum(want, 0).tobytes(), what
