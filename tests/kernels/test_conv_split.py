"""conv2d's thread splits (lazyarray/kernels/conv_split.py, lazyarray/kernels/winograd2.py):
under ``la.set_num_threads(n > 1)`` a large batch runs as chunks of images over the threads, and the
values equal the one-thread result and the loop reference at odd batch sizes, strides, padding,
dilation, 1x1 kernels, small outputs (batch-last chunks), with and without bias, into planned or
strided ``out`` buffers. One thread, one image and small convs take the unsplit path."""
from __future__ import annotations

import os
import threading

import numpy as np
import pytest
from ops.cases import _conv2d_ref

import lazyarray as la
from lazyarray import threads
from lazyarray.kernels import conv_split, winograd2
from lazyarray.kernels.conv2d import run_conv2d


@pytest.fixture(params=[2, 3])
def split_everything(request, monkeypatch):
    """Every conv big enough to split (threshold 0), on 2 or 3 threads; counts the splits."""
    monkeypatch.setattr(la.config, "min_split_macs", 0)
    monkeypatch.setattr(la.config, "conv_direct_batch", False)  # (one thread: the products, as the chunks run)
    parts = []
    real = threads.split
    monkeypatch.setattr(threads, "split", lambda ps, work: parts.append(len(ps)) or real(ps, work))
    la.set_num_threads(request.param)
    yield parts
    la.set_num_threads(os.cpu_count() or 1)


def _check_split(parts, images):
    """Split in 2+ parts when there are at least as many images as threads, else not at all (a
    split would idle cores that BLAS's threads use)."""
    if images >= threads.num_threads():
        assert parts and parts[-1] >= 2
    else:
        assert parts == []


def _one_thread(fn):
    la.set_num_threads(1)
    try:
        return fn()
    finally:
        la.set_num_threads(os.cpu_count() or 1)


# (x shape, weight shape, params): im2col shapes (not Winograd: stride, dilation, kernel size,
# odd output or few channels) of 64+ output pixels per image, at odd batch and image sizes
IM2COL = [
    ((5, 3, 9, 8), (4, 3, 3, 3), {"padding": (1, 1)}),
    ((7, 4, 16, 16), (6, 4, 3, 3), {"stride": (2, 2), "padding": (1, 1)}),
    ((3, 2, 21, 6), (5, 2, 3, 2), {"stride": (2, 1), "padding": (0, 1)}),
    ((6, 3, 12, 12), (4, 3, 3, 3), {"dilation": (2, 2), "padding": (2, 2)}),
    ((5, 8, 9, 9), (3, 8, 1, 1), {}),  # 1x1: the image is its own columns
    ((4, 8, 17, 17), (3, 8, 1, 1), {"stride": (2, 2)}),
    ((9, 2, 10, 12), (3, 2, 5, 5), {"padding": (2, 2), "dilation": (1, 2)}),
    ((2, 3, 26, 18), (4, 3, 3, 3), {"stride": (3, 2)}),
]


@pytest.mark.parametrize("xs,ws,params", IM2COL)
@pytest.mark.parametrize("bias", [True, False])
def test_im2col_split_equals_one_thread_and_the_reference(split_everything, monkeypatch, xs, ws, params, bias):
    rng = np.random.default_rng(sum(xs) + sum(ws))
    x, w = rng.standard_normal(xs).astype("float32"), rng.standard_normal(ws).astype("float32")
    b = rng.standard_normal(ws[0]).astype("float32") if bias else None
    ref = _conv2d_ref(x, w, b, **params)
    per_image = int(np.prod(ws[1:])) * ref.shape[2] * ref.shape[3] * 4  # im2col bytes of one image
    monkeypatch.setattr(conv_split, "SPLIT_CHUNK_BYTES", per_image * max(1, xs[0] // 3))  # several chunks
    with la.tuning(conv_blocked=False):  # (one thread: the chunks' products, not conv2d[blocked]'s loop)
        got = run_conv2d(np, x, w, b, **params)
        _check_split(split_everything, xs[0])
        one = _one_thread(lambda: run_conv2d(np, x, w, b, **params))
    np.testing.assert_allclose(got, one, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5)


# Outputs under per_image_min_pixels: each chunk runs the batch-last kernel (one product per chunk)
SMALL = [
    ((7, 5, 8, 8), (6, 5, 3, 3), {"stride": (2, 2), "padding": (1, 1)}),  # ResNet's 256->512 shape, small
    ((5, 4, 8, 8), (3, 4, 1, 1), {"stride": (2, 2)}),
    ((3, 2, 6, 7), (4, 2, 3, 2), {"padding": (1, 0), "dilation": (2, 1)}),
    ((9, 3, 5, 5), (2, 3, 3, 3), {}),
]


@pytest.mark.parametrize("xs,ws,params", SMALL)
@pytest.mark.parametrize("per_chunk", [1, 2, None])
def test_small_outputs_split_in_batch_last_chunks(split_everything, monkeypatch, xs, ws, params, per_chunk):
    rng = np.random.default_rng(sum(xs) * 7 + sum(ws))
    x, w, b = (rng.standard_normal(s).astype("float32") for s in (xs, ws, ws[:1]))
    ref = _conv2d_ref(x, w, b, **params)
    assert ref.shape[2] * ref.shape[3] < la.config.per_image_min_pixels
    if per_chunk:
        cols = int(np.prod(ws[1:])) * ref.shape[2] * ref.shape[3] * 4
        monkeypatch.setattr(conv_split, "SCRATCH_MAX_BYTES", cols * per_chunk)
    got = run_conv2d(np, x, w, b, **params)
    _check_split(split_everything, xs[0])
    one = _one_thread(lambda: run_conv2d(np, x, w, b, **params))
    np.testing.assert_allclose(got, one, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("n,per_image,limit,threads,expected", [
    (64, 590, 1000, 2, 2),  # 38 chunks by bytes (even already): two images each
    (64, 147, 4000, 2, 16),  # 3 chunks by bytes, rounded up to 4: two per thread
    (64, 16, 4000, 2, 32),  # one chunk by bytes: still one per thread
    (5, 1, 1000, 2, 3),  # 3 + 2 images
    (3, 1, 1000, 4, 1),  # fewer images than threads: one each
    (7, 100, 250, 3, 3),  # 3 chunks by bytes, a multiple of 3: 3 + 3 + 1 images
])
def test_balanced_chunks(n, per_image, limit, threads, expected):
    assert conv_split.balanced_chunks(n, per_image, limit, threads) == expected


@pytest.mark.parametrize("n,c,h,w,o,pad", [(5, 3, 6, 8, 4, 1), (7, 2, 4, 4, 3, 0), (3, 4, 10, 6, 5, 2),
                                          (2, 1, 2, 2, 1, 1), (2, 3, 4, 6, 5, 1)])
@pytest.mark.parametrize("chunk", [None, 1, 2])
def test_winograd_split_equals_one_thread_and_the_reference(split_everything, monkeypatch, n, c, h, w, o, pad,
                                                            chunk):
    monkeypatch.setattr(la.config, "winograd_min_channels", 1)
    monkeypatch.setattr(la.config, "winograd_min_pixels", 1)
    monkeypatch.setattr(la.config, "winograd_cached_min_pixels", 1)
    rng = np.random.default_rng(n * 100 + c * 10 + h)
    x, k = rng.standard_normal((n, c, h, w)).astype("float32"), rng.standard_normal((o, c, 3, 3)).astype("float32")
    b = rng.standard_normal(o).astype("float32")
    got = winograd2.winograd_conv2d(np, x, k, (pad, pad), chunk=chunk, bias=b)
    _check_split(split_everything, n)  # (even one chunk of all images is cut in as many as threads)
    one = _one_thread(lambda: winograd2.winograd_conv2d(np, x, k, (pad, pad), chunk=chunk, bias=b))
    np.testing.assert_allclose(got, one, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(got, _conv2d_ref(x, k, b, padding=(pad, pad)), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("winograd_path", [True, False])
def test_split_writes_planned_and_strided_out_buffers(split_everything, monkeypatch, winograd_path):
    if winograd_path:
        monkeypatch.setattr(la.config, "winograd_min_channels", 1)
        monkeypatch.setattr(la.config, "winograd_min_pixels", 1)
        monkeypatch.setattr(la.config, "winograd_cached_min_pixels", 1)
    rng = np.random.default_rng(7)
    x, k, b = (rng.standard_normal(s).astype("float32") for s in ((5, 3, 10, 10), (4, 3, 3, 3), (4,)))
    ref = _conv2d_ref(x, k, b, padding=(1, 1))
    out = np.full((5, 4, 10, 10), np.nan, np.float32)
    assert run_conv2d(np, x, k, b, padding=(1, 1), out=out) is out
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5)
    strided = np.full((10, 10, 4, 5), np.nan, np.float32).transpose(3, 2, 0, 1)  # not writable in place
    run_conv2d(np, x, k, b, padding=(1, 1), out=strided)
    np.testing.assert_allclose(strided, ref, rtol=1e-5, atol=1e-5)
    assert len(split_everything) >= 2  # each call split (Winograd twice: kernel blocks, then images)


def test_one_image_is_not_split(split_everything, monkeypatch):
    """A batch of one: no chunks to share (its products keep BLAS's threads), values unchanged."""
    monkeypatch.setattr(la.config, "winograd_min_channels", 1)
    monkeypatch.setattr(la.config, "winograd_min_pixels", 1)
    monkeypatch.setattr(la.config, "winograd_cached_min_pixels", 1)
    rng = np.random.default_rng(6)
    x, k = rng.standard_normal((1, 4, 10, 10)).astype("float32"), rng.standard_normal((3, 4, 3, 3)).astype("float32")
    for params in ({"padding": (1, 1)}, {"stride": (2, 2)}):  # Winograd, im2col
        np.testing.assert_allclose(run_conv2d(np, x, k, **params), _conv2d_ref(x, k, **params), rtol=1e-5, atol=1e-5)
    assert split_everything == []


def test_one_thread_never_splits(monkeypatch):
    monkeypatch.setattr(la.config, "min_split_macs", 0)
    monkeypatch.setattr(threads, "split", lambda *a: pytest.fail("split under one thread"))
    rng = np.random.default_rng(2)
    x, k = rng.standard_normal((4, 64, 8, 8)).astype("float32"), rng.standard_normal((64, 64, 3, 3)).astype("float32")
    for params in ({"padding": (1, 1)}, {"stride": (2, 2), "padding": (1, 1)}):  # Winograd, im2col
        got = _one_thread(lambda p=params: run_conv2d(np, x, k, **p))
        np.testing.assert_allclose(got, _conv2d_ref(x, k, **params), rtol=1e-4, atol=1e-4)


def test_small_convs_and_groups_are_not_split(monkeypatch):
    la.set_num_threads(2)
    try:
        monkeypatch.setattr(threads, "split", lambda *a: pytest.fail("split a small conv"))
        rng = np.random.default_rng(3)
        x = rng.standard_normal((4, 4, 8, 8)).astype("float32")
        for ws, p in (((6, 4, 3, 3), {"padding": (1, 1)}), ((6, 2, 3, 3), {"groups": 2})):
            k = rng.standard_normal(ws).astype("float32")
            np.testing.assert_allclose(run_conv2d(np, x, k, **p), _conv2d_ref(x, k, **p), rtol=1e-5, atol=1e-5)
        monkeypatch.setattr(la.config, "min_split_macs", 0)  # groups > 1 keep their batched matmul anyway
        k = rng.standard_normal((6, 2, 3, 3)).astype("float32")
        np.testing.assert_allclose(run_conv2d(np, x, k, groups=2), _conv2d_ref(x, k, groups=2), rtol=1e-5,
                                   atol=1e-5)
    finally:
        la.set_num_threads(os.cpu_count() or 1)


def test_split_convs_from_several_caller_threads_at_once(split_everything, monkeypatch):
    """Callers share the pool and each thread's scratch: results never mix, and BLAS gets its
    threads back when the last caller is done."""
    threadpoolctl = pytest.importorskip("threadpoolctl")
    monkeypatch.setattr(la.config, "winograd_min_channels", 1)
    monkeypatch.setattr(la.config, "winograd_min_pixels", 1)
    monkeypatch.setattr(la.config, "winograd_cached_min_pixels", 1)
    rng = np.random.default_rng(4)
    k = rng.standard_normal((4, 3, 3, 3)).astype("float32")
    jobs = [(rng.standard_normal((n, 3, s, s)).astype("float32"), p)
            for n, s, p in ((5, 8, {"padding": (1, 1)}), (6, 9, {"stride": (2, 2)}), (3, 6, {"padding": (1, 1)}),
                            (7, 7, {"dilation": (2, 2), "padding": (1, 1)}))]
    expected = [_conv2d_ref(x, k, **p) for x, p in jobs]
    blas_before = [i["num_threads"] for i in threadpoolctl.threadpool_info() if i["user_api"] == "blas"]
    errors = []

    def work(x, p, want):
        for _ in range(20):
            if not np.allclose(run_conv2d(np, x, k, **p), want, rtol=1e-5, atol=1e-5):
                errors.append(x.shape)

    callers = [threading.Thread(target=work, args=(x, p, e)) for (x, p), e in zip(jobs, expected)]
    for t in callers:
        t.start()
    for t in callers:
        t.join()
    assert not errors
    assert [i["num_threads"] for i in threadpoolctl.threadpool_info() if i["user_api"] == "blas"] == blas_before


def test_resnet_block_hybridized_on_two_threads_equals_one_thread():
    """A real model through the executor: ResNet-18's first stages at batch 6 split their convs."""
    from lazyarray.blocks.models import resnet18

    rng = np.random.default_rng(5)
    net = resnet18(classes=10, thumbnail=True, channels=(16, 16, 32, 64, 128))
    net.initialize()
    net.hybridize()
    x = la.array(rng.standard_normal((6, 3, 16, 16)).astype("float32"))
    one = _one_thread(lambda: net(x).asnumpy())
    la.set_num_threads(2)
    try:
        with la.tuning(min_split_macs=0):
            two = net(x).asnumpy()
    finally:
        la.set_num_threads(os.cpu_count() or 1)
    np.testing.assert_allclose(two, one, rtol=1e-5, atol=1e-5)
