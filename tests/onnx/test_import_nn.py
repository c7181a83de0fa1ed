"""ONNX pooling imported with MaxPool's second output, Indices, and AveragePool as ``nn.avg_pool2d``
(``lazyarray/onnx/import_nn.py``), checked against onnxruntime and ``onnx.reference`` on shapes and
attributes beyond ONNX's node cases."""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from onnx import TensorProto, helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

import lazyarray as la  # noqa: E402
from lazyarray.graph.traverse import topo_order  # noqa: E402
from lazyarray.onnx.backend import LazyArrayBackend  # noqa: E402
from lazyarray.onnx.load import load  # noqa: E402

CASES = [  # input shape, MaxPool attributes
    ((2, 3, 9), {"kernel_shape": [3], "strides": [2]}),
    ((2, 3, 7, 6), {"kernel_shape": [3, 2], "pads": [1, 0, 1, 1], "strides": [2, 1]}),
    ((1, 2, 6, 7), {"kernel_shape": [2, 3], "storage_order": 1, "strides": [2, 2]}),
    ((1, 2, 8, 8), {"kernel_shape": [2, 2], "dilations": [2, 2], "pads": [1, 1, 1, 1]}),
    ((2, 1, 7, 7), {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1}),
    ((1, 2, 4, 5, 6), {"kernel_shape": [2, 2, 3], "strides": [2, 1, 2], "pads": [0, 1, 1, 1, 0, 1]}),
    ((1, 2, 4, 5, 6), {"kernel_shape": [2, 3, 2], "storage_order": 1}),
]


def maxpool_model(shape, attrs):
    node = helper.make_node("MaxPool", ["x"], ["y", "i"], **attrs)
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None),
                           helper.make_tensor_value_info("i", TensorProto.INT64, None)])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 12)])


@pytest.mark.parametrize("shape,attrs", CASES)
def test_maxpool_indices_match_onnxruntime_and_the_reference(shape, attrs):
    x = np.random.default_rng(len(shape)).permutation(np.prod(shape)).reshape(shape).astype(np.float32)  # no ties
    model = maxpool_model(shape, attrs)
    y, i = LazyArrayBackend.prepare(model).run([x])
    assert i.dtype == np.int64 and i.shape == y.shape
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    ort_y, ort_i = sess.run(None, {"x": x})
    np.testing.assert_array_equal(y, ort_y)
    np.testing.assert_array_equal(i, ort_i)
    if any(s > 1 for s in attrs.get("strides", [])):  # onnx.reference's unit-stride path gives no flat Indices
        ref_y, ref_i = ReferenceEvaluator(model).run(None, {"x": x})
        np.testing.assert_array_equal(y, ref_y)
        np.testing.assert_array_equal(i, ref_i)
    order = "F" if attrs.get("storage_order") else "C"
    planes = x.reshape(shape[0] * shape[1], -1, order="C")
    flat = np.concatenate([p.reshape(shape[2:]).ravel(order=order) for p in planes])
    np.testing.assert_array_equal(flat[i], y)  # each index points at its maximum


def test_maxpool_indices_pick_the_first_maximum_of_a_window():
    x = np.zeros((1, 1, 4, 4), np.float32)  # every window ties: the first tap (top-left) wins
    y, i = LazyArrayBackend.prepare(maxpool_model(x.shape, {"kernel_shape": [2, 2], "strides": [2, 2]})).run([x])
    np.testing.assert_array_equal(i.ravel(), [0, 2, 8, 10])


def test_padded_maxpool_indices_never_point_into_the_padding():
    x = np.full((1, 1, 3, 3), -np.inf, np.float32)
    _, i = LazyArrayBackend.prepare(maxpool_model(x.shape, {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]})).run([x])
    assert (i >= 0).all() and (i < x.size).all()


AVG_CASES = [  # input shape, AveragePool attributes, imported as nn.avg_pool2d
    ((2, 3, 9), {"kernel_shape": [3], "strides": [2]}, True),
    ((2, 3, 9), {"kernel_shape": [3], "pads": [1, 1], "count_include_pad": 1}, True),
    ((2, 3, 9), {"kernel_shape": [3], "pads": [1, 1], "count_include_pad": 0}, True),
    ((2, 3, 10), {"kernel_shape": [3], "strides": [2], "pads": [1, 1], "ceil_mode": 1, "count_include_pad": 1}, True),
    ((2, 3, 10), {"kernel_shape": [3], "strides": [2], "pads": [1, 1], "ceil_mode": 1, "count_include_pad": 0}, True),
    ((1, 2, 8, 8), {"kernel_shape": [2, 2], "strides": [2, 2]}, True),
    ((1, 2, 7, 6), {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "count_include_pad": 0}, True),
    ((1, 2, 7, 6), {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "count_include_pad": 1}, True),
    ((1, 2, 7, 6), {"kernel_shape": [3, 2], "strides": [2, 2], "ceil_mode": 1}, True),
    ((2, 1, 7, 7), {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1], "ceil_mode": 1,
                    "count_include_pad": 1}, True),
    # ceil mode's last window would start in the end padding: ONNX drops it, leaving floor mode's windows
    ((1, 1, 5), {"kernel_shape": [2], "strides": [3], "pads": [1, 1], "ceil_mode": 1}, True),
    ((1, 2, 7, 6), {"kernel_shape": [2, 2], "pads": [1, 0, 0, 1]}, False),  # asymmetric pads
    ((1, 2, 8, 8), {"kernel_shape": [2, 2], "dilations": [2, 2]}, False),
    ((1, 2, 4, 5, 6), {"kernel_shape": [2, 2, 3], "strides": [2, 1, 2]}, False),
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape,attrs,fits", AVG_CASES)
def test_average_pool_matches_onnxruntime_and_is_avg_pool2d_where_it_fits(shape, attrs, fits, dtype):
    elem = TensorProto.FLOAT if dtype == np.float32 else TensorProto.DOUBLE
    node = helper.make_node("AveragePool", ["x"], ["y"], **attrs)
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", elem, shape)],
                          [helper.make_tensor_value_info("y", elem, None)])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 19)])
    x = np.random.default_rng(len(shape)).standard_normal(shape).astype(dtype)
    rep = LazyArrayBackend.prepare(model)
    (y,) = rep.run([x])
    if dtype == np.float32:
        (want,) = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})
    else:  # (onnxruntime has no double AveragePool)
        (want,) = ReferenceEvaluator(model).run(None, {"x": x})
    assert y.dtype == dtype and y.shape == want.shape
    np.testing.assert_allclose(y, want, rtol=1e-5 if dtype == np.float32 else 1e-12, atol=1e-6)
    (op, _, _), = rep._compiled.values()
    names = {n.op.name for n in topo_order(list(op.sym.outputs)) if n.op is not None}
    assert ("avg_pool2d" in names) == fits


@pytest.mark.parametrize("attrs,fits", [
    ({"kernel_shape": [2], "strides": [2], "ceil_mode": 1, "count_include_pad": 1}, True),
    ({"kernel_shape": [3], "strides": [2], "pads": [1, 1], "ceil_mode": 1, "count_include_pad": 0}, True),
    ({"kernel_shape": [2], "strides": [3], "pads": [1, 1], "ceil_mode": 1}, False),  # may drop a window
])
def test_average_pool_over_a_dynamic_length_in_ceil_mode(tmp_path, attrs, fits):
    node = helper.make_node("AveragePool", ["x"], ["y"], **attrs)
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, "seq"])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 19)])
    onnx.save(model, str(tmp_path / "m.onnx"))
    sym = load(str(tmp_path / "m.onnx"))  # (the length stays symbolic)
    names = {n.op.name for n in topo_order(list(sym.outputs)) if n.op is not None}
    assert ("avg_pool2d" in names) == fits
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    op = la.CachedOp(sym)
    for length in (5, 6, 7, 10, 11):
        x = np.random.default_rng(length).standard_normal((2, 3, length)).astype(np.float32)
        (want,) = sess.run(None, {"x": x})
        y = op(x=la.array(x)).asnumpy()
        assert y.shape == want.shape
        np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("shape,attrs", [
    ((2, 3, 10), {"kernel_shape": [3], "strides": [2], "pads": [1, 1], "ceil_mode": 1, "count_include_pad": 1}),
    ((2, 3, 10), {"kernel_shape": [2], "strides": [2], "ceil_mode": 1, "count_include_pad": 1}),
    ((2, 1, 7, 7), {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1], "ceil_mode": 1,
                    "count_include_pad": 1}),
])
def test_an_imported_ceil_mode_average_pool_exports_back(tmp_path, shape, attrs):
    """Ceil mode counting the pads imports as the padded input's average (export_nn refuses avg_pool2d
    with both): the imported block exports, and onnxruntime runs the file to the source's values."""
    node = helper.make_node("AveragePool", ["x"], ["y"], **attrs)
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 19)])
    onnx.save(model, str(tmp_path / "m.onnx"))
    x = np.random.default_rng(3).standard_normal(shape).astype(np.float32)
    (want,) = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})
    net = la.blocks.SymbolBlock.imports(str(tmp_path / "m.onnx"), ["x"])
    net.hybridize()
    np.testing.assert_allclose(net(la.array(x)).asnumpy(), want, rtol=1e-5, atol=1e-6)
    la.onnx.export(net, str(tmp_path / "back.onnx"))
    sess = ort.InferenceSession(str(tmp_path / "back.onnx"), providers=["CPUExecutionProvider"])
    (got,) = sess.run(None, {sess.get_inputs()[0].name: x})
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
