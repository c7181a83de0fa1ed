"""``la.blocks.models.resnet18``: structure, imperative == hybridized (outputs and gradients),
export -> SymbolBlock.imports, and training runs whose loss falls."""
from __future__ import annotations

import numpy as np
import pytest

import lazyarray as la
from lazyarray.blocks.models import resnet18

threadpoolctl = pytest.importorskip("threadpoolctl")


@pytest.fixture(autouse=True)
def one_blas_thread():
    """ResNet's small matmuls (a few thousand rows, K up to 4608) run 30-100x slower when
    OpenBLAS spreads them over threads of a busy 2-core machine; one thread keeps these fast."""
    with threadpoolctl.threadpool_limits(1, user_api="blas"):
        yield


def _images(n, size, seed=0):
    return np.random.default_rng(seed).standard_normal((n, 3, size, size)).astype(np.float32)


def _forward_backward(net, x, og):
    xa = la.array(x)
    xa.attach_grad()
    with la.autograd.record():
        y = net(xa)
    y.backward(la.array(og))
    grads = {k: p.grad().asnumpy() for k, p in net.collect_params().items() if p.grad_req != "null"}
    stats = {k: p.data().asnumpy() for k, p in net.collect_params().items() if "running" in k}
    return y.asnumpy(), xa.grad.asnumpy(), grads, stats


def test_resnet18_structure():
    net = resnet18(classes=10)
    net.initialize()
    assert net(la.ones((1, 3, 32, 32))).shape == (1, 10)
    params = net.collect_params()
    trainable = sum(p.data().size for p in params.values() if p.grad_req != "null")
    assert trainable == 11173962  # CIFAR ResNet-18 (thumbnail stem with BatchNorm)
    convs = [k for k, p in params.items() if k.endswith("weight") and len(p.shape) == 4]
    assert len(convs) == 1 + 16 + 3  # stem, 8 blocks x 2, three downsampling shortcuts
    assert params["output.weight"].shape == (10, 512)
    assert all(p.shape[0] in (64, 128, 256, 512) for k, p in params.items() if k in convs)


def test_resnet18_imagenet_stem():
    net = resnet18(classes=5, thumbnail=False)
    net.initialize()
    stem = net.features[0]
    assert stem.kernel == (7, 7) and stem.strides == (2, 2) and stem.padding == (3, 3)
    assert isinstance(net.features[3], la.blocks.MaxPool2D)
    assert net(la.ones((1, 3, 64, 64))).shape == (1, 5)  # 64 -> 32 (conv) -> 16 (pool) -> 2 (stages)


def _gluon_names(net) -> list[str]:
    """Gluon ``resnet18_v1``'s parameter names for ours, in our order. Gluon numbers the
    convolutions and BatchNorms of each stage in creation order: a block's body, then its
    downsample shortcut."""
    bn = ("gamma", "beta", "running_mean", "running_var")
    names = ["conv0_weight"] + [f"batchnorm0_{k}" for k in bn]
    for s, stage in enumerate(list(net.features)[4:8], 1):
        count = {"conv": 0, "batchnorm": 0}
        for block in stage:
            shortcut = block.residual.shortcut
            layers = list(block.residual.body) + ([] if isinstance(shortcut, la.blocks.Identity) else list(shortcut))
            for layer in layers:
                kind = {la.blocks.Conv2D: "conv", la.blocks.BatchNorm: "batchnorm"}.get(type(layer))
                if kind is not None:
                    prefix = f"stage{s}_{kind}{count[kind]}_"
                    names += [prefix + "weight"] if kind == "conv" else [prefix + k for k in bn]
                    count[kind] += 1
    return ["resnetv10_" + n for n in names + ["dense0_weight", "dense0_bias"]]


def test_imagenet_variant_equals_gluon_resnet18_v1():
    """With the weights of MXNet Gluon's resnet18_v1 (the fixture is 1/8 of its width, 10 classes),
    resnet18(thumbnail=False) gives MXNet's recorded output: the same architecture."""
    from mxnet_format.mxnet_fixtures import model_files, model_io
    arrays, _ = la.mxnet.load_params(model_files("resnet18_v1")[1])
    x, want = model_io("resnet18_v1")
    net = resnet18(classes=10, thumbnail=False, channels=(8, 8, 16, 32, 64))
    net.initialize()
    net(la.array(x))
    params = net.collect_params()
    names = _gluon_names(net)
    assert sorted(names) == sorted(arrays) and len(names) == len(params)
    for (ours, p), name in zip(params.items(), names):
        assert p.shape == arrays[name].shape, (ours, name)
        p.set_data(arrays[name])
    np.testing.assert_allclose(net(la.array(x)).asnumpy(), want, rtol=1e-4, atol=1e-5)


def test_hybridized_equals_imperative_and_export_round_trips(tmp_path):
    net = resnet18(classes=10)
    net.initialize()
    x = _images(2, 16)
    og = np.random.default_rng(1).standard_normal((2, 10)).astype(np.float32)
    want = _forward_backward(net, x, og)
    stats_before = want[3]
    # the running statistics moved once; reset them so the hybridized call starts from the same state
    for k, p in net.collect_params().items():
        if "running" in k:
            p.set_data(la.array(np.zeros_like(stats_before[k]) if "mean" in k else np.ones_like(stats_before[k])))
    net.hybridize()
    got = _forward_backward(net, x, og)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(got[1], want[1], rtol=1e-4, atol=1e-6)
    assert sorted(got[2]) == sorted(want[2])
    for k in want[2]:
        np.testing.assert_allclose(got[2][k], want[2][k], rtol=1e-4, atol=1e-5, err_msg=k)
    for k in want[3]:
        np.testing.assert_allclose(got[3][k], want[3][k], rtol=1e-4, atol=1e-6, err_msg=k)
    infer = net(la.array(x)).asnumpy()  # inference mode: running statistics
    files = net.export(str(tmp_path / "resnet18"))
    back = la.blocks.SymbolBlock.imports(files[0], ["data"], files[1])
    np.testing.assert_allclose(back(la.array(x)).asnumpy(), infer, rtol=1e-5, atol=1e-5)


def test_exports_to_mxnet_files_and_back(tmp_path):
    net = resnet18(classes=10, channels=(8, 8, 16, 16, 32))
    net.initialize()
    net.hybridize()
    x = la.array(_images(2, 32))
    want = net(x).asnumpy()
    files = la.mxnet.export(net, str(tmp_path / "resnet18"))
    back = la.blocks.SymbolBlock.imports(files[0], ["data"], files[1])
    np.testing.assert_allclose(back(x).asnumpy(), want, rtol=1e-5, atol=1e-6)


def _train(net, x, labels, steps, lr):
    loss_fn = la.blocks.SoftmaxCrossEntropyLoss()
    trainer = la.blocks.Trainer(net.collect_params(), "adam", {"learning_rate": lr})
    losses = []
    for _ in range(steps):
        with la.autograd.record():
            loss = loss_fn(net(x), labels).mean()
        loss.backward()
        trainer.step(1)
        losses.append(float(loss.asnumpy()))
    return losses


def test_a_narrow_resnet18_overfits_eight_images():
    la.random.seed(0)
    net = resnet18(classes=4, channels=(8, 8, 16, 16, 32))
    net.initialize()
    net.hybridize()
    x = la.array(_images(8, 16))
    labels = la.array(np.random.default_rng(2).integers(0, 4, 8))
    losses = _train(net, x, labels, steps=12, lr=0.01)
    assert losses[0] > 1.0 and losses[-1] < 0.05, losses
    with la.autograd.predict_mode():  # the running statistics learned the data too
        assert float(la.blocks.SoftmaxCrossEntropyLoss()(net(x), labels).mean().asnumpy()) < 0.5


@pytest.mark.slow
def test_resnet18_overfits_sixteen_cifar_sized_images():
    """The full-width network (11M parameters) on 16 random 32x32 images, 8 Adam steps."""
    la.random.seed(0)
    net = resnet18(classes=10)
    net.initialize()
    net.hybridize()
    x = la.array(_images(16, 32, seed=3))
    labels = la.array(np.arange(16) % 10)
    losses = _train(net, x, labels, steps=8, lr=0.001)
    assert losses[0] > 1.5 and losses[-1] < 0.05, losses
