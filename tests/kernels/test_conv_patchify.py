"""conv2d[patchify] (kernels/conv_patchify.py): a convolution whose windows tile its input as one copy of the
patches and one product, im2col's (the reference's) values bit for bit: float32 and float64, views, empty dims,
input rows and columns past the last window, the eager call and a compiled step's bound call, the chooser's
conditions and the switch."""
from __future__ import annotations

import numpy as np
import pytest

import lazyarray as la
from lazyarray import kernels
from lazyarray.kernels import conv2d as c2
from lazyarray.kernels import conv_patchify
from lazyarray.ops import conv, registry
from lazyarray.tuning_table import current

_ANY = {"conv_patchify_min_macs": 0, "conv_patchify_min_channels": 1}


def _case(rng, n, c, h, w, o, k, dtype):
    x = rng.standard_normal((n, c, h, w)).astype(dtype)
    wt = rng.standard_normal((o, c) + k).astype(dtype)
    return x, wt, rng.standard_normal(o).astype(dtype)


def _reference(x, w, b, k):
    return conv.conv2d_im2col(np, x, w, b, k, (0, 0), (1, 1), 1, None)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n,c,h,w,o,k", [(8, 16, 8, 8, 32, (2, 2)), (1, 16, 8, 8, 32, (2, 2)), (2, 3, 32, 32, 16, (4, 4)),
                                         (3, 8, 9, 7, 5, (2, 3)), (0, 16, 8, 8, 32, (2, 2)), (2, 8, 0, 8, 4, (2, 2)),
                                         (2, 8, 6, 6, 0, (3, 3))])
@pytest.mark.parametrize("bias", [True, False])
def test_equals_im2col_bit_for_bit(dtype, n, c, h, w, o, k, bias):
    rng = np.random.default_rng(n + c + h + o)
    x, wt, b = _case(rng, n, c, h, w, o, k, dtype)
    b = b if bias else None
    want = _reference(x, wt, b, k)
    with la.tuning(**_ANY):
        assert c2.choose_conv2d(np, x, wt, None, k, (0, 0), (1, 1), 1).impl is c2.PATCHIFY
        got = c2.run_conv2d(np, x, wt, b, stride=k)
        out = np.full(want.shape, np.nan, dtype)
        bound = kernels.bind(registry.get("conv2d"), np, x, wt, *(() if b is None else (b,)), stride=k, out=out)
        assert bound.choice.impl is c2.PATCHIFY
        bound.fn(x, wt, *(() if b is None else (b,)), out=out)
        into = c2.run_conv2d(np, x, wt, b, stride=k, out=np.empty(want.shape, dtype))
    for y in (got, out, into):
        assert y.dtype == want.dtype and y.shape == want.shape
        np.testing.assert_array_equal(y, want)


def test_views_and_non_c_ordered_outputs():
    rng = np.random.default_rng(3)
    x, wt, b = _case(rng, 4, 16, 16, 16, 24, (2, 2), np.float32)
    xv, wv = x[:, :, ::2, ::2], np.ascontiguousarray(np.swapaxes(wt, 2, 3)).swapaxes(2, 3)  # (views)
    want = _reference(xv, wv, b, (2, 2))
    out = np.empty((4, 4, 4, 24), np.float32).transpose(0, 3, 1, 2)  # (an NHWC output: not C-ordered images)
    with la.tuning(**_ANY):
        assert c2.choose_conv2d(np, xv, wv, None, (2, 2), (0, 0), (1, 1), 1).impl is c2.PATCHIFY
        np.testing.assert_array_equal(c2.run_conv2d(np, xv, wv, b, stride=(2, 2)), want)
        assert c2.choose_conv2d(np, xv, wv, out, (2, 2), (0, 0), (1, 1), 1).impl is not c2.PATCHIFY
        np.testing.assert_array_equal(conv_patchify.conv2d_patchify(np, xv, wv, b, (2, 2), (0, 0), (1, 1), 1, out),
                                      want)


def test_what_it_does_not_take():
    rng = np.random.default_rng(4)
    x, wt, b = _case(rng, 8, 16, 8, 8, 32, (2, 2), np.float32)
    t = current()
    assert conv_patchify.applies(np, x, wt, None, (2, 2), (0, 0), (1, 1), 1, t)  # (262K multiply-adds)
    assert not conv_patchify.applies(np, x[:1], wt, None, (2, 2), (0, 0), (1, 1), 1, t)  # (32K: blocked's)
    assert not conv_patchify.applies(np, x, wt, None, (1, 1), (0, 0), (1, 1), 1, t)  # (overlapping windows)
    assert not conv_patchify.applies(np, x, wt, None, (2, 2), (1, 1), (1, 1), 1, t)  # (padding)
    assert not conv_patchify.applies(np, x, wt[:, :1, :1], None, (1, 1), (0, 0), (1, 1), 1, t)  # (1x1: pointwise)
    x3, w3, _ = _case(rng, 8, 3, 32, 32, 16, (4, 4), np.float32)
    assert not conv_patchify.applies(np, x3, w3, None, (4, 4), (0, 0), (1, 1), 1, t)  # (3 channels: blocked's)
    assert not conv_patchify.applies(np, x.astype(np.float16), wt.astype(np.float16), None, (2, 2), (0, 0),
                                     (1, 1), 1, t)
    with la.tuning(conv_patchify=False):
        assert c2.choose_conv2d(np, x, wt, None, (2, 2), (0, 0), (1, 1), 1).impl is not c2.PATCHIFY
    assert conv_patchify.conv2d_patchify(np, x, wt, b, (1, 1), (0, 0), (1, 1), 1, None) is None  # (declines)


def test_explain_names_it_in_a_compiled_program():
    rng = np.random.default_rng(5)
    x, wt, b = _case(rng, 8, 16, 8, 8, 32, (2, 2), np.float32)
    xs, ws, bs = (la.sym.var(nm, shape=a.shape, dtype=a.dtype) for nm, a in (("x", x), ("w", wt), ("b", b)))
    op = la.CachedOp(la.sym.tanh(la.sym.nn.conv2d(xs, ws, bs, stride=(2, 2))))
    args = [la.array(a) for a in (x, wt, b)]
    for _ in range(3):
        got = op(*args).asnumpy()
    np.testing.assert_array_equal(got, np.tanh(_reference(x, wt, b, (2, 2))))
    assert "conv2d[patchify]" in str(op.explain(*args))
