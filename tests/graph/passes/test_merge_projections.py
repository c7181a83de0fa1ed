"""merge_projections: dense layers reading one input made one nn.dense whose output each reads as a
view of its units (graph/passes/merge_projections.py): the graph before and after, where it must not
fire, values equal to the separate layers (float32 and float64, biases or none, constant and transposed
weights, a non-contiguous input, empty dims) and to onnxruntime on the transformer fixtures."""
import json
import os

import numpy as np
import pytest

import lazyarray as la
from lazyarray.graph.passes.matmul_bias import matmul_bias
from lazyarray.graph.passes.merge_projections import merge_projections
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
        for _ in range(2):  # (the second call: parameter-only steps kept)
            ys = op(**{k: la.array(v) for k, v in feeds.items()})
    return [y.asnumpy() for y in (ys if isinstance(ys, (list, tuple)) else [ys])]


def _feeds(sym, dtype):
    return {n.name: RNG.standard_normal(n.avals[0].shape).astype(dtype) for n in sym.input_nodes()}


def _three(x, dtype, units=(4, 4, 4), bias=True):
    k = x.outputs[0].aval.shape[-1]
    outs = []
    for i, n in enumerate(units):
        w = _var(f"w{i}", (n, k), dtype)
        outs.append(la.sym.dense(x, w, _var(f"b{i}", (n,), dtype)) if bias else la.sym.dense(x, w))
    return outs


def _check_equal(y, dtype):
    feeds = _feeds(y, dtype)
    got = _values(y, feeds)
    want = _values(y, feeds, merge_projections=False)
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-6 if dtype == "float32" else 1e-14, atol=1e-6)
    return feeds, got


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("case", ["3d", "2d", "1 row", "no bias", "widths", "empty rows", "empty k"])
def test_the_layers_become_one_dense_and_views_with_the_separate_values(dtype, case):
    shape = {"2d": (6, 3), "1 row": (1, 3), "empty rows": (0, 5, 3), "empty k": (2, 5, 0)}.get(case, (2, 5, 3))
    x = _var("x", shape, dtype)
    units = (4, 8, 2) if case == "widths" else (4, 4, 4)
    outs = _three(x, dtype, units, bias=case != "no bias")
    y = la.Symbol([o.outputs[0] for o in outs])
    before = _ops(y)
    after = merge_projections(y).check()
    assert before == ["dense"] * 3
    assert _ops(after) == ["concatenate"] * (1 if case == "no bias" else 2) + ["dense"] + ["getitem"] * 3
    feeds, got = _check_equal(y, dtype)
    for i, (o, n) in enumerate(zip(got, units)):
        want = feeds["x"] @ feeds[f"w{i}"].T + (0 if case == "no bias" else feeds[f"b{i}"])
        assert o.shape == shape[:-1] + (n,)
        np.testing.assert_allclose(o, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_a_non_contiguous_input_and_attention_shaped_consumers(dtype):
    xt = _var("xt", (3, 5, 2), dtype)
    x = la.sym.transpose(xt, axes=(2, 1, 0))  # (a view: the layers' input is not C-ordered)
    q, k, v = _three(x, dtype)
    qh = la.sym.transpose(la.sym.reshape(q, shape=(2, 5, 2, 2)), axes=(0, 2, 1, 3))
    kh = la.sym.transpose(la.sym.reshape(k, shape=(2, 5, 2, 2)), axes=(0, 2, 3, 1))
    y = la.sym.matmul(la.sym.matmul(qh, kh), la.sym.transpose(la.sym.reshape(v, shape=(2, 5, 2, 2)), axes=(0, 2, 1, 3)))
    assert _ops(merge_projections(y).check()).count("dense") == 1
    _check_equal(y, dtype)


def test_constant_weights_are_joined_as_literals_and_transposed_weights_are_taken():
    x = _var("x", (2, 5, 3))
    w = [RNG.standard_normal((4, 3)).astype("float32") for _ in range(2)]
    ys = [la.sym.dense(x, constant(wi), constant(np.ones(4, "float32"))) for wi in w]
    y = la.Symbol([o.outputs[0] for o in ys])
    assert _ops(merge_projections(y)) == ["dense", "getitem", "getitem"]  # (no concatenate: one literal each)
    feeds, got = _check_equal(y, "float32")
    np.testing.assert_allclose(got[1], feeds["x"] @ w[1].T + 1, rtol=1e-5, atol=1e-5)
    # matmul + add as torch exports a Linear: matmul_bias makes dense(x, transpose(w), b), then this pass
    ms = [la.sym.matmul(x, _var(f"m{i}", (3, 4))) + _var(f"c{i}", (4,)) for i in range(3)]
    z = la.Symbol([m.outputs[0] for m in ms])
    assert _ops(merge_projections(matmul_bias(z)).check()).count("dense") == 1
    _check_equal(z, "float32")


@pytest.mark.parametrize("case", ["one layer", "other inputs", "bias and none", "data weight", "k mismatch",
                                  "integers", "switched off"])
def test_it_does_not_fire(case):
    dtype = "int32" if case == "integers" else "float32"
    x, x2 = _var("x", (2, 5, 3), dtype), _var("x2", (2, 5, 3), dtype)
    w0, w1, b0 = _var("w0", (4, 3), dtype), _var("w1", (4, 3), dtype), _var("b0", (4,), dtype)
    d0 = la.sym.dense(x, w0, b0)
    d1 = {"other inputs": la.sym.dense(x2, w1, b0), "bias and none": la.sym.dense(x, w1),
          "data weight": la.sym.dense(x, la.sym.exp(w1), b0),
          "k mismatch": la.sym.dense(la.sym.concatenate([x, x], axis=-1), _var("w6", (4, 6)), b0)}.get(
        case, la.sym.dense(x, w1, b0))
    y = la.Symbol([d0.outputs[0]] if case == "one layer" else [d0.outputs[0], d1.outputs[0]])
    if case == "switched off":
        with la.tuning(merge_projections=False):
            assert merge_projections(y) is y
        return
    assert merge_projections(y) is y


def _fixture_models():
    with open(os.path.join(FIXTURES, "manifest.json")) as f:
        names = [m["name"] for m in json.load(f)]
    return [n for n in names if n.startswith(("hf_bert", "hf_vit", "hf_bart", "causal_decoder"))]


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
        with la.tuning(merge_projections=on):
            net = la.blocks.SymbolBlock.imports(path, m["inputs"])
            net.hybridize()
            nets[on] = net
    for case in m["cases"]:
        ins = {k: data[f"{case}/in/{k}"] for k in m["inputs"]}
        xs = [la.array(ins[k]) for k in m["inputs"]]
        want = sess.run(None, {i.name: ins[i.name] for i in sess.get_inputs()})
        got = {}
        for on, net in nets.items():
            with la.tuning(merge_projections=on):
                for _ in range(2):
                    ys = net(*xs)
                got[on] = [y.asnumpy() for y in (ys if isinstance(ys, (list, tuple)) else [ys])]
        for a, b, c in zip(got[True], got[False], want):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
            np.testing.assert_allclose(a, c, rtol=1e-3, atol=1e-4)
    steps = {}
    for on, net in nets.items():
        with la.tuning(merge_projections=on):
            steps[on] = sum(r["op[implementation]"].startswith("nn.dense") for r in net.explain(*xs).steps)
    # (causal_decoder's attention has its in-projection merged already: nothing to merge)
    assert (steps[True] < steps[False]) == (name != "causal_decoder")
