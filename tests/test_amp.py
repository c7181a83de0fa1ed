"""Mixed precision (issue #37, item 5): ``la.amp`` loss scaling (scale / unscale, overflow skip, growth),
the per-block dtype policy of ``convert_block``, float16 and bfloat16 training against float32, and
named errors for bad arguments."""
from __future__ import annotations

import copy

import ml_dtypes
import numpy as np
import pytest

import lazyarray as la
from lazyarray import amp
from lazyarray.blocks import Trainer
from lazyarray.blocks.trainer import StaleGradientError

B = la.blocks


@pytest.fixture(autouse=True)
def _policy():
    token = amp._POLICY.set(amp.policy())
    yield
    amp._POLICY.reset(token)


def mlp():
    net = B.HybridSequential()
    net.add(B.Dense(32, activation="relu", in_units=16), B.Dense(4, in_units=32))
    return net


def cnn():
    net = B.HybridSequential()
    net.add(B.Conv2D(8, 3, padding=1, in_channels=1), B.BatchNorm(in_channels=8), B.Activation("relu"),
            B.MaxPool2D(2), B.Flatten(), B.Dense(4, in_units=8 * 4 * 4))
    return net


def data(shape, seed=0):
    rng = np.random.default_rng(seed)
    return la.array(rng.standard_normal(shape).astype("float32")), la.array(rng.integers(0, 4, shape[0]))


def train(make, shape, dtype, steps, optimizer="sgd", scaler=None, hybridize=True):
    """Final mean loss of ``steps`` updates on one synthetic batch, and the scaler."""
    la.random.seed(0)
    net = make()
    net.initialize(la.init.Xavier())
    if dtype != "float32":
        amp.convert_block(net, dtype)
    if hybridize:
        net.hybridize()
    params = {"learning_rate": 0.05, "multi_precision": True, **({"momentum": 0.9} if optimizer == "sgd" else {})}
    trainer = Trainer(net.collect_params(), optimizer, params)
    if dtype != "float32":
        scaler = amp.init_trainer(trainer, net, target_dtype=dtype, scaler=scaler)
    x, y = data(shape)
    loss_fn = B.SoftmaxCrossEntropyLoss()
    for _ in range(steps):
        with la.autograd.record():
            loss = loss_fn(net(x), y)
            if dtype == "float32":
                loss.backward()
            else:
                with amp.scale_loss(loss, trainer) as scaled:
                    scaled.backward()
        trainer.step(shape[0])
    return float(loss_fn(net(x), y).mean().asnumpy()), net, scaler


def one_step(net, trainer, x, y, scaled=True):
    with la.autograd.record():
        loss = B.SoftmaxCrossEntropyLoss()(net(x), y)
        if scaled:
            with amp.scale_loss(loss, trainer) as s:
                s.backward()
        else:
            loss.backward()
    trainer.step(x.shape[0])


def float32_pair(optimizer="adam", scale=2.0**10):
    """Two equal float32 MLPs and trainers, the second with loss scaling."""
    nets, trainers = [], []
    for _ in range(2):
        la.random.seed(1)
        net = mlp()
        net.initialize(la.init.Xavier())
        nets.append(net)
        trainers.append(Trainer(net.collect_params(), optimizer, {"learning_rate": 0.01}))
    scaler = amp.init_trainer(trainers[1], target_dtype="float16", scaler=amp.LossScaler(init_scale=scale))
    return nets, trainers, scaler


def weights(net):
    return [p.data().asnumpy().copy() for p in net.collect_params().values()]


# -- loss scaling arithmetic ----------------------------------------------------------------------------
def test_scaled_loss_is_float32_loss_times_the_scale():
    net = mlp()
    net.initialize()
    trainer = Trainer(net.collect_params(), "sgd", {"multi_precision": True})
    amp.init_trainer(trainer, target_dtype="float16", scaler=amp.LossScaler(init_scale=8.0))
    loss = la.array(np.array([1.5, -2.0], "float16"))
    with amp.scale_loss(loss, trainer) as scaled:
        assert scaled.dtype == np.float32
        np.testing.assert_array_equal(scaled.asnumpy(), [12.0, -16.0])
    with amp.scale_loss([loss, loss], trainer) as both:
        assert isinstance(both, list) and len(both) == 2


def test_unscaled_steps_equal_plain_float32_steps_bit_for_bit():
    # a power-of-two scale is exact: the scaled gradients, unscaled, are the plain ones
    nets, trainers, scaler = float32_pair("adam")
    x, y = data((16, 16))
    for _ in range(3):
        one_step(nets[0], trainers[0], x, y, scaled=False)
        one_step(nets[1], trainers[1], x, y)
    for a, b in zip(weights(nets[0]), weights(nets[1])):
        np.testing.assert_array_equal(a, b)
    assert scaler.scale == 2.0**10 and scaler.skipped == 0 and scaler.good_steps == 3


def test_overflow_skips_the_step_leaves_everything_and_halves_the_scale():
    nets, trainers, scaler = float32_pair("adam", scale=2.0**10)
    net, trainer = nets[1], trainers[1]
    x, y = data((16, 16))
    one_step(net, trainer, x, y)  # a real step: Adam states exist
    before_w = weights(net)
    before_states = copy.deepcopy({k: [np.array(a) for a in (v if isinstance(v, tuple) else (v,))]
                                   for k, v in trainer._states.items()})
    before_steps = trainer._steps
    scaler.scale = 3e38  # the scaled gradients overflow float32
    one_step(net, trainer, x, y)
    assert scaler.skipped == 1 and scaler.scale == 1.5e38 and scaler.good_steps == 0
    for a, b in zip(before_w, weights(net)):
        np.testing.assert_array_equal(a, b)
    for k, v in trainer._states.items():
        for a, b in zip(before_states[k], v if isinstance(v, tuple) else (v,)):
            np.testing.assert_array_equal(a, np.array(b))
    assert trainer._steps == before_steps
    with pytest.raises(StaleGradientError):  # the overflowed gradients count as used
        trainer.step(16)


def test_nan_gradients_skip_too():
    nets, trainers, scaler = float32_pair("sgd")
    net, trainer = nets[1], trainers[1]
    before = weights(net)
    x, y = data((4, 16))
    with la.autograd.record():
        loss = B.SoftmaxCrossEntropyLoss()(net(x * float("nan")), y)
        with amp.scale_loss(loss, trainer) as s:
            s.backward()
    trainer.step(4)
    assert scaler.skipped == 1 and scaler.scale == 2.0**9
    for a, b in zip(before, weights(net)):
        np.testing.assert_array_equal(a, b)


def test_the_scale_grows_after_the_interval():
    s = amp.LossScaler()
    assert (s.scale, s.growth_factor, s.backoff_factor, s.growth_interval) == (2.0**16, 2.0, 0.5, 2000)
    s = amp.LossScaler(init_scale=4.0, growth_interval=3)
    for _ in range(2):
        s.update(overflow=False)
    assert s.scale == 4.0
    s.update(overflow=False)
    assert s.scale == 8.0 and s.good_steps == 0
    s.update(overflow=False)
    s.update(overflow=True)  # an overflow restarts the count
    s.update(overflow=False)
    s.update(overflow=False)
    assert s.scale == 4.0
    # through the trainer
    nets, trainers, scaler = float32_pair("sgd")
    scaler.growth_interval = 2
    x, y = data((4, 16))
    for _ in range(2):
        one_step(nets[1], trainers[1], x, y)
    assert scaler.scale == 2.0**11


# -- the policy ---------------------------------------------------------------------------------------
def test_convert_block_float16_casts_the_multiplying_layers_only():
    net = cnn()
    net.initialize()
    amp.convert_block(net, "float16")
    assert net[0].weight.dtype == np.float16 and net[5].weight.dtype == np.float16
    assert net[1].gamma.dtype == np.float32  # the norm stays float32
    x, _ = data((2, 1, 8, 8))
    assert net(x).dtype == np.float32  # losses run in float32
    net.hybridize()
    assert net(x).dtype == np.float32


def test_init_sets_the_default_dtype():
    assert amp.init("bfloat16") == amp.Policy("bfloat16") and amp.policy().target_dtype == "bfloat16"
    net = mlp()
    net.initialize()
    amp.convert_block(net)
    w = net[0].weight.data().asnumpy()
    assert w.dtype == np.float32
    np.testing.assert_array_equal(w, w.astype(ml_dtypes.bfloat16).astype(np.float32))


@pytest.mark.parametrize("make, shape", [(mlp, (64, 16)), (cnn, (64, 1, 8, 8))])
def test_low_precision_training_matches_float32(make, shape):
    ref, _, _ = train(make, shape, "float32", 40)
    first, _, _ = train(make, shape, "float32", 0)
    for dtype in ("float16", "bfloat16"):
        loss, net, scaler = train(make, shape, dtype, 40, scaler=amp.LossScaler(init_scale=2.0**8))
        assert loss < 0.5 * first, (dtype, loss, first)
        assert abs(loss - ref) <= 0.05 * ref + 0.01, (dtype, loss, ref)
        w = net[0].weight.data().asnumpy()
        if dtype == "bfloat16":  # weights hold bfloat16 values after every update
            np.testing.assert_array_equal(w, w.astype(ml_dtypes.bfloat16).astype(np.float32))
        else:
            assert w.dtype == np.float16


def test_bfloat16_without_master_weights_rounds_the_weights_in_place():
    la.random.seed(0)
    net = mlp()
    net.initialize()
    amp.convert_block(net, "bfloat16")
    trainer = Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1})
    amp.init_trainer(trainer, net, target_dtype="bfloat16")
    x, y = data((8, 16))
    one_step(net, trainer, x, y)
    w = net[1].weight.data().asnumpy()
    np.testing.assert_array_equal(w, w.astype(ml_dtypes.bfloat16).astype(np.float32))


# -- errors -------------------------------------------------------------------------------------------
def test_bad_arguments_are_named_errors():
    with pytest.raises(la.ParamValueError, match=r"amp\.init: target_dtype must be 'float16' or 'bfloat16', "
                                                 r"got 'float8'"):
        amp.init("float8")
    with pytest.raises(la.ParamError, match=r"amp\.init: target_dtype must be a string.*got int 16"):
        amp.init(16)
    with pytest.raises(la.ParamValueError, match=r"LossScaler: init_scale must be a finite number > 0, got 0"):
        amp.LossScaler(init_scale=0)
    with pytest.raises(la.ParamValueError, match=r"LossScaler: backoff_factor must be a number in \(0, 1\), got 2"):
        amp.LossScaler(backoff_factor=2)
    with pytest.raises(la.ParamError, match=r"LossScaler: growth_interval must be an int.*got float 1\.5"):
        amp.LossScaler(growth_interval=1.5)
    with pytest.raises(la.ParamError, match=r"amp\.convert_block: net must be a Block, got str"):
        amp.convert_block("net", "float16")
    net = mlp()
    net.initialize()
    net.cast("float16")
    fp16 = Trainer(net.collect_params(), "sgd")
    with pytest.raises(la.ParamValueError, match=r"amp\.init_trainer: trainer has float16 parameters but "
                                                 r"multi_precision=False"):
        amp.init_trainer(fp16, target_dtype="float16")
    with pytest.raises(la.ParamError, match=r"amp\.init_trainer: trainer must be a la\.blocks\.Trainer, got dict"):
        amp.init_trainer({}, target_dtype="float16")
    with pytest.raises(la.ParamValueError, match=r"amp\.init_trainer: target_dtype 'bfloat16' needs net"):
        amp.init_trainer(Trainer(mlp().collect_params()), target_dtype="bfloat16")
    with pytest.raises(la.ParamValueError, match=r"amp\.scale_loss: trainer has no loss scaler; call "
                                                 r"la\.amp\.init_trainer\(trainer\) first"):
        with amp.scale_loss(la.ones(2), fp16):
            pass
    ok = Trainer(net.collect_params(), "sgd", {"multi_precision": True})
    amp.init_trainer(ok, target_dtype="float16")
    with pytest.raises(la.ParamError, match=r"amp\.scale_loss: loss\[0\] must be a float la array, got list"):
        with amp.scale_loss([[1.0]], ok):
            pass
    with pytest.raises(la.ParamError, match=r"amp\.scale_loss: loss must be a float la array, got NDArray of "
                                            r"dtype int64"):
        with amp.scale_loss(la.array(np.array([1, 2])), ok):
            pass


def test_no_policy_and_no_dtype_is_a_named_error():
    amp._POLICY.set(None)
    with pytest.raises(la.ParamValueError, match=r"amp\.convert_block: no target dtype: pass target_dtype"):
        amp.convert_block(mlp())


def test_init_sets_the_policy_of_this_thread_only():
    import threading

    amp.init("bfloat16")
    seen = []
    t = threading.Thread(target=lambda: seen.append((amp.init("float16").target_dtype, amp.policy().target_dtype)))
    t.start()
    t.join()
    assert seen == [("float16", "float16")] and amp.policy().target_dtype == "bfloat16"


# -- the per-op policy (autocast) ----------------------------------------------------------------------
def _softmax(a):
    e = np.exp(a - a.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def test_autocast_float16_runs_the_fp32_list_in_float32_and_the_multiplies_in_float16():
    rng = np.random.default_rng(0)
    h = rng.standard_normal((3, 4)).astype(np.float16)
    w = rng.standard_normal((5, 4)).astype(np.float32)
    x, wx = la.array(h), la.array(w)
    ref32 = h.astype(np.float32)
    with amp.autocast("float16"):
        cases = {"softmax": (la.nn.softmax(x), _softmax(ref32)), "exp": (la.exp(x), np.exp(ref32)),
                 "log": (la.log(abs(x)), np.log(np.abs(ref32))), "sum": (x.sum(axis=1), ref32.sum(1)),
                 "mean": (la.mean(x), ref32.mean()),
                 "layer_norm": (la.nn.layer_norm(x, la.ones((4,)), la.zeros((4,))),
                                (ref32 - ref32.mean(-1, keepdims=True)) / np.sqrt(ref32.var(-1, keepdims=True) + 1e-5))}
        for name, (got, want) in cases.items():
            assert got.dtype == np.float32, name
            np.testing.assert_allclose(got.asnumpy(), want, rtol=1e-5, atol=1e-5, err_msg=name)
        d = la.nn.dense(la.array(ref32), wx)  # float32 in: computed in float16
        m = la.matmul(la.array(ref32), la.array(w.T))
    want16 = h @ w.astype(np.float16).T
    for got in (d, m):
        assert got.dtype == np.float16
        np.testing.assert_allclose(got.asnumpy().astype(np.float32), want16.astype(np.float32), rtol=2e-3, atol=2e-3)
    assert la.nn.softmax(x).dtype == np.float16 and la.matmul(la.array(ref32), la.array(w.T)).dtype == np.float32


def test_autocast_bfloat16_rounds_the_multiplies_inputs():
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((4, 8)).astype(np.float32), rng.standard_normal((8, 3)).astype(np.float32)
    with amp.autocast("bfloat16"):
        got = la.matmul(la.array(a), la.array(b))
        s = la.nn.softmax(la.array(a))
    bf = ml_dtypes.bfloat16
    assert got.dtype == np.float32 and s.dtype == np.float32
    np.testing.assert_allclose(got.asnumpy(), a.astype(bf).astype(np.float32) @ b.astype(bf).astype(np.float32),
                               rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(s.asnumpy(), _softmax(a), rtol=1e-6)  # not rounded: an fp32-list op


def test_autocast_ends_with_its_block_even_on_errors():
    x = la.ones((2, 2), dtype="float16")
    with pytest.raises(RuntimeError), amp.autocast("float16"):
        raise RuntimeError("inside")
    assert la.nn.softmax(x).dtype == np.float16
    with pytest.raises(la.ParamValueError, match=r"amp\.autocast: target_dtype must be 'float16' or 'bfloat16'"):
        with amp.autocast("float8"):
            pass


def test_converted_hybridized_transformer_records_the_per_op_policy():
    la.random.seed(0)
    net = la.blocks.models.transformer_encoder(50, 4, units=16, num_layers=1, num_heads=2, max_length=8)
    net.initialize(la.init.Xavier())
    tokens = la.array(np.random.default_rng(0).integers(0, 50, (2, 8)))
    net(tokens)
    amp.convert_block(net, "float16")
    amp.convert_block(net, "float16")  # converting twice wraps the forward once
    assert type(net).__name__ == "TransformerEncoder" and type(net).__bases__[0].__name__ == "TransformerEncoder"
    net.hybridize()
    out = net(tokens)
    assert out.dtype == np.float32 and np.isfinite(out.asnumpy()).all()
    sym, _ = net.export_graph()
    lines = str(sym).splitlines()
    soft = [ln for ln in lines if "softmax(" in ln]
    mm = [ln for ln in lines if " matmul(" in ln]
    assert soft and all(": float32[" in ln for ln in soft), soft
    assert mm and all(": float16[" in ln for ln in mm), mm


def _zoo(kind):
    rng = np.random.default_rng(0)
    if kind == "resnet18":
        x, y = rng.standard_normal((8, 3, 32, 32)).astype("float32"), rng.integers(0, 10, 8)
        return (lambda: la.blocks.models.resnet18(10, channels=(8, 8, 16, 16, 32))), x, y
    x, y = rng.integers(0, 100, (8, 8)), rng.integers(0, 4, 8)
    return (lambda: la.blocks.models.transformer_encoder(100, 4, units=16, num_layers=2, num_heads=2,
                                                         max_length=8)), x, y


def train_zoo(kind, dtype, steps=40):
    make, x, y = _zoo(kind)
    la.random.seed(0)
    net = make()
    net.initialize(la.init.Xavier())
    net(la.array(x[:1]))
    if dtype != "float32":
        amp.convert_block(net, dtype)
    net.hybridize()
    trainer = Trainer(net.collect_params(), "adam", {"learning_rate": 1e-3, "multi_precision": True})
    scaler = None if dtype == "float32" else amp.init_trainer(
        trainer, net, target_dtype=dtype, scaler=amp.LossScaler(init_scale=2.0**8))
    loss_fn, X, Y = B.SoftmaxCrossEntropyLoss(), la.array(x), la.array(y)
    for _ in range(steps):
        with la.autograd.record():
            loss = loss_fn(net(X), Y)
            if scaler is None:
                loss.backward()
            else:
                with amp.scale_loss(loss, trainer) as scaled:
                    scaled.backward()
        trainer.step(len(y))
    return float(loss_fn(net(X), Y).mean().asnumpy()), scaler


@pytest.mark.parametrize("kind", ["transformer", pytest.param("resnet18", marks=pytest.mark.slow)])
def test_zoo_models_train_in_low_precision_within_2_percent_of_float32(kind):
    ref, _ = train_zoo(kind, "float32")
    first, _ = train_zoo(kind, "float32", steps=0)
    assert ref < 0.2 * first
    for dtype in ("float16", "bfloat16"):
        loss, scaler = train_zoo(kind, dtype)
        assert scaler.skipped == 0, dtype
        assert abs(loss - ref) <= 0.02 * ref, (kind, dtype, loss, ref)
