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


# -- hybridized blocks return nested tuples / lists / dicts ----------------------------------------
class Nested(B.HybridBlock):
    """Returns ``(a, [b, (c, d)], {"logits": e, "aux": (f,)})``, one input used twice as an output."""

    def __init__(self):
        super().__init__()
        self.fc = B.Dense(3, in_units=4)

    def forward(self, x):
        h = self.fc(x)
        return (la.relu(h), [h * 2, (la.tanh(h), x)], {"logits": h + 1, "aux": (h.sum(axis=1),)})


def _flat(out):
    if isinstance(out, dict):
        return [v for k in out for v in _flat(out[k])]
    if isinstance(out, (tuple, list)):
        return [v for o in out for v in _flat(o)]
    return [out]


def _same_structure(a, b):
    assert type(a) is type(b)
    if isinstance(a, dict):
        assert list(a) == list(b)
        for k in a:
            _same_structure(a[k], b[k])
    elif isinstance(a, (tuple, list)):
        assert len(a) == len(b)
        for u, v in zip(a, b):
            _same_structure(u, v)


def test_nested_outputs_equal_eager_with_the_same_structure():
    net = Nested()
    net.initialize()
    x = la.array(np.random.default_rng(0).standard_normal((2, 4)).astype("float32"))
    eager = net(x)
    net.hybridize()
    for _ in range(2):  # the trace, then the compiled graph
        out = net(x)
        _same_structure(out, eager)
        for a, b in zip(_flat(out), _flat(eager)):
            np.testing.assert_allclose(a.asnumpy(), b.asnumpy(), rtol=1e-6)
    assert net.trace_count == 1
    out = net(la.ones((5, 4)))  # another batch: the same graph, the same structure
    assert out[2]["aux"][0].shape == (5,) and out[1][1][1].shape == (5, 4)


def test_gradients_flow_through_nested_outputs():
    grads = []
    for hybrid in (False, True):
        net = Nested()
        net.initialize(la.init.One())
        if hybrid:
            net.hybridize()
        x = la.array(np.linspace(-1, 1, 8, dtype="float32").reshape(2, 4))
        x.attach_grad()
        with la.autograd.record():
            out = net(x)
            loss = out[1][1][0].sum() + (out[2]["logits"] * out[2]["aux"][0].reshape((2, 1))).sum() \
                + out[1][1][1].sum()
        loss.backward()
        grads.append((net.fc.weight.grad().asnumpy(), x.grad.asnumpy()))
    np.testing.assert_allclose(grads[1][0], grads[0][0], rtol=1e-5)
    np.testing.assert_allclose(grads[1][1], grads[0][1], rtol=1e-5)
    assert np.abs(grads[1][0]).sum() > 0


def test_nested_outputs_export_and_import_with_names_by_path(tmp_path):
    net = Nested()
    net.initialize()
    net.hybridize()
    x = la.array(np.random.default_rng(1).standard_normal((2, 4)).astype("float32"))
    flat = [o.asnumpy() for o in _flat(net(x))]
    names = ["out_0", "out_1_0", "out_1_1_0", "out_1_1_1", "out_2_logits", "out_2_aux_0"]
    sym_file, param_file = net.export(str(tmp_path / "m"))
    sym = la.load_symbol(sym_file)
    assert sym.list_outputs() == [f"{n}_output" for n in names]
    back = B.SymbolBlock.imports(sym_file, ["data"], param_file)
    for a, b in zip(back(x), flat):
        np.testing.assert_allclose(a.asnumpy(), b, rtol=1e-6)
    onnx = pytest.importorskip("onnx")
    path = net.export_onnx(str(tmp_path / "m.onnx"), input_shapes=(2, 4))
    assert [o.name for o in onnx.load(path).graph.output] == [f"{n}_output" for n in names]
    back = B.SymbolBlock.imports(path, ["data"])
    for a, b in zip(back(x), flat):
        np.testing.assert_allclose(a.asnumpy(), b, rtol=1e-5)


def test_a_top_level_dict_exports_its_keys(tmp_path):
    class Heads(B.HybridBlock):
        def forward(self, x):
            return {"logits": x * 2, "probs": la.nn.softmax(x)}

    net = Heads()
    net.hybridize()
    x = la.array([[1.0, 2.0]])
    out = net(x)
    assert list(out) == ["logits", "probs"]
    np.testing.assert_allclose(out["probs"].asnumpy(), la.nn.softmax(x).asnumpy(), rtol=1e-6)
    sym_file, _ = net.export(str(tmp_path / "h"))
    assert la.load_symbol(sym_file).list_outputs() == ["logits_output", "probs_output"]


def test_a_bad_leaf_is_named_by_its_path():
    class Bad(B.HybridBlock):
        def __init__(self, leaf):
            super().__init__()
            self.leaf = leaf

        def forward(self, x):
            return (x, {"aux": [x * 2, self.leaf]})

    for leaf, what in ((1.5, "a float"), (None, "None")):
        net = Bad(leaf)
        net.hybridize()
        with pytest.raises(la.OutputStructureError, match=r"Bad.forward .* output\[1\]\['aux'\]\[1\] is " + what):
            net(la.ones((2,)))
    assert issubclass(la.OutputStructureError, TypeError)
