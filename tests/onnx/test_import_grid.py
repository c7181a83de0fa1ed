"""ONNX GridSample and AffineGrid (``onnx/import_grid.py``) beyond ONNX's node cases: every mode x
padding mode x align_corners on 2-D images with grid points well past the borders (against
onnxruntime), 3-D volumes (against onnx.reference), and AffineGrid against onnxruntime (2-D) and
onnx.reference (3-D)."""
from __future__ import annotations

import numpy as np
import pytest
from node_check import check_node, node_model

RNG = np.random.default_rng(21)


@pytest.mark.parametrize("mode", ["nearest", "linear", "cubic"])
@pytest.mark.parametrize("padding", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align", [0, 1])
def test_grid_sample_2d_matches_onnxruntime(mode, padding, align):
    x = RNG.standard_normal((2, 3, 5, 7)).astype(np.float32)
    grid = (RNG.random((2, 4, 6, 2)) * 3.2 - 1.6).astype(np.float32)  # about a third of the points outside
    ins = {"x": x, "grid": grid}
    # cubic with border padding: onnxruntime does not clamp a coordinate past the border before taking
    # the 4 taps, ONNX's node cases (onnx.reference, PyTorch) do; follow ONNX there
    runtime = "reference" if (mode, padding) == ("cubic", "border") else "ort"
    check_node(node_model("GridSample", ins, opset=20, mode=mode, padding_mode=padding, align_corners=align), ins,
               runtime=runtime, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("mode", ["bilinear", "bicubic"])
def test_grid_sample_opset16_mode_names(mode):
    ins = {"x": RNG.standard_normal((1, 2, 4, 4)).astype(np.float32),
           "grid": (RNG.random((1, 3, 3, 2)) * 2.4 - 1.2).astype(np.float32)}
    check_node(node_model("GridSample", ins, opset=16, mode=mode), ins, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("mode,padding", [("linear", "zeros"), ("nearest", "reflection"), ("linear", "border")])
def test_grid_sample_3d_matches_reference(mode, padding):
    ins = {"x": RNG.standard_normal((1, 2, 3, 4, 5)).astype(np.float32),
           "grid": (RNG.random((1, 2, 3, 2, 3)) * 2.6 - 1.3).astype(np.float32)}
    check_node(node_model("GridSample", ins, opset=22, mode=mode, padding_mode=padding), ins,
               runtime="reference", rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("size,align", [([2, 3, 4, 5], 0), ([2, 1, 3, 6], 1), ([1, 2, 3, 4, 2], 0), ([1, 2, 1, 4, 3], 1)])
def test_affine_grid_matches_onnxruntime(size, align):
    r = len(size) - 2
    ins = {"theta": RNG.standard_normal((size[0], r, r + 1)).astype(np.float32)}
    model = node_model("AffineGrid", ins, opset=20, consts={"size": np.array(size, np.int64)}, align_corners=align)
    check_node(model, ins, runtime="ort" if r == 2 else "reference", rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("mode", ["nearest", "linear"])
def test_grid_sample_reflection_on_a_single_pixel_axis(mode):
    """With align_corners the reflection range of a one-pixel axis is the point 0: everything folds onto it."""
    ins = {"x": RNG.standard_normal((1, 2, 1, 5)).astype(np.float32),
           "grid": (RNG.random((1, 3, 4, 2)) * 3 - 1.5).astype(np.float32)}
    check_node(node_model("GridSample", ins, opset=20, mode=mode, padding_mode="reflection", align_corners=1), ins,
               rtol=1e-5, atol=1e-6)
