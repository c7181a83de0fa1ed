"""Registry-driven checks of the elementwise ops: NumPy values and dtypes, deferred recording,
finite-difference gradients."""
from __future__ import annotations

import numpy as np
import pytest

import lazyarray as la

from .checks import family_tests

FAMILY = ("elementwise",)


test_forward_matches_numpy, test_deferred_matches_eager, test_gradient_matches_finite_differences = \
    family_tests(FAMILY)


# -- tailored checks ------------------------------------------------------------------------

def test_heaviside_gradient_flows_to_y_where_x_is_zero_and_never_to_x():
    x = la.array(np.array([-1.0, 0.0, 2.0, 0.0]))
    y = la.array(np.array([0.3, 0.7, 0.1, 0.2]))
    x.attach_grad()
    y.attach_grad()
    with la.autograd.record():
        z = la.heaviside(x, y)
    og = np.array([1.0, 2.0, 3.0, 4.0])
    z.backward(la.array(og))
    np.testing.assert_array_equal(z.asnumpy(), np.heaviside(x.asnumpy(), y.asnumpy()))
    np.testing.assert_array_equal(y.grad.asnumpy(), og * (x.asnumpy() == 0))
    np.testing.assert_array_equal(x.grad.asnumpy(), np.zeros(4))


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64"])
@pytest.mark.parametrize("scalar", [2, 2.5, True], ids=["int", "float", "bool"])
@pytest.mark.parametrize("name", ["add", "subtract", "multiply", "divide", "maximum", "less"])
def test_python_scalars_are_weak_like_numpy_2(name, scalar, dtype):
    x = np.arange(1, 7, dtype=dtype).reshape(2, 3)
    fn = getattr(la, name)
    for got, want in ((fn(la.array(x), scalar), getattr(np, name)(x, scalar)),
                      (fn(scalar, la.array(x)), getattr(np, name)(scalar, x))):
        assert got.dtype == want.dtype
        np.testing.assert_allclose(got.asnumpy(), want, rtol=1e-6)
    with la.deferred():
        lazy = fn(la.array(x), scalar)
    assert lazy.dtype == getattr(np, name)(x, scalar).dtype


@pytest.mark.parametrize("name", ["add", "multiply", "power", "maximum", "heaviside", "equal"])
@pytest.mark.parametrize("deferred", [False, True], ids=["eager", "deferred"])
def test_broadcast_mismatch_names_op_shapes_and_fix(name, deferred):
    a, b = la.ones((2, 3)), la.ones((4, 3))
    with la.deferred(deferred), pytest.raises(la.ShapeError) as info:
        getattr(la, name)(a, b)
    msg = str(info.value)
    assert msg.startswith(name + ":") and "[2,3]" in msg and "[4,3]" in msg and "reshape" in msg
    assert isinstance(info.value, ValueError)


@pytest.mark.parametrize("deferred", [False, True], ids=["eager", "deferred"])
def test_mixing_devices_names_op_devices_and_fix(deferred):
    a, b = la.ones((2, 3), device=la.cpu(0)), la.ones((2, 3), device=la.cpu(1))
    with la.deferred(deferred), pytest.raises(la.DeviceError) as info:
        la.multiply(a, b)
    msg = str(info.value)
    assert msg.startswith("multiply:") and "cpu(0)" in msg and "cpu(1)" in msg and ".to(" in msg
    assert "[2,3]" in msg and isinstance(info.value, ValueError)


def test_non_numeric_input_is_a_type_error_naming_the_op():
    with pytest.raises(la.LazyArrayError, match="add: cannot use str") as info:
        la.add(la.ones(2), "x")
    assert isinstance(info.value, TypeError)


def test_quadratic_keeps_csr_storage_when_c_is_zero():
    dense = np.array([[0.0, 1.5, 0.0], [2.0, 0.0, -1.0]], dtype=np.float32)
    x = la.array(dense).tostype("csr")
    y = la.quadratic(x, a=2.0, b=-1.0)
    assert y.stype == "csr"
    np.testing.assert_allclose(y.asnumpy(), 2 * dense ** 2 - dense)
    with la.deferred():
        z = la.quadratic(x, a=2.0, b=-1.0)
    assert z.stype == "csr"
    np.testing.assert_allclose(z.asnumpy(), 2 * dense ** 2 - dense)
    assert la.quadratic(x.tostype("default"), a=1.0, c=1.0).stype == "default"


def test_smooth_l1_matches_mxnet_at_its_turning_point():
    # MXNet: 0.5*(s*x)**2 if |x| < 1/s**2 else |x| - 0.5/s**2; both pieces meet at |x| = 1/s**2.
    s = 2.0
    x = np.array([-0.25, -0.2, 0.0, 0.2, 0.25, 1.0])
    got = la.smooth_l1(la.array(x), scalar=s).asnumpy()
    want = np.where(np.abs(x) < 1 / s ** 2, 0.5 * (s * x) ** 2, np.abs(x) - 0.5 / s ** 2)
    np.testing.assert_allclose(got, want)
