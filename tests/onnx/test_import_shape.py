"""ONNX Gather of one constant index imported as a basic index (``lazyarray/onnx/import_shape.py``):
a view of its input instead of a gather, equal to onnxruntime's values; other indices stay gathers."""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from onnx import helper, numpy_helper  # noqa: E402

import lazyarray as la  # noqa: E402

RNG = np.random.default_rng(0)


def _gather_model(shape, index, axis, dtype=np.float32):
    dt = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    nodes = [helper.make_node("Gather", ["x", "i"], ["g"], axis=axis),
             helper.make_node("Mul", ["g", "two"], ["y"])]  # (something reads the view)
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", dt, shape)],
                          [helper.make_tensor_value_info("y", dt, None)],
                          [numpy_helper.from_array(np.asarray(index, np.int64), "i"),
                           numpy_helper.from_array(np.asarray(2, dtype), "two")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


def _ops(sym):
    return [n.op.name for n in sym.topo() if n.op is not None]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape,index,axis", [((3, 4, 5), 0, 0), ((3, 4, 5), 2, 0), ((3, 4, 5), -1, 0),
                                              ((3, 4, 5), 1, 1), ((3, 4, 5), -2, -1), ((2, 0, 5), 1, 0),
                                              ((3, 4, 5), [1], 0), ((3, 4, 5), 5, -1)])
def test_gather_of_one_constant_index_is_a_basic_index_with_onnxruntimes_values(tmp_path, shape, index, axis, dtype):
    m = _gather_model(shape, index, axis, dtype)
    path = str(tmp_path / "m.onnx")
    onnx.save(m, path)
    sym = la.onnx.load(path)
    gathers = _ops(sym).count("take")
    scalar_in_range = np.ndim(index) == 0 and -shape[axis] <= index < shape[axis]
    assert (gathers == 0) == scalar_in_range, _ops(sym)
    x = RNG.standard_normal(shape).astype(dtype)
    if not -shape[axis] <= np.max(index) < shape[axis]:  # (an index out of range: the gather raises)
        with pytest.raises(IndexError):
            la.CachedOp(sym)(x=la.array(x)).asnumpy()
        return
    want = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    op = la.CachedOp(sym)
    for _ in range(2):
        got = op(x=la.array(x)).asnumpy()
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_array_equal(got, want)
