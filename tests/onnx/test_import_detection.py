"""ONNX NonMaxSuppression (``onnx/import_detection.py``) against onnxruntime beyond ONNX's node
cases: many boxes and classes, both box formats, score thresholds, omitted limits."""
from __future__ import annotations

import numpy as np
import pytest
from node_check import check_node, node_model

RNG = np.random.default_rng(22)


def random_boxes(b, n):
    lo = RNG.random((b, n, 2)) * 10
    return np.concatenate([lo, lo + RNG.random((b, n, 2)) * 4 + 0.5], axis=-1).astype(np.float32)


@pytest.mark.parametrize("center,limits", [(0, (5, 0.4, None)), (0, (50, 0.2, 0.5)), (1, (3, 0.6, 0.1)),
                                           (0, (None, None, None)), (0, (100, None, None))])
def test_non_max_suppression_matches_onnxruntime(center, limits):
    boxes, scores = random_boxes(3, 40), RNG.random((3, 4, 40)).astype(np.float32)
    if center:
        boxes = np.concatenate([(boxes[..., 2:] + boxes[..., :2]) / 2, boxes[..., 2:] - boxes[..., :2]], axis=-1)
    ins = {"boxes": boxes, "scores": scores}
    names = ("max", "iou", "score")
    dtypes = (np.int64, np.float32, np.float32)
    consts = {k: None if v is None else np.array([v], dt) for k, v, dt in zip(names, limits, dtypes)}
    check_node(node_model("NonMaxSuppression", ins, opset=11, consts=consts, center_point_box=center), ins,
               rtol=0, atol=0)
