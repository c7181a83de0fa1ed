"""ONNX Unique along an axis imported (``lazyarray/onnx/import_index.py``), checked against
onnxruntime and ``onnx.reference`` on shapes, dtypes and axes beyond ONNX's node cases."""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from onnx import TensorProto, helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

import lazyarray as la  # noqa: E402
from lazyarray.onnx.backend import LazyArrayBackend  # noqa: E402


def unique_model(x, **attrs):
    node = helper.make_node("Unique", ["x"], ["y", "indices", "inverse", "counts"], **attrs)
    dt = helper.np_dtype_to_tensor_dtype(x.dtype)
    outs = [helper.make_tensor_value_info("y", dt, None)] + [
        helper.make_tensor_value_info(k, TensorProto.INT64, None) for k in ("indices", "inverse", "counts")]
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", dt, x.shape)], outs)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])


def with_repeats(shape, axis, dtype, seed):
    """Random slices along ``axis``, some of them repeated, in shuffled order."""
    rng = np.random.default_rng(seed)
    axis = axis % len(shape)
    distinct = rng.integers(-2, 3, size=shape).astype(dtype)
    picks = rng.integers(0, max(shape[axis] // 2, 1), size=shape[axis])
    return np.take(distinct, picks, axis=axis)


@pytest.mark.parametrize("shape,axis", [((6, 2), 0), ((3, 7), 1), ((4, 5, 3), -2), ((2, 3, 8), 2), ((9,), 0),
                                        ((5, 1, 2), 0)])
@pytest.mark.parametrize("sorted_", [1, 0])
@pytest.mark.parametrize("dtype", [np.float32, np.int64])
def test_unique_along_an_axis_matches_onnxruntime_and_the_reference(shape, axis, sorted_, dtype):
    x = with_repeats(shape, axis, dtype, seed=sum(shape) + sorted_)
    model = unique_model(x, axis=axis, sorted=sorted_)
    ours = LazyArrayBackend.prepare(model).run([x])
    theirs = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})
    for name, o, t in zip(("Y", "indices", "inverse_indices", "counts"), ours, theirs):
        assert o.dtype == t.dtype and o.shape == t.shape, name
        np.testing.assert_array_equal(o, t, err_msg=name)
    if sorted_ or axis % len(shape) == 0:  # onnx.reference's sorted=0 takes slices along axis 0 whatever the axis
        for name, o, r in zip(("Y", "indices", "inverse_indices", "counts"), ours,
                              ReferenceEvaluator(model).run(None, {"x": x})):
            np.testing.assert_array_equal(o, r, err_msg=name)
    y, first, inverse, counts = ours
    np.testing.assert_array_equal(np.take(y, inverse, axis=axis), x)  # the inverse rebuilds the input


def test_unique_along_an_axis_orders_slices_lexicographically_not_by_sum():
    x = np.array([[0, 9], [1, 0], [0, 1], [1, 0]], np.int32)
    y, first, inverse, counts = LazyArrayBackend.prepare(unique_model(x, axis=0)).run([x])
    np.testing.assert_array_equal(y, [[0, 1], [0, 9], [1, 0]])
    np.testing.assert_array_equal(first, [2, 0, 1])
    np.testing.assert_array_equal(inverse, [1, 2, 0, 2])
    np.testing.assert_array_equal(counts, [1, 1, 2])


def test_nan_slices_sort_last_and_equal_each_other_as_in_the_flattened_form():
    x = np.array([[np.nan, 1], [0, 2], [np.nan, 1], [np.nan, 0]], np.float32)
    y, first, inverse, counts = LazyArrayBackend.prepare(unique_model(x, axis=0)).run([x])
    np.testing.assert_array_equal(y, [[0, 2], [np.nan, 0], [np.nan, 1]])
    np.testing.assert_array_equal(counts, [1, 1, 2])
    np.testing.assert_array_equal(inverse, [2, 0, 2, 1])


def test_unique_along_an_axis_of_a_huge_input_is_refused_by_name():
    x = np.zeros((5000, 4), np.float32)
    with pytest.raises(la.GraphFormatError, match=r"Unique.*axis=0.*pairwise"):
        LazyArrayBackend.prepare(unique_model(x, axis=0)).run([x])
