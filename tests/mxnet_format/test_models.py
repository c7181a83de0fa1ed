"""Real MXNet 1.9.1 exports (Gluon model zoo ResNet-18 v1 and MobileNet 0.25, an MLP, an
Embedding text classifier) load without MXNet and give MXNet's outputs; written back in MXNet
format, they load again with the same outputs."""
import json

import numpy as np
import pytest

import lazyarray as la

from .mxnet_fixtures import MODEL_NAMES, model_files, model_io


@pytest.mark.parametrize("name", MODEL_NAMES)
@pytest.mark.parametrize("hybridize", [False, True])
def test_model_equals_mxnet(name, hybridize):
    x, want = model_io(name)
    net = la.blocks.SymbolBlock.imports(*model_files(name)[:1], ["data"], model_files(name)[1])
    if hybridize:
        net.hybridize()
    got = net(la.array(x)).asnumpy()
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("name", MODEL_NAMES)
def test_model_batch_sizes(name):
    """One loaded graph serves any batch size: each row equals the batch-of-two result."""
    x, want = model_io(name)
    net = la.blocks.SymbolBlock.imports(model_files(name)[0], ["data"], model_files(name)[1])
    net.hybridize()
    for batch in (1, 5):
        xb = np.resize(x, (batch,) + x.shape[1:])
        got = net(la.array(xb)).asnumpy()
        np.testing.assert_allclose(got, np.resize(want, (batch,) + want.shape[1:]), rtol=1e-4, atol=1e-5)


def test_load_returns_symbol_and_params():
    sym, params = la.mxnet.load(*model_files("resnet18_v1"))
    assert sym.list_inputs()[0] == "data"
    assert set(params) == set(sym.list_inputs()) - {"data"}
    assert all(isinstance(v, la.NDArray) for v in params.values())
    assert params["resnetv10_conv0_weight"].shape == (8, 3, 7, 7)
    assert {"resnetv10_batchnorm0_running_mean", "resnetv10_batchnorm0_running_var"} <= set(params)


@pytest.mark.parametrize("name", MODEL_NAMES)
def test_model_round_trip_through_mxnet_format(name, tmp_path):
    x, want = model_io(name)
    net = la.blocks.SymbolBlock.imports(model_files(name)[0], ["data"], model_files(name)[1])
    files = la.mxnet.export(net, str(tmp_path / name))
    back = la.blocks.SymbolBlock.imports(files[0], ["data"], files[1])
    np.testing.assert_allclose(back(la.array(x)).asnumpy(), want, rtol=1e-4, atol=1e-5)
    # and again: a second export of the re-imported model writes the same parameters
    files2 = la.mxnet.export(back, str(tmp_path / (name + "2")))
    assert open(files2[1], "rb").read() == open(files[1], "rb").read()
    a = la.mxnet.load_params(files[1])
    assert a[1] == la.mxnet.load_params(model_files(name)[1])[1]  # aux: states stay aux:


def test_model_converts_to_our_format(tmp_path):
    """An MXNet model re-exported in lazyarray's own format loads with no MXNet code path."""
    x, want = model_io("mobilenet0.25")
    net = la.blocks.SymbolBlock.imports(model_files("mobilenet0.25")[0], ["data"], model_files("mobilenet0.25")[1])
    sym_file, param_file = net.export(str(tmp_path / "m"))
    assert '"format": "lazyarray.symbol"' in open(sym_file).read()
    back = la.blocks.SymbolBlock.imports(sym_file, ["data"], param_file)
    np.testing.assert_allclose(back(la.array(x)).asnumpy(), want, rtol=1e-4, atol=1e-5)


def test_fine_tune_a_loaded_model():
    """Loaded parameters are ordinary parameters: a training step changes them and the loss."""
    x, _ = model_io("mlp")
    net = la.blocks.SymbolBlock.imports(model_files("mlp")[0], ["data"], model_files("mlp")[1])
    net.hybridize()
    trainer = la.blocks.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1})
    labels = la.array(np.array([1, 3]))
    loss_fn = la.blocks.SoftmaxCrossEntropyLoss()
    losses = []
    for _ in range(3):
        with la.autograd.record():
            loss = loss_fn(net(la.array(x)), labels).mean()
        loss.backward()
        trainer.step(1)
        losses.append(float(loss.asnumpy()))
    assert losses[-1] < losses[0]


class _Native(la.blocks.HybridBlock):
    def __init__(self):
        super().__init__()
        self.conv = la.blocks.Conv2D(4, 3, padding=1, in_channels=3)
        self.bn = la.blocks.BatchNorm(in_channels=4)
        self.pool = la.blocks.MaxPool2D(2)
        self.drop = la.blocks.Dropout(0.5)
        self.fc = la.blocks.Dense(3, in_units=64)

    def forward(self, x):
        y = self.pool(la.relu(self.bn(self.conv(x))))
        return la.nn.softmax(self.fc(self.drop(y.reshape((y.shape[0], -1)))) * 2.0 + 1.0)


def test_native_block_exports_to_mxnet_and_back(tmp_path):
    net = _Native()
    net.initialize()
    x = la.array(np.random.default_rng(0).standard_normal((2, 3, 8, 8)).astype(np.float32))
    net.hybridize()
    want = net(x).asnumpy()
    files = la.mxnet.export(net, str(tmp_path / "native"))
    text = open(files[0]).read()
    for op in ('"Convolution"', '"BatchNorm"', '"Pooling"', '"FullyConnected"', '"_mul_scalar"', '"softmax"'):
        assert op in text
    arrays, aux = la.mxnet.load_params(files[1])
    assert aux == {n for n in arrays if "running" in n}
    back = la.blocks.SymbolBlock.imports(files[0], ["data"], files[1])
    np.testing.assert_allclose(back(x).asnumpy(), want, rtol=1e-5, atol=1e-6)


def test_export_with_input_shapes_traces_the_block(tmp_path):
    net = la.blocks.Dense(3, in_units=4)
    net.initialize()
    files = la.mxnet.export(net, str(tmp_path / "d"), input_shapes=[(2, 4)])
    sym, params = la.mxnet.load(*files)
    assert sorted(params) == ["bias", "weight"] and sym.list_inputs()[0] == "data"


def test_export_refuses_ops_without_mxnet_counterpart(tmp_path):
    x = la.sym.var("x", shape=(3, 3))
    with pytest.raises(la.GraphError, match=r"no MXNet operator for .*triu.*tril|tril.*triu"):
        la.mxnet.export(la.sym.triu(x) + la.sym.tril(x), str(tmp_path / "t"))
    assert not (tmp_path / "t-symbol.json").exists()


def test_vision_layers_export_to_mxnet_and_back(tmp_path):
    """Grouped / dilated convolution, transposed convolution and ceil-mode pooling are written as
    MXNet's Convolution(num_group, dilate), Deconvolution and Pooling(full) and read back equal."""
    B = la.blocks
    net = B.HybridSequential().add(
        B.Conv2D(8, 3, padding=2, dilation=2, groups=2, in_channels=4),
        B.Conv2D(8, 3, padding=1, groups=8, use_bias=False),
        B.Conv2DTranspose(4, 3, strides=2, padding=1, output_padding=1, groups=2),
        B.AvgPool2D(3, 2, padding=1, ceil_mode=True, count_include_pad=False),
        B.MaxPool2D(3, 2, ceil_mode=True),
        B.AvgPool2D(2))
    net.initialize()
    x = la.array(np.random.default_rng(0).standard_normal((2, 4, 9, 9)).astype(np.float32))
    net.hybridize()
    want = net(x).asnumpy()
    files = la.mxnet.export(net, str(tmp_path / "vision"))
    nodes = json.load(open(files[0]))["nodes"]
    attrs = {n["name"]: n.get("attrs", {}) for n in nodes if n["op"] != "null"}
    assert [n["op"] for n in nodes if n["op"] != "null"] == ["Convolution"] * 2 + ["Deconvolution"] + ["Pooling"] * 3
    conv0, conv1, deconv, avg, mx, avg2 = attrs.values()
    assert (conv0["num_group"], conv0["dilate"], conv1["num_group"]) == ("2", "(2, 2)", "8")
    assert (deconv["adj"], deconv["num_group"], deconv["num_filter"]) == ("(1, 1)", "2", "4")
    assert (avg["pooling_convention"], avg["count_include_pad"], mx["pooling_convention"]) == ("full", "False", "full")
    assert avg2["pooling_convention"] == "valid"
    back = la.blocks.SymbolBlock.imports(files[0], ["data"], files[1])
    np.testing.assert_allclose(back(x).asnumpy(), want, rtol=1e-5, atol=1e-6)
