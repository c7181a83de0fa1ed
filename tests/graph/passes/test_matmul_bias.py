"""matmul_bias: add(matmul(x, w), b) of a matrix w and a vector b made one nn.dense(x, w.T, b)
(graph/passes/matmul_bias.py): where it fires, where it must not, values equal to the graph as
recorded (small graphs, float32 and float64, either operand order, constant and transposed weights,
empty dims) and to onnxruntime on the transformer fixtures."""
import json
import os

import numpy as np
import pytest

import lazyarray as la
from lazyarray.graph.passes.matmul_bias import matmul_bias
from lazyarray.onnx.import_ops import constant

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "..", "data", "onnx_dynamic")
RNG = np.random.default_rng(0)


def _ops(sym):
    return [n.op.name for n in sym.topo() if n.op is not None]


def _var(name, shape, dtype="float32"):
    return la.sym.var(name, shape=shape, dtype=dtype)


def _values(sym, feeds, **tuning):
    with la.tuning(**tuning):
        op = la.CachedOp(sym)
        ys = op(**{k: la.array(v) for k, v in feeds.items()})
    return [y.asnumpy() for y in (ys if isinstance(ys, (list, tuple)) else [ys])]


def _feeds(sym, dtype):
    return {n.name: RNG.standard_normal(n.avals[0].shape).astype(dtype) for n in sym.input_nodes()}


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("case", ["3d", "2d", "1d", "bias first", "empty rows", "empty k"])
def test_the_pair_becomes_one_dense_with_the_values_of_the_two_ops(dtype, case):
    shape = {"3d": (2, 5, 3), "2d": (4, 3), "1d": (3,), "bias first": (2, 5, 3), "empty rows": (0, 5, 3),
             "empty k": (2, 5, 0)}[case]
    k = shape[-1]
    x, w, b = _var("x", shape, dtype), _var("w", (k, 4), dtype), _var("b", (4,), dtype)
    y = b + la.sym.matmul(x, w) if case == "bias first" else la.sym.matmul(x, w) + b
    assert _ops(matmul_bias(y)) == ["transpose", "dense"]
    feeds = _feeds(y, dtype)
    got, = _values(y, feeds)
    want, = _values(y, feeds, matmul_bias=False)
    np.testing.assert_allclose(got, want, rtol=1e-6 if dtype == "float32" else 1e-13, atol=1e-6)
    np.testing.assert_allclose(got, feeds["x"] @ feeds["w"] + feeds["b"], rtol=1e-5, atol=1e-5)


def test_a_transposed_weight_is_read_from_its_source_and_a_constant_is_transposed_once():
    x, v, b = _var("x", (2, 5, 3)), _var("v", (4, 3)), _var("b", (4,))
    y = la.sym.matmul(x, la.sym.transpose(v)) + b
    assert _ops(matmul_bias(y)) == ["dense"]  # (dense(x, v, b): v is the weight as dense takes it)
    feeds = _feeds(y, "float32")
    np.testing.assert_allclose(_values(y, feeds)[0], _values(y, feeds, matmul_bias=False)[0], rtol=1e-6, atol=1e-6)
    wc = RNG.standard_normal((3, 4)).astype("float32")
    yc = la.sym.matmul(x, constant(wc)) + b  # (a frozen constant, as the ONNX importer makes them)
    assert _ops(matmul_bias(yc)) == ["dense"]  # (its transposed literal: no transpose node)
    feeds = _feeds(yc, "float32")
    np.testing.assert_allclose(_values(yc, feeds)[0], feeds["x"] @ wc + feeds["b"], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("case", ["product read twice", "product is an output", "matrix bias", "stacked weight",
                                  "wider bias dtype", "integers", "subtract", "switched off"])
def test_it_does_not_fire(case):
    dtype = "int32" if case == "integers" else "float32"
    x, w = _var("x", (2, 5, 3), dtype), _var("w", (3, 4), dtype)
    b = _var("b", (5, 4) if case == "matrix bias" else (4,), "float64" if case == "wider bias dtype" else dtype)
    if case == "stacked weight":
        w = _var("w", (2, 3, 4))
    m = la.sym.matmul(x, w)
    y = m - b if case == "subtract" else m + b
    outs = {"product read twice": la.Symbol([y.outputs[0], la.sym.exp(m).outputs[0]]),
            "product is an output": la.Symbol([y.outputs[0], m.outputs[0]])}.get(case, y)
    if case == "switched off":
        with la.tuning(matmul_bias=False):
            assert matmul_bias(outs) is outs
        return
    assert matmul_bias(outs) is outs


def _fixture_models():
    with open(os.path.join(FIXTURES, "manifest.json")) as f:
        names = [m["name"] for m in json.load(f)]
    return [n for n in names if n.startswith(("hf_", "torch_encoder", "causal_decoder", "swin_vit", "arange_gather"))]


@pytest.mark.parametrize("name", _fixture_models())
def test_transformer_fixtures_equal_onnxruntime_and_the_pass_switched_off(name):
    ort = pytest.importorskip("onnxruntime")
    pytest.importorskip("onnx")
    with open(os.path.join(FIXTURES, "manifest.json")) as f:
        m = next(m for m in json.load(f) if m["name"] == name)
    path = os.path.join(FIXTURES, name + ".onnx")
    data = np.load(os.path.join(FIXTURES, name + ".npz"))
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    nets = {}
    for on in (True, False):
        with la.tuning(matmul_bias=on):
            net = la.blocks.SymbolBlock.imports(path, m["inputs"])
            net.hybridize()
            nets[on] = net
    fired = False
    for case in m["cases"]:
        ins = {k: data[f"{case}/in/{k}"] for k in m["inputs"]}
        xs = [la.array(ins[k]) for k in m["inputs"]]
        want = sess.run(None, {i.name: ins[i.name] for i in sess.get_inputs()})
        got = {}
        for on, net in nets.items():
            with la.tuning(matmul_bias=on):
                for _ in range(2):  # (the second call: parameter-only steps kept)
                    ys = net(*xs)
                got[on] = [y.asnumpy() for y in (ys if isinstance(ys, (list, tuple)) else [ys])]
        for a, b, c in zip(got[True], got[False], want):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
            np.testing.assert_allclose(a, c, rtol=1e-3, atol=1e-4)
        with la.tuning(matmul_bias=True):
            fired |= any(r["op[implementation]"].startswith("nn.dense") for r in nets[True].explain(*xs).steps)
    assert fired == (name != "hf_t5_encoder")  # (T5's layers have no biases: nothing to fold)
