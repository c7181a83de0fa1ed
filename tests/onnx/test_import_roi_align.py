"""ONNX RoiAlign (``onnx/import_roi_align.py``) beyond ONNX's node cases: ROIs on several batch
entries, partly or wholly outside the map, scaled, both coordinate modes; average pooling against
onnxruntime, max pooling against onnx.reference (onnxruntime's max mode weighs corners differently)."""
from __future__ import annotations

import numpy as np
import pytest
from node_check import check_node, node_model, run_lazyarray

from lazyarray.errors import GraphFormatError

RNG = np.random.default_rng(28)


def roi_inputs():
    x = RNG.standard_normal((3, 4, 12, 10)).astype(np.float32)
    rois = np.array([[0, 0, 9, 9], [2.5, 1.2, 7.3, 11.0], [-3, -2, 4, 3], [8, 9, 14, 16], [5, 5, 5.4, 5.2],
                     [20, 20, 30, 30]], np.float32)
    return {"x": x, "rois": rois, "batch": np.array([0, 2, 1, 0, 2, 1], np.int64)}


@pytest.mark.parametrize("ctm", ["half_pixel", "output_half_pixel"])
@pytest.mark.parametrize("ratio,out,scale", [(2, (3, 4), 1.0), (1, (2, 2), 0.5), (3, (5, 3), 1.5)])
def test_roi_align_average_matches_onnxruntime(ctm, ratio, out, scale):
    ins = roi_inputs()
    model = node_model("RoiAlign", ins, opset=16, coordinate_transformation_mode=ctm, sampling_ratio=ratio,
                       output_height=out[0], output_width=out[1], spatial_scale=scale)
    check_node(model, ins, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("ctm", ["half_pixel", "output_half_pixel"])
def test_roi_align_max_matches_reference(ctm):
    ins = roi_inputs()
    model = node_model("RoiAlign", ins, opset=16, mode="max", coordinate_transformation_mode=ctm, sampling_ratio=2,
                       output_height=3, output_width=3)
    check_node(model, ins, runtime="reference", rtol=1e-4, atol=1e-5)


def test_adaptive_sampling_is_a_graph_format_error():
    ins = roi_inputs()
    with pytest.raises(GraphFormatError, match="sampling_ratio=0"):
        run_lazyarray(node_model("RoiAlign", ins, opset=16, infer=False, output_height=2, output_width=2), ins)
