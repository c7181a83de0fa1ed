"""3-D Conv / ConvTranspose / pooling import (sums of 2-D convolutions over the depth taps; pooling
over every tap) against onnxruntime on single-node models."""
from __future__ import annotations

import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper  # noqa: E402
from test_load import check, model, x32  # noqa: E402 (the single-node model helpers)

F32 = TensorProto.FLOAT


def _conv_out(op, xs, ws, attrs):
    c_out = ws[1] * attrs.get("group", 1) if op == "ConvTranspose" else ws[0]
    return model([helper.make_node(op, ["x", "w", "b"], ["y"], **attrs)], [("x", F32, xs)], [("y", F32, None)],
                 {"w": x32(*ws), "b": x32(c_out)})


@pytest.mark.parametrize("xs,ws,attrs", [
    ((2, 3, 5, 6, 7), (4, 3, 3, 3, 3), {}),
    ((1, 2, 7, 6, 5), (4, 2, 3, 2, 3), {"strides": [2, 1, 2], "pads": [1, 0, 1, 0, 1, 2]}),
    ((2, 4, 6, 6, 6), (6, 2, 2, 3, 3), {"group": 2, "dilations": [2, 1, 2], "pads": [1, 1, 1, 1, 1, 1]}),
    ((1, 2, 5, 5, 5), (3, 2, 3, 3, 3), {"auto_pad": "SAME_UPPER", "strides": [2, 2, 2]}),
], ids=["plain", "strided-asymmetric-pads", "grouped-dilated", "same-upper"])
def test_conv3d_matches_onnxruntime(xs, ws, attrs, tmp_path):
    check(_conv_out("Conv", xs, ws, attrs), tmp_path, {"x": x32(*xs)}, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("xs,ws,attrs", [
    ((2, 3, 3, 4, 5), (3, 2, 3, 3, 3), {}),
    ((1, 2, 3, 3, 4), (2, 3, 3, 2, 3), {"strides": [2, 3, 2], "pads": [1, 0, 1, 1, 1, 0],
                                        "output_padding": [1, 0, 1]}),
    ((1, 4, 2, 3, 3), (4, 1, 2, 2, 2), {"group": 2, "strides": [2, 2, 1]}),
], ids=["plain", "strided-padded-output-padding", "grouped"])
def test_conv_transpose3d_matches_onnxruntime(xs, ws, attrs, tmp_path):
    check(_conv_out("ConvTranspose", xs, ws, attrs), tmp_path, {"x": x32(*xs)}, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("op,attrs", [
    ("MaxPool", {"kernel_shape": [2, 3, 2], "strides": [2, 1, 2], "pads": [0, 1, 1, 1, 1, 0]}),
    ("AveragePool", {"kernel_shape": [3, 2, 2], "strides": [1, 2, 2], "pads": [1, 0, 1, 1, 1, 0],
                     "count_include_pad": 0}),
    ("AveragePool", {"kernel_shape": [2, 2, 2], "ceil_mode": 1, "strides": [2, 2, 2]}),
])
def test_pool3d_matches_onnxruntime(op, attrs, tmp_path):
    m = model([helper.make_node(op, ["x"], ["y"], **attrs)], [("x", F32, (2, 3, 5, 6, 7))], [("y", F32, None)])
    check(m, tmp_path, {"x": x32(2, 3, 5, 6, 7)})
