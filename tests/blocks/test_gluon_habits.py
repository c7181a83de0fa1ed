"""Gluon habits that must work (issue #37, item 7): ``collect_params()`` as a ``ParameterDict``,
a second ``initialize()`` warns (``force_reinit=True`` re-initializes), hybridized blocks returning
nested tuples / lists / dicts."""
from __future__ import annotations

import os
import warnings

import numpy as np
import pytest

import lazyarray as la
from lazyarray import blocks as B


def _mlp():
    net = B.HybridSequential()
    net.add(B.Dense(4, in_units=3, activation="relu"), B.Dense(2, in_units=4))
    net.initialize()
    return net


def _loss_and_backward(net, x):
    with la.autograd.record():
        loss = net(x).sum()
    loss.backward()


# -- collect_params() is a ParameterDict ----------------------------------------------------------
def test_collect_params_is_a_dict_compatible_parameter_dict():
    net = _mlp()
    params = net.collect_params()
    assert isinstance(params, B.ParameterDict) and isinstance(params, dict)
    names = ["0.weight", "0.bias", "1.weight", "1.bias"]
    assert list(params) == names and list(params.keys()) == names and len(params) == 4
    assert "0.weight" in params and params["0.weight"] is net[0].weight
    assert params == {n: p for n, p in params.items()}
    assert all(isinstance(p, B.Parameter) for p in params.values())
    selected = net.collect_params(".*weight")
    assert isinstance(selected, B.ParameterDict) and list(selected) == ["0.weight", "1.weight"]
    assert "0.weight" in repr(params)


def test_setattr_sets_every_parameter():
    net = _mlp()
    net.collect_params().setattr("grad_req", "null")
    assert {p.grad_req for p in net.collect_params().values()} == {"null"}
    net.collect_params(".*bias").setattr("lr_mult", 0.5)
    assert [p.lr_mult for p in net.collect_params().values()] == [1.0, 0.5, 1.0, 0.5]
    with pytest.raises(la.ParamError, match="no attribute 'grad_reg'"):
        net.collect_params().setattr("grad_reg", "null")


def test_zero_grad_zeroes_every_gradient():
    net = _mlp()
    net.collect_params().setattr("grad_req", "add")
    _loss_and_backward(net, la.ones((2, 3)))
    assert np.abs(net[1].bias.grad().asnumpy()).sum() > 0
    net.collect_params().zero_grad()
    for p in net.collect_params().values():
        assert not p.grad().asnumpy().any()


def test_reset_device_moves_values_and_gradients():
    net = _mlp()
    x = la.ones((2, 3))
    _loss_and_backward(net, x)
    before = {n: (p.data().asnumpy(), p.grad().asnumpy()) for n, p in net.collect_params().items()}
    net.collect_params().reset_device(la.cpu(1))
    for n, p in net.collect_params().items():
        assert p.data().device == la.cpu(1) and p.grad().device == la.cpu(1)
        np.testing.assert_array_equal(p.data().asnumpy(), before[n][0])
        np.testing.assert_array_equal(p.grad().asnumpy(), before[n][1])
    out = net(x.to(la.cpu(1)))  # runs on the new device, and trains there
    assert out.device == la.cpu(1)
    _loss_and_backward(net, x.to(la.cpu(1)))
    np.testing.assert_allclose(net[1].bias.grad().asnumpy(), before["1.bias"][1], rtol=1e-6)


def test_parameter_reset_device_before_its_shape_is_known():
    net = B.Dense(2)
    net.initialize()
    net.weight.reset_device(la.cpu(1))
    net.bias.reset_device(la.cpu(1))
    assert net(la.ones((1, 3), device=la.cpu(1))).device == la.cpu(1)
    assert net.weight.data().device == la.cpu(1)
    with pytest.raises(la.ParamError, match="reset_device takes a device"):
        net.weight.reset_device("cpu(1)")


def test_parameter_dict_initialize_and_save_load_round_trip(tmp_path):
    net = _mlp()
    path = os.path.join(tmp_path, "p.params")
    net.collect_params().save(path)
    other = B.HybridSequential()
    other.add(B.Dense(4, in_units=3, activation="relu"), B.Dense(2, in_units=4))
    params = other.collect_params()
    params.initialize(la.init.Zero())
    assert not params["0.weight"].data().asnumpy().any()
    params.load(path)
    x = la.array(np.arange(6, dtype="float32").reshape(2, 3))
    np.testing.assert_array_equal(other(x).asnumpy(), net(x).asnumpy())
    other.load_parameters(path)  # the same file format as Block.save_parameters
    net.save_parameters(path)
    params.load(path)
    with pytest.raises(la.ShapeError, match="unexpected parameters"):
        other.collect_params(".*weight").load(path)
    other.collect_params(".*weight").load(path, ignore_extra=True)


# -- a second initialize() warns ------------------------------------------------------------------
def test_second_initialize_warns_and_keeps_the_values():
    net = _mlp()
    w = net[0].weight.data().asnumpy().copy()
    with pytest.warns(B.ReinitializeWarning, match=r"Parameter '0.weight' is already initialized, ignoring; "
                                                   r"pass force_reinit=True to re-initialize") as rec:
        net.initialize(la.init.One())
    assert issubclass(B.ReinitializeWarning, UserWarning)
    assert rec[0].filename == __file__  # points at the user's line
    np.testing.assert_array_equal(net[0].weight.data().asnumpy(), w)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        net.initialize(la.init.One(), force_reinit=True)
    assert (net[0].weight.data().asnumpy() == 1).all()
    with pytest.warns(B.ReinitializeWarning, match="'1.bias'"):
        net.collect_params().initialize()
