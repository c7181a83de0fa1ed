"""squeeze_excite: multiply(x, hardsigmoid-conv(relu-conv(mean(x)))) -> nn.squeeze_excite in inference
graphs (after conv_activation), the recorded values within the gate's float rounding (float32/float64,
either operand order, empty batches), only where every inner value feeds nothing but the next op,
never in graphs that train; and MobileNetV3's fixture equal to the pass switched off and to onnxruntime."""
from __future__ import annotations

import numpy as np
import pytest

import lazyarray as la
from lazyarray.graph.passes.conv_activation import conv_activation
from lazyarray.graph.passes.squeeze_excite import squeeze_excite
from lazyarray.graph.symbol import Symbol

RNG = np.random.default_rng(1)
# every test twice: the NumPy kernels and the compiled one pass (kernels/squeeze_excite.py)
pytestmark = pytest.mark.usefixtures("kernel_path")
TOL = {"float32": {"rtol": 1e-5, "atol": 1e-6}, "float64": {"rtol": 1e-12, "atol": 1e-14}}


def _ops(sym):
    return [n.op.name for n in sym.topo() if n.op is not None]


def _parts(shape, r, dtype):
    c = shape[1]
    x = la.sym.var("x", shape=shape, dtype=dtype)
    ws = [la.sym.var(n, shape=s, dtype=dtype) for n, s in (("w1", (r, c, 1, 1)), ("b1", (r,)),
                                                            ("w2", (c, r, 1, 1)), ("b2", (c,)))]
    return x, ws


def _gate(x, w1, b1, w2, b2, axis=(2, 3), kernel=1):
    s = la.sym.mean(x, axis=axis, keepdims=True)
    h = la.sym.relu(la.sym.nn.conv2d(s, w1, b1))
    y = la.sym.nn.conv2d(h, w2, b2) if kernel == 1 else la.sym.nn.conv2d(h, w2, b2, padding=(1, 1))
    return la.sym.maximum(la.sym.minimum(la.sym.add(la.sym.multiply(y, 1 / 6), 0.5), 1.0), 0.0)


def _values(shape, r, dtype):
    c = shape[1]
    return {"x": (RNG.standard_normal(shape) * 2).astype(dtype),
            "w1": RNG.standard_normal((r, c, 1, 1)).astype(dtype), "b1": RNG.standard_normal(r).astype(dtype),
            "w2": (RNG.standard_normal((c, r, 1, 1)) * 3).astype(dtype), "b2": RNG.standard_normal(c).astype(dtype)}


@pytest.mark.parametrize("shape", [(2, 8, 5, 4), (1, 16, 16, 16), (0, 8, 3, 3), (1, 4, 1, 1)],
                         ids=["nchw", "16x16", "empty-batch", "1x1"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("gate_first", [False, True])
def test_one_node_and_values_equal(shape, dtype, gate_first, run_symbol):
    x, ws = _parts(shape, 3, dtype)
    g = _gate(x, *ws)
    sym = conv_activation(g * x if gate_first else x * g)
    out = squeeze_excite(sym).check()
    assert _ops(out) == ["squeeze_excite"]
    node = [n for n in out.topo() if n.op is not None][0]
    assert node.params["alpha"] == pytest.approx(1 / 6) and node.params["beta"] == 0.5
    assert [e.node.name for e in node.inputs] == ["x", "w1", "b1", "w2", "b2"]
    values = _values(shape, 3, dtype)
    got, want = run_symbol(out, **values)[0], run_symbol(sym, **values)[0]
    np.testing.assert_allclose(got, want, **TOL[dtype])


def test_negative_axes_are_the_same_mean():
    x, ws = _parts((1, 8, 4, 4), 2, "float32")
    assert _ops(squeeze_excite(conv_activation(x * _gate(x, *ws, axis=(-2, -1))))) == ["squeeze_excite"]


def test_what_it_leaves_alone():
    x, ws = _parts((1, 8, 4, 4), 2, "float32")
    y = la.sym.var("y", shape=(1, 8, 4, 4))
    cases = {
        "another input": y * _gate(x, *ws),  # (the product is not of the mean's input)
        "3x3 excitation": x * _gate(x, ws[0], ws[1], la.sym.var("w3", shape=(8, 2, 3, 3)), ws[3], kernel=3),
        "mean of one axis": x * _gate(x, *ws, axis=(3,)),
    }
    s = la.sym.mean(x, axis=(2, 3), keepdims=True)
    h = la.sym.relu(la.sym.nn.conv2d(s, ws[0], ws[1]))
    gate = la.sym.maximum(la.sym.minimum(la.sym.nn.conv2d(h, ws[2], ws[3]) * (1 / 6) + 0.5, 1.0), 0.0)
    cases["the mean read twice"] = Symbol([(x * gate).outputs[0], s.outputs[0]])
    cases["the hidden value read twice"] = Symbol([(x * gate).outputs[0], h.outputs[0]])
    cases["a relu gate"] = x * la.sym.relu(la.sym.nn.conv2d(h, ws[2], ws[3]))
    for what, sym in cases.items():
        fused = conv_activation(sym)
        assert "squeeze_excite" not in _ops(squeeze_excite(fused)), what
        assert squeeze_excite(fused) is fused, what


def test_the_tuning_switch_turns_it_off():
    x, ws = _parts((1, 8, 4, 4), 2, "float32")
    sym = conv_activation(x * _gate(x, *ws))
    with la.tuning(squeeze_excite=False):
        assert squeeze_excite(sym) is sym
    assert _ops(squeeze_excite(sym)) == ["squeeze_excite"]


def test_mobilenetv3_equals_the_pass_switched_off_and_onnxruntime(pass_on_off):
    """The fixture (issue #35) at every size: its two gates one step each (three steps fewer each), the
    values of the recorded ops within the gate's rounding, and onnxruntime's."""
    run = pass_on_off("mobilenetv3_mini", "squeeze_excite")
    for case, on, off, refs in run.cases:
        for a, b, r in zip(on, off, refs):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6, err_msg=case)
            np.testing.assert_allclose(a, r, rtol=1e-3, atol=1e-4, err_msg=case)
    on, off = run.on_ops, run.off_ops
    assert on.count("squeeze_excite") == 2 and len(on) == len(off) - 6, (on, off)


def test_graphs_that_train_keep_the_recorded_ops():
    x, ws = _parts((2, 8, 4, 4), 2, "float32")
    sym = x * _gate(x, *ws)
    op = la.CachedOp(sym)
    values = _values((2, 8, 4, 4), 2, "float32")
    arrays = {k: la.array(v) for k, v in values.items()}
    for a in arrays.values():
        a.attach_grad()
    with la.autograd.record():
        y = op(**arrays)
    y.backward()
    assert arrays["x"].grad is not None and arrays["w1"].grad is not None
    compiled = [c for c in op._cache.values() if c.backward is not None]
    assert compiled and all("squeeze_excite" not in _ops(c.sym) for c in compiled)
