"""kernels/pool_jit.py: the compiled max and average pools return the NumPy path's values for every
layout, window geometry and special value, and decline (None) what they do not cover."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

import lazyarray as la
from lazyarray import kernels
from lazyarray.kernels import pool_jit
from lazyarray.kernels.pool import choose_avg_pool2d, run_avg_pool2d, run_max_pool2d, run_max_pool2d_grad, run_norm
from lazyarray.ops.pool import avg_pool2d_kernel, max_pool2d_kernel, window_layout

pytest.importorskip("numba")

GEOMETRIES = [((2, 2), (0, 0), (0, 0), False), ((3, 3), (2, 2), (1, 1), False), ((3, 3), (2, 2), (1, 1), True),
              ((2, 2), (1, 1), (0, 0), False), ((3, 2), (2, 2), (0, 0), True), ((1, 2), (2, 1), (0, 1), False),
              ((2, 2), (2, 2), (0, 0), True)]


def _stored(x, layout):
    if layout == "batch-last":  # the executor's planned buffers: (C, H, W, N) memory
        return np.ascontiguousarray(x.transpose(1, 2, 3, 0)).transpose(3, 0, 1, 2)
    if layout == "strided":
        big = np.zeros(x.shape[:3] + (2 * x.shape[3],), x.dtype)
        big[..., ::2] = x
        return big[..., ::2]
    return x


def _special(x):
    x = x.copy()
    x[0, 0, 0, :4] = [np.nan, -0.0, np.inf, -np.inf]
    x[-1, -1, -1, :] = -np.inf  # a row of -inf: windows whose maximum is -inf
    return x


@pytest.mark.parametrize("geometry", GEOMETRIES, ids=lambda g: f"k{g[0]}-s{g[1]}-p{g[2]}-{'ceil' if g[3] else 'floor'}")
@pytest.mark.parametrize("layout", ["nchw", "batch-last", "strided"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_max_pool_equals_the_numpy_path(both_paths, geometry, layout, dtype):
    kernel, stride, padding, ceil = geometry
    for shape in [(3, 4, 8, 10), (2, 3, 7, 9)]:
        x = _stored(_special(np.random.default_rng(0).standard_normal(shape).astype(dtype)), layout)
        got, want = both_paths(lambda x=x: run_max_pool2d(np, x, kernel, stride, padding, ceil))
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_array_equal(got, want)
        if layout == "batch-last":  # a result stored like its input, as the NumPy path's
            assert got.transpose(1, 2, 3, 0).flags.c_contiguous


@pytest.mark.parametrize("out_layout", ["nchw", "batch-last", "strided"])
@pytest.mark.parametrize("in_layout", ["nchw", "batch-last"])
def test_max_pool_writes_into_a_planned_buffer_of_any_layout(monkeypatch, in_layout, out_layout):
    x = _stored(_special(np.random.default_rng(1).standard_normal((4, 3, 6, 8)).astype("float32")), in_layout)
    monkeypatch.setattr(la.config, "jit", False)
    want = run_max_pool2d(np, x)
    monkeypatch.setattr(la.config, "jit", True)
    out = _stored(np.full(want.shape, 7.0, np.float32), out_layout)
    assert run_max_pool2d(np, x, out=out) is out
    np.testing.assert_array_equal(out, want)


@pytest.mark.parametrize("geometry", GEOMETRIES[:4], ids=lambda g: f"k{g[0]}-s{g[1]}-p{g[2]}-{'ceil' if g[3] else 'floor'}")
@pytest.mark.parametrize("layout", ["nchw", "batch-last"])
@pytest.mark.parametrize("relu", [True, False])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_pooled_batch_norm_equals_the_numpy_path(both_paths, geometry, layout, relu, dtype):
    kernel, stride, padding, ceil = geometry
    rng = np.random.default_rng(2)
    x = _stored(_special(rng.standard_normal((3, 4, 8, 10)).astype(dtype) * 3), layout)
    gamma = np.array([0.5, 0.0, 2.0, 1e-3], dtype)  # a zero scale: still >= 0
    beta, mean = rng.standard_normal(4).astype(dtype), rng.standard_normal(4).astype(dtype)
    var = (rng.random(4) + 0.1).astype(dtype)
    got, want = both_paths(lambda: run_norm(np, x, gamma, beta, mean, var, 1e-3, relu,
                                                             kernel, stride, padding, ceil))
    np.testing.assert_array_equal(got, want)
    assert pool_jit.max_pool_norm(x, None, gamma, beta, mean, var, 1e-3, relu, kernel, stride, padding,
                                  got.shape[2:]) is not None  # (the compiled pass ran)


@pytest.mark.parametrize("gamma", [[1.0, -0.5, 2.0], [1.0, np.nan, 2.0]], ids=["negative", "nan"])
def test_a_scale_not_at_least_zero_declines_and_the_numpy_path_runs_the_recorded_order(both_paths, monkeypatch, gamma):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 3, 6, 6)).astype("float32")
    stats = [np.asarray(gamma, "float32")] + [rng.random(3).astype("float32") + 0.1 for _ in range(3)]
    monkeypatch.setattr(la.config, "jit", True)
    assert pool_jit.max_pool_norm(x, None, *stats, 1e-5, True, (2, 2), (2, 2), (0, 0), (3, 3)) is None
    got, want = both_paths(lambda: run_norm(np, x, *stats, 1e-5, True))
    np.testing.assert_array_equal(got, want)


def test_what_the_compiled_pools_do_not_cover_is_declined(monkeypatch):
    monkeypatch.setattr(la.config, "jit", True)
    geo = ((2, 2), (2, 2), (0, 0), (2, 2))
    f32 = np.ones((1, 2, 4, 4), np.float32)
    assert pool_jit.max_pool(f32, None, *geo) is not None
    for x, out in [(f32.astype("float16"), None), (f32.astype("int32"), None), (f32, np.empty((1, 2, 2, 2))),
                   (f32[0], None)]:
        assert pool_jit.max_pool(x, out, *geo) is None
    stats = [np.ones(2, np.float64)] * 4  # statistics of another dtype
    assert pool_jit.max_pool_norm(f32, None, *stats, 1e-5, False, *geo) is None
    buf = np.zeros(64, np.float32)  # an out overlapping its input's bytes: declined (NumPy's path buffers it)
    assert pool_jit.max_pool(buf[:32].reshape(1, 2, 4, 4), buf[24:32].reshape(1, 2, 2, 2), *geo) is None
    monkeypatch.setattr(la.config, "jit", False)
    assert pool_jit.max_pool(f32, None, *geo) is None


def test_integer_pools_keep_the_numpy_path(both_paths):
    x = np.random.default_rng(4).integers(-9, 9, (2, 3, 6, 6)).astype("int32")
    got, want = both_paths(lambda: run_max_pool2d(np, x))
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, want)


def test_every_window_of_random_geometries(both_paths):
    """Geometries beyond the table: every kernel, stride and padding up to 3 on odd and even sizes."""
    rng = np.random.default_rng(5)
    for k, s, p in itertools.product([(1, 3), (3, 1), (2, 3)], [(1, 2), (3, 3)], [(0, 0), (1, 1)]):
        if p[0] * 2 > k[0] or p[1] * 2 > k[1]:
            continue
        for ceil in (False, True):
            x = _special(rng.standard_normal((2, 2, 7, 8)).astype("float32"))
            got, want = both_paths(lambda x=x, k=k, s=s, p=p, ceil=ceil: run_max_pool2d(np, x, k, s, p, ceil))
            np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("geometry", GEOMETRIES, ids=lambda g: f"k{g[0]}-s{g[1]}-p{g[2]}-{'ceil' if g[3] else 'floor'}")
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_max_pool_gradient_equals_the_numpy_path_bit_for_bit(both_paths, monkeypatch, geometry, dtype):
    """Each window's first maximum (a NaN first, ties to the first tap, a window of -inf onto its
    padding) and the same sums for overlapping windows: equal bits."""
    kernel, stride, padding, ceil = geometry
    rng = np.random.default_rng(6)
    x = _special(rng.standard_normal((3, 4, 8, 10)).astype(dtype))
    x[1, 1, :, :3] = 0.5  # ties
    x[2, 2] = np.round(x[2, 2])  # more ties
    monkeypatch.setattr(la.config, "jit", False)
    y = run_max_pool2d(np, x, kernel, stride, padding, ceil)
    g = rng.standard_normal(y.shape).astype(dtype)
    got, want = both_paths(lambda: run_max_pool2d_grad(np, g, x, kernel, stride, padding, ceil))
    assert got.dtype == want.dtype and got.shape == x.shape
    np.testing.assert_array_equal(got, want)
    assert pool_jit.max_pool_grad(g, x, kernel, stride if stride != (0, 0) else kernel, padding) is not None
    assert pool_jit.max_pool_grad(g.astype("float16"), x, kernel, kernel, padding) is None


@pytest.mark.parametrize("geometry", [GEOMETRIES[0], GEOMETRIES[2]], ids=["tiles", "k3-s2-p1-ceil"])
def test_max_pool_gradient_writes_the_planned_buffer_on_both_paths(monkeypatch, geometry):
    kernel, stride, padding, ceil = geometry
    rng = np.random.default_rng(8)
    x = _special(rng.standard_normal((3, 4, 8, 10)).astype("float32"))
    monkeypatch.setattr(la.config, "jit", False)
    g = rng.standard_normal(run_max_pool2d(np, x, kernel, stride, padding, ceil).shape).astype("float32")
    want = run_max_pool2d_grad(np, g, x, kernel, stride, padding, ceil)
    for on in (False, True):
        monkeypatch.setattr(la.config, "jit", on)
        out = np.full(x.shape, 7.0, np.float32)  # (stale values: every one must be written)
        assert run_max_pool2d_grad(np, g, x, kernel, stride, padding, ceil, out=out) is out
        np.testing.assert_array_equal(out, want)
    monkeypatch.setattr(la.config, "jit", True)
    assert pool_jit.max_pool_grad(g, x, kernel, stride if stride != (0, 0) else kernel, padding, out=x) is None


def test_an_out_beside_its_input_in_one_buffer_takes_the_compiled_pool(monkeypatch):
    """A pool's output interleaved with its input in one buffer (their bounds cross, no byte is
    shared): the compiled kernel runs (``np.may_share_memory`` alone would decline it)."""
    monkeypatch.setattr(la.config, "jit", True)
    buf = np.random.default_rng(2).standard_normal(64).astype(np.float32)
    x, out = buf[0::2].reshape(1, 2, 4, 4), buf[1::2][:8].reshape(1, 2, 2, 2)
    want = x.reshape(1, 2, 2, 2, 2, 2).max(axis=(3, 5))
    assert np.may_share_memory(out, x)
    assert pool_jit.max_pool(x, out, (2, 2), (2, 2), (0, 0), (2, 2)) is not None
    np.testing.assert_array_equal(out, want)


@pytest.mark.parametrize("geometry", GEOMETRIES, ids=lambda g: f"k{g[0]}-s{g[1]}-p{g[2]}-{'ceil' if g[3] else 'floor'}")
@pytest.mark.parametrize("include_pad", [True, False])
@pytest.mark.parametrize("layout", ["nchw", "batch-last", "strided"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_avg_pool_equals_the_numpy_path_bit_for_bit(both_paths, geometry, include_pad, layout, dtype):
    kernel, stride, padding, ceil = geometry
    for shape in [(3, 4, 8, 10), (2, 3, 7, 9), (1, 0, 4, 4)]:
        x = _stored(_special(np.random.default_rng(0).standard_normal(shape).astype(dtype)) if shape[1] else
                    np.zeros(shape, dtype), layout)
        got, want = both_paths(lambda x=x: run_avg_pool2d(np, x, kernel, stride, padding, ceil, include_pad))
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_array_equal(got, want)
    out = np.full(want.shape, 7, dtype)  # into a planned buffer
    assert run_avg_pool2d(np, x, kernel, stride, padding, ceil, include_pad, out=out) is out
    np.testing.assert_array_equal(out, want)


def test_avg_pool_choice_and_what_it_declines(monkeypatch):
    monkeypatch.setattr(la.config, "jit", True)
    x = np.ones((1, 2, 4, 4), np.float32)
    assert choose_avg_pool2d(np, x).impl.name == "compiled"
    assert choose_avg_pool2d(np, _stored(np.ones((2, 2, 4, 4), np.float32), "batch-last")).impl.name == "sums"
    geo = ((2, 2), (2, 2), (0, 0), (2, 2), (0, 0), True)
    assert pool_jit.avg_pool(x, None, *geo) is not None
    for xx, out in [(x.astype("float16"), None), (x, np.empty((1, 2, 2, 2))), (x[0], None),
                    (_stored(x, "strided"), None)]:
        assert pool_jit.avg_pool(xx, out, *geo) is None
    taps = ((3, 3), (2, 2), (1, 1), (2, 2), (0, 0), False)  # 1 * 2 * 2 * 2 outputs, 9 taps each: 72 reads
    assert pool_jit.avg_pool(x, None, *taps, max_taps=72) is not None
    assert pool_jit.avg_pool(x, None, *taps, max_taps=71) is None
    assert pool_jit.avg_pool(x, None, *geo, max_taps=0) is not None  # (2 x 2 tiles: always)
    with la.tuning(avg_pool_compiled_max_taps=0):  # declined: the sums run
        y = run_avg_pool2d(np, x, (3, 3), (2, 2), (1, 1), False, False)
    np.testing.assert_array_equal(y, run_avg_pool2d(np, x, (3, 3), (2, 2), (1, 1), False, False))
    monkeypatch.setattr(la.config, "jit", False)
    assert pool_jit.avg_pool(x, None, *geo) is None
    assert choose_avg_pool2d(np, x).impl.name == "sums"


PHASE_GEOMETRIES = [((3, 3), (2, 2), (1, 1)), ((3, 3), (2, 2), (0, 0)), ((2, 3), (1, 2), (1, 1)), ((3, 1), (3, 1), (1, 0)),
                    ((2, 2), (1, 1), (0, 0))]


@pytest.mark.parametrize("geometry", PHASE_GEOMETRIES, ids=lambda g: f"k{g[0]}-s{g[1]}-p{g[2]}")
@pytest.mark.parametrize("layout", ["nchw", "strided"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_the_phase_plane_pool_is_the_row_loop_bit_for_bit(monkeypatch, geometry, layout, dtype):
    """``_pool_phases`` (windows inside the padded input, not batch last, no epilogue) against the row
    loop it replaced there (the same taps in the same order: every bit, signed zeros and NaNs too),
    views and an empty batch included; the NumPy path agrees up to signed zeros (``test_max_pool_equals_the_numpy_path``)."""
    monkeypatch.setattr(la.config, "jit", True)
    kernel, stride, padding = geometry
    rows = la.jit.compiled(pool_jit._pool_rows)
    for shape in [(1, 8, 32, 32), (2, 3, 7, 9), (0, 3, 7, 9), (1, 2, 3, 3)]:
        x = _stored(np.random.default_rng(6).standard_normal(shape).astype(dtype), layout)
        if x.size:
            x[0, 0, 0, :3] = [np.nan, -0.0, 0.0]
            x[0, -1, 1, :] = -0.0
        ho, wo = ((shape[2 + a] + 2 * padding[a] - kernel[a]) // stride[a] + 1 for a in (0, 1))
        assert pool_jit._phases_fit(x, kernel, stride, padding, (ho, wo))
        got = pool_jit.max_pool(x, None, kernel, stride, padding, (ho, wo))
        want = np.full(got.shape, 7.0, dtype)
        empty = np.empty(0, dtype)
        rows(x, want, *kernel, *stride, *padding, x.dtype.type(-np.inf), False, False, empty, empty, x.dtype.type(0))
        assert got.tobytes() == want.tobytes()


def test_a_bound_max_pool_runs_the_phase_planes_and_declines_the_rest(monkeypatch):
    """``bind`` (a compiled step): the phase-plane pool with its tables made once, into the planned
    buffer; an out overlapping x or no out go through ``max_pool``; tiles, batch-last inputs and
    ``ceil_mode``'s windows past the input keep the generic binding."""
    from lazyarray import kernels
    monkeypatch.setattr(la.config, "jit", True)
    x = np.random.default_rng(7).standard_normal((1, 8, 32, 32)).astype(np.float32)
    out = np.full((1, 8, 16, 16), 7.0, np.float32)
    geo = ((3, 3), (2, 2), (1, 1), (16, 16))
    want = run_max_pool2d(np, x, (3, 3), (2, 2), (1, 1))
    fn = pool_jit.bound_max_pool(x, out, *geo, lambda x, out=None: run_max_pool2d(np, x, (3, 3), (2, 2), (1, 1), out=out))
    assert fn(x, out=out) is out
    np.testing.assert_array_equal(out, want)
    np.testing.assert_array_equal(fn(x), want)  # (no out: the generic binding's new array)
    buf = np.zeros(x.size + out.size, np.float32)
    xb, ob = buf[:x.size].reshape(x.shape), buf[x.size - 16:x.size - 16 + out.size].reshape(out.shape)
    xb[...] = x
    assert fn(xb, out=ob) is ob  # (overlapping: the generic binding, whose NumPy path buffers it)
    np.testing.assert_array_equal(ob, want)
    with la.tuning(max_pool_windows=False):  # (on, a padded pool runs max_pool2d[windows]: test_pool_windows.py)
        bound = kernels.bind("max_pool2d", np, x, out=out, kernel=(3, 3), stride=(2, 2), padding=(1, 1))
    assert str(bound.choice) == "max_pool2d[compiled]"
    np.testing.assert_array_equal(bound.fn(x, out=np.empty_like(out)), want)
    assert pool_jit.bound_max_pool(x, out, (2, 2), (2, 2), (0, 0), (16, 16), None) is None  # tiles
    assert pool_jit.bound_max_pool(x, out, (3, 3), (2, 2), (1, 1), (17, 17), None) is None  # past the input (ceil)
    last = _stored(np.ones((2, 3, 6, 6), np.float32), "batch-last")
    assert pool_jit.bound_max_pool(last, np.empty((2, 3, 3, 3), np.float32), (3, 3), (2, 2), (1, 1), (3, 3), None) is None
    monkeypatch.setattr(la.config, "jit", False)
    assert pool_jit.bound_max_pool(x, out, *geo, None) is None


def _ref_avg(x, kernel, stride, padding, ceil, include_pad):
    return avg_pool2d_kernel(np, np.ascontiguousarray(x), kernel, stride, padding, ceil, include_pad)


@pytest.mark.parametrize("geometry", GEOMETRIES + [((1, 2), (1, 2), (0, 0), True), ((1, 3), (1, 2), (0, 1), False)],
                         ids=lambda g: f"k{g[0]}-s{g[1]}-p{g[2]}-{'ceil' if g[3] else 'floor'}")
@pytest.mark.parametrize("include_pad", [True, False])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_a_bound_avg_pool_equals_the_reference_bit_for_bit(monkeypatch, geometry, include_pad, dtype):
    """``bind`` (a compiled step): avg_pool2d's kernel with its layout and scalars made once, into
    the planned buffer, equal to the op's reference kernel (the NumPy sums) bit for bit, unit-height
    1-D pools (conv1d_net's) and empty dims included; a call it cannot take (no out, a strided
    view, another shape) goes to the generic binding, with the same values."""
    from lazyarray import kernels
    monkeypatch.setattr(la.config, "jit", True)
    kernel, stride, padding, ceil = geometry
    window = {"kernel": kernel, "stride": stride, "padding": padding, "ceil_mode": ceil, "count_include_pad": include_pad}
    for shape in [(1, 16, 1, 11), (3, 4, 8, 10), (2, 3, 7, 9), (1, 0, 4, 4)]:
        if shape[2] + 2 * padding[0] < kernel[0]:
            continue
        x = _special(np.random.default_rng(8).standard_normal(shape).astype(dtype)) if shape[1] else np.zeros(shape, dtype)
        want = _ref_avg(x, kernel, stride, padding, ceil, include_pad)
        out = np.full(want.shape, 7, dtype)
        bound = kernels.bind("avg_pool2d", np, x, out=out, **window)
        rows = shape[2] == 1 and kernel[0] == 1 and padding[0] == 0  # (a 1-D pool: pool_jit's row loop)
        assert str(bound.choice) == ("avg_pool2d[compiled, rows]" if rows else "avg_pool2d[compiled]")
        assert bound.fn(x, out=out) is out
        assert out.tobytes() == want.tobytes()
        assert bound.fn(x).tobytes() == want.tobytes()  # (no out: the generic binding's new array)
        if shape[1]:
            view = _stored(x, "strided")  # (not C-ordered: the generic binding, the sums on the view)
            assert bound.fn(view, out=out) is out
            assert out.tobytes() == avg_pool2d_kernel(np, view, kernel, stride, padding, ceil, include_pad).tobytes()


def test_a_bound_avg_pool_makes_its_kernel_once_and_declines_what_avg_pool_does(monkeypatch):
    monkeypatch.setattr(la.config, "jit", True)
    x = np.random.default_rng(9).standard_normal((1, 16, 1, 11)).astype(np.float32)
    out = np.empty((1, 16, 1, 6), np.float32)
    geo = ((1, 2), (1, 2), (0, 0), (1, 6), (0, 1), False)
    calls = []
    fn = pool_jit.bound_avg_pool(x, out, *geo, 1 << 62, lambda x, out=None: calls.append(x))
    assert fn is not None
    monkeypatch.setattr(la.jit, "compiled", lambda *a, **k: pytest.fail("looked up per call"))
    assert fn(x, out=out) is out and not calls
    np.testing.assert_array_equal(out, _ref_avg(x, (1, 2), (1, 2), (0, 0), True, False))
    fn(x[:, :8], out=out[:, :8])  # (another shape: the generic binding)
    assert len(calls) == 1
    monkeypatch.undo()
    monkeypatch.setattr(la.config, "jit", True)
    assert pool_jit.bound_avg_pool(x, None, *geo, 1 << 62, None) is None  # no planned buffer
    assert pool_jit.bound_avg_pool(x, out, *geo, 0, None) is None  # more reads than the table allows
    assert pool_jit.bound_avg_pool(x.astype(np.float16), out, *geo, 1 << 62, None) is None
    monkeypatch.setattr(la.config, "jit", False)
    assert pool_jit.bound_avg_pool(x, out, *geo, 1 << 62, None) is None


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_a_one_dimensional_max_pool_binds_the_phase_planes(monkeypatch, dtype):
    """conv1d_net's max pool, a unit-height (1, 2) / (1, 2) window: ``bind`` makes the phase-plane
    pool once; its values are the row loop's bit for bit and the folds' (the reference) up to signed zeros."""
    from lazyarray import kernels
    monkeypatch.setattr(la.config, "jit", True)
    for shape in [(1, 16, 1, 23), (4, 16, 1, 23), (0, 16, 1, 23)]:
        x = np.random.default_rng(10).standard_normal(shape).astype(dtype)
        if x.size:
            x[0, 0, 0, :3] = [np.nan, 1.0, 2.0]
        out = np.full(shape[:3] + (11,), 7, dtype)
        assert pool_jit.bound_max_pool(x, out, (1, 2), (1, 2), (0, 0), (1, 11), None) is not None
        with la.tuning(max_pool_windows=False):  # (on, max_pool2d[windows] takes it: pool_windows.py)
            bound = kernels.bind("max_pool2d", np, x, out=out, kernel=(1, 2), stride=(1, 2))
        assert str(bound.choice) == "max_pool2d[compiled]"
        assert bound.fn(x, out=out) is out
        want = np.full(out.shape, 5, dtype)
        empty = np.empty(0, dtype)
        la.jit.compiled(pool_jit._pool_rows)(x, want, 1, 2, 1, 2, 0, 0, x.dtype.type(-np.inf), False, False, empty,
                                             empty, x.dtype.type(0))
        assert out.tobytes() == want.tobytes()
        np.testing.assert_array_equal(out, max_pool2d_kernel(np, x, (1, 2), (1, 2), (0, 0), False))


ROW_GEOMETRIES = [((1, 2), (1, 2), (0, 0), True), ((1, 2), (1, 2), (0, 0), False), ((1, 3), (1, 2), (0, 1), False),
                  ((1, 3), (1, 1), (0, 1), True), ((1, 4), (1, 3), (0, 2), True), ((1, 2), (3, 2), (0, 0), False)]


@pytest.mark.parametrize("geometry", ROW_GEOMETRIES, ids=lambda g: f"k{g[0]}-s{g[1]}-p{g[2]}-{'ceil' if g[3] else 'floor'}")
@pytest.mark.parametrize("include_pad", [True, False])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_the_row_loop_of_a_one_dimensional_avg_pool_is_the_reference_bit_for_bit(monkeypatch, geometry, include_pad,
                                                                                  dtype):
    """``_avg_row`` (``avg_pool2d[compiled, rows]``): a unit-height pool by 1 x k windows, padded, ceil mode,
    windows tiling x or not, equals the op's reference kernel bit for bit (special values, -0.0 beside
    padding, a C-ordered view, empty dims), eagerly and bound; ``avg_pool_rows`` off: the other loops,
    the same values."""
    monkeypatch.setattr(la.config, "jit", True)
    kernel, stride, padding, ceil = geometry
    window = {"kernel": kernel, "stride": stride, "padding": padding, "ceil_mode": ceil, "count_include_pad": include_pad}
    big = np.random.default_rng(11).standard_normal((5, 6, 1, 11)).astype(dtype)
    big[0, 0, 0, :5] = [np.nan, -0.0, np.inf, -np.inf, -0.0]
    big[1, 1, 0, -1] = -0.0
    for x in (big, big[1:4], big[:, :0], big[:0], big[..., :1], big[..., :0]):
        if x.shape[3] + 2 * padding[1] < kernel[1]:
            continue
        want = _ref_avg(x, kernel, stride, padding, ceil, include_pad)
        got = run_avg_pool2d(np, x, kernel, stride, padding, ceil, include_pad)
        assert got.dtype == want.dtype and got.tobytes() == want.tobytes()
        out = np.full(want.shape, 7, dtype)
        bound = kernels.bind("avg_pool2d", np, x, out=out, **window)
        order = x.flags.c_contiguous  # (a view not C-ordered: the sums)
        assert str(bound.choice) == ("avg_pool2d[compiled, rows]" if order else "avg_pool2d[sums]")
        assert bound.fn(x, out=out) is out and out.tobytes() == want.tobytes()
        if not x.shape[3]:  # (the taps loop divides by a zero count there: the rows loop's factors do not)
            continue
        with la.tuning(avg_pool_rows=False):
            off = kernels.bind("avg_pool2d", np, x, out=out, **window)
            assert str(off.choice) == ("avg_pool2d[compiled]" if order else "avg_pool2d[sums]")
            assert off.fn(x, out=np.full(want.shape, 7, dtype)).tobytes() == want.tobytes()
    view = _stored(big, "strided")  # (not C-ordered: declined, the sums on the view)
    assert pool_jit.avg_pool(view, None, *_layout(view, geometry), include_pad) is None


def _layout(x, geometry):
    """``avg_pool``'s (kernel, stride, padding, shape, extra) for ``x`` and an op's window."""
    kernel, stride, padding, ceil = geometry
    return window_layout(x.shape, kernel, stride, padding, ceil)
