"""Make the MXNet 1.x fixtures the tests read (run by hand, once; NOT part of the test suite).

Needs real MXNet, which needs NumPy < 1.24, so it runs in a side virtual environment:

    python3.11 -m venv /tmp/mxenv
    /tmp/mxenv/bin/pip install mxnet==1.9.1 numpy==1.23.5
    /tmp/mxenv/bin/python tests/data/mxnet/make_fixtures.py

It writes, next to this file:

* ``models/<name>-symbol.json`` + ``models/<name>-0000.params``: real ``HybridBlock.export``
  output of four models with random weights (seeded), ``models/<name>-input.npy`` and
  ``models/<name>-output.npy`` (MXNet's inference output for that input, batch 2);
* ``ops/<case>-symbol.json`` + ``ops/<case>-0000.params`` + ``ops/<case>-in<k>.npy`` +
  ``ops/<case>-out.npy``: one small graph per operator case (MXNet's symbol API);
* ``mxnet_timings.json``: MXNet's own load time and hybridized inference times at batch 1 and
  32 for each model, the reference column of ``benchmarks/mxnet_models.py``.

Arrays are saved with ``numpy.save`` (no pickle). Models are small on purpose (a few MB in all):
the ResNet-18 v1 is the model zoo's ``ResNetV1`` with ``BasicBlockV1`` and ``[2, 2, 2, 2]`` layers
(exactly ``resnet18_v1``'s structure and operators) at 1/8 of its width, 10 classes;
``mobilenet0.25`` is the zoo model itself with 10 classes.
"""
import json
import os
import platform
import shutil
import time

import mxnet as mx
import numpy as np
from mxnet import gluon
from mxnet.gluon import nn
from mxnet.gluon.model_zoo import vision

HERE = os.path.dirname(os.path.abspath(__file__))
MODELS = os.path.join(HERE, "models")
OPS = os.path.join(HERE, "ops")


# -- models ---------------------------------------------------------------------------------------
class TextClassifier(gluon.HybridBlock):
    """Embedding -> mean over the tokens -> Dense(relu) -> Dense: an LSTM-free text classifier."""

    def __init__(self, vocab=200, dim=16, hidden=32, classes=4, **kw):
        super().__init__(**kw)
        with self.name_scope():
            self.embed = nn.Embedding(vocab, dim)
            self.hidden = nn.Dense(hidden, activation="relu")
            self.drop = nn.Dropout(0.3)
            self.out = nn.Dense(classes)

    def hybrid_forward(self, F, tokens):
        x = self.embed(tokens).mean(axis=1)
        return self.out(self.drop(self.hidden(x)))


def make_models():
    mx.random.seed(0)
    np.random.seed(0)
    models = {}
    resnet = vision.ResNetV1(vision.BasicBlockV1, [2, 2, 2, 2], [8, 8, 16, 32, 64], classes=10,
                             prefix="resnetv10_")
    models["resnet18_v1"] = (resnet, np.random.standard_normal((2, 3, 64, 64)).astype("float32"))
    models["mobilenet0.25"] = (vision.get_model("mobilenet0.25", classes=10),
                               np.random.standard_normal((2, 3, 64, 64)).astype("float32"))
    mlp = nn.HybridSequential(prefix="mlp_")
    with mlp.name_scope():
        mlp.add(nn.Dense(64, activation="relu"), nn.Dropout(0.2), nn.Dense(32, activation="tanh"), nn.Dense(10))
    models["mlp"] = (mlp, np.random.standard_normal((2, 20)).astype("float32"))
    models["text_cnn"] = (TextClassifier(prefix="textclf_"),
                          np.random.randint(0, 200, (2, 12)).astype("float32"))
    for net, _ in models.values():
        net.initialize(mx.init.Xavier(magnitude=2.0))
    return models


def _perturb_batchnorm(net):
    """Random running statistics and gammas: fresh ones (0, 1) would hide BatchNorm mistakes."""
    for name, p in net.collect_params().items():
        if name.endswith(("running_mean", "beta")):
            p.set_data(mx.nd.array(np.random.uniform(-0.5, 0.5, p.shape)))
        elif name.endswith(("running_var", "gamma")):
            p.set_data(mx.nd.array(np.random.uniform(0.5, 1.5, p.shape)))


def _time(fn, repeat):
    fn()
    best = float("inf")
    for _ in range(3):
        t = time.perf_counter()
        for _ in range(repeat):
            fn()
        best = min(best, (time.perf_counter() - t) / repeat)
    return best


def export_models():
    os.makedirs(MODELS, exist_ok=True)
    timings = {"mxnet": mx.__version__, "numpy": np.__version__, "python": platform.python_version(),
               "machine": platform.machine(), "models": {}}
    for name, (net, x) in make_models().items():
        net(mx.nd.array(x))  # deferred shapes
        _perturb_batchnorm(net)
        net.hybridize(static_alloc=True, static_shape=True)
        y = net(mx.nd.array(x)).asnumpy()
        prefix = os.path.join(MODELS, name)
        net.export(prefix)
        np.save(prefix + "-input.npy", x)
        np.save(prefix + "-output.npy", y)
        # MXNet's own numbers: load, and hybridized inference at batch 1 and 32
        sym_file, par_file = prefix + "-symbol.json", prefix + "-0000.params"
        t0 = time.perf_counter()
        for _ in range(5):
            back = gluon.SymbolBlock.imports(sym_file, ["data"], par_file)
        load_s = (time.perf_counter() - t0) / 5
        np.testing.assert_allclose(back(mx.nd.array(x)).asnumpy(), y, rtol=1e-5, atol=1e-6)
        back.hybridize(static_alloc=True, static_shape=True)
        row = {"load_s": load_s, "params": int(sum(p.data().size for p in back.collect_params().values())),
               "input_shape": list(x.shape[1:]), "input_dtype": str(x.dtype)}
        for batch in (1, 32):
            xb = mx.nd.array(np.resize(x, (batch,) + x.shape[1:]))
            row[f"infer_b{batch}_s"] = _time(lambda b=back, v=xb: b(v).wait_to_read(), 20 if batch == 1 else 5)
        timings["models"][name] = row
        print(f"{name}: {row}")
    with open(os.path.join(HERE, "mxnet_timings.json"), "w") as f:
        json.dump(timings, f, indent=1, sort_keys=True)


# -- one graph per operator case ----------------------------------------------------------------------
S = mx.sym


def _op_cases():
    """``name -> (symbol, {input: array}, {param: array})``; inputs named ``x``, ``y``, ``z``."""
    rs = np.random.RandomState(1)

    def r(*shape, lo=-2.0, hi=2.0):
        return rs.uniform(lo, hi, shape).astype("float32")

    x, y = S.var("x"), S.var("y")
    w, b, g = S.var("w"), S.var("b"), S.var("g")
    img = r(2, 4, 7, 7)
    cases = {}

    def add(name, sym, inputs, params=None):
        cases[name] = (sym, inputs, params or {})

    add("fc_flatten", S.FullyConnected(x, w, b, num_hidden=5), {"x": r(2, 3, 4)}, {"w": r(5, 12), "b": r(5)})
    add("fc_noflatten", S.FullyConnected(x, w, b, num_hidden=5, flatten=False), {"x": r(2, 3, 4)},
        {"w": r(5, 4), "b": r(5)})
    add("fc_nobias", S.FullyConnected(x, w, num_hidden=5, no_bias=True), {"x": r(3, 6)}, {"w": r(5, 6)})
    add("conv_basic", S.Convolution(x, w, b, kernel=(3, 3), num_filter=6, pad=(1, 1)), {"x": img},
        {"w": r(6, 4, 3, 3), "b": r(6)})
    add("conv_stride_nobias", S.Convolution(x, w, kernel=(3, 2), num_filter=3, stride=(2, 1), pad=(1, 0),
                                            no_bias=True), {"x": img}, {"w": r(3, 4, 3, 2)})
    add("conv_groups", S.Convolution(x, w, b, kernel=(3, 3), num_filter=6, num_group=2, pad=(1, 1)),
        {"x": img}, {"w": r(6, 2, 3, 3), "b": r(6)})
    add("conv_depthwise", S.Convolution(x, w, kernel=(3, 3), num_filter=4, num_group=4, stride=(2, 2), pad=(1, 1),
                                        no_bias=True), {"x": img}, {"w": r(4, 1, 3, 3)})
    add("conv_dilate", S.Convolution(x, w, b, kernel=(3, 3), num_filter=2, dilate=(2, 2), pad=(2, 1)),
        {"x": img}, {"w": r(2, 4, 3, 3), "b": r(2)})
    mean, var = S.var("m"), S.var("v")
    bn_p = {"g": r(4), "b": r(4), "m": r(4), "v": r(4, lo=0.5, hi=2.0)}
    add("bn_fix_gamma", S.BatchNorm(x, g, b, mean, var, eps=1e-3), {"x": img}, bn_p)
    add("bn_gamma", S.BatchNorm(x, g, b, mean, var, fix_gamma=False, eps=2e-5, momentum=0.8), {"x": img}, bn_p)
    add("bn_global_stats", S.BatchNorm(x, g, b, mean, var, fix_gamma=False, use_global_stats=True), {"x": img},
        bn_p)
    for act in ("relu", "sigmoid", "tanh", "softrelu", "softsign"):
        add(f"act_{act}", S.Activation(x, act_type=act), {"x": r(3, 5)})
    add("leaky", S.LeakyReLU(x, act_type="leaky", slope=0.1), {"x": r(3, 5)})
    add("prelu", S.LeakyReLU(x, g, act_type="prelu"), {"x": r(2, 3, 4)}, {"g": r(3, lo=0.0, hi=0.5)})
    add("elu", S.LeakyReLU(x, act_type="elu", slope=0.7), {"x": r(3, 5)})
    add("gelu", S.LeakyReLU(x, act_type="gelu"), {"x": r(3, 5)})
    add("selu", S.LeakyReLU(x, act_type="selu"), {"x": r(3, 5)})
    add("pool_max", S.Pooling(x, kernel=(3, 3), stride=(2, 2), pad=(1, 1), pool_type="max"), {"x": img})
    add("pool_avg", S.Pooling(x, kernel=(3, 3), stride=(2, 2), pad=(1, 1), pool_type="avg"), {"x": img})
    add("pool_avg_nopadcount", S.Pooling(x, kernel=(3, 3), stride=(2, 2), pad=(1, 1), pool_type="avg",
                                         count_include_pad=False), {"x": img})
    add("pool_max_full", S.Pooling(x, kernel=(2, 2), stride=(2, 2), pool_type="max",
                                   pooling_convention="full"), {"x": img})
    add("pool_avg_full", S.Pooling(x, kernel=(3, 3), stride=(2, 2), pad=(1, 1), pool_type="avg",
                                   pooling_convention="full"), {"x": r(2, 4, 8, 8)})
    add("pool_global_avg", S.Pooling(x, kernel=(1, 1), global_pool=True, pool_type="avg"), {"x": img})
    add("pool_global_max", S.Pooling(x, kernel=(1, 1), global_pool=True, pool_type="max"), {"x": img})
    add("flatten", S.Flatten(x), {"x": r(2, 3, 4)})
    add("dropout", S.Dropout(x, p=0.5), {"x": r(3, 5)})
    add("softmax", S.softmax(x, axis=1), {"x": r(2, 3, 4)})
    add("softmax_temperature", S.softmax(x, temperature=2.0), {"x": r(2, 5)})
    add("log_softmax", S.log_softmax(x), {"x": r(2, 5)})
    add("softmax_output", S.SoftmaxOutput(x, name="softmax"), {"x": r(2, 5)})
    add("softmax_activation_channel", S.SoftmaxActivation(x, mode="channel"), {"x": r(2, 3, 4)})
    add("softmax_activation", S.SoftmaxActivation(x), {"x": r(2, 3, 4)})
    for op in ("elemwise_add", "elemwise_sub", "elemwise_mul", "elemwise_div"):
        add(op, getattr(S, op)(x, y), {"x": r(3, 4), "y": r(3, 4, lo=0.5, hi=2.0)})
    for op in ("broadcast_add", "broadcast_sub", "broadcast_mul", "broadcast_div", "broadcast_maximum",
               "broadcast_minimum", "broadcast_power"):
        add(op, getattr(S, op)(x, y), {"x": r(3, 1, 4, lo=0.5, hi=2.0), "y": r(2, 1, lo=0.5, hi=2.0)})
    for op, scalar in (("_plus_scalar", 1.5), ("_minus_scalar", 0.5), ("_rminus_scalar", 2.0),
                       ("_mul_scalar", -3.0), ("_div_scalar", 4.0), ("_rdiv_scalar", 2.0),
                       ("_power_scalar", 2.0), ("_rpower_scalar", 1.5), ("_maximum_scalar", 0.1),
                       ("_minimum_scalar", 0.2)):
        add(op, getattr(mx.sym._internal, op)(x, scalar=scalar), {"x": r(3, 4, lo=0.5, hi=2.0)})
    add("plus", x + y, {"x": r(3, 4), "y": r(3, 4)})
    add("concat", S.Concat(x, y, dim=1), {"x": r(2, 3, 2), "y": r(2, 1, 2)})
    for i, (shape, reverse) in enumerate((((0, -1), False), ((-2,), False), ((-3, -2), False),
                                          ((-4, 2, -1, -2), False), ((0, 0, -1), False),
                                          ((-1, 0), True), ((6, -1), False))):
        add(f"reshape{i}", S.Reshape(x, shape=shape, reverse=reverse), {"x": r(2, 6, 5)})
    add("transpose", S.transpose(x, axes=(2, 0, 1)), {"x": r(2, 3, 4)})
    add("transpose_default", S.transpose(x), {"x": r(2, 3, 4)})
    add("slice_axis", S.slice_axis(x, axis=1, begin=1, end=-1), {"x": r(2, 5, 3)})
    add("slice_axis_none", S.slice_axis(x, axis=-1, begin=-2, end=None), {"x": r(2, 5, 3)})
    add("embedding", S.Embedding(x, w, input_dim=7, output_dim=3), {"x": np.array([[0, 6, 2], [1, 1, 5]], "float32")},
        {"w": r(7, 3)})
    add("clip", S.clip(x, a_min=-0.5, a_max=0.7), {"x": r(3, 4)})
    add("mean_axis", S.mean(x, axis=1), {"x": r(2, 3, 4)})
    add("mean_keepdims", S.mean(x, axis=(0, 2), keepdims=True), {"x": r(2, 3, 4)})
    add("sum_exclude", S.sum(x, axis=1, exclude=True), {"x": r(2, 3, 4)})
    add("sum_all", S.sum(x), {"x": r(2, 3, 4)})
    add("expand_dims", S.expand_dims(x, axis=1), {"x": r(2, 3)})
    add("copy", S._internal._copy(x), {"x": r(2, 3)})
    add("layernorm", S.LayerNorm(x, g, b, eps=1e-4), {"x": r(2, 3, 5)}, {"g": r(5), "b": r(5)})
    add("layernorm_axis1", S.LayerNorm(x, g, b, axis=1), {"x": r(2, 3, 5)}, {"g": r(3), "b": r(3)})
    add("batch_dot", S.batch_dot(x, y), {"x": r(2, 3, 4), "y": r(2, 4, 5)})
    add("batch_dot_t", S.batch_dot(x, y, transpose_a=True, transpose_b=True), {"x": r(2, 4, 3), "y": r(2, 5, 4)})
    add("exp_log_sqrt", S.sqrt(S.exp(S.log(x))), {"x": r(3, 4, lo=0.5, hi=2.0)})
    add("relu_sigmoid_tanh", S.tanh(S.sigmoid(S.relu(x))), {"x": r(3, 4)})
    add("square_abs_neg", S.negative(S.abs(S.square(x))), {"x": r(3, 4)})
    return cases


def export_ops():
    if os.path.isdir(OPS):
        shutil.rmtree(OPS)
    os.makedirs(OPS)
    for name, (sym, inputs, params) in _op_cases().items():
        aux = set(sym.list_auxiliary_states())
        args = {k: mx.nd.array(v) for k, v in {**inputs, **params}.items() if k not in aux}
        shapes = dict(zip(sym.list_arguments(), sym.infer_shape_partial(**{k: v.shape for k, v in args.items()})[0]))
        for k in sym.list_arguments():  # labels the inference graph ignores (SoftmaxOutput's)
            if k not in args:
                args[k] = mx.nd.zeros(shapes[k])
        ex = sym.bind(mx.cpu(), args,
                      aux_states={k: mx.nd.array(v) for k, v in params.items() if k in aux} or None)
        out = ex.forward(is_train=False)[0].asnumpy()
        prefix = os.path.join(OPS, name)
        sym.save(prefix + "-symbol.json")
        mx.nd.save(prefix + "-0000.params", {("aux:" if k in aux else "arg:") + k: mx.nd.array(v)
                                             for k, v in params.items()})
        for k, v in inputs.items():
            np.save(f"{prefix}-in-{k}.npy", v)
        np.save(prefix + "-out.npy", out)
    print(f"{len(_op_cases())} operator cases")


if __name__ == "__main__":
    export_ops()
    export_models()
