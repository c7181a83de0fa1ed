"""pad's ``fill_copy`` (``kernels/pad.py``): the constant pad as a fill and one copy, bit for bit
``numpy.pad`` (the reference) over float dtypes, widths, views, empty axes and planned buffers; other
modes, 0-d arrays and other dtypes keep the reference; eager calls and compiled steps run it."""
from __future__ import annotations

import numpy as np
import pytest

import lazyarray as la
from lazyarray import kernels
from lazyarray.kernels import pad as kpad
from lazyarray.ops import registry

PAD = registry.get("pad")
RNG = np.random.default_rng(3)


def _ref(x, pw, c=0.0):
    return PAD.kernel(np, x, pw, mode="constant", constant_values=c)


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
@pytest.mark.parametrize("pw,c", [(((0, 0), (0, 0), (0, 0), (0, 1)), 0.0), (((1, 2), (0, 3), (2, 0), (1, 1)), -1.5),
                                  (((2, 2),), 7.0), (((0, 0),), 0.0)])
def test_fill_copy_equals_numpy_pad(dtype, pw, c):
    x = (RNG.standard_normal((2, 3, 1, 5)) * 4).astype(dtype)
    got = kpad.pad_fill_copy(np, x, pw, "constant", c)
    want = _ref(x, pw, c)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)


def test_views_empty_axes_and_planned_buffers():
    x = RNG.standard_normal((4, 6, 5)).astype(np.float32)[::2, :, ::-2]  # a strided view
    pw = ((1, 0), (2, 2), (0, 3))
    np.testing.assert_array_equal(kpad.pad_fill_copy(np, x, pw, "constant", 0.5), _ref(x, pw, 0.5))
    e = np.zeros((0, 3), np.float64)
    np.testing.assert_array_equal(kpad.pad_fill_copy(np, e, ((1, 1), (0, 2)), "constant", 2.0),
                                  _ref(e, ((1, 1), (0, 2)), 2.0))
    out = np.full((3, 10, 6), np.nan, np.float32)
    assert kpad.pad_fill_copy(np, x, pw, "constant", 0.5, out=out) is out  # planned, C-ordered: written into
    np.testing.assert_array_equal(out, _ref(x, pw, 0.5))
    other = np.full((10, 3, 6), np.nan, np.float32).transpose(1, 0, 2)  # not C-ordered: a new array
    got = kpad.pad_fill_copy(np, x, pw, "constant", 0.5, out=other)
    assert got is not other
    np.testing.assert_array_equal(got, _ref(x, pw, 0.5))


def test_what_keeps_the_reference():
    x = RNG.standard_normal((3, 4))
    assert kernels.choose(PAD, np, x, pad_width=((1, 1),)).impl is kpad.FILL_COPY
    for mode in ("edge", "reflect"):
        assert kernels.choose(PAD, np, x, pad_width=((1, 1),), mode=mode).impl is kpad.REFERENCE
        assert kpad.pad_fill_copy(np, x, ((1, 1),), mode) is None
    for dtype in (np.complex64, np.int32, np.uint8, np.bool_):
        assert kernels.choose(PAD, np, x.astype(dtype), pad_width=((1, 1),)).impl is kpad.REFERENCE
        assert kpad.pad_fill_copy(np, x.astype(dtype), ((1, 1),)) is None
    assert kernels.choose(PAD, np, np.float32(1.0), pad_width=((0, 0),)).impl is kpad.REFERENCE


def test_eager_and_compiled_calls_run_it():
    x = RNG.standard_normal((2, 3)).astype(np.float32)
    with la.profile() as prof:
        y = la.pad(la.array(x), pad_width=((1, 0), (0, 2)), constant_values=3.0)
    np.testing.assert_array_equal(y.asnumpy(), np.pad(x, ((1, 0), (0, 2)), constant_values=3.0))
    assert {e.impl for e in prof.events if e.name.endswith("pad")} == {"fill_copy"}
    for mode in ("edge", "reflect"):
        np.testing.assert_array_equal(la.pad(la.array(x), pad_width=((1, 1),), mode=mode).asnumpy(),
                                      np.pad(x, ((1, 1),), mode=mode))
