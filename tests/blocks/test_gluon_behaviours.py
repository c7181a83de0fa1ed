"""Gluon behaviours of blocks (issue #14): children in lists and dicts, hooks, apply, summary, cast,
share_parameters, save/load(prefix), Constant, Concatenate, None arguments of hybridized blocks,
collect_params(select), multi-head autograd.backward. References are NumPy computations here."""
from __future__ import annotations

import os

import numpy as np
import pytest

import lazyarray as la
from lazyarray import blocks as B

rng = np.random.default_rng(0)


def _x(*shape):
    return la.array(rng.standard_normal(shape).astype(np.float32))


def _dense_ref(block, x):
    return x @ block.weight.data().asnumpy().T + block.bias.data().asnumpy()


class Towers(B.HybridBlock):
    def __init__(self):
        super().__init__()
        self.layers = [B.Dense(4, in_units=3), B.Dense(2, in_units=4)]
        self.heads = {"a": B.Dense(1, in_units=2), "b": B.Dense(3, in_units=2)}

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return la.concatenate([self.heads["a"](x), self.heads["b"](x)], axis=1)


def test_children_in_lists_and_dicts_are_registered_hybridized_and_exported(tmp_path):
    la.random.seed(0)
    net = Towers()
    assert list(net.collect_params()) == [
        "layers.0.weight", "layers.0.bias", "layers.1.weight", "layers.1.bias",
        "heads.a.weight", "heads.a.bias", "heads.b.weight", "heads.b.bias"]
    net.initialize()
    x = _x(5, 3)
    h = _dense_ref(net.layers[1], _dense_ref(net.layers[0], x.asnumpy()))
    ref = np.concatenate([_dense_ref(net.heads["a"], h), _dense_ref(net.heads["b"], h)], axis=1)
    np.testing.assert_allclose(net(x).asnumpy(), ref, rtol=1e-5, atol=1e-6)
    net.hybridize()
    np.testing.assert_allclose(net(x).asnumpy(), ref, rtol=1e-5, atol=1e-6)
    assert all(layer._active for layer in net.layers)  # hybridize() reached the children in the list
    sym_file, param_file = net.export(str(tmp_path / "towers"))
    again = B.SymbolBlock.imports(sym_file, ["data"], param_file)
    np.testing.assert_allclose(again(x).asnumpy(), ref, rtol=1e-5, atol=1e-6)
    # a trainer over collect_params() trains the blocks in the containers
    trainer = B.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1})
    with la.autograd.record():
        loss = net(x).sum()
    loss.backward()
    before = net.heads["b"].weight.data().asnumpy().copy()
    trainer.step(1)
    assert not np.array_equal(before, net.heads["b"].weight.data().asnumpy())


def test_containers_filled_after_assignment_and_replaced():
    class Grow(B.Block):
        def __init__(self):
            super().__init__()
            self.blocks = []
            for units in (2, 3):
                self.blocks.append(B.Dense(units))

    net = Grow()
    assert list(net.collect_params()) == ["blocks.0.weight", "blocks.0.bias", "blocks.1.weight", "blocks.1.bias"]
    net.blocks = (B.Dense(5),)
    assert list(net.collect_params()) == ["blocks.0.weight", "blocks.0.bias"]
    net.blocks = None
    assert list(net.collect_params()) == []
    assert "blocks.0" not in dict(net.children())


def test_collect_params_select_is_a_regex_matched_from_the_start():
    net = Towers()
    assert list(net.collect_params(".*weight|.*bias")) == list(net.collect_params())
    assert list(net.collect_params("heads.*bias")) == ["heads.a.bias", "heads.b.bias"]
    assert list(net.collect_params("bias")) == []  # re.match, as Gluon
    with pytest.raises(la.LazyArrayError, match="regular expression"):
        net.collect_params("(")


def test_forward_hooks_and_detach():
    net = B.HybridSequential()
    net.add(B.Dense(3, in_units=2), B.Dense(1, in_units=3))
    net.initialize()
    calls = []
    h_pre = net[0].register_forward_pre_hook(lambda b, args: (args[0] * 2,))  # replaces the input
    h_post = net[1].register_forward_hook(lambda b, args, out: calls.append(out.shape))
    x = _x(4, 2)
    ref = _dense_ref(net[1], _dense_ref(net[0], 2 * x.asnumpy()))
    np.testing.assert_allclose(net(x).asnumpy(), ref, rtol=1e-5, atol=1e-6)
    assert calls == [(4, 1)]
    h_pre.detach()
    h_post.detach()
    np.testing.assert_allclose(net(x).asnumpy(), _dense_ref(net[1], _dense_ref(net[0], x.asnumpy())),
                               rtol=1e-5, atol=1e-6)
    assert calls == [(4, 1)]
    # on a hybridized block the block's own hooks run at every call
    net.hybridize()
    with net.register_forward_hook(lambda b, args, out: out + 1):
        np.testing.assert_allclose(net(x).asnumpy(), net[1](net[0](x)).asnumpy() + 1, rtol=1e-5)
        np.testing.assert_allclose(net(x).asnumpy(), net[1](net[0](x)).asnumpy() + 1, rtol=1e-5)
    assert not net._forward_hooks


def test_apply_visits_children_first():
    net = Towers()
    seen = []
    assert net.apply(lambda b: seen.append(b)) is net
    assert seen == [*net.layers, net.heads["a"], net.heads["b"], net]


def test_summary_prints_shapes_and_counts(capsys):
    net = B.HybridSequential()
    net.add(B.Dense(4), B.BatchNorm(), B.Dense(2))
    net.initialize()
    net.hybridize()
    net.summary(_x(1, 3))
    text = capsys.readouterr().out
    rows = {line.split()[0]: line.split() for line in text.splitlines() if line.strip()[:2] in ("0 ", "1 ", "2 ")}
    assert rows["0"][-1] == str(3 * 4 + 4) and rows["0"][-3:-1] == ["(1,", "4)"]
    assert rows["1"][-1] == str(4 * 4)
    assert rows["2"][-1] == str(4 * 2 + 2)
    total = sum(int(np.prod(p.shape)) for p in net.collect_params().values())
    frozen = sum(int(np.prod(p.shape)) for p in net.collect_params().values() if p.grad_req == "null")
    assert f"Total params: {total}" in text
    assert f"Trainable params: {total - frozen}" in text and f"Non-trainable params: {frozen}" in text
    assert net._active and net.trace_count == 0  # ran imperatively, still hybridized
    assert not net[0]._forward_hooks


def test_cast_to_float16():
    la.random.seed(0)
    net = B.HybridSequential()
    net.add(B.Dense(4, in_units=3, activation="relu"), B.Dense(2, in_units=4))
    net.initialize()
    x = _x(5, 3)
    ref = net(x).asnumpy()
    with la.autograd.record():
        net(x).sum().backward()
    net.cast("float16")
    for p in net.collect_params().values():
        assert p.data().dtype == np.float16 and p.grad().dtype == np.float16
    x16 = x.astype("float16")
    out = net(x16)
    assert out.dtype == np.float16
    np.testing.assert_allclose(out.asnumpy(), ref, rtol=2e-2, atol=2e-2)
    net.hybridize()
    np.testing.assert_allclose(net(x16).asnumpy(), out.asnumpy(), rtol=1e-3)
    net.cast("float32")
    np.testing.assert_allclose(net(x).asnumpy(), ref, rtol=2e-2, atol=2e-2)  # retraced for the new dtype
    assert net(x).dtype == np.float32


def test_share_parameters():
    a, b = Towers(), Towers()
    b.share_parameters(a.collect_params(".*layers"))
    assert b.layers[0].weight is a.layers[0].weight and b.heads["a"].weight is not a.heads["a"].weight
    a.initialize()
    b.initialize()
    x = _x(2, 3)
    np.testing.assert_array_equal(b.layers[1](b.layers[0](x)).asnumpy(), a.layers[1](a.layers[0](x)).asnumpy())
    with pytest.raises(la.LazyArrayError, match="dict"):
        b.share_parameters([1])


def test_save_and_load_by_structure(tmp_path):
    la.random.seed(1)
    net = Towers()
    net.initialize()
    prefix = str(tmp_path / "towers")
    net.save(prefix)
    assert sorted(os.listdir(tmp_path)) == ["towers-model.json", "towers-model.params"]

    class Renamed(B.HybridBlock):  # other attribute names, same tree
        def __init__(self):
            super().__init__()
            self.body = [B.Dense(4, in_units=3), B.Dense(2, in_units=4)]
            self.out = {"x": B.Dense(1, in_units=2), "y": B.Dense(3, in_units=2)}
    Renamed.__name__ = "Towers"
    other = Renamed()
    other.initialize()
    other.load(prefix)
    for p, q in zip(net.collect_params().values(), other.collect_params().values()):
        np.testing.assert_array_equal(p.data().asnumpy(), q.data().asnumpy())
    wrong = B.HybridSequential()
    wrong.add(B.Dense(4, in_units=3))
    with pytest.raises(la.LazyArrayError, match="Towers in the file"):
        wrong.load(prefix)


def test_save_parameters_is_atomic_and_roundtrips(tmp_path):
    net = Towers()
    net.initialize()
    path = str(tmp_path / "p.params")
    net.save_parameters(path)
    net.save_parameters(path)  # over an existing file
    assert os.listdir(tmp_path) == ["p.params"]
    other = Towers()
    other.load_parameters(path)
    for n, p in net.collect_params().items():
        np.testing.assert_array_equal(other.collect_params()[n].data().asnumpy(), p.data().asnumpy())


class Shift(B.HybridBlock):
    def __init__(self):
        super().__init__()
        self.dense = B.Dense(2, in_units=2)
        self.offset = B.Constant(np.array([1.0, -1.0], np.float32))

    def forward(self, x):
        return self.dense(x) + self.offset.data()


def test_constant_is_a_frozen_exported_parameter(tmp_path):
    net = Shift()
    net.initialize()
    assert net.offset.grad_req == "null" and "offset" in net.collect_params()
    x = _x(3, 2)
    ref = _dense_ref(net.dense, x.asnumpy()) + np.array([1.0, -1.0])
    np.testing.assert_allclose(net(x).asnumpy(), ref, rtol=1e-5, atol=1e-6)
    trainer = B.Trainer(net.collect_params(), "sgd", {"learning_rate": 1.0})
    with la.autograd.record():
        net(x).sum().backward()
    trainer.step(1)
    np.testing.assert_array_equal(net.offset.data().asnumpy(), [1.0, -1.0])
    net.hybridize()
    net(x)
    sym_file, param_file = net.export(str(tmp_path / "shift"))
    again = B.SymbolBlock.imports(sym_file, ["data"], param_file)
    np.testing.assert_allclose(again(x).asnumpy(), net(x).asnumpy(), rtol=1e-6)
    assert again.collect_params()["offset"].grad_req == "null"
    with pytest.raises(ValueError, match="Constant"):
        net.offset.grad_req = "write"


@pytest.mark.parametrize("cls", [B.Concatenate, B.HybridConcatenate])
def test_concatenate(cls):
    net = cls(axis=1)
    net.add(B.Dense(2, in_units=3), B.Dense(3, in_units=3), B.Activation("relu"))
    net.initialize()
    x = _x(4, 3)
    ref = np.concatenate([_dense_ref(net[0], x.asnumpy()), _dense_ref(net[1], x.asnumpy()),
                          np.maximum(x.asnumpy(), 0)], axis=1)
    np.testing.assert_allclose(net(x).asnumpy(), ref, rtol=1e-5, atol=1e-6)
    net.hybridize()
    np.testing.assert_allclose(net(x).asnumpy(), ref, rtol=1e-5, atol=1e-6)
    with pytest.raises(la.LazyArrayError, match="no children"):
        cls()(x)


class Masked(B.HybridBlock):
    def __init__(self):
        super().__init__()
        self.dense = B.Dense(2, in_units=3)

    def forward(self, x, mask=None):
        y = self.dense(x)
        return y if mask is None else y * mask


def test_none_arguments_of_hybridized_blocks():
    net = Masked()
    net.initialize()
    net.hybridize()
    x, m = _x(4, 3), la.array((rng.random((4, 2)) > 0.5).astype(np.float32))
    ref = _dense_ref(net.dense, x.asnumpy())
    np.testing.assert_allclose(net(x, None).asnumpy(), ref, rtol=1e-5, atol=1e-6)
    assert net.trace_count == 1
    np.testing.assert_allclose(net(x, m).asnumpy(), ref * m.asnumpy(), rtol=1e-5, atol=1e-6)
    assert net.trace_count == 2  # another trace for an array in that place
    np.testing.assert_allclose(net(_x(6, 3), None).shape, (6, 2))
    np.testing.assert_allclose(net(x, None).asnumpy(), ref, rtol=1e-5, atol=1e-6)
    assert net.trace_count == 2  # the None trace serves the None calls (new shapes too)
    assert net.inference_symbol().symbol.list_inputs()[0] == "data"  # one array: named "data"
    with pytest.raises(la.LazyArrayError, match="arrays \\(or None\\)"):
        net(x, 3)


def test_autograd_backward_of_several_heads():
    xv = rng.standard_normal(4).astype(np.float32)
    x = la.array(xv)
    x.attach_grad()
    g1, g2 = rng.standard_normal(4).astype(np.float32), np.float32(0.5)
    with la.autograd.record():
        y1 = x * x
        y2 = (la.sin(x)).sum()
    la.autograd.backward([y1, y2], head_grads=[la.array(g1), g2])
    np.testing.assert_allclose(x.grad.asnumpy(), 2 * xv * g1 + g2 * np.cos(xv), rtol=1e-5)
    with la.autograd.record():
        y1, y2 = x * 2, x * 3
    la.autograd.backward([y1, y2])
    np.testing.assert_allclose(x.grad.asnumpy(), np.full(4, 5.0), rtol=1e-6)
    with pytest.raises(la.LazyArrayError, match="2 heads but 1"):
        la.autograd.backward([y1, y2], head_grads=[None])
    with pytest.raises(la.LazyArrayError, match="heads\\[0\\]"):
        la.autograd.backward([la.ones(2)])


@pytest.mark.parametrize("hybridize", [False, True])
def test_parameters_on_several_devices_train_like_one(hybridize):
    """Data parallel on cpu(0) and cpu(1): per-device copies, gradients summed, every copy updated;
    the result equals one device training on the whole batch."""
    devices = [la.cpu(0), la.cpu(1)]
    la.random.seed(0)
    net = B.HybridSequential()
    net.add(B.Dense(3, in_units=4, activation="tanh"), B.Dense(2, in_units=3))
    net.initialize(device=devices)
    single = B.HybridSequential()
    single.add(B.Dense(3, in_units=4, activation="tanh"), B.Dense(2, in_units=3))
    single.initialize()
    for p, q in zip(net.collect_params().values(), single.collect_params().values()):
        q.set_data(p.data())
        assert [str(d) for d in p.list_device()] == ["cpu(0)", "cpu(1)"]
        assert [a.device for a in p.list_data()] == devices
        np.testing.assert_array_equal(p.data(la.cpu(1)).asnumpy(), p.data(la.cpu(0)).asnumpy())
    if hybridize:
        net.hybridize()
        single.hybridize()
    trainer = B.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1, "momentum": 0.5})
    ref_trainer = B.Trainer(single.collect_params(), "sgd", {"learning_rate": 0.1, "momentum": 0.5})
    for step in range(3):
        x, y = _x(6, 4), _x(6, 2)
        with la.autograd.record():
            losses = [B.L2Loss()(net(xs), ys) for xs, ys in
                      zip(B.split_and_load(x, devices), B.split_and_load(y, devices))]
        for loss in losses:
            loss.backward()
        assert [g.device for g in net[0].weight.list_grad()] == devices
        trainer.step(6)
        with la.autograd.record():
            B.L2Loss()(single(x), y).backward()
        ref_trainer.step(6)
    for p, q in zip(net.collect_params().values(), single.collect_params().values()):
        for copy in p.list_data():
            np.testing.assert_allclose(copy.asnumpy(), q.data().asnumpy(), rtol=1e-5, atol=1e-6)
    with pytest.raises(la.LazyArrayError, match="not on cpu\\(2\\)"):
        net[0].weight.data(la.cpu(2))


def test_summary_needs_inputs():
    with pytest.raises(la.LazyArrayError, match="summary needs example inputs"):
        B.Dense(2).summary()
