"""ONNX tensors of narrow formats (``onnx/narrow.py``): a bfloat16 / float8 / int4 model imports
with its values in float32 / int8, every value ONNX types as narrow is rounded into its format, and
the result equals ONNX's reference; such graphs export back to ONNX."""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ml_dtypes = pytest.importorskip("ml_dtypes")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

import lazyarray as la  # noqa: E402
from lazyarray.errors import GraphFormatError  # noqa: E402
from lazyarray.onnx import narrow as N  # noqa: E402
from lazyarray.onnx.backend import LazyArrayBackend  # noqa: E402

BF16 = TensorProto.BFLOAT16


def _model(nodes, inputs, outputs, inits=(), opset=21):
    g = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(inits))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def _mlp_bf16():
    """y = tanh(x @ W + b) in bfloat16, W and b bfloat16 initializers."""
    rng = np.random.default_rng(3)
    w = (rng.standard_normal((4, 3)) * 0.7).astype(ml_dtypes.bfloat16)
    b = rng.standard_normal(3).astype(ml_dtypes.bfloat16)
    nodes = [helper.make_node("MatMul", ["x", "W"], ["h"]), helper.make_node("Add", ["h", "b"], ["z"]),
             helper.make_node("Tanh", ["z"], ["y"])]
    return _model(nodes, [helper.make_tensor_value_info("x", BF16, [2, 4])],
                  [helper.make_tensor_value_info("y", BF16, [2, 3])],
                  [numpy_helper.from_array(w, "W"), numpy_helper.from_array(b, "b")])


def test_a_bfloat16_model_loads_with_float32_values_rounded_after_every_node(tmp_path):
    model = _mlp_bf16()
    path = tmp_path / "m.onnx"
    onnx.save(model, str(path))
    sym = la.onnx.load(str(path))
    assert [n.op.name for n in sym.topo() if n.kind == "op"].count("round_to_format") == 3
    x = np.random.default_rng(4).standard_normal((2, 4)).astype(ml_dtypes.bfloat16)
    got = la.CachedOp(sym)(x=la.array(x.astype(np.float32))).asnumpy()
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, got.astype(ml_dtypes.bfloat16).astype(np.float32))  # values of the format
    want = ReferenceEvaluator(model).run(None, {"x": x})[0]
    np.testing.assert_allclose(got, want.astype(np.float32), rtol=2 ** -7)


def test_the_backend_takes_and_returns_the_narrow_dtypes():
    model = _mlp_bf16()
    x = np.random.default_rng(5).standard_normal((2, 4)).astype(ml_dtypes.bfloat16)
    (got,) = LazyArrayBackend.prepare(model).run([x])
    assert got.dtype == np.dtype(ml_dtypes.bfloat16)
    np.testing.assert_allclose(got.astype(np.float32), ReferenceEvaluator(model).run(None, {"x": x})[0]
                               .astype(np.float32), rtol=2 ** -7)


@pytest.mark.parametrize("elem,fmt", [(TensorProto.INT4, "int4"), (TensorProto.UINT4, "uint4"),
                                      (TensorProto.FLOAT8E4M3FN, "float8_e4m3fn"), (TensorProto.INT2, "int2")])
def test_quantize_dequantize_round_trip_matches_the_reference(elem, fmt):
    x = np.linspace(-3, 3, 24, dtype=np.float32).reshape(4, 6)
    zp = numpy_helper.from_array(np.zeros((), getattr(ml_dtypes, fmt)), "zp")
    scale = numpy_helper.from_array(np.array(0.25, np.float32), "s")
    nodes = [helper.make_node("QuantizeLinear", ["x", "s", "zp"], ["q"]),
             helper.make_node("DequantizeLinear", ["q", "s", "zp"], ["y"])]
    model = _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 6])],
                   [helper.make_tensor_value_info("q", elem, [4, 6]),
                    helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 6])], [zp, scale])
    q, y = LazyArrayBackend.prepare(model).run([x])
    rq, ry = ReferenceEvaluator(model).run(None, {"x": x})
    assert q.dtype == rq.dtype
    np.testing.assert_array_equal(q.astype(np.float32), rq.astype(np.float32))
    np.testing.assert_array_equal(y, ry)


def test_only_models_with_narrow_types_pay_for_type_inference():
    assert N.has_narrow(_mlp_bf16())
    plain = _model([helper.make_node("Relu", ["x"], ["y"])], [helper.make_tensor_value_info("x", 1, [2])],
                   [helper.make_tensor_value_info("y", 1, [2])])
    assert not N.has_narrow(plain)
    cast = _model([helper.make_node("Cast", ["x"], ["y"], to=TensorProto.FLOAT8E5M2)],
                  [helper.make_tensor_value_info("x", 1, [2])], [helper.make_tensor_value_info("y", 19, [2])])
    assert N.has_narrow(cast)


def test_a_narrow_input_whose_output_type_is_unknown_is_refused(monkeypatch):
    model = _mlp_bf16()
    real = N.value_types

    def untyped(m):
        types = real(m)
        types.pop("z")
        return types
    import sys
    monkeypatch.setattr(sys.modules["lazyarray.onnx.load"], "value_types", untyped)
    from lazyarray.onnx.load import to_symbol
    with pytest.raises(GraphFormatError, match=r"'z' reads values of a narrow format \(bfloat16\).*element type"):
        to_symbol(model)


def test_an_imported_narrow_graph_exports_and_runs_in_the_reference(tmp_path):
    model = _mlp_bf16()
    src, out = tmp_path / "m.onnx", tmp_path / "back.onnx"
    onnx.save(model, str(src))
    sym = la.onnx.load(str(src))
    la.onnx.export(sym, str(out), opset=21)
    back = onnx.load(str(out))
    assert "Cast" in {n.op_type for n in back.graph.node}
    x = np.random.default_rng(6).standard_normal((2, 4)).astype(np.float32)
    x = x.astype(ml_dtypes.bfloat16).astype(np.float32)
    ours = la.CachedOp(sym)(x=la.array(x)).asnumpy()
    name = back.graph.input[0].name
    np.testing.assert_array_equal(ReferenceEvaluator(back).run(None, {name: x})[0], ours)


def test_exporting_a_format_below_its_opset_names_the_opset(tmp_path):
    x = la.sym.var("x", shape=(3,), dtype="float32")
    y = la.sym.round_to_format(x, format="float8_e4m3fn")
    with pytest.raises(la.GraphError, match="opset 19"):
        la.onnx.export(y, str(tmp_path / "f8.onnx"), opset=18)


def test_widen_turns_every_narrow_format_wide_and_leaves_numpy_dtypes_as_they_are():
    from lazyarray.ops.narrow_format import FORMATS
    for name, wide in FORMATS.items():
        v = np.zeros(3, np.float32).astype(getattr(ml_dtypes, name))
        assert N.widen(v).dtype == wide, name
    for dt in ("float32", "float64", "int8", "uint8", "bool", ">f4", "<U3", "O"):
        a = np.zeros(2, dt)
        assert N.widen(a) is a, dt


def test_a_narrow_cast_found_while_converting_converts_with_the_types():
    """The loader does not walk the nodes for narrow formats first: a graph that declares none but casts
    to one midway is converted again with the value types, as a model declaring them is."""
    nodes = [helper.make_node("Relu", ["x"], ["r"]),
             helper.make_node("Cast", ["r"], ["c"], to=BF16),
             helper.make_node("Cast", ["c"], ["y"], to=TensorProto.FLOAT)]
    model = _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [5])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, [5])])
    assert not N.declares_narrow(model.graph) and N.has_narrow(model)
    from lazyarray.onnx.load import Conversion
    conv = Conversion(model, "m", None)
    assert conv.types and not conv.unchecked
    x = np.array([-1.0, 1.00390625, 3.14159, 250.3, 0.1], np.float32)
    (y,) = LazyArrayBackend.prepare(model).run([x])
    np.testing.assert_array_equal(y, ReferenceEvaluator(model).run(None, {"x": x})[0])
    assert not np.array_equal(y, np.maximum(x, 0))  # (rounded through bfloat16)
