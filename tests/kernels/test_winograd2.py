"""Winograd F(2x2, 3x3) convolution (lazyarray/kernels/winograd2.py): equal to the direct convolution
(the loop reference of tests/ops/cases.py) wherever conv2d chooses it, and chosen only where it
applies (3x3, stride 1, even output, enough channels and pixels)."""
from __future__ import annotations

import numpy as np
import pytest
from ops.cases import _conv2d_ref

import lazyarray as la
from lazyarray import blocks as B
from lazyarray.kernels import conv2d as kernels_conv2d
from lazyarray.kernels import winograd2, winograd4
from lazyarray.kernels.conv2d import run_conv2d
from lazyarray.ops import derived


@pytest.fixture
def always(monkeypatch):
    """conv2d takes the Winograd path for every 3x3 stride-1 layer with an even output."""
    monkeypatch.setattr(la.config, "winograd_min_channels", 1)
    monkeypatch.setattr(la.config, "winograd_min_pixels", 1)
    monkeypatch.setattr(la.config, "winograd_cached_min_pixels", 1)


@pytest.mark.parametrize("n,c,h,w,o,pad", [(2, 3, 6, 8, 4, 1), (1, 5, 4, 4, 2, 0), (3, 2, 8, 6, 3, 2),
                                          (1, 1, 2, 2, 1, 1), (2, 4, 10, 4, 5, 1)])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_winograd_equals_the_direct_convolution(n, c, h, w, o, pad, dtype):
    rng = np.random.default_rng(n * 100 + c * 10 + h)
    x = rng.standard_normal((n, c, h, w)).astype(dtype)
    k = rng.standard_normal((o, c, 3, 3)).astype(dtype)
    got = winograd2.winograd_conv2d(np, x, k, (pad, pad))
    assert got.dtype == dtype and got.shape == (n, o, h + 2 * pad - 2, w + 2 * pad - 2)
    tol = 1e-5 if dtype == "float32" else 1e-12
    np.testing.assert_allclose(got, _conv2d_ref(x, k, padding=(pad, pad)), rtol=tol, atol=tol)


def test_conv2d_uses_winograd_where_chosen_and_writes_out(always, monkeypatch):
    calls = []
    real = winograd2.winograd_conv2d
    monkeypatch.setattr(winograd2, "winograd_conv2d", lambda *a, **kw: calls.append(a[1].shape) or real(*a, **kw))
    rng = np.random.default_rng(0)
    x, k, b = (rng.standard_normal(s).astype("float32") for s in ((2, 3, 6, 6), (4, 3, 3, 3), (4,)))
    out = np.full((2, 4, 6, 6), np.nan, np.float32)
    res = run_conv2d(np, x, k, b, padding=(1, 1), out=out)
    assert res is out and calls == [(2, 3, 6, 6)]
    np.testing.assert_allclose(out, _conv2d_ref(x, k, b, padding=(1, 1)), rtol=1e-5, atol=1e-5)
    # an out buffer it cannot write into directly (a transposed view) still receives the values
    strided = np.full((6, 6, 4, 2), np.nan, np.float32).transpose(3, 2, 0, 1)
    run_conv2d(np, x, k, b, padding=(1, 1), out=strided)
    np.testing.assert_allclose(strided, out, rtol=1e-6)
    # through the public op, eager and in a hybridized graph
    ref = _conv2d_ref(x, k, b, padding=(1, 1))
    np.testing.assert_allclose(la.nn.conv2d(la.array(x), la.array(k), la.array(b), padding=(1, 1)).asnumpy(),
                               ref, rtol=1e-5, atol=1e-5)
    with la.deferred():
        y = la.nn.conv2d(la.array(x), la.array(k), la.array(b), padding=(1, 1))
    np.testing.assert_allclose(y.asnumpy(), ref, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("x,k,params,expected", [
    ((64, 128, 8, 8), (128, 128, 3, 3), {}, True),
    ((64, 128, 8, 8), (128, 128, 3, 3), {"stride": (2, 2)}, False),
    ((64, 128, 8, 8), (128, 128, 3, 3), {"dilation": (2, 2), "padding": (2, 2)}, False),
    ((64, 128, 7, 8), (128, 128, 3, 3), {}, False),  # odd output height
    ((64, 128, 8, 8), (128, 128, 5, 5), {"padding": (2, 2)}, False),
    ((64, 64, 32, 32), (64, 64, 3, 3), {}, True),  # run in chunks of images that stay in cache
    ((1, 64, 32, 32), (64, 64, 3, 3), {}, True),
    ((1, 32, 32, 32), (32, 32, 3, 3), {}, False),  # too few channels anyway
    ((1, 512, 4, 4), (512, 512, 3, 3), {}, False),  # too few pixels to pay for the kernel transform
    ((64, 128, 8, 8), (128, 64, 3, 3), {"groups": 2}, False),
])
def test_winograd_is_chosen_only_where_it_applies_and_pays(x, k, params, expected):
    p = {"stride": (1, 1), "padding": (1, 1), "dilation": (1, 1), "groups": 1} | params
    (sh, sw), (ph, pw), (dh, dw) = p["stride"], p["padding"], p["dilation"]
    ho = (x[2] + 2 * ph - (k[2] - 1) * dh - 1) // sh + 1
    wo = (x[3] + 2 * pw - (k[3] - 1) * dw - 1) // sw + 1
    assert winograd2.use_winograd(x, k, p["stride"], p["padding"], p["dilation"], p["groups"], ho, wo) is expected


@pytest.mark.parametrize("chunk", [1, 2, 3, 5, None])
def test_chunks_of_images_give_the_same_result(chunk):
    """The batch runs a few images at a time (last chunk shorter), with the kernels transformed once
    and the bias added in the output transform."""
    rng = np.random.default_rng(chunk or 0)
    x = rng.standard_normal((5, 3, 6, 4)).astype("float32")
    k = rng.standard_normal((4, 3, 3, 3)).astype("float32")
    out = np.full((5, 4, 6, 4), np.nan, np.float32)
    b = rng.standard_normal(4).astype("float32")
    got = winograd2.winograd_conv2d(np, x, k, (1, 1), out=out, chunk=chunk, bias=b)
    assert got is out
    np.testing.assert_allclose(out, _conv2d_ref(x, k, b, padding=(1, 1)), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("shape,tiles,expected", [
    ((64, 64, 32, 32), 256, 2),  # 256 KB per image: two fit CHUNK_BYTES
    ((64, 128, 16, 16), 64, 4),
    ((64, 256, 8, 8), 16, 16),  # few tiles per image: enough images for MIN_CHUNK_TILES rows
    ((64, 512, 4, 4), 4, 64),
    ((3, 512, 4, 4), 4, 3),  # never more than the batch
    ((8, 4096, 64, 64), 1024, 1),  # one image larger than a chunk: one at a time
])
def test_chunk_size_keeps_the_input_in_cache_yet_the_products_tall(shape, tiles, expected):
    assert winograd2.chunk_images(*shape, tiles) == expected


def test_large_batch_is_chosen_and_chunked_by_conv2d(monkeypatch):
    """ResNet's first stage at batch 64 takes Winograd, in chunks, and matches the reference."""
    sizes = []
    real = winograd2._chunk
    monkeypatch.setattr(winograd2, "_chunk", lambda xp, x, *a: sizes.append(x.shape[0]) or real(xp, x, *a))
    monkeypatch.setattr(winograd2, "CHUNK_BYTES", 2 * 64 * 8 * 8 * 4)  # two images per chunk
    monkeypatch.setattr(la.config, "winograd_max_tile", 2)  # (F(2, 3) at the second call too, its kernels kept)
    rng = np.random.default_rng(1)
    x = rng.standard_normal((5, 64, 8, 8)).astype("float32")
    k = rng.standard_normal((64, 64, 3, 3)).astype("float32") / 24
    b = rng.standard_normal(64).astype("float32")
    y = run_conv2d(np, x, k, b, padding=(1, 1))
    assert sizes == [5]  # 16 tiles per image: MIN_CHUNK_TILES wants all five
    monkeypatch.setattr(winograd2, "MIN_CHUNK_TILES", 1)
    sizes.clear()
    y2 = run_conv2d(np, x, k, b, padding=(1, 1))
    assert sizes == [2, 2, 1]
    ref = _conv2d_ref(x, k, b, padding=(1, 1))
    np.testing.assert_allclose(y, ref, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(y2, ref, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("shape,dtype,pad", [((2, 10, 32, 32), "float32", 1), ((1, 9, 24, 22), "float64", 0),
                                             ((3, 8, 32, 34), "float32", 2)])
def test_large_planes_are_copied_in_channel_blocks_with_the_same_result(shape, dtype, pad):
    """Channel planes of ALIASING_BYTES or more go into the tile layout CHANNEL_BLOCK channels at a
    time (a last, shorter block when the channels do not divide)."""
    rng = np.random.default_rng(shape[1])
    x = rng.standard_normal(shape).astype(dtype)
    assert shape[2] * shape[3] * x.itemsize >= winograd2.ALIASING_BYTES  # (the blocked copy)
    k = rng.standard_normal((4, shape[1], 3, 3)).astype(dtype)
    got = winograd2.winograd_conv2d(np, x, k, (pad, pad))
    tol = 1e-4 if dtype == "float32" else 1e-11
    np.testing.assert_allclose(got, _conv2d_ref(x, k, padding=(pad, pad)), rtol=tol, atol=tol)


# -- the transformed kernels kept while the weight is unchanged (winograd2.kernels, ops/derived.py) --------
@pytest.fixture
def tile_of(monkeypatch):
    """conv2d takes F(tile, 3) for every 3x3 stride-1 layer with an even output; the kept kernels
    start empty."""
    for prefix in ("winograd", "winograd4"):
        for name in ("min_channels", "min_pixels", "cached_min_pixels"):
            monkeypatch.setattr(la.config, f"{prefix}_{name}", 1)
    derived.clear()

    def choose(tile):
        if tile == 2:
            monkeypatch.setattr(la.config, "winograd_max_tile", 2)
        else:
            monkeypatch.setattr(la.config, "winograd_max_tile", 4)
        return winograd2.kernels_name(tile)

    yield choose
    derived.clear()


@pytest.mark.parametrize("tile", [2, 4])
def test_kernels_are_transformed_once_the_weight_holds_still(tile_of, monkeypatch, tile):
    name = tile_of(tile)
    mod = winograd2 if tile == 2 else winograd4
    made = []
    real = mod._kernel_tiles
    monkeypatch.setattr(mod, "_kernel_tiles", lambda *a: made.append(1) or real(*a))
    rng = np.random.default_rng(tile)
    x, k = rng.standard_normal((2, 5, 8, 8)).astype("float32"), rng.standard_normal((6, 5, 3, 3)).astype("float32")
    ref = _conv2d_ref(x, k, padding=(1, 1))
    for i in range(4):
        np.testing.assert_allclose(run_conv2d(np, x, k, padding=(1, 1)), ref, rtol=1e-5, atol=1e-5)
        assert derived.held_count(name) == (i >= 1) and derived.held_count() == (i >= 1)
    assert len(made) == 2  # the first call's, and the second's (kept): none since
    u = derived.derived(k, name, lambda: pytest.fail("made again"), 0)
    assert u.shape == ((tile + 2) ** 2, 5, 6) and not u.flags.writeable
    np.testing.assert_array_equal(u, real(np, k))
    assert u.flags.c_contiguous == (tile == 4)  # (F(2, 3): the transposed view it multiplies by)


def _conv_net():
    net = B.HybridSequential()
    net.add(B.Conv2D(6, 3, padding=(1, 1), in_channels=4))
    net.initialize()
    net.hybridize()
    return net


def _by_hand(net, x):
    w, b = (p.data().asnumpy() for p in net.collect_params().values())
    return _conv2d_ref(x, w, b, padding=(1, 1))


def _step(net, x):
    trainer = B.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.5})

    def step():
        with la.autograd.record():
            loss = B.L2Loss()(net(la.array(x)), la.array(np.ones((2, 6, 8, 8), "float32")))
        loss.backward()
        trainer.step(2)

    return step


def _write(net, x):
    def write():
        w = net[0].weight.data()
        w[:] = w * 2

    return write


def _set_data(net, x):
    p = net[0].weight
    return lambda: p.set_data(p.data().asnumpy() + 1)


@pytest.mark.parametrize("tile", [2, 4])
@pytest.mark.parametrize("change", [_write, _set_data, _step])
def test_a_changed_weight_is_never_served_stale_kernels(tile_of, tile, change):
    name = tile_of(tile)
    net = _conv_net()
    x = np.random.default_rng(3).standard_normal((2, 4, 8, 8)).astype("float32")
    for _ in range(2):
        net(la.array(x))
    assert derived.held_count(name) == 1
    before = net(la.array(x)).asnumpy()
    change(net, x)()
    after = net(la.array(x)).asnumpy()
    assert derived.held_count(name) == 0  # the stale kernels are dropped at the first call after the write
    assert not np.allclose(before, after)
    np.testing.assert_allclose(after, _by_hand(net, x), rtol=1e-4, atol=1e-4)
    net(la.array(x))
    assert derived.held_count(name) == 1  # and kept again once the weight holds still
    np.testing.assert_allclose(net(la.array(x)).asnumpy(), _by_hand(net, x), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("tile", [2, 4])
def test_a_write_through_a_numpy_alias_is_seen(tile_of, tile):
    tile_of(tile)
    net = _conv_net()
    x = np.random.default_rng(4).standard_normal((2, 4, 8, 8)).astype("float32")
    for _ in range(3):
        net(la.array(x))
    np.asarray(net[0].weight.data())[:] *= 3  # NumPy's in-place write: lazyarray never hears of it
    for _ in range(2):
        np.testing.assert_allclose(net(la.array(x)).asnumpy(), _by_hand(net, x), rtol=1e-4, atol=1e-4)


def _cached_flags(monkeypatch) -> list:
    """The ``cached`` argument of every ``winograd_tile`` call conv2d makes from now on."""
    seen = []
    real = kernels_conv2d.winograd_tile
    monkeypatch.setattr(kernels_conv2d, "winograd_tile", lambda *a: seen.append(a[-2]) or real(*a))
    return seen


def test_training_keeps_no_kernels_and_todays_choice(tile_of, monkeypatch):
    """Weights updated every step: no kernels kept, and the chooser is told so (``cached`` False)."""
    tile_of(4)
    seen = _cached_flags(monkeypatch)
    net = _conv_net()
    x = np.random.default_rng(5).standard_normal((2, 4, 8, 8)).astype("float32")
    step = _step(net, x)
    for _ in range(4):
        step()
    assert derived.held_count() == 0 and seen and not any(seen)
    seen.clear()
    for _ in range(3):  # inference: kept from the second call, chosen so from the first (one rounding)
        net(la.array(x))
    assert seen and all(seen)  # (a compiled step asks once per answer of its per-call facts: kernels.bind)


def test_without_room_in_the_budget_kernels_are_transformed_every_call_and_the_chooser_knows(tile_of, monkeypatch):
    tile_of(4)
    monkeypatch.setattr(la.config, "keep_weights_budget", 0)
    seen = _cached_flags(monkeypatch)
    rng = np.random.default_rng(6)
    x, k = rng.standard_normal((2, 5, 8, 8)).astype("float32"), rng.standard_normal((6, 5, 3, 3)).astype("float32")
    for _ in range(3):
        np.testing.assert_allclose(run_conv2d(np, x, k, padding=(1, 1)), _conv2d_ref(x, k, padding=(1, 1)),
                                   rtol=1e-4, atol=1e-4)  # float32 Winograd of sums near 10: 1.2e-5 seen
    assert seen == [False] * 3 and derived.held_count() == 0


def test_recorded_calls_keep_todays_choice_even_with_unchanged_weights(tile_of, monkeypatch):
    """Under autograd's recording the chooser is never told of kept kernels, so a recorded step
    computes as it did before kernels were kept (the tile of a weight transformed every call)."""
    tile_of(4)
    seen = _cached_flags(monkeypatch)
    net = _conv_net()
    x = np.random.default_rng(7).standard_normal((2, 4, 8, 8)).astype("float32")
    for _ in range(3):
        with la.autograd.record():
            y = net(la.array(x))
        np.testing.assert_allclose(y.asnumpy(), _by_hand(net, x), rtol=1e-4, atol=1e-4)
    assert seen and not any(seen)


def test_every_inference_call_rounds_alike_first_kept_or_served(tile_of, monkeypatch):
    """The choice (and so the rounding) is the same at a weight's first call, when its kernels are
    transformed afresh, at the second, when they are kept, and after: equal bits every call (here
    F(4, 3) only with kernels that are kept, F(2, 3) otherwise)."""
    tile_of(4)
    monkeypatch.setattr(la.config, "winograd4_min_pixels", 10**9)
    rng = np.random.default_rng(8)
    x, k = rng.standard_normal((2, 5, 8, 8)).astype("float32"), rng.standard_normal((6, 5, 3, 3)).astype("float32")
    first = run_conv2d(np, x, k, padding=(1, 1))
    for _ in range(3):
        np.testing.assert_array_equal(run_conv2d(np, x, k, padding=(1, 1)), first)
    assert derived.held_count() == 1
