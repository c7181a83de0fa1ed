"""ONNX ``BatchNormalization`` imports as the registry's ``batch_norm``, so the inference pass folds
it into the ``Conv`` (or ``Gemm``) before it: the compiled graph has no ``batch_norm`` node left and
its outputs equal onnxruntime's (float64: the ONNX reference evaluator's)."""
from __future__ import annotations

import numpy as np
import pytest

import lazyarray as la

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

RNG = np.random.default_rng(3)


def _model(nodes, x_shape, inits, elem=TensorProto.FLOAT):
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", elem, x_shape)],
                          [helper.make_tensor_value_info("y", elem, None)],
                          [numpy_helper.from_array(v, k) for k, v in inits.items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


def _stats(c, dtype):
    return {"s": RNG.standard_normal(c).astype(dtype), "b": RNG.standard_normal(c).astype(dtype),
            "m": RNG.standard_normal(c).astype(dtype), "v": (np.abs(RNG.standard_normal(c)) + 0.5).astype(dtype)}


def _ops(sym) -> list[str]:
    return [n.op.name for n in sym.topo() if n.op is not None]


def _run_both(m, tmp_path, x):
    path = str(tmp_path / "m.onnx")
    onnx.save(m, path)
    sym = la.onnx.load(path)
    op = la.CachedOp(sym)
    got = op(la.array(x)).asnumpy()
    if x.dtype == np.float64:  # onnxruntime has no float64 Conv: the ONNX spec's own evaluator
        from onnx.reference import ReferenceEvaluator
        want = ReferenceEvaluator(m).run(None, {"x": x})[0]
    else:
        want = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    return sym, op, got, want


@pytest.mark.parametrize("dtype,elem", [(np.float32, TensorProto.FLOAT), (np.float64, TensorProto.DOUBLE)])
@pytest.mark.parametrize("conv_attrs,with_bias", [
    ({"pads": [1, 1, 1, 1]}, True), ({}, False), ({"strides": [2, 2], "group": 2}, True),
    ({"pads": [0, 1, 1, 0]}, False)])  # asymmetric pads: a pad node, then the conv
def test_imported_conv_then_batch_norm_folds_and_equals_onnxruntime(tmp_path, dtype, elem, conv_attrs, with_bias):
    c_in, c_out = 4, 6
    inits = {"w": RNG.standard_normal((c_out, c_in // conv_attrs.get("group", 1), 3, 3)).astype(dtype),
             **_stats(c_out, dtype)}
    conv_in = ["x", "w"]
    if with_bias:
        inits["cb"] = RNG.standard_normal(c_out).astype(dtype)
        conv_in.append("cb")
    nodes = [helper.make_node("Conv", conv_in, ["c"], **conv_attrs),
             helper.make_node("BatchNormalization", ["c", "s", "b", "m", "v"], ["y"], epsilon=1e-3)]
    x = RNG.standard_normal((2, c_in, 7, 8)).astype(dtype)
    sym, op, got, want = _run_both(_model(nodes, ("N", c_in, 7, 8), inits, elem), tmp_path, x)
    assert "batch_norm" in _ops(sym)  # imported as the registry op ...
    compiled = _ops(op.compiled(x=x.shape))
    assert "batch_norm" not in compiled and "conv2d" in compiled  # ... and folded into the conv
    assert got.dtype == want.dtype
    rtol, atol = (1e-5, 1e-5) if dtype == np.float32 else (1e-12, 1e-12)
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)


def test_imported_batch_norm_alone_runs_as_the_registry_op(tmp_path):
    """Nothing to fold into (its input is the graph input): it stays, and still equals onnxruntime."""
    nodes = [helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"], epsilon=1e-4)]
    x = RNG.standard_normal((3, 5, 4)).astype(np.float32)
    sym, op, got, want = _run_both(_model(nodes, (3, 5, 4), _stats(5, np.float32)), tmp_path, x)
    assert "batch_norm" in _ops(op.compiled(x=x.shape))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)

