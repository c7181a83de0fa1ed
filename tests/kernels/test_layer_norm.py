"""layer_norm[in_place]: bit for bit the written-out ops' NumPy values (mean, subtract, square, mean,
add, sqrt, divide, multiply, multiply, add), within rounding of the reference kernel, float32 and
float64, views; where it applies (last axis, one dtype, size) and what the profile names."""
from __future__ import annotations

import numpy as np
import pytest

import lazyarray as la
from lazyarray import kernels
from lazyarray.kernels import layer_norm as L
from lazyarray.ops import registry

RNG = np.random.default_rng(4)
REFERENCE = registry.get("layer_norm").kernel


def _written_out(x, g, b, eps):
    c = np.subtract(x, np.mean(x, axis=-1, keepdims=True))
    inv = np.divide(x.dtype.type(1), np.sqrt(np.add(np.mean(np.square(c), axis=-1, keepdims=True), x.dtype.type(eps))))
    return np.add(np.multiply(np.multiply(c, inv), g), b)


def _args(shape, dtype):
    return ((RNG.standard_normal(shape) * 4 + 10).astype(dtype), RNG.standard_normal(shape[-1:]).astype(dtype),
            RNG.standard_normal(shape[-1:]).astype(dtype))


@pytest.mark.parametrize("shape", [(1, 7, 32), (8, 65, 32), (3, 129), (5, 1), (7,), (2, 2, 3, 768)])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_the_written_out_values_bit_for_bit_and_the_reference_within_rounding(shape, dtype):
    x, g, b = _args(shape, dtype)
    got = L.run_layer_norm(np, x, g, b, eps=1e-5)
    np.testing.assert_array_equal(got, _written_out(x, g, b, 1e-5))
    tol = 2e-5 if dtype == "float32" else 1e-12
    np.testing.assert_allclose(got, REFERENCE(np, x, g, b, eps=1e-5), rtol=tol, atol=tol)
    out = np.empty(shape, dtype)
    assert L.run_layer_norm(np, x, g, b, eps=1e-5, out=out) is out
    np.testing.assert_array_equal(out, got)


def test_views_and_large_rows_from_scratch():
    x = (RNG.standard_normal((300, 64)) * 2).astype("float32")[::2]  # every other row: a strided view
    g, b = RNG.standard_normal(64).astype("float32"), RNG.standard_normal(64).astype("float32")
    np.testing.assert_array_equal(L.run_layer_norm(np, x, g, b), _written_out(x, g, b, 1e-5))
    big = RNG.standard_normal((200, 128)).astype("float32")  # 100 KB: the squares come from scratch
    assert big.nbytes >= L.SCRATCH_FROM_BYTES
    for _ in range(2):
        np.testing.assert_array_equal(L.run_layer_norm(np, big, g.repeat(2), b.repeat(2)),
                                      _written_out(big, g.repeat(2), b.repeat(2), 1e-5))


def test_where_it_applies():
    x, g, b = _args((4, 8), "float32")
    assert str(kernels.choose("layer_norm", np, x, g, b)) == "layer_norm[in_place]"
    assert kernels.choose("layer_norm", np, x.T.copy(), g[:4], b[:4], axis=0).impl.name == "reference"
    assert kernels.choose("layer_norm", np, x, g.astype("float64"), b).impl.name == "reference"
    assert kernels.choose("layer_norm", np, x.astype("float16"), g.astype("float16"), b.astype("float16")) \
        .impl.name == "reference"
    assert kernels.choose("layer_norm", np, x[:0], g, b).impl.name == "reference"
    with la.tuning(layer_norm_in_place_max_bytes=64):
        assert kernels.choose("layer_norm", np, x, g, b).impl.name == "reference"
    np.testing.assert_array_equal(L.run_layer_norm(np, x[:0], g, b), REFERENCE(np, x[:0], g, b))


def test_the_profile_names_it():
    x, g, b = _args((4, 8), "float32")
    with la.profile() as prof:
        la.nn.layer_norm(x, g, b)
    assert [e.key for e in prof.events] == ["nn.layer_norm[in_place]"]
