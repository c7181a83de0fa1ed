"""Winograd F(4x4, 3x3) convolution (lazyarray/kernels/winograd4.py): transforms derived exactly from
their points, values equal to the direct convolution (the loop reference of tests/ops/cases.py)
at every output size (cropped tiles), padding, bias, dtype, chunking and thread split, float32
error within a bound of im2col's on ResNet-18's layers, and chosen where it measured fastest."""
from __future__ import annotations

import os
from fractions import Fraction

import numpy as np
import pytest
from ops.cases import _conv2d_ref

import lazyarray as la
from lazyarray import threads
from lazyarray.kernels import winograd2, winograd4
from lazyarray.kernels.conv2d import run_conv2d


def _exact_correlation(points, m, r, rng):
    """A^T ((G g) * (B^T d)) in exact fractions, and the correlation of d with g directly."""
    at, g, bt = winograd4.toom_cook(points, m, r)
    d = [Fraction(int(v)) for v in rng.integers(-9, 10, m + r - 1)]
    taps = [Fraction(int(v)) for v in rng.integers(-9, 10, r)]
    gg = [sum(row[k] * taps[k] for k in range(r)) for row in g]
    bd = [sum(row[k] * d[k] for k in range(m + r - 1)) for row in bt]
    got = [sum(row[j] * gg[j] * bd[j] for j in range(m + r - 1)) for row in at]
    want = [sum(d[i + k] * taps[k] for k in range(r)) for i in range(m)]
    return got, want


@pytest.mark.parametrize("points,m", [(winograd4.POINTS, 4), ((0, 1, -1, 2, -2, None), 4),
                                      ((0, 1, -1, None), 2), ((0, 1, -1, 2, -2, Fraction(1, 2)), 4)])
def test_toom_cook_gives_an_exact_correlation(points, m):
    rng = np.random.default_rng(len(points))
    for _ in range(5):
        got, want = _exact_correlation(points, m, 3, rng)
        assert got == want


def test_the_input_and_output_transforms_are_exact_in_binary():
    """Only the kernel transform rounds: B^T and A^T hold dyadic fractions (exact in float32)."""
    at, _, bt = winograd4.toom_cook(winograd4.POINTS, 4, 3)
    for v in [*sum(at, []), *sum(bt, [])]:
        assert v.denominator & (v.denominator - 1) == 0 and float(np.float32(v)) == v


@pytest.mark.parametrize("points", [(0, 1, 1, 2, -2, None), (0, 1, -1, None, -2, 2), (0, 1, -1, 2, None)])
def test_toom_cook_rejects_bad_points(points):
    with pytest.raises(ValueError, match="distinct points"):
        winograd4.toom_cook(points, 4, 3)


def test_the_bias_position_reaches_every_output_once():
    assert (winograd4._AT[:, winograd4.BIAS_POSITION // 6] == 1).all()
    assert winograd4.BIAS_POSITION // 6 == winograd4.BIAS_POSITION % 6


# (n, c, h, w, o, padding): odd channel counts; outputs 4 and 8 (whole tiles), 6, 2, 7 x 5 and
# 1 x 3 (cropped tiles), padding 0, 1 and 2
SHAPES = [(2, 3, 6, 6, 5, 1), (1, 5, 10, 10, 3, 1), (3, 7, 8, 8, 2, 0), (2, 3, 4, 4, 4, 0),
          (1, 1, 2, 2, 1, 1), (2, 3, 9, 7, 4, 0), (1, 2, 3, 5, 3, 0), (2, 4, 4, 6, 3, 2)]


@pytest.mark.parametrize("n,c,h,w,o,pad", SHAPES)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("with_bias", [True, False])
def test_winograd4_equals_the_direct_convolution(n, c, h, w, o, pad, dtype, with_bias):
    rng = np.random.default_rng(n * 100 + c * 10 + h)
    x = rng.standard_normal((n, c, h, w)).astype(dtype)
    k = rng.standard_normal((o, c, 3, 3)).astype(dtype)
    b = rng.standard_normal(o).astype(dtype) if with_bias else None
    got = winograd4.winograd4_conv2d(np, x, k, (pad, pad), bias=b)
    want = _conv2d_ref(x.astype(np.float64), k.astype(np.float64), None if b is None else b.astype(np.float64),
                       padding=(pad, pad))
    assert got.dtype == dtype and got.shape == want.shape == (n, o, h + 2 * pad - 2, w + 2 * pad - 2)
    # relative to the output's scale: float32 F(4, 3) rounds about 10x more than a direct sum
    tol = 2e-5 if dtype == "float32" else 1e-12
    assert np.abs(got - want).max() <= tol * np.abs(want).max()


@pytest.mark.parametrize("chunk", [1, 2, 3, None])
def test_chunks_of_images_give_the_same_result_into_out(chunk):
    rng = np.random.default_rng(chunk or 0)
    x = rng.standard_normal((5, 3, 6, 10)).astype("float64")
    k = rng.standard_normal((4, 3, 3, 3))
    b = rng.standard_normal(4)
    out = np.full((5, 4, 6, 10), np.nan)
    got = winograd4.winograd4_conv2d(np, x, k, (1, 1), out=out, chunk=chunk, bias=b)
    assert got is out
    np.testing.assert_allclose(out, _conv2d_ref(x, k, b, padding=(1, 1)), rtol=1e-12, atol=1e-12)


@pytest.fixture
def two_threads(monkeypatch):
    """Every conv big enough to split over 2 threads; counts the splits' parts."""
    monkeypatch.setattr(la.config, "min_split_macs", 0)
    parts = []
    real = threads.split
    monkeypatch.setattr(threads, "split", lambda ps, work: parts.append(len(ps)) or real(ps, work))
    la.set_num_threads(2)
    yield parts
    la.set_num_threads(os.cpu_count() or 1)


@pytest.mark.parametrize("n,c,h,w,o,pad", [(5, 3, 6, 8, 4, 1), (4, 2, 9, 7, 5, 0), (2, 65, 8, 8, 3, 1)])
@pytest.mark.parametrize("chunk", [None, 1, 2])
def test_split_over_two_threads_equals_the_reference(two_threads, n, c, h, w, o, pad, chunk):
    rng = np.random.default_rng(n + c + h)
    x, k, b = rng.standard_normal((n, c, h, w)), rng.standard_normal((o, c, 3, 3)), rng.standard_normal(o)
    got = winograd4.winograd4_conv2d(np, x, k, (pad, pad), chunk=chunk, bias=b)
    assert two_threads and two_threads[-1] >= 2  # the kernel transform and the chunks were split
    np.testing.assert_allclose(got, _conv2d_ref(x, k, b, padding=(pad, pad)), rtol=1e-11, atol=1e-11)


def _direct64(x, w):
    """float64 direct convolution at padding 1 (windows times kernels in one tensordot)."""
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1)))
    win = np.lib.stride_tricks.sliding_window_view(xp, (3, 3), axis=(2, 3))
    return np.tensordot(win, w.astype(np.float64), axes=([1, 4, 5], [1, 2, 3])).transpose(0, 3, 1, 2)


@pytest.mark.parametrize("n,c,hw", [(2, 64, 32), (2, 128, 16), (4, 256, 8), (8, 512, 4)])
def test_float32_error_on_resnet_layers_is_a_small_multiple_of_im2col(monkeypatch, n, c, hw):
    """ResNet-18's 3x3 layers, random normal inputs, He-initialized weights, float32: F(4, 3)'s
    largest error relative to max |y| measured 2.7e-6 - 5.3e-6, 6-11x im2col's (~5e-7; the table
    of ``benchmarks/winograd.py``). Its products sum values that the input and kernel transforms
    scaled up (entries up to 2.5 per axis) and the output transform cancels (up to 8 per axis), so
    their float32 rounding weighs more than in a direct sum. The bound: 20x im2col's error on the
    same data and 1e-5 of max |y|; float64 agrees to 1e-12."""
    rng = np.random.default_rng(c)
    x = rng.standard_normal((n, c, hw, hw)).astype(np.float32)
    w = (rng.standard_normal((c, c, 3, 3)) * np.sqrt(2.0 / (9 * c))).astype(np.float32)
    want = _direct64(x, w)
    scale = np.abs(want).max()
    f43 = np.abs(winograd4.winograd4_conv2d(np, x, w, (1, 1)) - want).max() / scale
    monkeypatch.setattr(la.config, "winograd_min_channels", 1 << 30)  # conv2d's im2col
    im2col = np.abs(run_conv2d(np, x, w, padding=(1, 1)) - want).max() / scale
    assert f43 <= min(20 * im2col, 1e-5)
    f64 = winograd4.winograd4_conv2d(np, x.astype(np.float64), w.astype(np.float64), (1, 1))
    assert np.abs(f64 - want).max() <= 1e-12 * scale


# What benchmarks/winograd.py measured (batch 64 and 1, 1 and 2 threads): F(4, 3) from 64 to 256
# channels with 1024+ output pixels in the batch, F(2, 3) at 512 channels, im2col below
@pytest.mark.parametrize("x,k,params,expected", [
    ((64, 64, 32, 32), (64, 64, 3, 3), {}, 4),
    ((64, 128, 16, 16), (128, 128, 3, 3), {}, 4),
    ((64, 256, 8, 8), (256, 256, 3, 3), {}, 4),
    ((64, 512, 4, 4), (512, 512, 3, 3), {}, 2),
    ((1, 64, 32, 32), (64, 64, 3, 3), {}, 4),  # 1024 pixels
    ((1, 128, 16, 16), (128, 128, 3, 3), {}, 2),  # 256 pixels: the kernel transform outweighs
    ((2, 64, 16, 16), (128, 64, 3, 3), {}, 2),  # 512 pixels
    ((1, 256, 8, 8), (256, 256, 3, 3), {}, 0),
    ((64, 64, 32, 32), (64, 64, 3, 3), {"stride": (2, 2)}, 0),
    ((64, 64, 30, 30), (64, 64, 3, 3), {"padding": (0, 0)}, 4),  # 28 x 28: 4 divides it
    ((64, 64, 31, 31), (64, 64, 3, 3), {}, 0),  # odd output: neither (F(2, 3) needs even sizes)
    ((64, 32, 32, 32), (32, 32, 3, 3), {}, 0),
])
def test_winograd_tile_picks_the_measured_fastest(monkeypatch, x, k, params, expected):
    monkeypatch.setattr(la.config, "winograd_max_tile", 4)
    p = {"stride": (1, 1), "padding": (1, 1), "dilation": (1, 1), "groups": 1} | params
    (sh, sw), (ph, pw) = p["stride"], p["padding"]
    ho, wo = (x[2] + 2 * ph - 3) // sh + 1, (x[3] + 2 * pw - 3) // sw + 1
    assert winograd4.winograd_tile(x, k, p["stride"], p["padding"], p["dilation"], p["groups"], ho, wo) == expected
    monkeypatch.setattr(la.config, "winograd_max_tile", 2)  # the opt-out: F(2, 3) where F(4, 3) was chosen
    got = winograd4.winograd_tile(x, k, p["stride"], p["padding"], p["dilation"], p["groups"], ho, wo)
    assert got == (2 if expected == 4 else expected)


@pytest.mark.parametrize("x,k,expected,kept", [
    ((64, 512, 4, 4), (512, 512, 3, 3), 2, 4),  # kept kernels: 512 channels pay on F(4, 3)
    ((16, 512, 4, 4), (512, 512, 3, 3), 2, 4),
    ((1, 128, 16, 16), (128, 128, 3, 3), 2, 4),  # 256 pixels
    ((4, 256, 8, 8), (256, 256, 3, 3), 2, 4),
    ((1, 256, 8, 8), (256, 256, 3, 3), 0, 0),  # 64 pixels: im2col either way
    ((4, 512, 4, 4), (512, 512, 3, 3), 0, 0),
    ((64, 1024, 4, 4), (1024, 1024, 3, 3), 2, 2),  # beyond what was measured: as before
    ((64, 64, 32, 32), (64, 64, 3, 3), 4, 4),
    ((64, 32, 32, 32), (32, 32, 3, 3), 0, 0),
])
def test_kept_kernels_move_the_choice_only_where_measured(monkeypatch, x, k, expected, kept):
    monkeypatch.setattr(la.config, "winograd_max_tile", 4)
    args = (x, k, (1, 1), (1, 1), (1, 1), 1, x[2], x[3])
    assert winograd4.winograd_tile(*args) == expected  # transformed every call (training): as before
    assert winograd4.winograd_tile(*args, cached=True) == kept
    monkeypatch.setattr(la.config, "winograd_max_tile", 2)
    assert winograd4.winograd_tile(*args, cached=True) == (2 if kept == 4 else kept)


def test_conv2d_runs_the_chosen_tile_and_writes_out(monkeypatch):
    """conv2d calls F(4, 3) where ``winograd_tile`` says 4 (into planned and strided ``out``,
    eagerly and in a graph), and F(2, 3) under ``LAZYARRAY_WINOGRAD=2``."""
    calls = []
    for mod, name in ((winograd4, "winograd4_conv2d"), (winograd2, "winograd_conv2d")):
        real = getattr(mod, name)
        monkeypatch.setattr(mod, name, lambda *a, real=real, name=name, **kw: calls.append(name) or real(*a, **kw))
    monkeypatch.setattr(la.config, "winograd4_min_channels", 1)
    monkeypatch.setattr(la.config, "winograd4_min_pixels", 1)
    monkeypatch.setattr(la.config, "winograd4_cached_min_pixels", 1)
    monkeypatch.setattr(la.config, "winograd_min_channels", 1)
    monkeypatch.setattr(la.config, "winograd_min_pixels", 1)
    monkeypatch.setattr(la.config, "winograd_cached_min_pixels", 1)
    monkeypatch.setattr(la.config, "winograd_max_tile", 4)
    rng = np.random.default_rng(0)
    x, k, b = (rng.standard_normal(s) for s in ((2, 3, 8, 8), (4, 3, 3, 3), (4,)))
    ref = _conv2d_ref(x, k, b, padding=(1, 1))
    out = np.full((2, 4, 8, 8), np.nan)
    assert run_conv2d(np, x, k, b, padding=(1, 1), out=out) is out
    np.testing.assert_allclose(out, ref, rtol=1e-12, atol=1e-12)
    strided = np.full((8, 8, 4, 2), np.nan).transpose(3, 2, 0, 1)
    run_conv2d(np, x, k, b, padding=(1, 1), out=strided)
    np.testing.assert_allclose(strided, ref, rtol=1e-12, atol=1e-12)
    with la.deferred():
        y = la.nn.conv2d(la.array(x), la.array(k), la.array(b), padding=(1, 1))
    np.testing.assert_allclose(y.asnumpy(), ref, rtol=1e-12, atol=1e-12)
    assert calls == ["winograd4_conv2d"] * 3
    calls.clear()
    monkeypatch.setattr(la.config, "winograd_max_tile", 2)
    np.testing.assert_allclose(run_conv2d(np, x, k, b, padding=(1, 1)), ref, rtol=1e-12, atol=1e-12)
    assert calls == ["winograd_conv2d"]


@pytest.mark.parametrize("shape,expected", [
    ((64, 64, 64, 32, 32), 2),  # 256 KB per image: CHUNK_BYTES holds one, MIN_CHUNK_IMAGES says 2
    ((64, 128, 128, 16, 16), 2),  # two images fill CHUNK_BYTES
    ((64, 64, 64, 8, 8), 16),  # small images: by bytes
    ((64, 256, 256, 8, 8), 64),  # 9 MB of transformed kernels: 256 tile rows (4 per image)
    ((1, 64, 64, 32, 32), 1),  # never more than the batch
    ((8, 512, 512, 64, 64), 2),  # one image has the rows (256 tiles), yet 2 images
])
def test_chunks_keep_the_input_in_cache_and_amortize_large_kernels(shape, expected):
    n, c, o, h, w = shape
    tiles = -(-h // 4) * -(-w // 4)  # (padding 1: the output is h x w)
    assert winograd4.chunk_images(n, c, o, h, w, tiles) == expected


def test_resnet18_on_winograd4_equals_onnxruntime_at_the_onnx_tests_tolerance(monkeypatch, tmp_path):
    """The project's full-width ResNet-18 (CIFAR stem) at batch 2 runs its 64-channel 3x3 layers
    (and, with their kernels kept, 128-channel ones) as F(4, 3) and still equals onnxruntime at
    tests/onnx's rtol 1e-5 / atol 1e-6."""
    ort = pytest.importorskip("onnxruntime")
    monkeypatch.setattr(la.config, "winograd_max_tile", 4)
    calls = []
    real = winograd4.winograd4_conv2d
    monkeypatch.setattr(winograd4, "winograd4_conv2d", lambda *a, **kw: calls.append(a[1].shape) or real(*a, **kw))
    net = la.blocks.models.resnet18(classes=10, thumbnail=True)
    net.initialize()
    net.hybridize()
    x = np.random.default_rng(0).standard_normal((2, 3, 32, 32)).astype(np.float32)
    ours = net(la.array(x)).asnumpy()
    assert calls and 64 in {s[1] for s in calls}  # (the first stage's 2 x 32 x 32 pixels at least)
    path = net.export_onnx(str(tmp_path / "resnet18.onnx"))
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    theirs, = sess.run(None, {sess.get_inputs()[0].name: x})
    np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("layout", ["fortran", "batch_last", "reversed_kernel_view"])
def test_any_input_and_kernel_strides(layout):
    """The padded copy reads any strides (a batch-last planned buffer, a Fortran array) and the
    kernel transform any kernel view."""
    rng = np.random.default_rng(7)
    x, k = rng.standard_normal((3, 5, 9, 10)), rng.standard_normal((4, 5, 3, 3))
    want = _conv2d_ref(x, k, padding=(1, 1))
    if layout == "fortran":
        x = np.asfortranarray(x)
    elif layout == "batch_last":
        x = np.ascontiguousarray(x.transpose(1, 2, 3, 0)).transpose(3, 0, 1, 2)
    else:
        k = np.ascontiguousarray(k[:, :, ::-1, ::-1])[:, :, ::-1, ::-1]
    np.testing.assert_allclose(winograd4.winograd4_conv2d(np, x, k, (1, 1)), want, rtol=1e-12, atol=1e-12)
