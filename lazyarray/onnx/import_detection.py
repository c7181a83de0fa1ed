"""ONNX NonMaxSuppression -> the registry's ``non_max_suppression`` (``ops/detection.py``). The
limits ONNX passes as tensors (max_output_boxes_per_class, iou_threshold, score_threshold) are
read at load time; omitted ones take the spec's defaults (0 boxes, threshold 0, no score threshold)."""
from __future__ import annotations

import numpy as np

from .. import sym as S
from .import_ops import Converter, OnnxNode


def non_max_suppression(n: OnnxNode) -> list:
    n.arity(2, 5)

    def scalar(i, what, default):
        v = n.const(i, f"NonMaxSuppression {what}")
        return default if v is None or np.asarray(v).size == 0 else np.asarray(v).reshape(-1)[0].item()
    return [S.non_max_suppression(n.inputs[0], n.inputs[1],
                                  max_per_class=max(int(scalar(2, "max_output_boxes_per_class", 0)), 0),
                                  iou_threshold=float(scalar(3, "iou_threshold", 0.0)),
                                  score_threshold=None if (t := scalar(4, "score_threshold", None)) is None else float(t),
                                  center_point_box=bool(int(n.attr("center_point_box", 0))))]


DETECTION_CONVERTERS: dict[str, Converter] = {"NonMaxSuppression": non_max_suppression}
