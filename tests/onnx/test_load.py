"""``la.onnx.load`` and ``SymbolBlock.imports`` of ONNX files: each converter family against
onnxruntime on the same model, malformed files, unsupported operators, opsets."""
from __future__ import annotations

import importlib
import sys

import numpy as np
import pytest

import lazyarray as la
from lazyarray.errors import GraphFormatError

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

RNG = np.random.default_rng(0)
F32 = TensorProto.FLOAT


def model(nodes, inputs, outputs, inits=(), opset=17):
    """A model from nodes; ``inputs``/``outputs`` are ``(name, elem_type, shape)``."""
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(*i) for i in inputs],
                          [helper.make_tensor_value_info(*o) for o in outputs],
                          [numpy_helper.from_array(np.asarray(v), k) for k, v in dict(inits).items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m


def save(m, tmp_path, name="m.onnx"):
    path = str(tmp_path / name)
    onnx.save(m, path)
    return path


def reference(m, feeds: dict, onnx_reference: bool = False) -> list:
    if onnx_reference:  # the ONNX spec's own evaluator (which the node test data come from)
        from onnx.reference import ReferenceEvaluator
        return ReferenceEvaluator(m).run(None, feeds)
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def ours(m, tmp_path, feeds: dict) -> list:
    sym = la.onnx.load(save(m, tmp_path))
    out = la.CachedOp(sym)(**{k: la.array(v) for k, v in feeds.items() if k in sym.list_inputs()})
    return [o.asnumpy() for o in (out if isinstance(out, list) else [out])]


def check(m, tmp_path, feeds, rtol=1e-5, atol=1e-6, onnx_reference=False):
    want, got = reference(m, feeds, onnx_reference), ours(m, tmp_path, feeds)
    assert len(want) == len(got)
    for w, g in zip(want, got):
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol)


def x32(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


# -- nn --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("trans_a,trans_b,alpha,beta,with_c", [
    (0, 0, 1.0, 1.0, True), (1, 0, 0.5, 2.0, True), (0, 1, 2.0, 0.0, True), (1, 1, 1.0, 1.0, False),
    (0, 1, 1.0, 0.5, True)])
def test_gemm_attributes_match_onnxruntime(tmp_path, trans_a, trans_b, alpha, beta, with_c):
    a = x32(4, 3) if trans_a else x32(3, 4)
    b = x32(5, 4) if trans_b else x32(4, 5)
    ins = ["a", "b"] + (["c"] if with_c else [])
    node = helper.make_node("Gemm", ins, ["y"], transA=trans_a, transB=trans_b, alpha=alpha, beta=beta)
    inits = {"b": b, **({"c": x32(1, 5)} if with_c else {})}
    m = model([node], [("a", F32, a.shape)], [("y", F32, None)], inits)
    check(m, tmp_path, {"a": a})


@pytest.mark.parametrize("attrs,xshape,wshape", [
    ({"pads": [1, 1, 1, 1]}, (1, 3, 7, 7), (4, 3, 3, 3)),
    ({"pads": [0, 1, 2, 0], "strides": [2, 1]}, (2, 3, 8, 7), (4, 3, 3, 2)),
    ({"auto_pad": "SAME_UPPER", "strides": [2, 2]}, (1, 2, 7, 8), (3, 2, 3, 3)),
    ({"auto_pad": "SAME_LOWER"}, (1, 2, 6, 6), (3, 2, 2, 2)),
    ({"auto_pad": "VALID", "dilations": [2, 1]}, (1, 2, 9, 7), (3, 2, 3, 3)),
    ({"group": 2, "pads": [1, 1, 1, 1]}, (1, 4, 6, 6), (6, 2, 3, 3)),
    ({"group": 4, "dilations": [2, 2], "pads": [2, 2, 2, 2]}, (1, 4, 7, 7), (4, 1, 3, 3)),
    ({"pads": [1, 2], "strides": [2]}, (2, 3, 11), (5, 3, 3)),  # 1-D
])
def test_conv_pads_auto_pad_groups_dilations_match_onnxruntime(tmp_path, attrs, xshape, wshape):
    node = helper.make_node("Conv", ["x", "w", "b"], ["y"], **attrs)
    m = model([node], [("x", F32, xshape)], [("y", F32, None)], {"w": x32(*wshape), "b": x32(wshape[0])})
    check(m, tmp_path, {"x": x32(*xshape)}, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("op,attrs", [
    ("MaxPool", {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1}),
    ("MaxPool", {"kernel_shape": [2, 2], "pads": [1, 0, 0, 1]}),
    ("MaxPool", {"kernel_shape": [2, 2], "dilations": [2, 2]}),
    ("AveragePool", {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "count_include_pad": 0}),
    ("AveragePool", {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "count_include_pad": 1}),
    ("AveragePool", {"kernel_shape": [3, 2], "strides": [2, 2], "ceil_mode": 1}),
    ("AveragePool", {"kernel_shape": [2, 2], "auto_pad": "SAME_UPPER"}),
])
def test_pooling_matches_onnxruntime(tmp_path, op, attrs):
    node = helper.make_node(op, ["x"], ["y"], **attrs)
    m = model([node], [("x", F32, (1, 2, 7, 6))], [("y", F32, None)])
    check(m, tmp_path, {"x": x32(1, 2, 7, 6)})


def test_norms_softmax_and_global_pools_match_onnxruntime(tmp_path):
    c = 3
    nodes = [helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["bn"], epsilon=1e-3),
             helper.make_node("Relu", ["bn"], ["r"]),
             helper.make_node("GlobalAveragePool", ["r"], ["gap"]),
             helper.make_node("GlobalMaxPool", ["r"], ["gmp"]),
             helper.make_node("LayerNormalization", ["x", "ls", "lb"], ["ln"], axis=-2),
             helper.make_node("Softmax", ["x"], ["sm"], axis=1),
             helper.make_node("LogSoftmax", ["x"], ["lsm"])]
    inits = {"s": x32(c), "b": x32(c), "m": x32(c), "v": np.abs(x32(c)) + 0.5, "ls": x32(4, 5), "lb": x32(4, 5)}
    m = model(nodes, [("x", F32, (2, c, 4, 5))], [(n, F32, None) for n in ("gap", "gmp", "ln", "sm", "lsm")],
              inits)
    check(m, tmp_path, {"x": x32(2, c, 4, 5)})


@pytest.mark.parametrize("mode,extra", [
    ("nearest", {}), ("nearest", {"coordinate_transformation_mode": "asymmetric", "nearest_mode": "floor"}),
    ("linear", {}), ("linear", {"coordinate_transformation_mode": "align_corners"}),
    ("cubic", {})])
def test_resize_matches_onnxruntime(tmp_path, mode, extra):
    node = helper.make_node("Resize", ["x", "", "scales"], ["y"], mode=mode, **extra)
    m = model([node], [("x", F32, (1, 2, 4, 5))], [("y", F32, None)],
              {"scales": np.array([1, 1, 2.0, 1.5], np.float32)})
    # align_corners with a scale whose output length is not whole: the spec divides by the unrounded
    # length (scale * 5 - 1 = 6.5, as onnx.reference and the node tests do); onnxruntime by 7 - 1
    align = extra.get("coordinate_transformation_mode") == "align_corners"
    check(m, tmp_path, {"x": x32(1, 2, 4, 5)}, rtol=1e-4, atol=1e-5, onnx_reference=align)


# -- shapes ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("target,allowzero,xshape", [
    ([0, -1], 0, (2, 3, 4)), ([-1, 0, 2], 0, (3, 4, 2)), ([2, 0, -1], 0, (4, 3, 2)), ([0, 6], 1, (0, 2, 3))])
def test_reshape_zero_and_minus_one_match_onnxruntime(tmp_path, target, allowzero, xshape):
    node = helper.make_node("Reshape", ["x", "shape"], ["y"], allowzero=allowzero)
    m = model([node], [("x", F32, xshape)], [("y", F32, None)], {"shape": np.array(target, np.int64)})
    check(m, tmp_path, {"x": x32(*xshape)})


@pytest.mark.parametrize("xshape,target", [((3, 1), (2, 1, 6)), ((1, 4), (3, 1)), ((2, 3), (3,)), ((3, 1, 2), (1, 4, 1))])
def test_expand_broadcasts_both_ways_as_onnxruntime(tmp_path, xshape, target):
    node = helper.make_node("Expand", ["x", "shape"], ["y"])
    m = model([node], [("x", F32, xshape)], [("y", F32, None)], {"shape": np.array(target, np.int64)})
    check(m, tmp_path, {"x": x32(*xshape)})


@pytest.mark.parametrize("starts,ends,axes,steps", [
    ([1, 0], [3, 10], None, None), ([-1], [-1000], [1], [-2]), ([0, 5], [2, -1], [-2, -1], [1, 2]),
    ([2**62], [-2**62], [0], [-1]), ([-3, 1], [2**63 - 1, 4], [-1, 0], None)])
def test_slice_steps_negative_axes_and_clamping_match_onnxruntime(tmp_path, starts, ends, axes, steps):
    names = ["x", "starts", "ends"] + (["axes"] if axes is not None or steps is not None else [])
    inits = {"starts": np.array(starts, np.int64), "ends": np.array(ends, np.int64)}
    if axes is not None or steps is not None:
        inits["axes"] = np.array(axes if axes is not None else list(range(len(starts))), np.int64)
    if steps is not None:
        names.append("steps")
        inits["steps"] = np.array(steps, np.int64)
    m = model([helper.make_node("Slice", names, ["y"])], [("x", F32, (4, 7))], [("y", F32, None)], inits)
    check(m, tmp_path, {"x": x32(4, 7)})


def test_shape_ops_chain_matches_onnxruntime(tmp_path):
    """Shape -> Gather -> Unsqueeze -> Concat -> Reshape (the pattern exporters write) is folded at load time."""
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Gather", ["s", "zero"], ["n"], axis=0),
             helper.make_node("Unsqueeze", ["n", "ax0"], ["n1"]),
             helper.make_node("Concat", ["n1", "minus1"], ["target"], axis=0),
             helper.make_node("Reshape", ["x", "target"], ["flat"]),
             helper.make_node("Transpose", ["flat"], ["t"], perm=[1, 0]),
             helper.make_node("Split", ["t", "sizes"], ["p", "q"], axis=0),
             helper.make_node("Squeeze", ["q", "ax0"], ["q0"]) if False else helper.make_node("Identity", ["q"], ["q0"]),
             helper.make_node("Pad", ["p", "pads", "pv"], ["pp"], mode="constant"),
             helper.make_node("Tile", ["q0", "reps"], ["tt"]),
             helper.make_node("Flatten", ["x"], ["fl"], axis=2),
             helper.make_node("Cast", ["fl"], ["c"], to=TensorProto.DOUBLE)]
    inits = {"zero": np.array(0, np.int64), "ax0": np.array([0], np.int64), "minus1": np.array([-1], np.int64),
             "sizes": np.array([5, 7], np.int64), "pads": np.array([1, 0, 0, 2], np.int64),
             "pv": np.array(3.0, np.float32), "reps": np.array([2, 1], np.int64)}
    m = model(nodes, [("x", F32, (2, 3, 4))], [("pp", F32, None), ("tt", F32, None),
                                              ("c", TensorProto.DOUBLE, None)], inits)
    check(m, tmp_path, {"x": x32(2, 3, 4)})


@pytest.mark.parametrize("shape,axis,sizes", [((4, 7), 2, None), ((4, 7), -3, None), ((4, 7), 5, [2, 2]),
                                              ((), 0, None)])
def test_split_with_an_axis_out_of_range_is_a_format_error(tmp_path, shape, axis, sizes):
    """The converter indexed the input's shape by the axis unchecked: a bare IndexError."""
    ins, inits = ["x"], {}
    if sizes is not None:
        ins.append("sizes")
        inits["sizes"] = np.array(sizes, np.int64)
    m = model([helper.make_node("Split", ins, ["p", "q"], axis=axis, name="cut")], [("x", F32, shape)],
              [("p", F32, None), ("q", F32, None)], inits)
    with pytest.raises(GraphFormatError, match=rf"cut.*axis={axis} is out of range for an input of rank {len(shape)}"):
        la.onnx.load(save(m, tmp_path))


# -- reductions ------------------------------------------------------------------------------------
@pytest.mark.parametrize("op", ["ReduceMean", "ReduceMax", "ReduceSum", "ReduceL2", "ReduceLogSumExp"])
@pytest.mark.parametrize("opset", [13, 18])
@pytest.mark.parametrize("axes,keepdims", [([1], 1), ([-1, 0], 0), (None, 1)])
def test_reductions_axes_attribute_before_18_and_input_from_18(tmp_path, op, opset, axes, keepdims):
    as_input = opset >= 18 or (op == "ReduceSum" and opset >= 13)
    ins, inits, attrs = ["x"], {}, {"keepdims": keepdims}
    if axes is not None and as_input:
        ins.append("axes")
        inits["axes"] = np.array(axes, np.int64)
    elif axes is not None:
        attrs["axes"] = axes
    m = model([helper.make_node(op, ins, ["y"], **attrs)], [("x", F32, (3, 4, 2))], [("y", F32, None)], inits,
              opset=opset)
    check(m, tmp_path, {"x": x32(3, 4, 2)})


def test_noop_with_empty_axes_returns_the_input(tmp_path):
    node = helper.make_node("ReduceSum", ["x"], ["y"], noop_with_empty_axes=1)
    m = model([node], [("x", F32, (3, 4))], [("y", F32, None)], opset=13)
    check(m, tmp_path, {"x": x32(3, 4)})


# -- elementwise -----------------------------------------------------------------------------------
def test_elementwise_family_matches_onnxruntime(tmp_path):
    un = ["Abs", "Neg", "Exp", "Sqrt", "Relu", "Sigmoid", "Tanh", "Erf", "Floor", "Ceil", "Round", "Sign",
          "Reciprocal", "Softplus", "Softsign", "Elu", "Selu", "HardSigmoid", "HardSwish", "Mish"]
    nodes, outs = [helper.make_node("Abs", ["x"], ["ax"])], []
    for op in un:
        src = "ax" if op in ("Sqrt", "Reciprocal") else "x"
        nodes.append(helper.make_node(op, [src], [op.lower()]))
        outs.append((op.lower(), F32, None))
    nodes += [helper.make_node("LeakyRelu", ["x"], ["lrelu"], alpha=0.2),
              helper.make_node("Clip", ["x", "lo", "hi"], ["clip"]),
              helper.make_node("Gelu", ["x"], ["gelu"], approximate="tanh"),
              helper.make_node("Pow", ["ax", "y"], ["pow"]),
              helper.make_node("Max", ["x", "y", "lo"], ["max"]), helper.make_node("Mean", ["x", "y"], ["mean"]),
              helper.make_node("Less", ["x", "y"], ["less"]), helper.make_node("Not", ["less"], ["not"]),
              helper.make_node("Where", ["not", "x", "y"], ["where"]),
              helper.make_node("Div", ["x", "y"], ["div"])]
    outs += [(n, F32, None) for n in ("lrelu", "clip", "gelu", "pow", "max", "mean", "where", "div")]
    outs += [("not", TensorProto.BOOL, None)]
    m = model(nodes, [("x", F32, (3, 4)), ("y", F32, (4,))], outs,
              {"lo": np.array(-0.5, np.float32), "hi": np.array(0.7, np.float32)}, opset=20)
    check(m, tmp_path, {"x": x32(3, 4), "y": x32(4)}, rtol=1e-5, atol=2e-6)


def test_integer_div_and_mod_follow_onnx(tmp_path):
    nodes = [helper.make_node("Div", ["a", "b"], ["d"]), helper.make_node("Mod", ["a", "b"], ["m"]),
             helper.make_node("Mod", ["a", "b"], ["f"], fmod=1)]
    i32 = TensorProto.INT32
    m = model(nodes, [("a", i32, (6,)), ("b", i32, (6,))], [("d", i32, None), ("m", i32, None), ("f", i32, None)])
    check(m, tmp_path, {"a": np.array([7, -7, 7, -7, 0, 9], np.int32), "b": np.array([2, 2, -2, -2, 3, 4], np.int32)})


# -- errors ----------------------------------------------------------------------------------------
def test_unsupported_operators_are_all_named_in_one_error(tmp_path):
    nodes = [helper.make_node("Bernoulli", ["boxes"], ["a"], name="nms"),
             helper.make_node("Relu", ["x"], ["r"]),
             helper.make_node("StringNormalizer", ["r"], ["b"], name="u1"),
             helper.make_node("StringNormalizer", ["r"], ["c"], name="u2")]
    m = model(nodes, [("x", F32, (1, 1, 4)), ("boxes", F32, (1, 4, 4))], [("a", F32, None)],
              {"k": np.array([1], np.int64), "g": np.zeros((1, 1, 4, 2), np.float32)})
    path = save(m, tmp_path)
    with pytest.raises(GraphFormatError, match="2 ONNX operator") as err:
        la.onnx.load(path)
    assert "Bernoulli (node 'nms')" in str(err.value) and "StringNormalizer (nodes 'u1', 'u2')" in str(err.value)


def _good_bytes() -> bytes:
    m = model([helper.make_node("Relu", ["x"], ["y"])], [("x", F32, (2,))], [("y", F32, (2,))],
              {"unused": np.zeros(64, np.float32)})
    return m.SerializeToString()


@pytest.mark.parametrize("cut", [0.5, 0.9])
def test_truncated_file_raises_graph_format_error(tmp_path, cut):
    data = _good_bytes()
    path = tmp_path / "cut.onnx"
    path.write_bytes(data[:int(len(data) * cut)])
    with pytest.raises(GraphFormatError, match="cut.onnx"):
        la.onnx.load(str(path))


@pytest.mark.parametrize("data", [b"", b"\x00\x01garbage\xff" * 7, b'{"nodes": []}', bytes(range(256))])
def test_garbage_bytes_raise_graph_format_error(tmp_path, data):
    path = tmp_path / "bad.onnx"
    path.write_bytes(data)
    with pytest.raises(GraphFormatError, match="bad.onnx"):
        la.onnx.load(str(path))


def test_outputs_without_shapes_load(tmp_path):
    """onnx.checker wants a shape on every graph output; the spec and onnxruntime do not."""
    m = model([helper.make_node("Relu", ["x"], ["y"])], [("x", F32, (2, 3))], [("y", F32, None)])
    assert not m.graph.output[0].type.tensor_type.HasField("shape")
    check(m, tmp_path, {"x": x32(2, 3)})


def test_missing_file_raises_graph_format_error(tmp_path):
    with pytest.raises(GraphFormatError, match="cannot read"):
        la.onnx.load(str(tmp_path / "absent.onnx"))


def test_old_opset_whose_operators_did_not_change_loads(tmp_path):
    m = model([helper.make_node("Not", ["x"], ["y"])], [("x", TensorProto.BOOL, (3,))],
              [("y", TensorProto.BOOL, None)], opset=9)
    check(m, tmp_path, {"x": np.array([True, False, True])})


def test_shape_input_computed_from_data_is_refused(tmp_path):
    m = model([helper.make_node("Reshape", ["x", "s"], ["y"])], [("x", F32, (2, 3)), ("s", TensorProto.INT64, (2,))],
              [("y", F32, None)])
    with pytest.raises(GraphFormatError, match="must be known when the model is loaded.*'s'"):
        la.onnx.load(save(m, tmp_path))


# -- constants, parameters, SymbolBlock ------------------------------------------------------------
def _mlp():
    rng = np.random.default_rng(1)
    w1, b1, w2 = (rng.standard_normal(s).astype(np.float32) for s in ((3, 8), (8,), (8, 2)))
    nodes = [helper.make_node("MatMul", ["data", "fc1.weight"], ["h"]),
             helper.make_node("Add", ["h", "fc1.bias"], ["hb"]),
             helper.make_node("Relu", ["hb"], ["r"]),
             helper.make_node("Gemm", ["r", "fc2.weight"], ["out"])]
    return model(nodes, [("data", F32, ("N", 3))], [("out", F32, None)],
                 {"fc1.weight": w1, "fc1.bias": b1, "fc2.weight": w2})


def test_load_makes_initializers_named_constants(tmp_path):
    sym = la.onnx.load(save(_mlp(), tmp_path))
    assert sym.list_inputs() == ["data"]
    assert set(sym.list_constants()) == {"fc1.weight", "fc1.bias", "fc2.weight"}
    x = x32(5, 3)
    np.testing.assert_allclose(la.CachedOp(sym)(la.array(x)).asnumpy(), reference(_mlp(), {"data": x})[0],
                               rtol=1e-5, atol=1e-6)


def test_symbol_block_imports_onnx_with_named_parameters(tmp_path):
    path = save(_mlp(), tmp_path)
    block = la.blocks.SymbolBlock.imports(path, ["data"])
    params = block.collect_params()
    assert set(params) == {"fc1.weight", "fc1.bias", "fc2.weight"}
    inits = {t.name: numpy_helper.to_array(t) for t in _mlp().graph.initializer}
    for name, p in params.items():
        np.testing.assert_array_equal(p.data().asnumpy(), inits[name])
    x = x32(4, 3)
    np.testing.assert_allclose(block(la.array(x)).asnumpy(), reference(_mlp(), {"data": x})[0], rtol=1e-5, atol=1e-6)
    with pytest.raises(la.LazyArrayError, match="holds its own"):
        la.blocks.SymbolBlock.imports(path, ["data"], "x.params")


def _cubed_gelu_like(listed_as_input: bool):
    """y = (x ** p) / d * w: p and d 0-d initializers (torch's exporter writes a model's Python
    numbers so), w a (3,) weight; ``listed_as_input``: p and d also graph inputs (overridable)."""
    nodes = [helper.make_node("Pow", ["x", "p"], ["c"]), helper.make_node("Div", ["c", "d"], ["q"]),
             helper.make_node("Mul", ["q", "w"], ["y"])]
    inputs = [("x", F32, [2, 3])] + ([("p", F32, []), ("d", F32, [])] if listed_as_input else [])
    inits = {"p": np.float32(3), "d": np.float32(1.4142135), "w": x32(3)}
    return model(nodes, inputs, [("y", F32, [2, 3])], inits)


def test_scalar_initializers_are_graph_constants_that_passes_read(tmp_path):
    m = _cubed_gelu_like(listed_as_input=False)
    block = la.blocks.SymbolBlock.imports(save(m, tmp_path), ["x"])
    assert set(block.collect_params()) == {"w"}  # (the 0-d ones are constants of the graph, as ONNX says)
    block.hybridize()
    x = x32(2, 3) - 0.5
    np.testing.assert_allclose(block(la.array(x)).asnumpy(), reference(m, {"x": x})[0], rtol=1e-5, atol=1e-6)
    text = str(block.explain(la.array(x)))
    assert "multiply" in text and "power" not in text, text  # x ** 3 became x * x * x (algebra.simplify)


def test_scalar_initializers_listed_as_graph_inputs_stay_parameters(tmp_path):
    block = la.blocks.SymbolBlock.imports(save(_cubed_gelu_like(listed_as_input=True), tmp_path), ["x"])
    assert set(block.collect_params()) == {"p", "d", "w"}


def test_backend_prepares_and_runs_a_model():
    from lazyarray.onnx.backend import LazyArrayBackend
    assert LazyArrayBackend.supports_device("CPU") and not LazyArrayBackend.supports_device("CUDA")
    m = _mlp()
    x = x32(2, 3)
    rep = LazyArrayBackend.prepare(m)
    np.testing.assert_allclose(rep.run([x])[0], reference(m, {"data": x})[0], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(LazyArrayBackend.run_model(m, {"data": x})[0], rep.run([x])[0])


def test_backend_specializes_on_shape_inputs_and_converts_again_when_they_change():
    from lazyarray.onnx.backend import LazyArrayBackend
    m = model([helper.make_node("Reshape", ["x", "s"], ["y"])], [("x", F32, (2, 6)), ("s", TensorProto.INT64, (2,))],
              [("y", F32, None)])
    rep = LazyArrayBackend.prepare(m)
    x = x32(2, 6)
    assert rep.run([x, np.array([3, 4])])[0].shape == (3, 4)
    assert rep.run([x, np.array([4, -1])])[0].shape == (4, 3)


@pytest.mark.parametrize("attrs,xshape,wshape", [
    ({"strides": [2, 2], "pads": [1, 0, 0, 1]}, (1, 3, 4, 5), (3, 2, 3, 3)),
    ({"strides": [2, 1], "output_padding": [1, 0], "group": 3}, (2, 3, 3, 4), (3, 1, 2, 2)),
    ({"dilations": [2, 2]}, (1, 2, 3, 3), (2, 2, 2, 2)),
    ({"strides": [2, 2], "output_shape": [8, 9]}, (1, 1, 3, 4), (1, 2, 3, 3)),
    ({"strides": [3], "auto_pad": "SAME_UPPER"}, (1, 2, 5), (2, 3, 4)),  # 1-D
])
def test_conv_transpose_matches_onnxruntime(tmp_path, attrs, xshape, wshape):
    node = helper.make_node("ConvTranspose", ["x", "w", "b"], ["y"], **attrs)
    cout = wshape[1] * attrs.get("group", 1)
    m = model([node], [("x", F32, xshape)], [("y", F32, None)], {"w": x32(*wshape), "b": x32(cout)})
    check(m, tmp_path, {"x": x32(*xshape)}, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("depth", [0, -3])
def test_one_hot_with_no_classes_is_a_format_error(tmp_path, depth):
    """Issue #33's list: OneHot of depth 0 in a loaded graph (a put into an empty axis when run)."""
    m = model([helper.make_node("OneHot", ["idx", "depth", "vals"], ["oh"], name="hot")],
              [("idx", TensorProto.INT64, (3,))], [("oh", F32, None)],
              {"depth": np.array(depth, np.int64), "vals": np.array([0.0, 1.0], np.float32)})
    with pytest.raises(GraphFormatError, match=rf"'hot' \(OneHot\): depth={depth}: must be at least 1"):
        la.onnx.load(save(m, tmp_path))


def test_index_ops_match_onnxruntime(tmp_path):
    nodes = [helper.make_node("TopK", ["x", "k"], ["v", "i"], axis=1, largest=0),
             helper.make_node("OneHot", ["idx", "depth", "vals"], ["oh"], axis=0),
             helper.make_node("Hardmax", ["x"], ["hm"], axis=0),
             helper.make_node("CumSum", ["x", "ax"], ["cs"], exclusive=1, reverse=1),
             helper.make_node("ArgMax", ["x"], ["am"], axis=1, select_last_index=1)]
    inits = {"k": np.array([2], np.int64), "depth": np.array(4, np.int64), "ax": np.array(1, np.int64),
             "vals": np.array([-1.0, 3.0], np.float32)}
    i64 = TensorProto.INT64
    m = model(nodes, [("x", F32, (3, 5)), ("idx", i64, (2, 3))],
              [("v", F32, None), ("i", i64, None), ("oh", F32, None), ("hm", F32, None), ("cs", F32, None),
               ("am", i64, None)], inits)
    x = np.round(x32(3, 5))  # ties, so the index rules matter
    check(m, tmp_path, {"x": x, "idx": np.array([[0, 3, -1], [2, 1, -4]], np.int64)})


@pytest.mark.parametrize("reduction", ["none", "sum", "mean"])
def test_losses_match_onnxruntime(tmp_path, reduction):
    nodes = [helper.make_node("SoftmaxCrossEntropyLoss", ["s", "t", "w"], ["sce", "logp"], reduction=reduction,
                              ignore_index=1),
             helper.make_node("NegativeLogLikelihoodLoss", ["logp", "t"], ["nll"], reduction=reduction)]
    m = model(nodes, [("s", F32, (4, 3, 2)), ("t", TensorProto.INT64, (4, 2))],
              [("sce", F32, None), ("logp", F32, None), ("nll", F32, None)], {"w": np.abs(x32(3)) + 0.1})
    check(m, tmp_path, {"s": x32(4, 3, 2), "t": np.array([[0, 1], [2, 2], [1, 0], [0, 2]], np.int64)})


def test_group_and_rms_norms_match_the_onnx_reference(tmp_path):
    nodes = [helper.make_node("GroupNormalization", ["x", "gs", "gb"], ["gn"], num_groups=2, epsilon=1e-3),
             helper.make_node("RMSNormalization", ["x", "rs"], ["rms"], axis=-2)]
    m = model(nodes, [("x", F32, (2, 4, 3, 2))], [(n, F32, None) for n in ("gn", "rms")],
              {"gs": x32(4), "gb": x32(4), "rs": x32(3, 2)}, opset=23)
    check(m, tmp_path, {"x": x32(2, 4, 3, 2)}, onnx_reference=True)  # onnxruntime lacks opset 23 here


@pytest.mark.parametrize("p", [1, 2])
def test_lp_normalization_matches_onnxruntime(tmp_path, p):
    """L1 divides by the sum of |x| (onnx.reference sums x itself, which is not a norm)."""
    m = model([helper.make_node("LpNormalization", ["x"], ["y"], axis=1, p=p)], [("x", F32, (3, 4))],
              [("y", F32, None)])
    check(m, tmp_path, {"x": x32(3, 4)})


@pytest.mark.parametrize("attrs,with_mask,with_past,three_d", [
    ({}, False, False, False), ({"is_causal": 1}, True, True, False), ({"softcap": 2.0, "qk_matmul_output_mode": 2}, True,
                                                                        False, False),
    ({"q_num_heads": 4, "kv_num_heads": 2, "is_causal": 1, "qk_matmul_output_mode": 3}, False, False, True),
    ({"left_window_size": 1, "scale": 0.3}, True, True, False)])
def test_attention_matches_the_onnx_reference(tmp_path, attrs, with_mask, with_past, three_d):
    b, hq, hk, sq, sk, d, past = 2, 4, 2, 3, 5, 4, 2
    shapes = {"q": (b, sq, hq * d), "k": (b, sk, hk * d), "v": (b, sk, hk * d)} if three_d else \
        {"q": (b, hq, sq, d), "k": (b, hk, sk, d), "v": (b, hk, sk, d)}
    names = ["q", "k", "v"]
    feeds = {n: x32(*s) for n, s in shapes.items()}
    if with_mask:
        names.append("mask")
        feeds["mask"] = RNG.random((sq, sk + (past if with_past else 0) - 1)) > 0.3  # short: padded as masked
    if with_past:
        names += [""] * (4 - len(names)) + ["pk", "pv"]
        feeds["pk"], feeds["pv"] = x32(b, hk, past, d), x32(b, hk, past, d)
    outs = ["y", "pres_k", "pres_v", "qk"]
    node = helper.make_node("Attention", names, outs, **attrs)
    ins = [(n, TensorProto.BOOL if n == "mask" else F32, feeds[n].shape) for n in feeds]
    m = model([node], ins, [(o, F32, None) for o in outs], opset=onnx.defs.onnx_opset_version())
    check(m, tmp_path, feeds, rtol=1e-5, atol=1e-5, onnx_reference=True)


def test_quantize_and_dequantize_match_onnxruntime(tmp_path):
    nodes = [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"], axis=1),
             helper.make_node("DequantizeLinear", ["q", "s", "z"], ["dq"], axis=1),
             helper.make_node("QuantizeLinear", ["x", "s0"], ["qu"]),
             helper.make_node("DequantizeLinear", ["qu", "s0"], ["dqu"])]
    inits = {"s": np.array([0.02, 0.05, 0.1], np.float32), "z": np.array([-3, 0, 5], np.int8),
             "s0": np.array(0.01, np.float32)}
    m = model(nodes, [("x", F32, (2, 3, 4))], [("q", TensorProto.INT8, None), ("dq", F32, None),
                                              ("qu", TensorProto.UINT8, None), ("dqu", F32, None)], inits, opset=19)
    check(m, tmp_path, {"x": x32(2, 3, 4) * 4})  # some values saturate


def test_blocked_dequantize_matches_onnxruntime(tmp_path):
    node = helper.make_node("DequantizeLinear", ["x", "s", "z"], ["y"], axis=1, block_size=2)
    m = model([node], [("x", TensorProto.UINT8, (2, 5))], [("y", F32, None)],
              {"s": np.array([[0.5, 2.0, 1.0], [0.1, 0.2, 0.3]], np.float32),
               "z": np.array([[1, 2, 3], [4, 5, 6]], np.uint8)}, opset=21)
    check(m, tmp_path, {"x": RNG.integers(0, 255, (2, 5)).astype(np.uint8)})


# -- the conversion's own costs ---------------------------------------------------------------------
def _size_chain(n: int):
    """``n`` times: relu, then a Reshape of it to its own Shape (a size value of the symbolic batch
    applied to a data tensor: ``Conversion._sizes_of`` asks what the tensor reads)."""
    nodes, x = [], "x"
    for k in range(n):
        nodes += [helper.make_node("Relu", [x], [f"r{k}"]), helper.make_node("Shape", [f"r{k}"], [f"s{k}"]),
                  helper.make_node("Reshape", [f"r{k}", f"s{k}"], [f"y{k}"])]
        x = f"y{k}"
    return model(nodes, [("x", F32, ("N", 4))], [(x, F32, None)])


def test_the_conversion_walks_each_node_once_not_the_graph_above_each_value(tmp_path, monkeypatch):
    from lazyarray.graph import symbol as symbol_module
    from lazyarray.graph import traverse
    load_module = importlib.import_module("lazyarray.onnx.load")  # (la.onnx.load is the function)
    listed = []

    def counted(outputs, stop=None):
        order = traverse.topo_order(outputs, stop)
        listed.append(len(order))
        return order
    monkeypatch.setattr(symbol_module, "topo_order", counted)
    monkeypatch.setattr(load_module, "topo_order", counted, raising=False)
    path = save(_size_chain(60), tmp_path)
    sym = la.onnx.load(path)
    monkeypatch.undo()
    nodes = len(sym.topo())
    assert sum(listed) < 6 * nodes, (sum(listed), nodes)  # (walking the graph above each value: ~60x)
    x = x32(3, 4)
    np.testing.assert_array_equal(la.CachedOp(sym)(la.array(x)).asnumpy(), np.maximum(x, 0))


def test_the_cyclic_gc_is_paused_while_converting_and_given_back(tmp_path, monkeypatch):
    import gc

    load_module = importlib.import_module("lazyarray.onnx.load")  # (la.onnx.load is the function)
    seen = []
    relu = load_module.CONVERTERS["Relu"]
    monkeypatch.setitem(load_module.CONVERTERS, "Relu", lambda n: seen.append(gc.isenabled()) or relu(n))
    assert gc.isenabled()
    la.onnx.load(save(_size_chain(1), tmp_path))
    assert seen == [False] and gc.isenabled()


def test_imported_nodes_carry_the_callers_line_found_once(tmp_path, monkeypatch):
    from lazyarray.graph import build
    from lazyarray.graph import node as node_module
    path = save(_size_chain(4), tmp_path)
    walks = []
    real = build.user_source
    monkeypatch.setattr(build, "user_source", lambda skip=1: walks.append(skip) or real(skip + 1))
    sym = la.onnx.load(path); line = sys._getframe().f_lineno  # noqa: E702
    monkeypatch.undo()
    ops = [n for n in sym.topo() if n.op is not None]
    assert ops and all(n.source == (__file__, line) for n in ops), {n.source for n in ops}
    assert walks == [] and node_module.RECORD_SOURCE.get() is None  # (no walk per node; the line is unset after)
