"""Blocks: child registration, hierarchical parameter names, save / load, Sequential."""
from __future__ import annotations

import json
import os
import struct

import numpy as np
import pytest
from safetensors.numpy import load_file

import lazyarray as la
from lazyarray import blocks as B


class Encoder(B.HybridBlock):
    def __init__(self):
        super().__init__()
        self.fc1 = B.Dense(8, activation="relu")
        self.fc2 = B.Dense(4)

    def forward(self, x):
        return self.fc2(self.fc1(x))


class Model(B.HybridBlock):
    def __init__(self):
        super().__init__()
        self.encoder = Encoder()
        self.head = B.HybridSequential()
        self.head.add(B.Dense(3), B.BatchNorm())
        self.scale = B.Parameter(shape=(1,), init=la.init.One())

    def forward(self, x):
        return self.head(self.encoder(x)) * self.scale.data()


def test_collect_params_names_follow_attribute_paths():
    names = list(Model().collect_params())
    assert names == ["scale", "encoder.fc1.weight", "encoder.fc1.bias", "encoder.fc2.weight", "encoder.fc2.bias",
                     "head.0.weight", "head.0.bias", "head.1.gamma", "head.1.beta", "head.1.running_mean",
                     "head.1.running_var"]
    assert list(Model().collect_params()) == names  # stable across instances


def test_collect_params_select():
    assert list(Model().collect_params(".*running")) == ["head.1.running_mean", "head.1.running_var"]


def test_shared_parameter_is_listed_once():
    net = B.Sequential()
    a = B.Dense(3, in_units=3)
    b = B.Dense(3, in_units=3)
    b.weight = a.weight
    net.add(a, b)
    assert list(net.collect_params()) == ["0.weight", "0.bias", "1.bias"]


def test_reassigning_an_attribute_replaces_the_child():
    net = Encoder()
    net.fc2 = B.Dense(5)
    assert [n for n in net.collect_params()] == ["fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"]
    net.fc2 = None
    assert list(net.collect_params()) == ["fc1.weight", "fc1.bias"]


def test_forgetting_super_init_is_explained():
    class Bad(B.Block):
        def __init__(self):
            self.fc = B.Dense(2)

    with pytest.raises(la.LazyArrayError, match=r"super\(\).__init__\(\)"):
        Bad()


def test_sequential_indexing_and_len():
    net = B.HybridSequential()
    net.add(B.Dense(4), B.Activation("relu"), B.Dense(2))
    assert len(net) == 3 and isinstance(net[1], B.Activation)
    assert len(net[:2]) == 2 and isinstance(net[:2], B.HybridSequential)
    seq = B.Sequential().add(B.Dense(2))
    seq.initialize()
    assert seq(la.ones((3, 5))).shape == (3, 2)


def test_plain_block_with_hybrid_children():
    class Mixed(B.Block):
        def __init__(self):
            super().__init__()
            self.a = B.Dense(3)

        def forward(self, x):
            return self.a(x).asnumpy().sum()  # plain Python is fine in a Block

    net = Mixed()
    net.initialize(init=la.init.One())
    net.hybridize()  # hybridizes the child only
    assert net.a.hybridized
    assert net(la.ones((2, 2))) == pytest.approx(12.0)


def _trained_model(seed=0):
    la.random.seed(seed)
    net = Model()
    net.initialize()
    with la.autograd.record():
        net(la.array(np.random.default_rng(seed).standard_normal((4, 5)).astype(np.float32)))
    return net


def test_save_and_load_parameters(tmp_path):
    net = _trained_model(0)
    path = str(tmp_path / "model.params")
    net.save_parameters(path)
    other = _trained_model(1)
    x = la.ones((2, 5))
    assert not np.allclose(other(x).asnumpy(), net(x).asnumpy())
    other.load_parameters(path)
    np.testing.assert_array_equal(other(x).asnumpy(), net(x).asnumpy())
    assert os.listdir(tmp_path) == ["model.params"]  # written atomically: no temporary left behind


def test_parameter_file_is_safetensors(tmp_path):
    net = _trained_model()
    path = str(tmp_path / "m.params")
    net.save_parameters(path)
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
    meta = json.loads(header["__metadata__"]["lazyarray.params"])
    assert meta == {"version": 1, "grad_null": ["head.1.running_mean", "head.1.running_var"]}
    arrays = load_file(path)
    assert set(arrays) == set(net.collect_params())
    np.testing.assert_array_equal(arrays["head.1.running_mean"], net.head[1].running_mean.data().asnumpy())


def test_load_parameters_names_missing_extra_and_misshaped(tmp_path):
    net = _trained_model()
    path = str(tmp_path / "m.params")
    net.save_parameters(path)

    class Other(B.HybridBlock):
        def __init__(self):
            super().__init__()
            self.encoder = Encoder()
            self.extra = B.Dense(2, in_units=2)

    other = Other()
    other.encoder.fc1 = B.Dense(8, activation="relu", in_units=7)
    with pytest.raises(la.ShapeError) as info:
        other.load_parameters(path)
    msg = str(info.value)
    assert "missing parameters ['extra.weight', 'extra.bias']" in msg
    assert "'head.0.weight'" in msg and "'scale'" in msg  # extra ones are named
    assert "'encoder.fc1.weight' has shape (8, 5) in the file but (8, 7)" in msg
    other.encoder.fc1 = B.Dense(8, activation="relu")
    other.load_parameters(path, allow_missing=True, ignore_extra=True)
    np.testing.assert_array_equal(other.encoder.fc1.weight.data().asnumpy(), net.encoder.fc1.weight.data().asnumpy())


def test_load_parameters_rejects_non_safetensors(tmp_path):
    path = tmp_path / "bad.params"
    path.write_bytes(b"\x80\x04not a safetensors file")
    with pytest.raises(la.GraphFormatError, match="not a safetensors"):
        Model().load_parameters(str(path))
    with pytest.raises(la.GraphFormatError, match="cannot read"):
        Model().load_parameters(str(tmp_path / "missing.params"))


def test_zero_grad_clears_every_gradient():
    net = _trained_model()
    # (rows that differ: with equal rows the batch norm's gradient sums to zero over the batch, so every
    # gradient before it is zero in exact arithmetic and only rounding made it otherwise)
    x = la.array(np.random.default_rng(1).standard_normal((2, 5)).astype(np.float32))
    with la.autograd.record():
        y = (net(x) * la.array(np.arange(6.0).reshape(2, 3))).sum()
    y.backward()
    assert np.abs(net.encoder.fc1.weight.grad().asnumpy()).sum() > 0
    net.zero_grad()
    assert np.abs(net.encoder.fc1.weight.grad().asnumpy()).sum() == 0


def test_repr_shows_the_tree():
    text = repr(Model())
    assert "(encoder): Encoder(" in text and "(fc1): Dense(None -> 8, relu)" in text and "BatchNorm" in text
