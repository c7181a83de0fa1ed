"""fuse_layer_norm: a layer norm written out in ops (as the ONNX importer expands LayerNormalization)
-> one nn.layer_norm in inference graphs, bit for bit the written-out values (ops/norm.py's reference
and kernels/layer_norm.py compute the same operations in the same order),
and only where the pattern's values feed nothing else."""
from __future__ import annotations

import numpy as np
import pytest

import lazyarray as la
from lazyarray.graph.passes.layer_norm import fuse_layer_norm
from lazyarray.graph.symbol import Symbol

RNG = np.random.default_rng(3)
S = la.sym


def _ops(sym):
    return [n.op.name for n in sym.topo() if n.op is not None]


def _written_out(x, g, b, eps=1e-5, swap=False, axis=-1):
    """The importer's expansion of LayerNormalization (``swap``: every commutative pair the other way)."""
    c = S.subtract(x, S.mean(x, axis=axis, keepdims=True))
    inv = S.divide(1.0, S.sqrt(S.add(S.mean(S.square(c), axis=axis, keepdims=True), eps)))
    if swap:
        return S.add(b, S.multiply(g, S.multiply(inv, c)))
    return S.add(S.multiply(S.multiply(c, inv), g), b)


def _vars(shape, dtype):
    return (S.var("x", shape=shape, dtype=dtype), S.var("g", shape=shape[-1:], dtype=dtype),
            S.var("b", shape=shape[-1:], dtype=dtype))


def _values(shape, dtype):
    return {"x": (RNG.standard_normal(shape) * 3 + 5).astype(dtype),
            "g": RNG.standard_normal(shape[-1:]).astype(dtype), "b": RNG.standard_normal(shape[-1:]).astype(dtype)}


@pytest.mark.parametrize("shape", [(1, 7, 32), (2, 5, 8), (3, 200), (4, 1), (6,), (2, 3, 4, 1000)])
@pytest.mark.parametrize("swap", [False, True])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_one_node_and_values_equal_bit_for_bit(shape, swap, dtype, run_symbol):
    sym = _written_out(*_vars(shape, dtype), eps=1e-12, swap=swap)
    out = fuse_layer_norm(sym).check()
    assert _ops(out) == ["layer_norm"]
    node = out.outputs[0].node
    assert node.params == {"axis": -1, "eps": float(np.asarray(1e-12, dtype))}
    values = _values(shape, dtype)
    got, want = run_symbol(out, **values)[0], run_symbol(sym, **values)[0]
    np.testing.assert_array_equal(got, want)


def test_the_axis_may_be_named_by_its_index(run_symbol):
    sym = _written_out(*_vars((2, 3, 8), "float32"), axis=(2,))
    assert _ops(fuse_layer_norm(sym)) == ["layer_norm"]


def _not_fused(sym):
    assert "layer_norm" not in _ops(fuse_layer_norm(sym))


def test_another_axis_is_kept():
    _not_fused(_written_out(*_vars((2, 3, 8), "float32"), axis=1))


def test_a_value_read_elsewhere_is_kept():
    x, g, b = _vars((2, 8), "float32")
    c = S.subtract(x, S.mean(x, axis=-1, keepdims=True))
    inv = S.divide(1.0, S.sqrt(S.add(S.mean(S.square(c), axis=-1, keepdims=True), 1e-5)))
    y = S.add(S.multiply(S.multiply(c, inv), g), b)
    _not_fused(Symbol([y.outputs[0], inv.outputs[0]]))


def test_an_eps_that_is_not_a_constant_is_kept():
    x, g, b = _vars((2, 8), "float32")
    c = S.subtract(x, S.mean(x, axis=-1, keepdims=True))
    eps = S.var("eps", shape=(), dtype="float32")
    inv = S.divide(1.0, S.sqrt(S.add(S.mean(S.square(c), axis=-1, keepdims=True), eps)))
    _not_fused(S.add(S.multiply(S.multiply(c, inv), g), b))


def test_another_numerator_or_mean_input_is_kept():
    x, g, b = _vars((2, 8), "float32")
    c = S.subtract(x, S.mean(x, axis=-1, keepdims=True))
    inv = S.divide(2.0, S.sqrt(S.add(S.mean(S.square(c), axis=-1, keepdims=True), 1e-5)))
    _not_fused(S.add(S.multiply(S.multiply(c, inv), g), b))
    y = S.var("y", shape=(2, 8))
    c = S.subtract(x, S.mean(y, axis=-1, keepdims=True))
    inv = S.divide(1.0, S.sqrt(S.add(S.mean(S.square(c), axis=-1, keepdims=True), 1e-5)))
    _not_fused(S.add(S.multiply(S.multiply(c, inv), g), b))


def test_parameters_of_another_shape_or_dtype_are_kept():
    x = S.var("x", shape=(2, 8))
    _not_fused(_written_out(x, S.var("g", shape=(2, 8)), S.var("b", shape=(8,))))
    _not_fused(_written_out(x, S.var("g", shape=(8,)), S.var("b", shape=(8,), dtype="float64")))


def test_switched_off_by_the_tuning_table():
    sym = _written_out(*_vars((2, 8), "float32"))
    with la.tuning(fuse_layer_norm=False):
        assert fuse_layer_norm(sym) is sym


def _onnx_layer_norm(path, shape):
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper
    c = shape[-1]
    g, b = RNG.standard_normal(c).astype("float32"), RNG.standard_normal(c).astype("float32")
    node = helper.make_node("LayerNormalization", ["x", "g", "b"], ["y"], axis=-1, epsilon=1e-6)
    graph = helper.make_graph([node], "ln", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, list(shape))],
                              [numpy_helper.from_array(g, "g"), numpy_helper.from_array(b, "b")])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return g, b


def test_an_imported_layer_normalization_runs_as_one_op(tmp_path):
    path = str(tmp_path / "ln.onnx")
    g, b = _onnx_layer_norm(path, (2, 7, 32))
    x = (RNG.standard_normal((2, 7, 32)) * 2 + 1).astype("float32")
    net = la.blocks.SymbolBlock.imports(path, ["x"])
    net.hybridize()
    text = str(net.explain(la.array(x)))
    assert "nn.layer_norm[compiled]" in text or "nn.layer_norm[in_place]" in text
    with la.tuning(fuse_layer_norm=False):
        ref = la.blocks.SymbolBlock.imports(path, ["x"])
        ref.hybridize()
        want = ref(la.array(x)).asnumpy()
        assert "layer_norm" not in str(ref.explain(la.array(x)))
    np.testing.assert_array_equal(net(la.array(x)).asnumpy(), want)
    mean = x.mean(-1, keepdims=True)
    expect = (x - mean) / np.sqrt(((x - mean) ** 2).mean(-1, keepdims=True) + 1e-6) * g + b
    np.testing.assert_allclose(want, expect, rtol=1e-5, atol=1e-5)


def _t5_norm(x, g, eps=1e-6, cast=True, square=False, swap=False):
    """T5's layer norm as exported: a cast to the same dtype, pow 2 (x * x once simplified), mean,
    add, sqrt, 1 / s, times the input, the weight first."""
    c = S.cast(x, dtype=x.outputs[0].aval.dtype) if cast else x
    sq = S.square(c) if square else S.multiply(c, c)
    inv = S.divide(1.0, S.sqrt(S.add(S.mean(sq, axis=-1, keepdims=True), eps)))
    h = S.multiply(inv, c) if swap else S.multiply(c, inv)
    return S.multiply(h, g) if swap else S.multiply(g, h)


@pytest.mark.parametrize("variant", [{}, {"cast": False}, {"square": True}, {"swap": True}],
                         ids=["t5", "no-cast", "square", "swapped"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_an_rms_norm_is_one_node_bit_for_bit(variant, dtype, run_symbol):
    x, g, _ = _vars((2, 7, 32), dtype)
    sym = _t5_norm(x, g, **variant)
    out = fuse_layer_norm(sym).check()
    assert _ops(out) == ["rms_norm"]
    values = _values((2, 7, 32), dtype)
    np.testing.assert_array_equal(run_symbol(out, **values)[0], run_symbol(sym, **values)[0])


def test_a_layer_norm_is_not_taken_for_an_rms_norm():
    sym = _written_out(*_vars((2, 8), "float32"))
    assert _ops(fuse_layer_norm(sym)) == ["layer_norm"]
    x, g, b = _vars((2, 8), "float32")
    c = S.subtract(x, S.mean(x, axis=-1, keepdims=True))  # no bias: gamma * (c * inv) is an RMS norm of c
    inv = S.divide(1.0, S.sqrt(S.add(S.mean(S.square(c), axis=-1, keepdims=True), 1e-5)))
    assert _ops(fuse_layer_norm(S.multiply(S.multiply(c, inv), g))) == ["mean", "subtract", "rms_norm"]


def test_a_cast_read_elsewhere_stays():
    x, g, _ = _vars((2, 8), "float32")
    c = S.cast(x, dtype="float32")
    inv = S.divide(1.0, S.sqrt(S.add(S.mean(S.multiply(c, c), axis=-1, keepdims=True), 1e-6)))
    y = S.multiply(g, S.multiply(c, inv))
    out = fuse_layer_norm(Symbol([y.outputs[0], S.sum(c).outputs[0]]))
    assert "rms_norm" in _ops(out) and "cast" in _ops(out)
