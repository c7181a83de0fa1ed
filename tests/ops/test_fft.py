"""fft ops (ops/fft.py, la.fft) through the registry-driven checks, plus gradients with respect to complex
inputs, the standard's signatures and dtypes, la.sym / JSON / CachedOp and the frequency helpers."""
import inspect

import numpy as np
import pytest

import lazyarray as la

from .checks import family_tests

test_forward_matches_numpy, test_deferred_matches_eager, test_gradient_matches_finite_differences = \
    family_tests(("fft",))

NORMS = ("backward", "ortho", "forward")
STANDARD_NAMES = ["fft", "fftfreq", "fftn", "fftshift", "hfft", "ifft", "ifftn", "ifftshift", "ihfft", "irfft",
                  "irfftn", "rfft", "rfftfreq", "rfftn"]


def _c(rng, shape, dtype=np.complex128):
    return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)


# -- values: every function, every norm, n / s / axes variants ---------------------------------------------------
@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("name,kw", [("fft", {}), ("fft", {"n": 5, "axis": 0}), ("ifft", {"n": 9}),
                                     ("rfft", {"n": 7}), ("irfft", {}), ("irfft", {"n": 7, "axis": 0}),
                                     ("hfft", {"n": 5}), ("ihfft", {"axis": 0}), ("hfft", {})])
def test_1d_transforms_equal_numpy(name, kw, norm):
    rng = np.random.default_rng(0)
    x = _c(rng, (6, 4)) if name in ("fft", "ifft", "irfft", "hfft") else rng.standard_normal((6, 4))
    got = getattr(la.fft, name)(la.asarray(x), norm=norm, **kw)
    want = getattr(np.fft, name)(x, norm=norm, **kw)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_allclose(got.asnumpy(), want, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("name,kw", [("fftn", {}), ("fftn", {"s": (3, 6), "axes": (2, 0)}), ("ifftn", {"axes": (1,)}),
                                     ("rfftn", {"s": (4, 5), "axes": (0, 1)}), ("rfftn", {}),
                                     ("irfftn", {}), ("irfftn", {"s": (3, 7), "axes": (1, 2)})])
def test_nd_transforms_equal_numpy(name, kw, norm):
    rng = np.random.default_rng(1)
    x = _c(rng, (3, 4, 5)) if name != "rfftn" else rng.standard_normal((3, 4, 5))
    got = getattr(la.fft, name)(la.asarray(x), norm=norm, **kw)
    want = getattr(np.fft, name)(x, norm=norm, **kw)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_allclose(got.asnumpy(), want, rtol=1e-10, atol=1e-12)


def test_minus_one_in_s_means_the_inputs_size():
    x = np.random.default_rng(2).standard_normal((3, 4))
    got = la.fft.fftn(la.asarray(x), s=(-1, 6), axes=(0, 1))
    np.testing.assert_allclose(got.asnumpy(), np.fft.fftn(x, s=(3, 6), axes=(0, 1)), atol=1e-12)
    back = la.fft.irfftn(la.fft.rfftn(la.asarray(x), s=(3, 4), axes=(0, 1)), s=(-1, 4), axes=(0, 1))
    np.testing.assert_allclose(back.asnumpy(), x, atol=1e-12)


@pytest.mark.parametrize("name", ["fftshift", "ifftshift"])
@pytest.mark.parametrize("axes", [None, 1, (0, -1)])
def test_shifts_equal_numpy(name, axes):
    x = np.arange(30.0).reshape(5, 6)
    np.testing.assert_array_equal(getattr(la.fft, name)(la.asarray(x), axes=axes).asnumpy(),
                                  getattr(np.fft, name)(x, axes=axes))


@pytest.mark.parametrize("name", ["fftfreq", "rfftfreq"])
@pytest.mark.parametrize("n,d", [(1, 1.0), (8, 0.1), (9, 2.5)])
def test_frequencies_equal_numpy_in_the_default_float_dtype(name, n, d):
    got = getattr(la.fft, name)(n, d=d)
    assert got.dtype == la.float32 and not got.is_lazy
    np.testing.assert_allclose(got.asnumpy(), getattr(np.fft, name)(n, d), rtol=1e-6)
    got64 = getattr(la.fft, name)(n, d=d, dtype=la.float64, device=la.cpu())
    assert got64.dtype == la.float64
    np.testing.assert_array_equal(got64.asnumpy(), getattr(np.fft, name)(n, d))


def test_frequency_helpers_refuse_bad_arguments():
    with pytest.raises(la.DTypeError, match="fft.fftfreq: dtype must be a real floating"):
        la.fft.fftfreq(4, dtype=la.int32)
    with pytest.raises(la.ParamValueError, match="fft.rfftfreq: n must be a positive int"):
        la.fft.rfftfreq(0)
    with pytest.raises(la.ParamValueError, match="d .*nonzero"):
        la.fft.fftfreq(4, d=0.0)


# -- dtypes: single precision stays single --------------------------------------------------------------------
@pytest.mark.parametrize("name,dtype,want", [
    ("fft", "complex64", "complex64"), ("fft", "float32", "complex64"), ("ifft", "complex128", "complex128"),
    ("rfft", "float32", "complex64"), ("rfft", "float64", "complex128"), ("irfft", "complex64", "float32"),
    ("hfft", "complex64", "float32"), ("ihfft", "float32", "complex64"), ("fftn", "complex64", "complex64"),
    ("rfftn", "float32", "complex64"), ("irfftn", "complex128", "float64"), ("fft", "int32", "complex128"),
    ("fftshift", "float32", "float32")])
def test_result_dtypes_follow_the_standard(name, dtype, want):
    x = la.asarray(np.ones((4, 4), dtype=dtype))
    assert getattr(la.fft, name)(x).dtype == np.dtype(want)
    with la.deferred():
        assert getattr(la.fft, name)(x).dtype == np.dtype(want)


def test_bad_inputs_raise_errors_naming_the_op():
    z = la.asarray(np.ones((4,), np.complex64))
    with pytest.raises(la.DTypeError, match="fft.rfft: needs a real input"):
        la.fft.rfft(z)
    with pytest.raises(la.DTypeError, match="fft.ihfft: needs a real input"):
        la.fft.ihfft(z)
    with pytest.raises(la.ParamValueError, match="fft.fft: n must be a positive"):
        la.fft.fft(z, n=0)
    with pytest.raises(la.ParamValueError, match="fft.fftn: s .* needs axes"):
        la.fft.fftn(la.ones((2, 3)), s=(2, 3))
    with pytest.raises(la.ParamValueError, match="repeat an axis"):
        la.fft.fftn(la.ones((2, 3)), axes=(0, 0))
    with pytest.raises(la.ShapeError, match="different lengths"):
        la.fft.fftn(la.ones((2, 3)), s=(2,), axes=(0, 1))
    with pytest.raises(la.AxisError, match="fft.fft: axis 2"):
        la.fft.fft(z, axis=2)
    with pytest.raises(la.ShapeError, match="0-d"):
        la.fft.fft(la.asarray(1.0 + 0j))


def test_signatures_are_the_standards():
    for name in STANDARD_NAMES:
        params = list(inspect.signature(getattr(la.fft, name)).parameters.values())
        assert params[0].kind is inspect.Parameter.POSITIONAL_ONLY, name
        assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in params[1:]), name
    assert list(inspect.signature(la.fft.fftn).parameters) == ["x", "s", "axes", "norm"]
    assert list(inspect.signature(la.fft.fftfreq).parameters) == ["n", "d", "dtype", "device"]
    assert sorted(la.fft.__all__) == STANDARD_NAMES


# -- gradients with respect to complex inputs (PyTorch's real-loss convention) --------------------------------------
def _loss(name, x, og, kw):
    """L(x) = sum(Re(conj(og) * f(x))): its gradient is dL/dRe(x) + i dL/dIm(x)."""
    y = getattr(np.fft, name)(x, **kw)
    return float(np.sum(np.real(np.conj(og) * y)))


def _numeric_complex_grad(name, x, og, kw, eps=1e-6):
    grad = np.zeros(x.shape, np.complex128)
    for k in range(x.size):
        for unit in (1.0, 1j):
            xp_, xm = x.copy(), x.copy()
            xp_.reshape(-1)[k] += eps * unit
            xm.reshape(-1)[k] -= eps * unit
            grad.reshape(-1)[k] += unit * (_loss(name, xp_, og, kw) - _loss(name, xm, og, kw)) / (2 * eps)
    return grad


@pytest.mark.parametrize("name,shape,kw", [
    ("fft", (5,), {}), ("fft", (3, 4), {"n": 6, "axis": 0, "norm": "ortho"}), ("fft", (6,), {"n": 4, "norm": "forward"}),
    ("ifft", (5,), {}), ("ifft", (2, 5), {"n": 3, "norm": "ortho"}), ("ifft", (4,), {"n": 7, "norm": "forward"}),
    ("fftn", (3, 4), {}), ("fftn", (2, 3, 4), {"s": (5, 2), "axes": (2, 0), "norm": "ortho"}),
    ("ifftn", (3, 4), {"norm": "forward"}), ("ifftn", (3, 4), {"s": (2, 6), "axes": (0, 1)}),
    ("fftshift", (3, 4), {"axes": (0, 1)}), ("ifftshift", (5,), {})])
def test_complex_input_gradients_match_finite_differences(name, shape, kw):
    rng = np.random.default_rng(3)
    x = _c(rng, shape)
    out_shape = getattr(np.fft, name)(x, **kw).shape
    og = _c(rng, out_shape)
    a = la.asarray(x)
    a.attach_grad()
    with la.autograd.record():
        y = getattr(la.fft, name)(a, **kw)
    y.backward(out_grad=la.asarray(og))
    assert a.grad.dtype == np.complex128
    np.testing.assert_allclose(a.grad.asnumpy(), _numeric_complex_grad(name, x, og, kw), rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("name", ["irfft", "hfft", "ihfft", "irfftn"])
def test_transforms_without_a_gradient_raise_naming_the_op(name):
    x = la.asarray(np.ones((4, 4), np.float64) if name == "ihfft" else np.ones((4, 4), np.complex128))
    x.attach_grad()
    with la.autograd.record():
        y = getattr(la.fft, name)(x)
    with pytest.raises(la.LazyArrayError, match=name):
        y.backward(out_grad=la.ones_like(y))


# -- deferred == eager == CachedOp, la.sym and JSON ----------------------------------------------------------------
def _pipeline(fft):
    def f(x):
        spec = fft.rfftn(x, s=(4, 6), axes=(0, 1), norm="ortho")
        spec = fft.fftshift(spec, axes=(0,))
        return fft.irfft(fft.ifftshift(spec, axes=(0,)), n=6, axis=-1) + la.real(fft.fftn(x, s=(4, 6), axes=(0, 1)))
    return f


def test_deferred_equals_eager_equals_cached_op():
    data = np.random.default_rng(5).standard_normal((3, 5))
    x = la.asarray(data)
    eager = _pipeline(la.fft)(x)
    with la.deferred():
        lazy = _pipeline(la.fft)(x)
        assert lazy.is_lazy and lazy.static_shape == eager.shape
    cached = la.CachedOp(la.get_symbol(lazy, inputs={"x": x}))
    np.testing.assert_array_equal(lazy.asnumpy(), eager.asnumpy())
    np.testing.assert_array_equal(cached(x).asnumpy(), eager.asnumpy())
    other = np.random.default_rng(7).standard_normal((3, 5))
    np.testing.assert_allclose(cached(la.asarray(other)).asnumpy(), _pipeline(la.fft)(la.asarray(other)).asnumpy(),
                               rtol=1e-12, atol=1e-12)
    want = (np.fft.irfft(np.fft.rfftn(data, s=(4, 6), axes=(0, 1), norm="ortho"), n=6)
            + np.fft.fftn(data, s=(4, 6), axes=(0, 1)).real)
    np.testing.assert_allclose(eager.asnumpy(), want, atol=1e-12)


def test_sym_graph_survives_a_json_round_trip_and_compiles():
    x = la.sym.var("x", shape=(3, 5), dtype="float32")
    spec = la.sym.fft.rfftn(x, s=(4, 6), axes=(0, 1), norm="forward")
    y = la.sym.fft.irfft(la.sym.fft.fftshift(spec, axes=(1,)), n=6)
    assert y.infer_shape()[1] == [(4, 6)]
    assert y.infer_type()[1] == [np.dtype("float32")]
    back = la.Symbol.from_json(y.to_json())
    assert back.to_json() == y.to_json()
    data = np.random.default_rng(6).standard_normal((3, 5)).astype(np.float32)
    want = np.fft.irfft(np.fft.fftshift(np.fft.rfftn(data, s=(4, 6), axes=(0, 1), norm="forward"), axes=1), n=6)
    np.testing.assert_allclose(la.CachedOp(back)(la.array(data)).asnumpy(), want, rtol=1e-4, atol=1e-5)
