"""Devices: identity and printing, the default-device context, transfers, GPU availability."""
from __future__ import annotations

import numpy as np
import pytest

import lazyarray as la

needs_gpu = pytest.mark.skipif(not la.gpu_available(), reason="needs CuPy and a GPU")


def test_cpu_devices_are_equal_by_kind_and_id():
    assert la.cpu(1) == la.cpu(1) and la.cpu(1) is la.cpu(1)
    assert la.cpu() == la.cpu(0) != la.cpu(1)
    assert str(la.cpu(1)) == "cpu(1)" and repr(la.cpu(0)) == "cpu(0)"
    assert la.Device.parse("cpu(3)") is la.cpu(3)


@pytest.mark.parametrize("bad", ["cpu", "tpu(0)", "cpu(x)"])
def test_parse_rejects_bad_text(bad):
    with pytest.raises(la.DeviceError, match="cannot parse device"):
        la.Device.parse(bad)


def test_negative_device_id_is_rejected():
    with pytest.raises(la.DeviceError, match="non-negative"):
        la.cpu(-1)


def test_default_device_context_manager_nests():
    assert la.current_device() == la.cpu(0)
    with la.cpu(1):
        assert la.current_device() == la.cpu(1)
        assert la.zeros(2).device == la.cpu(1)
        assert la.array([1.0]).device == la.cpu(1)
        with la.cpu(2):
            assert la.ones(3).device == la.cpu(2)
        assert (la.ones(2) + 1).device == la.cpu(1)
    assert la.current_device() == la.cpu(0)
    assert la.zeros(2).device == la.cpu(0)


def test_transfer_is_a_real_copy():
    x = la.array(np.arange(4.0, dtype=np.float32))
    y = x.to(la.cpu(1))
    assert y.device == la.cpu(1) and x.device == la.cpu(0)
    assert not np.shares_memory(x._value, y._value)
    np.testing.assert_array_equal(y.asnumpy(), x.asnumpy())
    x += 1  # the source changes, the copy does not
    np.testing.assert_array_equal(y.asnumpy(), np.arange(4.0))
    assert x.to(la.cpu(0)) is x
    z = y * 2  # ops follow their inputs' device
    assert z.device == la.cpu(1)


def test_transfer_inside_deferred_compute_is_a_recorded_copy():
    x = la.ones((2, 3))
    with la.deferred():
        y = x.to(la.cpu(1)) * 2
    assert y.is_lazy and y.device == la.cpu(1)
    np.testing.assert_array_equal(y.asnumpy(), np.full((2, 3), 2.0))


def test_transfer_gradient_comes_back_to_the_source_device():
    x = la.array([1.0, 2.0])
    x.attach_grad()
    with la.autograd.record():
        y = (x.to(la.cpu(1)) * 3).sum()
    y.backward()
    assert x.grad.device == la.cpu(0)
    np.testing.assert_array_equal(x.grad.asnumpy(), [3.0, 3.0])


def test_mixing_devices_in_an_op_is_an_error_with_the_fix():
    with pytest.raises(la.DeviceError, match=r"add: inputs live on different devices.*\.to\(cpu\(0\)\)"):
        la.ones(2) + la.ones(2, device=la.cpu(1))


@pytest.mark.skipif(la.gpu_available(), reason="a GPU is available here")
def test_gpu_without_cupy_or_device_raises_device_error():
    assert not la.gpu_available()
    with pytest.raises(la.DeviceError, match="gpu") as info:
        la.gpu()
    assert "la.cpu()" in str(info.value) and isinstance(info.value, la.LazyArrayError)


@needs_gpu
def test_gpu_round_trip():
    x = la.array(np.arange(6.0).reshape(2, 3))
    g = x.to(la.gpu(0))
    assert g.device == la.gpu(0) and str(g.device) == "gpu(0)"
    np.testing.assert_array_equal((g * 2).asnumpy(), x.asnumpy() * 2)
    np.testing.assert_array_equal(g.to(la.cpu(0)).asnumpy(), x.asnumpy())


@needs_gpu
def test_gpu_ops_match_cpu():
    x = np.random.default_rng(0).standard_normal((4, 5)).astype(np.float32)
    c, g = la.array(x), la.array(x, device=la.gpu(0))
    for f in (lambda a: la.exp(a).sum(axis=1), lambda a: la.nn.softmax(a), lambda a: a @ a.T):
        np.testing.assert_allclose(f(g).asnumpy(), f(c).asnumpy(), rtol=1e-5, atol=1e-6)
