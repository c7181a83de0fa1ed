"""Honest export (onnx/export_check.py, export_sizes.py): a file declares an axis dynamic only where
the graph serves every size of it, computes symbolic sizes with ONNX shape ops, and otherwise no
file is written and a ShapeError names the node and the line."""
import os

import numpy as np
import pytest

import lazyarray as la
from lazyarray import blocks as B

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")


def _run(path, **feeds):
    return ort.InferenceSession(path).run(None, feeds)


def _dims(path, i=0):
    return [d.dim_param or d.dim_value for d in onnx.load(path).graph.input[i].type.tensor_type.shape.dim]


def test_a_symbolic_graph_exports_its_size_computations(tmp_path):
    b = la.Dim("b")
    x = la.sym.var("x", shape=(b, 6))
    pos = la.sym.cast(la.sym.iota(bounds=(0, b, 1)), dtype="float32")
    ones = la.sym.fill(shape=(b, 2), value=1.0, dtype="float32")
    sizes = la.sym.cast(la.sym.dim_values(values=(b, 2 * b + 1), shape=(2,)), dtype="float32")
    y = la.sym.add(la.sym.sum(la.sym.reshape(x, shape=(b, 2, 3)), axis=2), la.sym.expand_dims(pos, axis=1))
    y = la.sym.add(la.sym.multiply(y, ones), sizes)
    path = la.onnx.export(y, str(tmp_path / "sym.onnx"))
    assert _dims(path) == ["b", 6]
    op = la.CachedOp(y)
    for n in (1, 4, 9):
        v = np.random.default_rng(n).standard_normal((n, 6)).astype(np.float32)
        got, = _run(path, x=v)
        np.testing.assert_allclose(got, op(la.array(v)).asnumpy(), rtol=1e-6)
        want = v.reshape(n, 2, 3).sum(2) + np.arange(n)[:, None] + np.array([n, 2 * n + 1])
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_a_traced_graph_with_a_baked_size_refuses_the_dynamic_axis(tmp_path):
    x = la.sym.var("x", shape=(4, 6))
    y = la.sym.reshape(x, shape=(2, 12))  # holds the 4 rows it was built for
    path = str(tmp_path / "baked.onnx")
    with pytest.raises(la.ShapeError, match="does not serve the dynamic axes.*node .reshape., recorded at test_export_dynamic.py"):
        la.onnx.export(y, path, dynamic_axes={"x": {0: "batch"}})
    with pytest.raises(la.ShapeError, match="does not serve"):
        la.onnx.export(y, path, dynamic_shapes={"x": {0: la.Dim("batch")}})
    assert not os.path.exists(path)
    la.onnx.export(y, path)  # static: what it serves
    assert _dims(path) == [4, 6]


class _ReadsBatch(B.HybridBlock):
    def __init__(self):
        super().__init__()
        self.dense = B.Dense(3, in_units=6)

    def forward(self, x):
        n = int(x.shape[0])  # a Python int: traced with the call's shapes, the graph holds it
        return la.reshape(self.dense(x), (1, n * 3))


def test_a_block_that_read_the_batch_as_an_int_cannot_export_it_dynamic(tmp_path):
    net = _ReadsBatch()
    net.initialize()
    net.hybridize()
    x = np.ones((2, 6), np.float32)
    net(la.array(x))
    path = str(tmp_path / "reads.onnx")
    with pytest.raises(la.ShapeError, match="read its size as a Python int at .*test_export_dynamic.py"):
        la.onnx.export(net, path, dynamic_axes={"data": {0: "batch"}})
    assert not os.path.exists(path)
    la.onnx.export(net, path)  # the default: the batch axis is not dynamic here
    assert _dims(path) == [2, 6]
    np.testing.assert_allclose(_run(path, data=x)[0], net(la.array(x)).asnumpy(), rtol=1e-5, atol=1e-6)


class _SizesByBatch(B.HybridBlock):
    def forward(self, x):
        return la.reshape(x, (x.shape[0], 2, -1)).sum(axis=2) + la.zeros((x.shape[0], 2))


def test_a_block_that_sizes_ops_by_the_batch_exports_it_dynamic(tmp_path):
    net = _SizesByBatch()
    net.hybridize()
    net(la.zeros((3, 6)))
    assert net.trace_count == 1
    path = la.onnx.export(net, str(tmp_path / "sizes.onnx"))
    assert _dims(path) == ["batch", 6]
    for n in (1, 5):
        v = np.random.default_rng(n).standard_normal((n, 6)).astype(np.float32)
        np.testing.assert_allclose(_run(path, data=v)[0], v.reshape(n, 2, 3).sum(2), rtol=1e-5, atol=1e-6)
    path = la.onnx.export(net, str(tmp_path / "named.onnx"), dynamic_shapes={"data": {0: la.Dim("n")}})
    assert _dims(path) == ["n", 6]
    out = onnx.load(path).graph.output[0].type.tensor_type.shape.dim
    assert out[0].dim_param == "n"


def test_a_block_defaults_to_a_dynamic_batch_only_where_axis_0_is_the_batch(tmp_path):
    net = B.HybridSequential()
    net.add(B.Dense(4, in_units=6, activation="relu"), B.Dense(2, in_units=4))
    net.initialize()
    net.hybridize()
    net(la.zeros((3, 6)))
    path = la.onnx.export(net, str(tmp_path / "mlp.onnx"))
    assert _dims(path) == ["batch", 6]
    for n in (1, 7):
        v = np.random.default_rng(n).standard_normal((n, 6)).astype(np.float32)
        np.testing.assert_allclose(_run(path, data=v)[0], net(la.array(v)).asnumpy(), rtol=1e-5, atol=1e-6)

    class SumOverBatch(B.HybridBlock):
        def forward(self, x):
            return la.sum(x, axis=0)

    s = SumOverBatch()
    s.hybridize()
    s(la.zeros((3, 6)))
    path = la.onnx.export(s, str(tmp_path / "sum.onnx"))
    assert _dims(path) == [3, 6]  # its output has no batch axis: nothing declared dynamic by default
    path = la.onnx.export(s, str(tmp_path / "sum_dyn.onnx"), dynamic_shapes={"data": {0: la.Dim("n")}})
    assert _dims(path) == ["n", 6]  # asked for, and served
    np.testing.assert_allclose(_run(path, data=np.ones((5, 6), np.float32))[0], np.full(6, 5.0))


def test_dynamic_shapes_takes_dims_and_refuses_both_forms_at_once(tmp_path):
    x = la.sym.var("x", shape=(2, 3))
    with pytest.raises(la.ParamError, match="not both"):
        la.onnx.export(la.sym.exp(x), str(tmp_path / "a.onnx"), dynamic_axes={"x": {0: "b"}},
                       dynamic_shapes={"x": {0: la.Dim("b")}})
    with pytest.raises(la.ParamError, match="la.Dim"):
        la.onnx.export(la.sym.exp(x), str(tmp_path / "a.onnx"), dynamic_shapes={"x": {0: "b"}})
