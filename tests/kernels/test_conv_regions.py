"""kernels/conv_regions.py: a small batch-last convolution in one compiled parallel region gives the
serial kernel's values (to rounding) for every geometry, layout, dtype and thread count, cuts its
pixels into the blocks it promises, and declines what it does not cover."""
from __future__ import annotations

import os

import numpy as np
import pytest

import lazyarray as la
from lazyarray import jit
from lazyarray.caches import NamedCache
from lazyarray.kernels import blas_gemm, blas_threads, conv_batch_last, conv_regions
from lazyarray.kernels.conv2d import choose_conv2d, run_conv2d
from lazyarray.ops import conv
from lazyarray.tuning_table import Tuning

pytest.importorskip("numba")
pytest.importorskip("threadpoolctl")

GEOMETRIES = [((3, 3), (1, 1), (1, 1), (1, 1)), ((1, 1), (1, 1), (0, 0), (1, 1)), ((3, 2), (2, 1), (0, 0), (1, 1)),
              ((2, 2), (3, 3), (1, 0), (1, 1)), ((3, 3), (1, 1), (2, 1), (2, 1)), ((3, 3), (2, 2), (1, 1), (1, 1))]
TOL = {"float32": dict(rtol=1e-5, atol=1e-5), "float64": dict(rtol=1e-12, atol=1e-12)}


def probed(answer: bool) -> NamedCache:
    """A BLAS probe cache that already holds ``answer``."""
    cache = NamedCache("test probe", 1)
    cache.put(None, answer)
    return cache


@pytest.fixture(autouse=True)
def _threads(request, monkeypatch):
    # (these small cases test the region on several threads: no work minimum, but where a test pins it)
    if request.node.name != "test_small_convolutions_run_the_region_on_one_thread":
        monkeypatch.setattr(la.config, "conv_region_min_macs", 0)
    yield
    la.set_num_threads(os.cpu_count() or 1)


def _batch_last(a):
    return np.ascontiguousarray(a.transpose(1, 2, 3, 0)).transpose(3, 0, 1, 2)


def _reference(x, w, b, stride, padding, dilation):
    """conv2d by its definition: a sum over every tap of the zero-padded input (float64)."""
    n, c, h, wd = x.shape
    o, _, kh, kw = w.shape
    (sh, sw), (ph, pw), (dh, dw) = stride, padding, dilation
    xp = np.zeros((n, c, h + 2 * ph, wd + 2 * pw))
    xp[:, :, ph:ph + h, pw:pw + wd] = x
    ho, wo = (h + 2 * ph - (kh - 1) * dh - 1) // sh + 1, (wd + 2 * pw - (kw - 1) * dw - 1) // sw + 1
    y = np.zeros((n, o, ho, wo))
    for a in range(kh):
        for bb in range(kw):
            win = xp[:, :, a * dh:a * dh + sh * (ho - 1) + 1:sh, bb * dw:bb * dw + sw * (wo - 1) + 1:sw]
            y += np.einsum("nchw,oc->nohw", win, w[:, :, a, bb].astype(np.float64))
    return y if b is None else y + b.reshape(1, o, 1, 1)


def _run(x, w, b, geometry, parallel, monkeypatch):
    kernel, stride, padding, dilation = geometry
    monkeypatch.setattr(la.config, "conv_region", parallel)
    n, o = x.shape[0], w.shape[0]
    ho, wo = ((x.shape[2 + i] + 2 * padding[i] - (kernel[i] - 1) * dilation[i] - 1) // stride[i] + 1 for i in (0, 1))
    out = _batch_last(np.full((n, o, ho, wo), np.nan, x.dtype))
    y = run_conv2d(np, x, w, b, stride=stride, padding=padding, dilation=dilation, out=out)
    assert y is out and conv.is_batch_last(y)
    return y


@pytest.mark.parametrize("geometry", GEOMETRIES, ids=lambda g: f"k{g[0]}-s{g[1]}-p{g[2]}-d{g[3]}")
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("layout", ["nchw", "batch-last"])
@pytest.mark.parametrize("threads", [1, 2])
def test_parallel_region_equals_serial_kernel_and_definition(monkeypatch, geometry, dtype, layout, threads):
    la.set_num_threads(threads)
    rng = np.random.default_rng(0)
    kernel = geometry[0]
    x = rng.standard_normal((17, 3, 9, 7)).astype(dtype)  # (a batch and pixel counts no block size divides)
    x = _batch_last(x) if layout == "batch-last" else x
    w = rng.standard_normal((5, 3, *kernel)).astype(dtype)
    b = rng.standard_normal(5).astype(dtype)
    calls = []
    real = conv_regions.conv2d
    monkeypatch.setattr(conv_regions, "conv2d", lambda *a: calls.append(a[-1]) or real(*a))
    got = _run(x, w, b, geometry, True, monkeypatch)
    assert calls == [threads]  # (the region ran, on the threads set)
    want = _run(x, w, b, geometry, False, monkeypatch)
    np.testing.assert_allclose(got, want, **TOL[dtype])
    np.testing.assert_allclose(got, _reference(x, w, b, *geometry[1:]), **TOL[dtype])


def test_without_bias_and_with_stale_scratch(monkeypatch):
    """No bias adds nothing; scratch left dirty by another geometry does not leak into the zeros of
    the padding (the columns are written whole)."""
    rng = np.random.default_rng(1)
    x = rng.standard_normal((8, 2, 6, 6)).astype("float32")
    w = rng.standard_normal((4, 2, 3, 3)).astype("float32")
    conv.scratch(np, 1, (1 << 16,), np.float32)[...] = np.nan
    conv.scratch(np, 0, (1 << 16,), np.float32)[...] = np.nan
    geometry = ((3, 3), (1, 1), (2, 2), (1, 1))
    got = _run(x, w, None, geometry, True, monkeypatch)
    np.testing.assert_allclose(got, _reference(x, w, None, *geometry[1:]), rtol=1e-5, atol=1e-5)


def test_non_finite_values_propagate_as_in_the_serial_kernel(monkeypatch):
    rng = np.random.default_rng(2)
    x = _batch_last(rng.standard_normal((6, 2, 5, 5)).astype("float32"))
    x[0, 0, 0, 0], x[1, 1, 2, 2] = np.nan, np.inf
    w = rng.standard_normal((3, 2, 3, 3)).astype("float32")
    geometry = ((3, 3), (1, 1), (1, 1), (1, 1))
    got = _run(x, w, None, geometry, True, monkeypatch)
    want = _run(x, w, None, geometry, False, monkeypatch)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(np.isinf(got), np.isinf(want))
    finite = np.isfinite(want)
    np.testing.assert_allclose(got[finite], want[finite], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("macs,pixels,threads", [(9 * 8 * 64, 144, 2), (72 * 16 * 64, 36, 2), (72 * 16 * 64, 36, 1),
                                                 (576 * 64 * 64, 16, 2), (10, 3, 4), (5000, 1, 2)])
def test_blocks_share_evenly_and_stay_small(macs, pixels, threads):
    blocks = blas_threads.region_blocks(macs, pixels, threads)
    per = -(-pixels // blocks)
    assert 1 <= blocks <= pixels
    if pixels >= blas_threads.BLOCKS_PER_THREAD * threads:
        assert blocks % threads == 0 and blocks >= blas_threads.BLOCKS_PER_THREAD * threads
    if macs <= blas_threads.SMALL_PRODUCT and pixels >= blocks:
        assert macs * per <= blas_threads.SMALL_PRODUCT or per == 1


def test_large_blocks_and_float64_put_blas_on_one_thread(monkeypatch):
    """Blocks OpenBLAS would split over its own threads, and every float64 block, run inside the
    one-thread switch (two threads of the region each calling a threaded BLAS fought: 9 ms for a
    60 us product); small float32 blocks skip it where the probe says they stay serial."""
    monkeypatch.setattr(blas_threads, "PROBE", probed(True))
    monkeypatch.setattr(conv_regions, "PLANS", NamedCache("test plans", 8))
    x32 = np.zeros((64, 8, 6, 6), np.float32)
    small = conv_regions._plan(x32, np.zeros((16, 8, 3, 3), np.float32), None, x32[:, :16], 2)
    assert small[3] is None
    big = conv_regions._plan(np.zeros((64, 63, 6, 6), np.float32), np.zeros((63, 63, 3, 3), np.float32), None,
                              np.zeros((64, 63, 6, 6), np.float32), 2)
    assert big[3] is not None and big[2] == 1  # (a one-pixel block is still over the small size)
    x64 = x32.astype(np.float64)
    assert conv_regions._plan(x64, np.zeros((16, 8, 3, 3)), None, x64[:, :16], 2)[3] is not None
    monkeypatch.setattr(blas_threads, "PROBE", probed(False))
    assert conv_regions._plan(x32, np.zeros((16, 8, 3, 3), np.float32), None, x32[:, :16], 2)[3] is not None


def test_large_blocks_on_two_threads_are_right(monkeypatch):
    la.set_num_threads(2)
    rng = np.random.default_rng(3)
    x = _batch_last(rng.standard_normal((64, 40, 4, 4)).astype("float32"))
    w = rng.standard_normal((48, 40, 3, 3)).astype("float32")
    geometry = ((3, 3), (1, 1), (1, 1), (1, 1))
    ran = []
    real = conv_regions.conv2d
    monkeypatch.setattr(conv_regions, "conv2d", lambda *a: ran.append(real(*a)) or ran[-1])
    got = _run(x, w, None, geometry, True, monkeypatch)
    assert ran == [True]  # (the region ran, its one-pixel blocks under the one-thread switch)
    np.testing.assert_allclose(got, _reference(x, w, None, *geometry[1:]), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("case", ["float16", "mixed dtypes", "jit off", "no gemm", "C-ordered out", "pool thread"])
def test_declines_what_it_does_not_cover(monkeypatch, case):
    rng = np.random.default_rng(4)
    dtype = "float16" if case == "float16" else "float32"
    x = rng.standard_normal((8, 2, 5, 5)).astype(dtype)
    w = rng.standard_normal((3, 2, 3, 3)).astype("float64" if case == "mixed dtypes" else dtype)
    out = np.zeros((8, 3, 5, 5), np.result_type(x, w))
    out = out if case == "C-ordered out" else _batch_last(out)
    monkeypatch.setattr(conv_regions, "PLANS", NamedCache("test plans", 8))
    if case == "jit off":
        monkeypatch.setattr(la.config, "jit", False)
    if case == "no gemm":
        monkeypatch.setattr(conv_regions, "gemm", lambda dtype: None)
    if case == "pool thread":
        from lazyarray import threads
        monkeypatch.setattr(threads, "in_pool", lambda: True)
    assert not (conv_batch_last.region_fits(x, out) and conv_batch_last.conv2d_region(np, x, w, None, (1, 1), (1, 1), (1, 1), 1, out) is not None)
    # and the serial kernels still compute it
    y = run_conv2d(np, x, w, None, padding=(1, 1), out=out)
    np.testing.assert_allclose(y, _reference(x.astype(np.float64), w.astype(np.float64), None, (1, 1), (1, 1), (1, 1)),
                               rtol=1e-2 if dtype == "float16" else 1e-5, atol=1e-2 if dtype == "float16" else 1e-5)


def test_gemm_is_numpys_openblas_and_multiplies():
    fn = blas_gemm.gemm(np.float32)
    if fn is None:
        pytest.skip("NumPy's BLAS is not an OpenBLAS threadpoolctl finds")
    assert blas_gemm.gemm(np.int64) is None
    for dtype in (np.float32, np.float64):
        a = np.arange(6, dtype=dtype).reshape(2, 3)
        b = np.arange(12, dtype=dtype).reshape(3, 4)
        c = np.full((2, 4), np.nan, dtype)
        blas_gemm.gemm(dtype)(blas_gemm.ROW_MAJOR, blas_gemm.NO_TRANS, blas_gemm.NO_TRANS, 2, 4, 3, 1.0,
                              a.ctypes.data, 3, b.ctypes.data, 4, 0.0, c.ctypes.data, 4)
        np.testing.assert_array_equal(c, a @ b)


def test_parallel_regions_only_in_the_process_that_asked_and_with_a_thread_safe_layer(monkeypatch):
    monkeypatch.setattr(la.config, "jit", True)
    parent = NamedCache("test parallel", 1)
    parent.put(None, (os.getpid() + 1, True))  # (as a forked child sees its parent's answer)
    monkeypatch.setattr(jit, "PARALLEL", parent)
    assert not jit.parallel_ready()
    numba = pytest.importorskip("numba")
    monkeypatch.setattr(numba.config, "THREADING_LAYER", "workqueue")
    monkeypatch.setattr(jit, "PARALLEL", NamedCache("test parallel", 1))
    assert not jit.parallel_ready()
    monkeypatch.setattr(numba.config, "THREADING_LAYER", "default")
    monkeypatch.setattr(jit, "PARALLEL", NamedCache("test parallel", 1))
    monkeypatch.setitem(jit._LAYERS, "default", ("no_such_pool",))
    assert not jit.parallel_ready()


def test_demo_cnn_takes_the_region_and_equals_the_serial_kernels(monkeypatch):
    from lazyarray.cli import build_model

    net = build_model("cnn")
    net.initialize()
    net.hybridize()
    x = la.array(np.random.default_rng(5).standard_normal((64, 1, 12, 12)).astype("float32"))
    calls = []
    real = conv_regions.conv2d
    monkeypatch.setattr(conv_regions, "conv2d", lambda *a: calls.append(a[1].shape) or real(*a))
    got = net(x).asnumpy()
    assert sorted(calls) == [(8, 1, 3, 3), (16, 8, 3, 3)]  # both convolutions
    monkeypatch.setattr(la.config, "conv_region", False)
    np.testing.assert_allclose(got, net(x).asnumpy(), rtol=1e-5, atol=1e-6)


def test_regions_from_two_python_threads_at_once(monkeypatch):
    """Two threads convolving at once each get their own scratch and their own region (numba's
    OpenMP and TBB layers are thread-safe; ``jit.parallel_ready`` refuses ``workqueue``)."""
    import threading

    la.set_num_threads(2)
    rng = np.random.default_rng(6)
    geometry = ((3, 3), (1, 1), (1, 1), (1, 1))
    cases = [(_batch_last(rng.standard_normal((32, c, 6, 6)).astype("float32")),
              rng.standard_normal((o, c, 3, 3)).astype("float32")) for c, o in ((4, 8), (8, 4))]
    want = [_reference(x, w, None, *geometry[1:]) for x, w in cases]
    errors, barrier = [], threading.Barrier(2, timeout=30)

    def work(k):
        try:
            x, w = cases[k]
            barrier.wait()
            for _ in range(30):
                out = _batch_last(np.full((32, w.shape[0], 6, 6), np.nan, np.float32))
                assert conv_batch_last.region_fits(x, out)
                assert conv_batch_last.conv2d_region(np, x, w, None, (1, 1), (1, 1), (1, 1), 1, out) is out
                np.testing.assert_allclose(out, want[k], rtol=1e-5, atol=1e-5)
        except BaseException as exc:  # (reported on the main thread)
            errors.append(exc)

    threads_ = [threading.Thread(target=work, args=(k,)) for k in range(2)]
    for t in threads_:
        t.start()
    for t in threads_:
        t.join()
    assert not errors, errors


def test_small_convolutions_run_the_region_on_one_thread():
    """Below ``conv_region_min_macs`` the region runs on one thread whatever the pool's size (the
    demo CNN's convolutions at batch 64 ran 2x slower on 2 threads), and ``explain()`` says so;
    at or past it, on the pool's threads."""
    la.set_num_threads(2)
    x = np.zeros((64, 8, 6, 6), np.float32)
    w = np.zeros((16, 8, 3, 3), np.float32)
    out = _batch_last(np.zeros((64, 16, 6, 6), np.float32))
    macs = 64 * 16 * 8 * 9 * 36
    with la.tuning(conv_region_min_macs=macs + 1):
        assert conv_batch_last.region_threads(x, w, out) == 1
        choice = choose_conv2d(np, x, w, out, (1, 1), (1, 1), (1, 1), 1)
        if jit.parallel_ready():
            assert choice.label() == "region, 1 threads"
    with la.tuning(conv_region_min_macs=macs):
        assert conv_batch_last.region_threads(x, w, out) == 2
    assert Tuning().conv_region_min_macs > macs  # (the default: the demo's largest conv stays on one thread)
