"""``round_to_format`` (ops/narrow_format.py): values rounded into bfloat16 / float8 / float4 / int4 /
int2, kept in float32 or int8/uint8. References: ``ml_dtypes`` (the conversions ONNX and JAX use) and
ONNX's own float8_e8m0 conversion."""
from __future__ import annotations

import numpy as np
import pytest

import lazyarray as la
from lazyarray.errors import DTypeError
from lazyarray.ops.narrow_format import FORMATS

ml_dtypes = pytest.importorskip("ml_dtypes")


@pytest.mark.parametrize("fmt", sorted(set(FORMATS) - {"float8_e8m0fnu"}))
def test_each_format_rounds_as_ml_dtypes_and_keeps_its_storage_dtype(fmt):
    rng = np.random.default_rng(0)
    x = (rng.standard_normal(200) * 6).astype(np.float32)
    if fmt.startswith(("int", "uint")):
        x = np.trunc(x)
    got = la.round_to_format(la.array(x), format=fmt, saturate=False).asnumpy()
    assert got.dtype == FORMATS[fmt]
    want = x.astype(np.dtype(getattr(ml_dtypes, fmt))).astype(FORMATS[fmt])
    np.testing.assert_array_equal(got, want)


def test_float64_converts_as_ml_dtypes_does_through_float32():
    # 1 + 2**-8 + 2**-30 lies above the bfloat16 midpoint 1 + 2**-8, but float32 drops the 2**-30 and
    # the midpoint ties to even: ml_dtypes (so ONNX's reference) gives 1.0, and so do we
    x = np.array([1 + 2 ** -8 + 2 ** -30, 1 + 2 ** -7 + 2 ** -9])
    got = la.round_to_format(la.array(x), format="bfloat16").asnumpy()
    np.testing.assert_array_equal(got, x.astype(ml_dtypes.bfloat16).astype(np.float32))
    np.testing.assert_array_equal(got, [1.0, 1 + 2 ** -7])


def test_saturate_clamps_float8_overflow_and_infinities_but_keeps_nan():
    x = la.array(np.array([1e6, -np.inf, np.inf, np.nan, 3.0], np.float32))
    sat = la.round_to_format(x, format="float8_e4m3fn").asnumpy()
    np.testing.assert_array_equal(sat, [448, -448, 448, np.nan, 3])
    raw = la.round_to_format(x, format="float8_e4m3fn", saturate=False).asnumpy()
    assert np.isnan(raw[:4]).all() and raw[4] == 3  # e4m3fn has no infinity: overflow is NaN
    e5 = la.round_to_format(x, format="float8_e5m2", saturate=False).asnumpy()
    np.testing.assert_array_equal(e5, [np.inf, -np.inf, np.inf, np.nan, 3])


@pytest.mark.parametrize("saturate", [True, False])
@pytest.mark.parametrize("mode", ["up", "down", "nearest"])
def test_e8m0_rounds_the_exponent_as_onnx_does(mode, saturate):
    nh = pytest.importorskip("onnx.numpy_helper")
    rng = np.random.default_rng(1)
    x = np.concatenate([np.abs(rng.standard_normal(100)) * 10.0 ** rng.integers(-30, 30, 100),
                        [1.0, 1.5, 3.0, 0.75, np.inf, np.nan, 3.3e38, 2.0 ** 127 * 1.9, 1e-40]]).astype(np.float32)
    got = la.round_to_format(la.array(x), format="float8_e8m0fnu", saturate=saturate, round_mode=mode).asnumpy()
    want = nh.to_float8e8m0(x, saturate, mode).astype(np.float32)
    np.testing.assert_array_equal(got, want)


def test_integer_formats_wrap_like_numpy_casts_and_bool_works():
    x = la.array(np.array([9, -9, 7, -8, 20], np.int64))
    np.testing.assert_array_equal(la.round_to_format(x, format="int4").asnumpy(), [-7, 7, 7, -8, 4])
    np.testing.assert_array_equal(la.round_to_format(x, format="uint2").asnumpy(), [1, 3, 3, 0, 0])
    b = la.round_to_format(la.array(np.array([True, False])), format="bfloat16").asnumpy()
    np.testing.assert_array_equal(b, [1.0, 0.0])


def test_complex_input_and_unknown_format_are_refused_by_name():
    with pytest.raises(DTypeError, match="round_to_format: x is complex64"):
        la.round_to_format(la.array(np.ones(2, np.complex64)), format="bfloat16")
    with pytest.raises(la.LazyArrayError, match="float7"):
        la.round_to_format(la.array(np.ones(2, np.float32)), format="float7")


def test_traced_and_hybridized_results_equal_eager():
    x = np.linspace(-3, 3, 17, dtype=np.float32)
    eager = la.round_to_format(la.array(x) * 1.1, format="bfloat16").asnumpy()
    with la.deferred():
        y = la.round_to_format(la.array(x) * 1.1, format="bfloat16")
    np.testing.assert_array_equal(y.asnumpy(), eager)
