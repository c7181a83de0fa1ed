"""conv2d's ``blocked_region`` (``kernels/blocked_region.py``): ``blocked``'s compiled loop over the threads in
one numba parallel region, each thread its images (or an image's channel blocks). Its parts cover the output
once; its values equal ``blocked``'s bit for bit (each value computed by the same loop) and the reference's
within ``blocked``'s rounding, float32 and float64, with and without bias, strides, filters not a multiple of
four, a single image (channel parts), empty batches and filters; the chooser takes it on several threads only,
past ``conv_blocked_region_min_macs``, for C-ordered arrays, not where it is switched off; a view's call runs
``blocked``; while the contention guard says contended it declines and ``blocked`` runs; a compiled program
names it in ``explain()`` (its own and ``nn.conv2d_act[write_out_region]``'s) with the one-thread program's values."""
from __future__ import annotations

import numpy as np
import pytest

import lazyarray as la
from lazyarray import jit
from lazyarray.kernels import blocked_region, contention, conv_blocked
from lazyarray.kernels import conv2d as kconv
from lazyarray.ops import conv

pytest.importorskip("numba")

DTYPES = ("float32", "float64")
RTOL = {"float32": 1e-5, "float64": 1e-12}
GEOMETRY = [  # x shape, weight shape, stride, padding
    ((8, 8, 16, 16), (8, 8, 3, 3), (1, 1), (1, 1)),  # ResNet's layers at batch 8
    ((8, 3, 32, 32), (8, 3, 3, 3), (1, 1), (1, 1)),
    ((8, 8, 16, 16), (16, 8, 3, 3), (2, 2), (1, 1)),
    ((3, 5, 9, 11), (6, 5, 2, 4), (1, 2), (1, 0)),  # images not a multiple of the threads, 6 filters, 8 taps
    ((1, 8, 16, 16), (16, 8, 3, 3), (1, 1), (1, 1)),  # one image: channel parts
    ((1, 4, 12, 12), (7, 4, 3, 3), (1, 1), (1, 1)),  # channel parts, a last block of three
    ((0, 3, 8, 8), (4, 3, 3, 3), (1, 1), (1, 1)),
    ((2, 3, 8, 8), (0, 3, 3, 3), (1, 1), (1, 1)),
]


@pytest.fixture(autouse=True)
def _quiet(two_threads, monkeypatch):
    """Two threads, the region switched on (off by default), the contention guard off (a shared machine's stall
    would run ``blocked``: the same values)."""
    monkeypatch.setattr(la.config, "contention_guard", False)
    monkeypatch.setattr(la.config, "conv_blocked_region", True)
    yield


def _arrays(rng, xs, ws, dtype, bias=True):
    x = rng.standard_normal(xs).astype(dtype)
    w = rng.standard_normal(ws).astype(dtype)
    return x, w, rng.standard_normal(ws[0]).astype(dtype) if bias else None


@pytest.mark.parametrize("n,o,threads", [(8, 8, 2), (3, 16, 2), (1, 16, 2), (1, 7, 4), (2, 4, 4), (1, 3, 2),
                                         (5, 9, 3), (0, 4, 2), (4, 0, 2)])
def test_the_parts_cover_the_output_once(n, o, threads):
    parts = blocked_region.parts(n, o, threads)
    seen = np.zeros((n, o), int)
    for i0, i1, o0, o1 in parts:
        assert i0 < i1 and o0 < o1 and o0 % blocked_region.BLOCK == 0
        seen[i0:i1, o0:o1] += 1
    assert (seen == 1).all() and len(parts) <= max(threads, n)
    assert not parts.flags.writeable


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("bias", [True, False], ids=["bias", "no-bias"])
@pytest.mark.parametrize("geo", GEOMETRY, ids=[f"{g[0]}-{g[1]}-s{g[2]}" for g in GEOMETRY])
def test_equals_blocked_bit_for_bit_and_the_reference(geo, bias, dtype):
    xs, ws, stride, padding = geo
    x, w, b = _arrays(np.random.default_rng(0), xs, ws, dtype, bias)
    args = (stride, padding, (1, 1), 1)
    want = conv.conv2d_im2col(np, x, w, b, *args, None).copy()
    serial = conv_blocked.conv2d_blocked(np, x, w, b, *args, None)
    got = blocked_region.conv2d_blocked_region(np, x, w, b, *args, None)
    assert got is not None and got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_array_equal(got, serial)
    rtol = RTOL[dtype]
    np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol * (xs[1] * ws[2] * ws[3] + 1))
    out = np.full(want.shape, np.nan, dtype)
    assert blocked_region.conv2d_blocked_region(np, x, w, b, *args, out) is out  # (into a planned output)
    np.testing.assert_array_equal(out, serial)


def test_the_chooser_takes_it_on_threads_only():
    x, w, _ = _arrays(np.random.default_rng(1), (8, 8, 16, 16), (8, 8, 3, 3), "float32")
    geo = ((1, 1), (1, 1), (1, 1), 1)
    choice = kconv.choose_conv2d(np, x, w, None, *geo)
    assert choice.impl is kconv.BLOCKED_REGION and str(choice) == "conv2d[blocked_region, 2 threads]"
    assert kconv.BLOCKED_REGION.fallback is kconv.BLOCKED and kconv.BLOCKED_REGION in kconv.IMPLS
    with la.tuning(conv_blocked_region=False):
        assert kconv.choose_conv2d(np, x, w, None, *geo).impl is kconv.BLOCKED
    with la.tuning(conv_blocked_region_min_macs=1 << 30):
        assert kconv.choose_conv2d(np, x, w, None, *geo).impl is kconv.BLOCKED
    with la.tuning(conv_blocked=False, conv_direct_batch=False):  # (blocked's case only)
        assert kconv.choose_conv2d(np, x, w, None, *geo).impl is kconv.IM2COL_COMPILED
    view = x[:, :, :, ::-1]  # (a view: blocked copies it once, on the calling thread)
    assert kconv.choose_conv2d(np, view, w, None, *geo).impl is not kconv.BLOCKED_REGION
    small = np.ascontiguousarray(x[:1])  # (one image's 147K multiply-adds: under the minimum)
    assert kconv.choose_conv2d(np, small, w, None, *geo).impl is not kconv.BLOCKED_REGION
    la.set_num_threads(1)
    assert kconv.choose_conv2d(np, x, w, None, *geo).impl is kconv.BLOCKED
    assert blocked_region.conv2d_blocked_region(np, x, w, None, *geo[:3], 1, None) is None  # (its fallback runs)


@pytest.mark.parametrize("dtype", DTYPES)
def test_a_view_runs_blocked_with_the_references_values(dtype):
    rng = np.random.default_rng(2)
    big = rng.standard_normal((8, 16, 18, 16)).astype(dtype)
    x, w, b = big[:, ::2, 1:17, ::-1], *_arrays(rng, (1, 1, 1, 1), (8, 8, 3, 3), dtype)[1:]
    geo = ((1, 1), (1, 1), (1, 1), 1)
    assert blocked_region.conv2d_blocked_region(np, x, w, b, *geo, None) is None  # (not C-ordered: blocked's)
    assert kconv.choose_conv2d(np, x, w, None, *geo).impl is kconv.BLOCKED
    y = kconv.run_conv2d(np, x, w, b, *geo)
    want = conv.conv2d_im2col(np, x, w, b, *geo, None)
    np.testing.assert_allclose(y, want, rtol=RTOL[dtype], atol=RTOL[dtype] * 73)


def test_contended_it_declines_and_blocked_runs(monkeypatch):
    x, w, b = _arrays(np.random.default_rng(3), (8, 8, 16, 16), (8, 8, 3, 3), "float32")
    geo = ((1, 1), (1, 1), (1, 1), 1)
    monkeypatch.setattr(contention, "quiet", lambda: False)
    assert blocked_region.conv2d_blocked_region(np, x, w, b, *geo, None) is None
    with la.profile() as prof:
        y = la.nn.conv2d(la.array(x), la.array(w), la.array(b), padding=1).asnumpy()
    np.testing.assert_array_equal(y, conv_blocked.conv2d_blocked(np, x, w, b, *geo, None))
    assert [e.impl for e in prof.events] == ["blocked"]  # (the fallback that ran)


@pytest.mark.parametrize("dtype", DTYPES)
def test_a_compiled_program_runs_it_with_the_one_thread_values(dtype):
    rng = np.random.default_rng(4)
    x, w, b = _arrays(rng, (8, 8, 16, 16), (8, 8, 3, 3), dtype)
    w2 = rng.standard_normal((16, 8, 3, 3)).astype(dtype)

    class Net(la.blocks.HybridBlock):
        def forward(self, a, k, c, k2):
            h = la.relu(la.nn.conv2d(a, k, c, padding=1))
            return la.nn.conv2d(h + a, k2, padding=1)

    args = [la.array(a) for a in (x, w, b, w2)]
    la.set_num_threads(1)
    one = Net()
    one.hybridize()
    want = one(*args).asnumpy()
    la.set_num_threads(2)
    net = Net()
    net.hybridize()
    for _ in range(3):
        np.testing.assert_array_equal(net(*args).asnumpy(), want)
    text = str(net.explain(*args))
    assert "nn.conv2d_act[write_out_region, blocked_region, 2 threads]" in text
    assert "nn.conv2d[blocked_region, 2 threads]" in text
    with la.profile() as prof:
        np.testing.assert_array_equal(net(*args).asnumpy(), want)
    assert [e.impl for e in prof.events if "conv2d" in e.name] == ["write_out_region, blocked_region, 2 threads",
                                                                   "blocked_region, 2 threads"]
    assert jit.parallel_ready()
