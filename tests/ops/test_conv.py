"""The conv2d kernel's paths (lazyarray/ops/conv.py): one matmul per image or one for the whole
batch, the copy-free 1x1 case, grouped and depthwise kernels; each equal to the loop reference
of tests/ops/cases.py, and each writing the planned ``out`` buffer it is given."""
from __future__ import annotations

import numpy as np
import pytest

import lazyarray as la
from lazyarray.kernels import conv_batch_last
from lazyarray.kernels.conv2d import run_conv2d
from lazyarray.ops import conv, scratch
from ops.cases import _conv2d_ref


@pytest.fixture(autouse=True)
def direct(monkeypatch):
    monkeypatch.setattr(la.config, "winograd_min_channels", 1 << 30)  # these tests are about the im2col paths


@pytest.mark.parametrize("per_image", [True, False], ids=["per-image", "whole-batch"])
@pytest.mark.parametrize("xs,ks,params", [
    ((3, 2, 7, 6), (4, 2, 3, 3), {"padding": (1, 1)}),
    ((2, 3, 9, 8), (5, 3, 3, 2), {"stride": (2, 1), "padding": (0, 1), "dilation": (1, 2)}),
    ((2, 4, 5, 5), (3, 4, 1, 1), {}),  # 1x1, stride 1: the image is its own column matrix
    ((2, 4, 6, 6), (3, 4, 1, 1), {"stride": (2, 2)}),
], ids=["3x3-p1", "s21-dil12", "1x1", "1x1-s2"])
def test_groups1_paths_equal_the_reference(per_image, xs, ks, params, monkeypatch):
    monkeypatch.setattr(la.config, "per_image_min_pixels", 0 if per_image else 1 << 30)
    rng = np.random.default_rng(sum(xs))
    x, k, b = (rng.standard_normal(s).astype("float32") for s in (xs, ks, ks[:1]))
    ref = _conv2d_ref(x, k, b, **params)
    np.testing.assert_allclose(run_conv2d(np, x, k, b, **params), ref, rtol=1e-5, atol=1e-5)
    out = np.full(ref.shape, np.nan, np.float32)
    assert run_conv2d(np, x, k, b, out=out, **params) is out
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5)
    strided = np.full(ref.shape[::-1], np.nan, np.float32).T  # not C-contiguous: filled by a copy
    run_conv2d(np, x, k, b, out=strided, **params)
    np.testing.assert_allclose(strided, ref, rtol=1e-5, atol=1e-5)


def test_1x1_path_reads_a_non_contiguous_image_correctly(monkeypatch):
    monkeypatch.setattr(la.config, "per_image_min_pixels", 0)
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 5, 4, 3)).astype("float32").transpose(0, 1, 3, 2)  # (2, 5, 3, 4) strided
    k = rng.standard_normal((2, 5, 1, 1)).astype("float32")
    np.testing.assert_allclose(run_conv2d(np, x, k), _conv2d_ref(np.ascontiguousarray(x), k), rtol=1e-5)


@pytest.mark.parametrize("ks,groups", [((4, 1, 3, 3), 4), ((6, 2, 3, 3), 2)], ids=["depthwise", "groups2"])
def test_grouped_kernels_write_into_out(ks, groups):
    rng = np.random.default_rng(2)
    x, k, b = (rng.standard_normal(s).astype("float32") for s in ((2, 4, 6, 5), ks, ks[:1]))
    ref = _conv2d_ref(x, k, b, padding=(1, 1), groups=groups)
    out = np.full(ref.shape, np.nan, np.float32)
    assert run_conv2d(np, x, k, b, padding=(1, 1), groups=groups, out=out) is out
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5)


def test_small_images_of_a_batch_take_the_batch_last_layout(monkeypatch):
    """A batch whose outputs have fewer than per_image_min_pixels pixels runs one (C, H, W, N)
    im2col product; single images and larger outputs run per image. Both equal the reference,
    also for a non-contiguous input and mixed dtypes."""
    calls = []
    real = conv_batch_last.batch_last_conv
    monkeypatch.setattr(conv_batch_last, "batch_last_conv", lambda *a: calls.append(a[1].shape) or real(*a))
    rng = np.random.default_rng(4)
    for xs, expect in (((3, 4, 6, 6), True), ((1, 4, 6, 6), False), ((3, 4, 20, 20), False)):
        calls.clear()
        x = rng.standard_normal(xs[::-1]).astype("float32").T  # (N, C, H, W), not C-contiguous
        k = rng.standard_normal((5, 4, 3, 3))  # float64 kernel
        b = rng.standard_normal(5).astype("float32")
        got = run_conv2d(np, x, k, b, stride=(1, 2), padding=(1, 1), dilation=(2, 1))
        assert (calls == [xs]) is expect
        ref = _conv2d_ref(np.ascontiguousarray(x).astype("float64"), k, b.astype("float64"),
                          stride=(1, 2), padding=(1, 1), dilation=(2, 1))
        assert got.dtype == np.float64
        np.testing.assert_allclose(got, ref, rtol=1e-10, atol=1e-10)


# -- batch-last arrays (executor/batch_last.py): conv2d reads and writes NCHW views stored (C, H, W, N) --
def _stored_batch_last(a):
    buf = np.ascontiguousarray(a.transpose(1, 2, 3, 0))
    return buf.transpose(3, 0, 1, 2)


_BATCH_LAST_GEOMETRIES = [
    ((3, 3), {"padding": (1, 1)}), ((1, 1), {}), ((3, 2), {"stride": (2, 1)}),  # 1x1, non-square
    ((2, 2), {"stride": (3, 3), "padding": (1, 0)}),  # stride > kernel
    ((3, 3), {"dilation": (2, 1), "padding": (2, 1)}), ((3, 3), {"stride": (2, 2), "padding": (1, 1)})]


@pytest.mark.usefixtures("kernel_path")  # NumPy's im2col copies and the compiled one (conv_jit.py)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("kernel,params", _BATCH_LAST_GEOMETRIES,
                         ids=["3x3-p1", "1x1", "3x2-s21", "2x2-s3-p10", "3x3-dil21", "3x3-s2-p1"])
@pytest.mark.parametrize("where", ["input", "output", "both"])
def test_conv2d_of_batch_last_arrays_matches_the_reference(where, kernel, params, dtype):
    from lazyarray.ops.conv import _conv2d
    from lazyarray.ops.conv import is_batch_last as _batch_last
    rng = np.random.default_rng(4)
    x = rng.standard_normal((5, 3, 9, 7)).astype(dtype)
    w = rng.standard_normal((4, 3) + kernel).astype(dtype)
    b = rng.standard_normal(4).astype(dtype)
    expected = _conv2d_ref(x, w, b, **params)
    xin = _stored_batch_last(x) if where in ("input", "both") else x
    out = _stored_batch_last(np.full(expected.shape, np.nan, dtype)) if where in ("output", "both") else \
        np.full(expected.shape, np.nan, dtype)
    assert _batch_last(xin) == (where != "output") and _batch_last(out) == (where != "input")
    assert _conv2d(np, xin, w, b, out=out, **params) is out
    tol = 1e-5 if dtype == "float32" else 1e-12
    np.testing.assert_allclose(out, expected, rtol=tol, atol=tol)
    np.testing.assert_allclose(_conv2d(np, xin, w, None, **params), expected - b[None, :, None, None],
                               rtol=tol, atol=tol)


def test_batch_last_is_not_claimed_for_other_strides():
    from lazyarray.ops.conv import is_batch_last as _batch_last
    x = np.zeros((4, 3, 5, 5), np.float32)
    assert not _batch_last(x) and not _batch_last(None)
    assert not _batch_last(_stored_batch_last(x)[:, :, :, ::2])  # strided, not a dense batch-last buffer
    assert not _batch_last(_stored_batch_last(x[:1]))  # one image: C order already


def test_scratch_columns_never_leak_into_results():
    """im2col columns and padded copies live in per-thread scratch buffers (ops/scratch.py): a result
    is never one of them, so a later call (or another thread's) leaves earlier results alone."""
    import threading

    rng = np.random.default_rng(5)
    w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    xs = [rng.standard_normal((n, 3, h, h)).astype(np.float32) for n, h in ((6, 5), (1, 12), (6, 7), (2, 4))]
    firsts = [run_conv2d(np, x, w, padding=(1, 1)) for x in xs]
    for x, first in zip(xs, firsts):
        np.testing.assert_allclose(first, _conv2d_ref(x, w, padding=(1, 1)), rtol=1e-5, atol=1e-5)
    errors = []

    def work(x, expected):
        for _ in range(30):
            got = run_conv2d(np, x, w, padding=(1, 1))
            if not np.allclose(got, expected, rtol=1e-5, atol=1e-5):
                errors.append(x.shape)

    threads = [threading.Thread(target=work, args=(x, e)) for x, e in zip(xs, firsts)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert conv.scratch(np, 0, (2, 3), np.float64).shape == (2, 3)
    big = scratch.scratch(np, 0, (scratch.SCRATCH_MAX_BYTES // 4 + 1,), np.float32)  # over the limit: its own
    assert big.base is None


@pytest.mark.parametrize("ks,groups", [((4, 1, 1, 9), 4), ((6, 4, 3, 3), 1), ((6, 2, 3, 3), 2)],
                         ids=["depthwise", "dense", "groups2"])
def test_half_precision_accumulates_in_float32(ks, groups):
    """float16 in and out, but each output is the float32 sum rounded once (as MLAS and cuDNN do), so
    long sums do not gather one float16 rounding error per tap."""
    rng = np.random.default_rng(3)
    x, k, b = (rng.standard_normal(s).astype("float16") for s in ((2, 4, 7, 12), ks, ks[:1]))
    want = _conv2d_ref(*(a.astype(np.float64) for a in (x, k, b)), padding=(1, 1), groups=groups)
    got = run_conv2d(np, x, k, b, padding=(1, 1), groups=groups)
    assert got.dtype == np.float16
    np.testing.assert_array_equal(got, want.astype(np.float32).astype(np.float16))
    out = np.full(want.shape, np.nan, np.float16)
    assert run_conv2d(np, x, k, b, padding=(1, 1), groups=groups, out=out) is out
    np.testing.assert_array_equal(out, got)


@pytest.mark.parametrize("m,k,n,blocks", [(16, 72, 2304, 3), (8, 9, 9216, 1), (128, 144, 2304, 1)],
                         ids=["three-blocks", "small-already", "blocks-too-narrow"])
def test_column_blocks_matmul_equals_one_product(m, k, n, blocks, monkeypatch):
    """Thin, wide products run as column blocks of at most SMALL_PRODUCT multiply-adds (when the
    blocks keep MIN_BLOCK_COLUMNS columns), into a strided ``out`` too, equal to one matmul."""
    rng = np.random.default_rng(7)
    a, b = rng.standard_normal((m, k)).astype("float32"), rng.standard_normal((k, n)).astype("float32")
    calls = []
    real = np.matmul
    monkeypatch.setattr(np, "matmul", lambda *args, **kw: calls.append(args[1].shape) or real(*args, **kw))
    wide = np.full((m, n + 5), np.nan, np.float32)
    out = wide[:, 2:2 + n]  # rows strided: blocks write into a view of a larger buffer
    assert conv_batch_last._column_blocks_matmul(np, a, b, out) is out
    assert len(calls) == blocks and sum(c[1] for c in calls) == n
    assert all(c[1] * m * k <= conv_batch_last.SMALL_PRODUCT for c in calls) or blocks == 1
    np.testing.assert_allclose(out, real(a, b), rtol=1e-5, atol=1e-4)
    assert np.isnan(wide[:, :2]).all() and np.isnan(wide[:, 2 + n:]).all()
    calls.clear()
    out64 = np.empty((m, n))
    conv_batch_last._column_blocks_matmul(np, a.astype(np.float64), b.astype(np.float64), out64)
    assert len(calls) == 1  # other dtypes: one call
    np.testing.assert_allclose(out64, out, rtol=1e-5, atol=1e-4)


def test_batch_last_views_follow_their_scratch_buffers():
    """``im2col_views`` keeps one set of views per geometry: geometries that alternate, one whose
    scratch outgrows the kept buffers (new buffers, new views), a padding-free one (nothing to zero)
    and another dilation each give the reference's values, call after call."""
    rng = np.random.default_rng(11)
    cases = [((16, 1, 12, 12), (8, 1, 3, 3), {"padding": (1, 1)}),
             ((16, 8, 6, 6), (16, 8, 3, 3), {"padding": (1, 1)}),
             ((16, 3, 7, 7), (4, 3, 3, 3), {}),
             ((16, 2, 7, 7), (3, 2, 3, 3), {"dilation": (2, 2), "padding": (1, 1)}),
             ((32, 16, 7, 7), (8, 16, 3, 3), {"padding": (1, 1)})]  # more columns than the others: new scratch
    data = [(rng.standard_normal(xs).astype(np.float32), rng.standard_normal(ks).astype(np.float32), p)
            for xs, ks, p in cases]
    refs = [_conv2d_ref(x, k, **p) for x, k, p in data]
    seen = []
    real = conv_batch_last.im2col_views
    for _ in range(3):
        for (x, k, p), ref in zip(data, refs):
            with pytest.MonkeyPatch.context() as mp:
                mp.setattr(conv_batch_last, "im2col_views", lambda *a: seen.append(a[1]) or real(*a))
                got = run_conv2d(np, _stored_batch_last(x), k, **p)
            # (float32 sums of 144 products near 10: 1.4e-5 seen; a stale view is off by whole values)
            np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4)
    assert len(seen) == 3 * len(cases)  # every call took the batch-last path
