"""``nn.conv2d_act[write_out_region]`` and ``nn.conv2d_add_relu[write_out_region]`` (``kernels/blocked_region.py``
with ``conv_act.py`` and ``conv_add_relu.py``): ``write_out``'s loop (the relu, or the residual and the relu, taken
as each output row is written) over the threads in one parallel region. Its values equal ``write_out``'s on
one thread bit for bit (each value computed by the same loop) and the reference's within ``blocked``'s rounding,
float32 and float64, with and without bias, strides, channel parts, empty batches; a residual that shares the
output's memory or is not C-ordered, a view, one thread, or the switch off run the serial path; while contended
``write_out`` runs (and the profile names it); a compiled ResNet block names it in ``explain()`` and computes the
one-thread program's values."""
from __future__ import annotations

import numpy as np
import pytest

import lazyarray as la
from lazyarray.kernels import blocked_region, contention, conv_act, conv_add_relu, conv_blocked
from lazyarray.ops import conv

pytest.importorskip("numba")

DTYPES = ("float32", "float64")
RTOL = {"float32": 1e-5, "float64": 1e-12}
GEOMETRY = [  # x shape, weight shape, stride
    ((8, 8, 16, 16), (8, 8, 3, 3), (1, 1)),  # ResNet's layers at batch 8
    ((8, 16, 8, 8), (16, 16, 3, 3), (1, 1)),
    ((3, 5, 9, 11), (6, 5, 3, 3), (1, 1)),  # images not a multiple of the threads, 6 filters
    ((1, 4, 12, 12), (7, 4, 3, 3), (1, 1)),  # one image: channel parts, a last block of three
    ((0, 3, 8, 8), (4, 3, 3, 3), (1, 1)),
]


@pytest.fixture(autouse=True)
def _quiet(two_threads, monkeypatch):
    monkeypatch.setattr(la.config, "contention_guard", False)
    monkeypatch.setattr(la.config, "conv_blocked_region", True)
    yield


def _arrays(rng, xs, ws, dtype, bias=True):
    x = rng.standard_normal(xs).astype(dtype)
    w = rng.standard_normal(ws).astype(dtype)
    return x, w, rng.standard_normal(ws[0]).astype(dtype) if bias else None


def _reference(x, w, b, geo, r=None):
    y = conv.conv2d_im2col(np, x, w, b, *geo, None)
    return np.maximum(y if r is None else y + r, 0)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("bias", [True, False], ids=["bias", "no-bias"])
@pytest.mark.parametrize("geo", GEOMETRY, ids=[f"{g[0]}-{g[1]}" for g in GEOMETRY])
def test_relu_and_residual_equal_write_out_bit_for_bit(geo, bias, dtype):
    xs, ws, stride = geo
    rng = np.random.default_rng(0)
    x, w, b = _arrays(rng, xs, ws, dtype, bias)
    args = (stride, (1, 1), (1, 1), 1)
    shape = conv.conv2d_im2col(np, x, w, b, *args, None).shape
    r = rng.standard_normal(shape).astype(dtype)
    tol = dict(rtol=RTOL[dtype], atol=RTOL[dtype] * (xs[1] * 9 + 2))
    for res, relu in ((None, True), (r, False)):
        serial = conv_blocked.conv2d_blocked(np, x, w, b, *args, None, res, relu)
        got = blocked_region.conv2d_blocked_region(np, x, w, b, *args, None, res, relu)
        assert got is not None and got.shape == shape
        np.testing.assert_array_equal(got, serial)
        np.testing.assert_allclose(got, _reference(x, w, b, args, res), **tol)
        out = np.full(shape, np.nan, dtype)
        assert blocked_region.conv2d_blocked_region(np, x, w, b, *args, out, res, relu) is out
        np.testing.assert_array_equal(out, serial)


@pytest.mark.parametrize("dtype", DTYPES)
def test_the_ops_choose_it_and_run_the_serial_path_elsewhere(dtype):
    rng = np.random.default_rng(1)
    x, w, b = _arrays(rng, (8, 8, 16, 16), (8, 8, 3, 3), dtype)
    r = rng.standard_normal((8, 8, 16, 16)).astype(dtype)
    geo = dict(padding=(1, 1))
    assert str(conv_act.choose_conv2d_act(np, x, w, b, **geo)) == \
        "conv2d_act[write_out_region, blocked_region, 2 threads]"
    assert str(conv_add_relu.choose_conv2d_add_relu(np, x, w, r, b, **geo)) == \
        "conv2d_add_relu[write_out_region, blocked_region, 2 threads]"
    assert conv_act.WRITE_OUT_REGION.fallback is conv_act.WRITE_OUT and conv_act.WRITE_OUT_REGION.threads
    assert conv_add_relu.WRITE_OUT_REGION.fallback is conv_add_relu.WRITE_OUT
    want_act = conv_act.run_conv2d_act(np, x, w, b, **geo)
    want_res = conv_add_relu.run_conv2d_add_relu(np, x, w, r, b, **geo)
    np.testing.assert_array_equal(want_act, conv_blocked.conv2d_blocked(np, x, w, b, (1, 1), (1, 1), (1, 1), 1, None,
                                                                          relu=True))
    with la.tuning(conv_blocked_region=False):
        assert conv_act.choose_conv2d_act(np, x, w, b, **geo).impl is conv_act.WRITE_OUT
        assert conv_add_relu.choose_conv2d_add_relu(np, x, w, r, b, **geo).impl is conv_add_relu.WRITE_OUT
        np.testing.assert_array_equal(conv_act.run_conv2d_act(np, x, w, b, **geo), want_act)
        np.testing.assert_array_equal(conv_add_relu.run_conv2d_add_relu(np, x, w, r, b, **geo), want_res)
    la.set_num_threads(1)
    assert conv_act.choose_conv2d_act(np, x, w, b, **geo).impl is conv_act.WRITE_OUT
    np.testing.assert_array_equal(conv_add_relu.run_conv2d_add_relu(np, x, w, r, b, **geo), want_res)


@pytest.mark.parametrize("dtype", DTYPES)
def test_a_residual_it_cannot_take_and_a_view_run_serial(dtype):
    rng = np.random.default_rng(2)
    x, w, b = _arrays(rng, (8, 8, 16, 16), (8, 8, 3, 3), dtype)
    geo = ((1, 1), (1, 1), (1, 1), 1)
    y = np.empty((8, 8, 16, 16), dtype)
    assert blocked_region.conv2d_blocked_region(np, x, w, b, *geo, y, y) is None  # (the residual is the output)
    strided = rng.standard_normal((8, 8, 16, 32)).astype(dtype)[..., ::2]
    assert blocked_region.conv2d_blocked_region(np, x, w, b, *geo, None, strided) is None
    got = conv_add_relu.run_conv2d_add_relu(np, x, w, strided, b, padding=(1, 1))
    np.testing.assert_allclose(got, _reference(x, w, b, geo, strided), rtol=RTOL[dtype], atol=RTOL[dtype] * 80)
    view = rng.standard_normal((8, 8, 16, 32)).astype(dtype)[..., ::2]
    assert blocked_region.conv2d_blocked_region(np, view, w, b, *geo, None, None, True) is None
    got = conv_act.run_conv2d_act(np, view, w, b, padding=(1, 1))
    np.testing.assert_allclose(got, _reference(view, w, b, geo), rtol=RTOL[dtype], atol=RTOL[dtype] * 80)


def test_contended_write_out_runs(monkeypatch):
    rng = np.random.default_rng(3)
    x, w, b = _arrays(rng, (8, 8, 16, 16), (8, 8, 3, 3), "float32")
    r = rng.standard_normal((8, 8, 16, 16)).astype(np.float32)
    monkeypatch.setattr(contention, "quiet", lambda: False)
    labels = []
    with la.profile() as prof:
        got_act = conv_act.run_conv2d_act(np, x, w, b, padding=(1, 1))
        labels.append(prof.take_choice())
        got_res = conv_add_relu.run_conv2d_add_relu(np, x, w, r, b, padding=(1, 1))
        labels.append(prof.take_choice())
    assert labels == ["write_out, blocked", "write_out, blocked"]  # (the choices that ran)
    geo = ((1, 1), (1, 1), (1, 1), 1)
    np.testing.assert_array_equal(got_act, conv_blocked.conv2d_blocked(np, x, w, b, *geo, None, relu=True))
    np.testing.assert_array_equal(got_res, conv_blocked.conv2d_blocked(np, x, w, b, *geo, None, r))


@pytest.mark.parametrize("dtype", DTYPES)
def test_a_compiled_resnet_block_runs_it_with_the_one_thread_values(dtype):
    rng = np.random.default_rng(4)
    x, w, b = _arrays(rng, (8, 8, 16, 16), (8, 8, 3, 3), dtype)
    w2, b2 = _arrays(rng, (1, 1, 1, 1), (8, 8, 3, 3), dtype)[1:]

    class Block(la.blocks.HybridBlock):
        def forward(self, a, k, c, k2, c2):
            h = la.relu(la.nn.conv2d(a, k, c, padding=1))
            return la.relu(la.nn.conv2d(h, k2, c2, padding=1) + a)

    args = [la.array(a) for a in (x, w, b, w2, b2)]
    la.set_num_threads(1)
    one = Block()
    one.hybridize()
    want = one(*args).asnumpy()
    la.set_num_threads(2)
    net = Block()
    net.hybridize()
    for _ in range(3):
        np.testing.assert_array_equal(net(*args).asnumpy(), want)
    text = str(net.explain(*args))
    assert "nn.conv2d_act[write_out_region, blocked_region, 2 threads]" in text
    assert "nn.conv2d_add_relu[write_out_region, blocked_region, 2 threads]" in text
    monkey = pytest.MonkeyPatch()
    monkey.setattr(contention, "quiet", lambda: False)  # (contended: the bound steps run write_out's loop)
    try:
        np.testing.assert_array_equal(net(*args).asnumpy(), want)
    finally:
        monkey.undo()
