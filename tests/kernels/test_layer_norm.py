"""layer_norm[compiled] and [in_place]: bit for bit the written-out ops' NumPy values (mean, subtract, square, mean,
add, sqrt, divide, multiply, multiply, add) and the reference kernel's (the same order), float32 and
float64, views; where it applies (last axis, one dtype, size) and what the profile names."""
from __future__ import annotations

import numpy as np
import pytest

import lazyarray as la
from lazyarray import jit, kernels
from lazyarray.kernels import layer_norm as L
from lazyarray.ops import registry

RNG = np.random.default_rng(4)
REFERENCE = registry.get("layer_norm").kernel


def _written_out(x, g, b, eps):
    """The ops one by one, each value C-ordered (as a compiled program's planned buffers hold them)."""
    c = np.ascontiguousarray(np.subtract(x, np.mean(x, axis=-1, keepdims=True)))
    var = np.mean(np.ascontiguousarray(np.square(c)), axis=-1, keepdims=True)
    inv = np.divide(x.dtype.type(1), np.sqrt(np.add(var, x.dtype.type(eps))))
    return np.add(np.multiply(np.multiply(c, inv), g), b)


def _args(shape, dtype):
    return ((RNG.standard_normal(shape) * 4 + 10).astype(dtype), RNG.standard_normal(shape[-1:]).astype(dtype),
            RNG.standard_normal(shape[-1:]).astype(dtype))


@pytest.mark.parametrize("shape", [(1, 7, 32), (8, 65, 32), (3, 129), (5, 1), (7,), (2, 2, 3, 768)])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_the_written_out_values_and_the_reference_bit_for_bit(shape, dtype):
    x, g, b = _args(shape, dtype)
    got = L.run_layer_norm(np, x, g, b, eps=1e-5)
    np.testing.assert_array_equal(got, _written_out(x, g, b, 1e-5))
    np.testing.assert_array_equal(got, REFERENCE(np, x, g, b, eps=1e-5))
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
    assert str(kernels.choose("layer_norm", np, x, g, b)) in ("layer_norm[in_place]", "layer_norm[compiled]")
    assert kernels.choose("layer_norm", np, x.T.copy(), g[:4], b[:4], axis=0).impl.name == "reference"
    assert kernels.choose("layer_norm", np, x, g.astype("float64"), b).impl.name == "reference"
    assert kernels.choose("layer_norm", np, x.astype("float16"), g.astype("float16"), b.astype("float16")) \
        .impl.name == "reference"
    assert kernels.choose("layer_norm", np, x[:0], g, b).impl.name == "reference"
    with la.tuning(layer_norm_in_place_max_bytes=64):  # (in_place's cap; the compiled kernels copy nothing)
        assert kernels.choose("layer_norm", np, x, g, b).impl.name == ("compiled" if jit.enabled() else "reference")
        with la.tuning(jit=False):
            assert kernels.choose("layer_norm", np, x, g, b).impl.name == "reference"
    np.testing.assert_array_equal(L.run_layer_norm(np, x[:0], g, b), REFERENCE(np, x[:0], g, b))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_compiled_equals_in_place_bit_for_bit_for_every_row_length(dtype):
    """Every length to two blocks and a few past (NumPy's pairwise sum splits rows of more than ``BLOCK``
    values in halves, recursively: ``pairwise_sum.py``)."""
    pytest.importorskip("numba")
    for n in (*range(1, 2 * L.BLOCK + 17), 383, 384, 385, 511, 512, 513, 640, 768, 1000, 1024, 1100, 4100):
        for rows in (1, 5):
            x, g, b = _args((rows, n), dtype)
            x[0, :1] *= -1e3 if n % 3 else 0.0
            want = L._in_place(np, x, g, b, eps=1e-6)
            np.testing.assert_array_equal(L._compiled(np, x, g, b, eps=1e-6), want, err_msg=f"{rows} x {n}")
    x, g, b = _args((3, 4, 32), dtype)
    x[1] = -0.0  # a constant row: zero variance, -0.0 sums
    x[2, 0, 3] = np.nan
    view = x[:, ::2]  # rows read through strides
    np.testing.assert_array_equal(L._compiled(np, view, g, b), L._in_place(np, view, g, b))
    out = np.empty((3, 4, 32), dtype)
    assert L._compiled(np, x, g, b, out=out) is out
    np.testing.assert_array_equal(out, L._in_place(np, x, g, b))
    assert L._compiled(np, x, g, b, out=np.empty((32, 4, 3), dtype).T) is None  # (not C-ordered: in_place)


def test_the_choice_by_row_length_and_jit(kernel_path):
    x, g, b = _args((4, 8), "float32")
    want = "layer_norm[compiled]" if kernel_path == "compiled" else "layer_norm[in_place]"
    assert str(kernels.choose("layer_norm", np, x, g, b)) == want
    long = _args((2, 768), "float32")  # (rows of any length: NumPy's pairwise sum past one block too)
    assert str(kernels.choose("layer_norm", np, *long)) == want
    np.testing.assert_array_equal(L.run_layer_norm(np, *long), _written_out(*long, 1e-5))
    # a transposed view: NumPy sums its rows across, value by value; in_place and strided_rows do the same
    # (tests/kernels/test_layer_norm_strided.py)
    t = (RNG.standard_normal((1, 32, 64)) * 3 + 7).astype("float32").transpose(0, 2, 1)
    tg, tb = RNG.standard_normal(32).astype("float32"), RNG.standard_normal(32).astype("float32")
    strided = "layer_norm[strided_rows]" if kernel_path == "compiled" else "layer_norm[in_place]"
    assert str(kernels.choose("layer_norm", np, t, tg, tb)) == strided
    np.testing.assert_array_equal(L.run_layer_norm(np, t, tg, tb), _written_out(t, tg, tb, 1e-5))
    with la.profile() as prof:
        la.nn.layer_norm(x, g, b)
    assert [e.key for e in prof.events if e.impl != "numba compile"] == ["nn." + want]
    np.testing.assert_array_equal(L.run_layer_norm(np, x, g, b), _written_out(x, g, b, 1e-5))


RMS_REFERENCE = registry.get("rms_norm").kernel


def _rms_written_out(x, g, eps):
    """T5's ops one by one, the squares C-ordered (a planned buffer)."""
    sq = np.ascontiguousarray(np.multiply(x, x))
    inv = np.divide(x.dtype.type(1), np.sqrt(np.add(np.mean(sq, axis=-1, keepdims=True), x.dtype.type(eps))))
    return np.multiply(g, np.multiply(x, inv))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_rms_norm_compiled_is_the_reference_and_the_written_out_ops_bit_for_bit(dtype):
    pytest.importorskip("numba")
    for n in (*range(1, 2 * L.BLOCK + 17), 511, 512, 513, 768, 1100):
        x, g, _ = _args((3, n), dtype)
        want = _rms_written_out(x, g, 1e-6)
        np.testing.assert_array_equal(RMS_REFERENCE(np, x, g, eps=1e-6), want)
        np.testing.assert_array_equal(L._rms_compiled(np, x, g, eps=1e-6), want, err_msg=f"row length {n}")
    x, g, _ = _args((2, 32, 16), dtype)
    t = x.transpose(0, 2, 1)  # (any layout: the squares are summed C-ordered either way)
    np.testing.assert_array_equal(L.run_rms_norm(np, t, g[:16].repeat(2)), _rms_written_out(t, g[:16].repeat(2), 1e-6))


def test_rms_norm_choice(kernel_path):
    x, g, _ = _args((4, 8), "float32")
    want = "rms_norm[compiled]" if kernel_path == "compiled" else "rms_norm[reference]"
    assert str(kernels.choose("rms_norm", np, x, g)) == want
    long = _args((2, 512), "float32")[:2]  # (rows of any length: NumPy's pairwise sum past one block too)
    assert str(kernels.choose("rms_norm", np, *long)) == want
    np.testing.assert_array_equal(L.run_rms_norm(np, *long), _rms_written_out(*long, 1e-6))
    np.testing.assert_array_equal(L.run_rms_norm(np, x, g), _rms_written_out(x, g, 1e-6))
    out = np.empty((4, 8), "float32")
    assert L.run_rms_norm(np, x, g, out=out) is out
    np.testing.assert_array_equal(out, _rms_written_out(x, g, 1e-6))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape", [(8, 7, 32), (2, 300), (0, 5, 16)])
def test_bound_layer_and_rms_norms_are_the_written_out_ops_bit_for_bit(dtype, shape, monkeypatch):
    """A compiled step's bound ``compiled`` layer and RMS norms (their constants one array, bound once)
    give the written-out ops' values, on arrays and on strided views that go to the runner."""
    pytest.importorskip("numba")
    monkeypatch.setattr(la.config, "jit", True)
    x, g, b = _args(shape, dtype)
    ln, rms = L.bind_layer_norm(np, x, g, b, eps=1e-5), L.bind_rms_norm(np, x, g, eps=1e-6)
    if x.size:  # (empty rows: the reference, bound)
        assert str(ln.choice) == "layer_norm[compiled]" and str(rms.choice) == "rms_norm[compiled]"
    for _ in range(2):
        np.testing.assert_array_equal(ln.fn(x, g, b), _written_out(x, g, b, 1e-5))
        np.testing.assert_array_equal(rms.fn(x, g), _rms_written_out(x, g, 1e-6))
    wide = np.repeat(x, 2, axis=-1)[..., ::2]  # (a view: rows of strided values, the runner's)
    np.testing.assert_array_equal(ln.fn(wide, g, b), _written_out(wide, g, b, 1e-5))
