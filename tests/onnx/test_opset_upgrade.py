"""Models of opset 7-12 read through ``onnx/opset_upgrade.py``: operators whose definition changed
before 13 are converted by ``onnx.version_converter`` and mean what onnxruntime computes on the
original file; unchanged models are read as they are; what cannot be converted (or is converted
wrongly) raises ``GraphFormatError`` with the reason."""
from __future__ import annotations

import numpy as np
import pytest

import lazyarray as la
from lazyarray.errors import GraphFormatError

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from lazyarray.onnx.load import check_model  # noqa: E402
from lazyarray.onnx.opset_upgrade import TARGET_OPSET, changed_operators, upgrade  # noqa: E402

RNG = np.random.default_rng(3)
F32, I64 = TensorProto.FLOAT, TensorProto.INT64


def model(nodes, inputs, opset, inits=(), n_out=1):
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(*i) for i in inputs],
                          [helper.make_tensor_value_info(f"y{k}" if n_out > 1 else "y", F32, None)
                           for k in range(n_out)],
                          [numpy_helper.from_array(np.asarray(v), k) for k, v in dict(inits).items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 7
    return m


def x32(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


# (description, nodes, inputs, opset, initializers, outputs): old forms whose meaning changed by 13
OLD_FORMS = [
    ("Softmax-11 coerces to 2-D from its axis", [helper.make_node("Softmax", ["x"], ["y"], axis=1)],
     [("x", F32, (2, 3, 4))], 11, {}, 1),
    ("LogSoftmax-11 with the default axis 1", [helper.make_node("LogSoftmax", ["x"], ["y"])],
     [("x", F32, (2, 3, 4))], 11, {}, 1),
    ("Unsqueeze-11 axes attribute", [helper.make_node("Unsqueeze", ["x"], ["y"], axes=[0, 3])],
     [("x", F32, (2, 3))], 11, {}, 1),
    ("Squeeze-11 axes attribute", [helper.make_node("Squeeze", ["x"], ["y"], axes=[1])],
     [("x", F32, (2, 1, 3))], 11, {}, 1),
    ("ReduceSum-11 axes attribute", [helper.make_node("ReduceSum", ["x"], ["y"], axes=[1], keepdims=0)],
     [("x", F32, (2, 3, 4))], 11, {}, 1),
    ("Split-11 split attribute", [helper.make_node("Split", ["x"], ["y0", "y1"], axis=1, split=[1, 3])],
     [("x", F32, (2, 4))], 11, {}, 2),
    ("Pad-10 pads attribute", [helper.make_node("Pad", ["x"], ["y"], pads=[0, 1, 1, 2], value=1.5)],
     [("x", F32, (2, 3))], 10, {}, 1),
    ("Clip-10 min/max attributes", [helper.make_node("Clip", ["x"], ["y"], min=-0.5, max=0.25)],
     [("x", F32, (3, 4))], 10, {}, 1),
    ("Slice-9 attributes", [helper.make_node("Slice", ["x"], ["y"], starts=[1, 0], ends=[3, -1], axes=[0, 1])],
     [("x", F32, (4, 5))], 9, {}, 1),
    ("Dropout-10 ratio attribute (inference: identity)", [helper.make_node("Dropout", ["x"], ["y"], ratio=0.3)],
     [("x", F32, (2, 3))], 10, {}, 1),
    ("Upsample-9 nearest -> Resize", [helper.make_node("Upsample", ["x", "s"], ["y"], mode="nearest")],
     [("x", F32, (1, 2, 2, 3))], 9, {"s": np.array([1, 1, 2, 2], np.float32)}, 1),
    ("BatchNormalization-7 spatial", [helper.make_node("BatchNormalization", ["x", "g", "b", "m", "v"], ["y"],
                                                       spatial=1, epsilon=1e-3)],
     [("x", F32, (2, 3, 4, 4))], 7,
     {"g": x32(3), "b": x32(3), "m": x32(3), "v": np.abs(x32(3)) + 0.5}, 1),
    ("Gemm-9 and Flatten-9", [helper.make_node("Flatten", ["x"], ["f"]),
                              helper.make_node("Gemm", ["f", "w", "c"], ["y"], transB=1, alpha=0.5)],
     [("x", F32, (2, 3, 2))], 9, {"w": x32(4, 6), "c": x32(4)}, 1),
]


@pytest.mark.parametrize("what,nodes,inputs,opset,inits,n_out", OLD_FORMS, ids=[f[0] for f in OLD_FORMS])
def test_old_operator_forms_mean_what_onnxruntime_computes_on_the_original(tmp_path, what, nodes, inputs, opset,
                                                                           inits, n_out):
    m = model(nodes, inputs, opset, inits, n_out)
    assert changed_operators(m, opset)  # the model really needs converting
    feeds = {name: x32(*shape) for name, _, shape in inputs}
    want = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
    path = str(tmp_path / "old.onnx")
    onnx.save(m, path)
    out = la.CachedOp(la.onnx.load(path))(**{k: la.array(v) for k, v in feeds.items()})
    got = [o.asnumpy() for o in (out if isinstance(out, list) else [out])]
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


def test_conversion_reaches_opset_13_and_keeps_recent_models_as_they_are():
    old = model([helper.make_node("Softmax", ["x"], ["y"])], [("x", F32, (2, 3, 4))], 11)
    new = upgrade(old, "m", lambda m: check_model(m, "m"))
    assert new is not old and [o.version for o in new.opset_import if o.domain == ""] == [TARGET_OPSET]
    recent = model([helper.make_node("Softmax", ["x"], ["y"])], [("x", F32, (2, 3))], 13)
    assert upgrade(recent, "m", check_model) is recent
    unchanged = model([helper.make_node("Sin", ["x"], ["y"])], [("x", F32, (2, 3))], 9)
    assert changed_operators(unchanged, 9) == [] and upgrade(unchanged, "m", check_model) is unchanged


def test_a_model_the_converter_cannot_convert_raises_graph_format_error(tmp_path):
    # Crop (an experimental operator of old opsets) has no schema the converter could map to 13
    m = model([helper.make_node("Crop", ["x"], ["y"], border=[0, 0, 1, 1])], [("x", F32, (1, 1, 4, 4))], 9)
    with pytest.raises(GraphFormatError, match="opset 9.*Crop"):
        upgrade(m, "m", check_model)


def test_a_failing_check_of_the_converted_model_raises_graph_format_error():
    m = model([helper.make_node("Softmax", ["x"], ["y"])], [("x", F32, (2, 3, 4))], 11)

    def reject(_):
        raise GraphFormatError("checker says no")

    with pytest.raises(GraphFormatError, match="opset-13 model is invalid: .?checker says no.*re-export"):
        upgrade(m, "m", reject)


def test_batched_scan_8_is_refused_because_the_converter_drops_its_batch_axis(tmp_path):
    body = helper.make_graph([helper.make_node("Add", ["s", "v"], ["s2"]), helper.make_node("Identity", ["s2"], ["o"])],
                             "body", [helper.make_tensor_value_info(n, F32, (2,)) for n in ("s", "v")],
                             [helper.make_tensor_value_info(n, F32, (2,)) for n in ("s2", "o")])
    scan = helper.make_node("Scan", ["", "init", "x"], ["y0", "y1"], body=body, num_scan_inputs=1)
    m = model([scan], [("init", F32, (1, 2)), ("x", F32, (1, 3, 2))], 8, n_out=2)
    path = str(tmp_path / "scan8.onnx")
    onnx.save(m, path)
    with pytest.raises(GraphFormatError, match="opset 8.*Scan before opset 9 is batched.*re-export"):
        la.onnx.load(path)
