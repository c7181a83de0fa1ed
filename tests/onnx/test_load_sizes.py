"""Sizes computed from a dynamic axis when loading (``Shape`` -> ``Gather`` -> ``Concat``): a graph node
computes one (``dim_values``) only where a converter reads it as a tensor; read only as a size
(a ``Reshape``'s target shape) it leaves no node behind, and both kinds give onnxruntime's values."""
from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper

import lazyarray as la


def _model(as_data: bool) -> onnx.ModelProto:
    """y = reshape(x, [batch, -1]) (and, ``as_data``: + batch as a float, the size used as a value)."""
    i64 = lambda name, v: helper.make_tensor(name, TensorProto.INT64, [len(v)], v)  # noqa: E731
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Gather", ["s", "zero"], ["b"], axis=0),
             helper.make_node("Unsqueeze", ["b", "axes0"], ["b1"]),
             helper.make_node("Concat", ["b1", "minus1"], ["shape"], axis=0),
             helper.make_node("Reshape", ["x", "shape"], ["r"])]
    if as_data:
        nodes += [helper.make_node("Cast", ["b1"], ["bf"], to=TensorProto.FLOAT),
                  helper.make_node("Add", ["r", "bf"], ["y"])]
    else:
        nodes += [helper.make_node("Identity", ["r"], ["y"])]
    g = helper.make_graph(
        nodes, "sizes",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 6])],
        initializer=[helper.make_tensor("zero", TensorProto.INT64, [], [0]), i64("axes0", [0]),
                     i64("minus1", [-1])])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def _ops(sym) -> list[str]:
    return [n.op.name for n in sym.topo() if n.op is not None]


def test_a_size_read_only_as_a_size_makes_no_node(tmp_path):
    path = str(tmp_path / "sizes.onnx")
    onnx.save(_model(as_data=False), path)
    sym = la.onnx.load(path)
    assert "dim_values" not in _ops(sym)
    x = np.arange(4 * 6, dtype=np.float32).reshape(4, 2, 3)
    np.testing.assert_array_equal(la.CachedOp(sym)(la.array(x)).asnumpy(), x.reshape(4, 6))


def test_a_size_read_as_data_is_computed_per_call(tmp_path):
    path = str(tmp_path / "sizes_data.onnx")
    onnx.save(_model(as_data=True), path)
    sym = la.onnx.load(path)
    assert _ops(sym).count("dim_values") == 1
    op = la.CachedOp(sym)
    for batch in (1, 5):  # (the batch as a value follows each call's batch)
        x = np.arange(batch * 6, dtype=np.float32).reshape(batch, 2, 3)
        np.testing.assert_array_equal(op(la.array(x)).asnumpy(), x.reshape(batch, 6) + batch)
