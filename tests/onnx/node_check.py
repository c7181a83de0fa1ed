"""Shared by the per-family import tests: a one-node ONNX model, run by lazyarray's backend and by
onnxruntime (or ``onnx.reference`` where onnxruntime lacks the operator)."""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import helper, numpy_helper  # noqa: E402

from lazyarray.onnx.backend import LazyArrayBackend  # noqa: E402


def node_model(op: str, inputs: dict, n_outputs: int = 1, opset: int = 21, consts: dict | None = None,
               domain: str = "", infer: bool = True, **attrs):
    """A model of one ``op`` node: ``inputs`` (name -> array) are graph inputs, then ``consts`` (name ->
    array) initializers, in that order (``None`` in either: an omitted input); the outputs ``y0, y1,
    ...`` are typed by ONNX's shape inference (``infer=False``: left untyped, for models that
    inference refuses: float outputs)."""
    consts = {k: v for k, v in (consts or {}).items()}
    names = [k if v is not None else "" for k, v in {**inputs, **consts}.items()]
    while names and not names[-1]:
        names.pop()
    node = helper.make_node(op, names, [f"y{i}" for i in range(n_outputs)], domain=domain or None, **attrs)
    ins = [helper.make_tensor_value_info(k, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape)
           for k, v in inputs.items() if v is not None]
    # typed by shape inference below, else float
    outs = [onnx.ValueInfoProto(name=f"y{i}") if infer else
            helper.make_tensor_value_info(f"y{i}", onnx.TensorProto.FLOAT, None) for i in range(n_outputs)]
    graph = helper.make_graph([node], "g", ins, outs, [numpy_helper.from_array(v, k) for k, v in consts.items() if v is not None])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 10
    return onnx.shape_inference.infer_shapes(model, strict_mode=True) if infer else model


def feeds(inputs: dict) -> dict:
    return {k: v for k, v in inputs.items() if v is not None}


def run_lazyarray(model, inputs: dict) -> list:
    return [np.asarray(y) for y in LazyArrayBackend.prepare(model).run(list(feeds(inputs).values()))]


def run_reference(model, inputs: dict, runtime: str = "ort") -> list:
    if runtime == "ort":
        ort = pytest.importorskip("onnxruntime")
        sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
        return sess.run(None, feeds(inputs))
    from onnx.reference import ReferenceEvaluator
    with np.errstate(all="ignore"):  # the reference divides by zero on some edges (AffineGrid of size 1)
        return ReferenceEvaluator(model).run(None, feeds(inputs))


def check_node(model, inputs: dict, runtime: str = "ort", rtol: float = 1e-5, atol: float = 1e-6) -> list:
    """lazyarray's outputs equal the runtime's (values, dtypes, shapes); returns lazyarray's."""
    got, want = run_lazyarray(model, inputs), run_reference(model, inputs, runtime)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        w = np.asarray(w)
        assert g.dtype == w.dtype and g.shape == w.shape, (g.dtype, g.shape, w.dtype, w.shape)
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol)
    return got
