"""conv2d's ``im2col_compiled`` (``kernels/conv_im2col.py``): im2col's columns written by one compiled pass
from the image. It equals the reference kernel (``im2col``) bit for bit over the conv case table's ungrouped
inputs and the real CNNs' batch-8 layers (strides, padding, dilation, rectangular kernels), float32 and
float64, with and without bias, for views (strided inputs, weights) and planned outputs in other orders, and
empty batches, channels, pixels and filters; the chooser takes it where it would take ``im2col`` for a kernel
larger than 1x1 and not where it is switched off (``conv_im2col_compiled``), for 1x1 kernels, other dtypes
or groups; ``explain()`` names it in a compiled program, whose values are the reference's."""
from __future__ import annotations

import numpy as np
import pytest
from ops.cases import CASES

import lazyarray as la
from lazyarray.kernels import conv2d as kconv
from lazyarray.kernels import conv_im2col
from lazyarray.ops import conv

DTYPES = ("float32", "float64")
GEOMETRY = [  # x shape, weight shape, stride, padding, dilation: the real CNNs' batch-8 layers, others, empties
    ((8, 3, 32, 32), (16, 3, 3, 3), (2, 2), (0, 0), (1, 1)),
    ((8, 3, 32, 32), (8, 3, 3, 3), (2, 2), (1, 1), (1, 1)),
    ((8, 8, 16, 16), (8, 8, 3, 3), (1, 1), (1, 1), (1, 1)),
    ((8, 8, 16, 16), (16, 8, 3, 3), (2, 2), (1, 1), (1, 1)),
    ((8, 16, 8, 8), (16, 16, 3, 3), (1, 1), (1, 1), (1, 1)),
    ((2, 3, 9, 11), (5, 3, 2, 4), (3, 2), (2, 1), (1, 1)),
    ((2, 3, 13, 12), (4, 3, 3, 3), (1, 2), (2, 3), (2, 3)),
    ((1, 2, 5, 5), (3, 2, 5, 5), (1, 1), (0, 0), (1, 1)),
    ((2, 3, 4, 4), (2, 3, 7, 7), (1, 1), (3, 3), (1, 1)),
    ((0, 3, 8, 8), (4, 3, 3, 3), (1, 1), (1, 1), (1, 1)),
    ((2, 0, 8, 8), (4, 0, 3, 3), (1, 1), (1, 1), (1, 1)),
    ((2, 3, 8, 8), (0, 3, 3, 3), (1, 1), (1, 1), (1, 1)),
    ((2, 3, 2, 2), (4, 3, 3, 3), (1, 1), (0, 0), (1, 1)),
]


@pytest.fixture(autouse=True)
def _without_blocked():
    """conv2d[blocked] off: these layers of few filters are its case (tests/kernels/test_conv_blocked.py)."""
    with la.tuning(conv_blocked=False):
        yield


def _arrays(rng, xs, ws, dtype, bias=True):
    x = rng.standard_normal(xs).astype(dtype)
    w = rng.standard_normal(ws).astype(dtype)
    return x, w, rng.standard_normal(ws[0]).astype(dtype) if bias else None


def _check(x, w, b, stride, padding, dilation, out=None):
    want = conv.conv2d_im2col(np, x, w, b, stride, padding, dilation, 1, None)
    assert conv_im2col.applies(np, x, w, b, out, 1)
    got = conv_im2col.conv2d_im2col_compiled(np, x, w, b, stride, padding, dilation, 1, out)
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)  # (bit for bit: the same columns, the same products)
    return got


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("bias", [True, False], ids=["bias", "no-bias"])
@pytest.mark.parametrize("geo", GEOMETRY, ids=[f"{g[0]}-{g[1]}-s{g[2]}-p{g[3]}-d{g[4]}" for g in GEOMETRY])
def test_equals_the_reference_bit_for_bit(geo, bias, dtype):
    xs, ws, stride, padding, dilation = geo
    x, w, b = _arrays(np.random.default_rng(0), xs, ws, dtype, bias)
    _check(x, w, b, stride, padding, dilation)


@pytest.mark.parametrize("dtype", DTYPES)
def test_equals_the_reference_over_the_conv_case_tables_inputs(dtype):
    rng = np.random.default_rng(1)
    samples = [s for s in CASES["conv2d"].samples(rng, dtype, False) if s.params.get("groups", 1) == 1]
    assert samples
    for s in samples:
        x, w, *b = s.args
        geo = conv.geometry(s.params.get("stride", (1, 1)), s.params.get("padding", (0, 0)),
                           s.params.get("dilation", (1, 1)))
        _check(x, w, b[0] if b else None, *geo)


@pytest.mark.parametrize("dtype", DTYPES)
def test_views_and_planned_outputs(dtype):
    rng = np.random.default_rng(2)
    big = rng.standard_normal((3, 8, 20, 18)).astype(dtype)
    x = big[:, ::2, 1:19:2, ::-1]  # channels and rows strided, columns reversed
    wbig = rng.standard_normal((10, 8, 3, 3)).astype(dtype)
    w, b = wbig[::2, ::2], rng.standard_normal(5).astype(dtype)  # a strided weight view
    geo = ((1, 1), (1, 1), (1, 1))
    y = _check(x, w, b, *geo)
    assert y.flags.c_contiguous
    shape = y.shape
    out = np.full(shape, np.nan, dtype)
    assert _check(x, w, b, *geo, out) is out  # C-ordered: the product written into it
    last = np.full((shape[0], shape[2], shape[3], shape[1]), np.nan, dtype).transpose(0, 3, 1, 2)
    assert _check(x, w, b, *geo, last) is last  # channels last: computed, copied in
    batch_last = np.full(shape[::-1], np.nan, dtype).T
    assert _check(x, w, b, *geo, batch_last) is batch_last


def test_the_chooser_takes_it_where_im2col_ran():
    rng = np.random.default_rng(3)
    x, w, _ = _arrays(rng, (8, 8, 16, 16), (16, 8, 3, 3), "float32")  # (16 filters: past direct_batch's bound)
    geo = ((1, 1), (1, 1), (1, 1), 1)
    assert kconv.choose_conv2d(np, x, w, None, *geo).impl is kconv.IM2COL_COMPILED
    assert kconv.choose_conv2d(np, x.astype(np.float64), w.astype(np.float64), None, *geo).impl \
        is kconv.IM2COL_COMPILED
    with la.tuning(conv_im2col_compiled=False):
        assert kconv.choose_conv2d(np, x, w, None, *geo).impl is kconv.IM2COL
    one = np.ascontiguousarray(w[:, :, :1, :1])  # 1x1 (stride 2: pointwise_strided, else plain im2col)
    assert kconv.choose_conv2d(np, x, one, None, (2, 2), (0, 0), (1, 1), 1).impl is kconv.POINTWISE_STRIDED
    with la.tuning(conv_pointwise_strided=False):
        assert kconv.choose_conv2d(np, x, one, None, (2, 2), (0, 0), (1, 1), 1).impl is kconv.IM2COL
    assert kconv.choose_conv2d(np, x.astype(np.float16), w.astype(np.float16), None, *geo).impl is kconv.IM2COL
    assert not conv_im2col.applies(np, x, w, None, None, 2)  # groups: not its case
    assert not conv_im2col.applies(np, x, w.astype(np.float64), None, None, 1)  # mixed dtypes
    with la.tuning(jit=False):
        assert conv_im2col.conv2d_im2col_compiled(np, x, w, None, *geo[:3], 1, None) is None  # (im2col runs)


@pytest.mark.parametrize("dtype", DTYPES)
def test_a_compiled_program_runs_it_with_the_references_values(dtype):
    rng = np.random.default_rng(4)
    x, w, b = _arrays(rng, (8, 8, 16, 16), (16, 8, 3, 3), dtype)

    class Net(la.blocks.HybridBlock):
        def forward(self, a, k, c):
            return la.nn.conv2d(a, k, c, stride=2, padding=1)

    net = Net()
    net.hybridize()
    args = [la.array(a) for a in (x, w, b)]
    want = conv.conv2d_im2col(np, x, w, b, (2, 2), (1, 1), (1, 1), 1, None)
    for _ in range(3):  # (the first run: the reference's NumPy path; then the compiled columns)
        np.testing.assert_array_equal(net(*args).asnumpy(), want)
    assert "nn.conv2d[im2col_compiled]" in str(net.explain(*args))
    with la.profile() as prof:
        np.testing.assert_array_equal(net(*args).asnumpy(), want)
    assert [e.impl for e in prof.events if e.name.endswith("conv2d")] == ["im2col_compiled"]
