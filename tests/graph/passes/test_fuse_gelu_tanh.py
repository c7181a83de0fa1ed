"""fuse_gelu_tanh: the tanh GELU written out in ops (GPT-2's, torch's approximate='tanh' exported)
-> one nn.gelu(approximation='tanh') in inference graphs, only where the pattern's values feed
nothing else; the values against the written-out ops, the exact tanh GELU and onnxruntime's."""
from __future__ import annotations

import itertools
import json
import math
from pathlib import Path

import numpy as np
import pytest

import lazyarray as la
from lazyarray.graph.passes.gelu import fuse_gelu_tanh
from lazyarray.onnx.import_ops import constant
from lazyarray.ops.norm import gelu_values

RNG = np.random.default_rng(6)
S = la.sym
FIXTURES = Path(__file__).resolve().parents[2] / "data" / "onnx_dynamic"


def _ops(sym):
    return [n.op.name for n in sym.topo() if n.op is not None]


def _written_out(x, form="gpt2", dtype="float32"):
    """0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3))), grouped as exporters write it."""
    def c(v):
        return constant(np.asarray(v, dtype))

    cube = S.multiply(S.multiply(x, x), x) if form != "cube_first" else S.multiply(x, S.multiply(x, x))
    inner = S.add(x, S.multiply(c(0.044715), cube)) if form != "gpt2" else S.add(x, S.multiply(cube, c(0.044715)))
    t = S.tanh(S.multiply(c(math.sqrt(2 / math.pi)), inner) if form == "gpt2" else
               S.multiply(inner, c(math.sqrt(2 / math.pi))))
    if form == "gpt2":  # (x * 0.5) * (1 + tanh)
        return S.multiply(S.multiply(x, c(0.5)), S.add(c(1.0), t))
    if form == "half_last":  # x * (0.5 * (tanh + 1)), torch's nn.GELU('tanh') as causal_decoder has it
        return S.multiply(x, S.multiply(c(0.5), S.add(t, c(1.0))))
    return S.multiply(S.multiply(x, S.add(t, c(1.0))), c(0.5))  # "cube_first": (x * (tanh + 1)) * 0.5


def _exact(x):
    xd = np.asarray(x, np.float64)
    with np.errstate(over="ignore"):
        return xd / (1 + np.exp(-2 * np.sqrt(2 / np.pi) * (xd + 0.044715 * xd ** 3)))


def _compiled(sym, x, **tuning):
    with la.tuning(**tuning):
        op = la.CachedOp(sym)
        for _ in range(2):
            y = op(x=la.array(x))
    return y.asnumpy()


@pytest.mark.parametrize("form", ["gpt2", "half_last", "cube_first"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape", [(2, 5, 8), (7,), (), (0, 4)])
def test_one_node_and_values_as_the_written_out_ops(form, dtype, shape, run_symbol):
    x = S.var("x", shape=shape, dtype=dtype)
    sym = _written_out(x, form, dtype)
    out = fuse_gelu_tanh(sym).check()
    assert _ops(sym).count("tanh") == 1 and len(_ops(sym)) == 9
    assert _ops(out) == ["gelu"]
    assert out.outputs[0].node.params == {"approximation": "tanh"}
    assert out.outputs[0].node.inputs[0].node is x.outputs[0].node
    values = (RNG.standard_normal(shape) * 3).astype(dtype)
    got, want = run_symbol(out, x=values)[0], run_symbol(sym, x=values)[0]
    assert got.dtype == want.dtype == np.dtype(dtype) and got.shape == shape
    if dtype == "float64" and shape:  # (float32: gelu[compiled_tanh], within 0.51 ulp of the exact)
        np.testing.assert_array_equal(got, gelu_values(np, values, "tanh"))
    fused, unfused = _compiled(sym, values), _compiled(sym, values, fuse_gelu_tanh=False)
    np.testing.assert_array_equal(unfused, want)
    np.testing.assert_array_equal(fused, got)
    tol = 5e-7 if dtype == "float32" else 1e-14
    np.testing.assert_allclose(fused, want, rtol=4 * tol, atol=tol)
    np.testing.assert_allclose(fused, _exact(values), rtol=4 * tol, atol=tol)


def test_a_view_input_and_gelu_of_gelu():
    xt = S.var("x", shape=(8, 6), dtype="float32")
    v = S.transpose(xt)  # (the GELU's input is a view)
    sym = _written_out(_written_out(v, "gpt2"), "half_last")
    out = fuse_gelu_tanh(sym).check()
    assert _ops(out) == ["transpose", "gelu", "gelu"]
    values = (RNG.standard_normal((8, 6)) * 3).astype("float32")
    np.testing.assert_allclose(_compiled(sym, values), _compiled(sym, values, fuse_gelu_tanh=False),
                               rtol=2e-6, atol=1e-6)


def test_the_power_form_is_taken_after_simplify():
    """``x ** 3`` as exported: the compiled pipeline's ``simplify`` writes it ``(x * x) * x`` first."""
    x = S.var("x", shape=(4, 32), dtype="float32")
    c = {v: constant(np.float32(v)) for v in (0.5, 1.0, 0.044715, math.sqrt(2 / math.pi), 3.0)}
    sym = S.multiply(S.multiply(x, c[0.5]), S.add(c[1.0], S.tanh(S.multiply(S.add(x, S.multiply(
        c[0.044715], S.power(x, c[3.0]))), c[math.sqrt(2 / math.pi)]))))
    values = (RNG.standard_normal((4, 32)) * 3).astype("float32")
    with la.tuning(fuse_gelu_tanh=True):
        op = la.CachedOp(sym)
        got = op(x=la.array(values)).asnumpy()
        assert "nn.gelu[" in str(op.explain(x=la.array(values)))
    assert np.abs(got - _exact(values)).max() <= 5e-7


@pytest.mark.parametrize("case", ["tanh read twice", "other constant", "other x", "switched off"])
def test_it_does_not_fire(case):
    x, z = S.var("x", shape=(3, 4)), S.var("z", shape=(3, 4))
    c = {v: constant(np.float32(v)) for v in (0.5, 1.0, 0.044715, 0.04, math.sqrt(2 / math.pi))}
    a = c[0.04] if case == "other constant" else c[0.044715]
    cube = S.multiply(S.multiply(x, x), z if case == "other x" else x)
    t = S.tanh(S.multiply(c[math.sqrt(2 / math.pi)], S.add(x, S.multiply(a, cube))))
    y = S.multiply(S.multiply(x, c[0.5]), S.add(c[1.0], t))
    sym = la.Symbol([y.outputs[0], t.outputs[0]]) if case == "tanh read twice" else y
    if case == "switched off":
        with la.tuning(fuse_gelu_tanh=False):
            assert fuse_gelu_tanh(sym) is sym
        return
    assert fuse_gelu_tanh(sym) is sym


@pytest.mark.parametrize("name", ["causal_decoder", "hf_gpt2"])
def test_real_exports_run_gelu_and_equal_onnxruntime(name):
    ort = pytest.importorskip("onnxruntime")
    m = {m["name"]: m for m in json.loads((FIXTURES / "manifest.json").read_text())}[name]
    path = str(FIXTURES / f"{name}.onnx")
    data = np.load(FIXTURES / f"{name}.npz")
    case = m["cases"][-1]
    ins = {k: data[f"{case}/in/{k}"] for k in m["inputs"]}
    outs = {}
    for fuse in (True, False):
        with la.tuning(fuse_gelu_tanh=fuse):
            net = la.blocks.SymbolBlock.imports(path, m["inputs"])
            net.hybridize()
            xs = [la.array(ins[k]) for k in m["inputs"]]
            for _ in range(2):
                ys = net(*xs)
            outs[fuse] = [y.asnumpy() for y in (ys if isinstance(ys, (list, tuple)) else [ys])]
            text = str(net.explain(*xs))
        assert ("nn.gelu[" in text) == fuse and ("tanh" in text.replace("gelu[compiled_tanh]", "")) != fuse
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    theirs = sess.run(None, {i.name: ins[i.name] for i in sess.get_inputs()})
    for got, off, want in itertools.zip_longest(outs[True], outs[False], theirs):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=2e-5)
        np.testing.assert_allclose(got, off, rtol=1e-4, atol=2e-5)
