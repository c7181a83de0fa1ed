"""ONNX ScatterElements / Scatter / ScatterND / TensorScatter (``onnx/import_scatter.py``) against
onnxruntime (``onnx.reference`` for TensorScatter, which onnxruntime lacks) on shapes, axes and
reductions beyond ONNX's node cases."""
from __future__ import annotations

import numpy as np
import pytest
from node_check import check_node, node_model, run_lazyarray

from lazyarray.errors import GraphFormatError

RNG = np.random.default_rng(15)


@pytest.mark.parametrize("axis", [0, 1, -1])
@pytest.mark.parametrize("reduction", ["none", "add", "mul", "max", "min"])
def test_scatter_elements_matches_onnxruntime(axis, reduction):
    x = RNG.standard_normal((4, 5, 3)).astype(np.float32)
    shape = [3, 4, 2]
    ax = axis % 3
    n = x.shape[ax]
    if reduction == "none":  # distinct targets along the axis
        idx = np.argsort(RNG.random(shape[:ax] + [n] + shape[ax + 1:]), axis=ax).take(range(shape[ax]), axis=ax)
    else:
        idx = RNG.integers(-n, n, shape)
    inputs = {"x": x, "i": idx.astype(np.int64), "u": RNG.standard_normal(shape).astype(np.float32)}
    check_node(node_model("ScatterElements", inputs, opset=18, axis=axis, reduction=reduction), inputs)


def test_scatter_alias_and_int32_indices():
    inputs = {"x": RNG.integers(0, 9, (3, 4)).astype(np.int32), "i": np.array([[3, 0], [1, 2]], np.int32),
              "u": np.array([[7, 8], [9, 10]], np.int32)}
    check_node(node_model("Scatter", inputs, opset=10, axis=1), inputs)


@pytest.mark.parametrize("reduction", ["none", "add", "mul", "max", "min"])
@pytest.mark.parametrize("k", [1, 2, 3])
def test_scatter_nd_matches_onnxruntime(reduction, k):
    x = RNG.standard_normal((4, 3, 2)).astype(np.float32)
    pts = np.stack(np.unravel_index(RNG.permutation(int(np.prod(x.shape[:k])))[:3], x.shape[:k]), axis=-1)
    if reduction != "none":
        pts = np.concatenate([pts, pts[:1]])  # a repeated point combines
    inputs = {"x": x, "i": pts.astype(np.int64),
              "u": RNG.standard_normal(pts.shape[:-1] + x.shape[k:]).astype(np.float32)}
    check_node(node_model("ScatterND", inputs, opset=18, reduction=reduction), inputs)


@pytest.mark.parametrize("mode", ["linear", "circular"])
@pytest.mark.parametrize("axis", [-2, 2, 1])
def test_tensor_scatter_matches_reference(mode, axis):
    cache = RNG.standard_normal((2, 3, 6, 4)).astype(np.float32)
    ushape = list(cache.shape)
    ushape[axis] = 3
    inputs = {"past": cache, "update": RNG.standard_normal(ushape).astype(np.float32),
              "where": np.array([1, 4 if mode == "circular" else 3], np.int64)}
    if axis == 1:
        inputs["where"] = np.array([0, 1 if mode == "circular" else 0], np.int64)
    check_node(node_model("TensorScatter", inputs, opset=24, mode=mode, axis=axis), inputs, runtime="reference")


def test_tensor_scatter_without_write_indices():
    inputs = {"past": np.zeros((2, 5, 3), np.float32), "update": np.ones((2, 2, 3), np.float32), "where": None}
    check_node(node_model("TensorScatter", inputs, opset=24), inputs, runtime="reference")


def test_scatter_elements_unknown_reduction_is_a_graph_format_error():
    inputs = {"x": np.zeros((2, 2), np.float32), "i": np.zeros((1, 2), np.int64), "u": np.zeros((1, 2), np.float32)}
    model = node_model("ScatterElements", inputs, opset=18, reduction="mean")
    with pytest.raises(GraphFormatError, match="ScatterElements reduction='mean'"):
        run_lazyarray(model, inputs)
