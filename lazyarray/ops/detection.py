"""Object-detection ops: ``non_max_suppression``.

``non_max_suppression(boxes [B, N, 4], scores [B, C, N])`` greedily keeps, per batch entry and
class, the highest-scoring box and drops the remaining boxes that overlap a kept one by an
intersection over union above ``iou_threshold``, up to ``max_per_class`` boxes (ONNX
NonMaxSuppression, ``torchvision.ops.batched_nms``). Boxes are corner pairs ``[y1, x1, y2, x2]``
(either diagonal) or, with ``center_point_box``, ``[x_center, y_center, width, height]``. Only boxes
scoring strictly above ``score_threshold`` compete (``None``: all). Equal scores keep the lower
box index first. The result, ``[K, 3]`` int64 rows ``(batch, class, box)`` in batch, class and
selection order, has a length known only after computing.
"""
from __future__ import annotations

import numpy as np

from ..errors import ShapeError, fmt_shape
from .params import BOOL, FLOAT, INT, OPT_FLOAT, Param
from .registry import OpDef, register


def _corners(b: np.ndarray, center: bool) -> np.ndarray:
    """[..., 4] boxes as (y_min, x_min, y_max, x_max)."""
    if center:
        x, y, hw, hh = b[..., 0], b[..., 1], b[..., 2] / 2, b[..., 3] / 2
        return np.stack([y - hh, x - hw, y + hh, x + hw], axis=-1)
    return np.stack([np.minimum(b[..., 0], b[..., 2]), np.minimum(b[..., 1], b[..., 3]),
                     np.maximum(b[..., 0], b[..., 2]), np.maximum(b[..., 1], b[..., 3])], axis=-1)


def _overlaps(kept: np.ndarray, others: np.ndarray, iou_threshold: float) -> np.ndarray:
    """Whether each of ``others`` overlaps the box ``kept`` by IoU > threshold (empty or degenerate
    boxes and intersections never do)."""
    ih = np.minimum(kept[2], others[:, 2]) - np.maximum(kept[0], others[:, 0])
    iw = np.minimum(kept[3], others[:, 3]) - np.maximum(kept[1], others[:, 1])
    inter = ih * iw
    a1 = (kept[2] - kept[0]) * (kept[3] - kept[1])
    a2 = (others[:, 2] - others[:, 0]) * (others[:, 3] - others[:, 1])
    union = a1 + a2 - inter
    valid = (ih > 0) & (iw > 0) & (inter > 0) & (a1 > 0) & (a2 > 0) & (union > 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        return valid & (inter / np.where(valid, union, 1) > iou_threshold)


def _nms(xp, boxes, scores, max_per_class=0, iou_threshold=0.0, score_threshold=None,
         center_point_box=False, out=None):
    host = [np.asarray(a.get() if hasattr(a, "get") and not isinstance(a, np.ndarray) else a) for a in (boxes, scores)]
    corners, sc = _corners(host[0].astype(np.float64), center_point_box), host[1]
    rows = []
    for b in range(sc.shape[0]):
        for c in range(sc.shape[1]):
            s = sc[b, c]
            cand = np.arange(s.shape[0]) if score_threshold is None else np.nonzero(s > score_threshold)[0]
            order = cand[np.lexsort((cand, -s[cand].astype(np.float64)))]  # score descending, index ascending
            kept = 0
            while order.size and kept < max_per_class:
                top = order[0]
                rows.append((b, c, top))
                kept += 1
                rest = order[1:]
                order = rest[~_overlaps(corners[b, top], corners[b, rest], iou_threshold)]
    return xp.asarray(np.array(rows, dtype=np.int64).reshape(-1, 3))


def _nms_shape(shapes, **params):
    b, s = shapes
    if len(b) != 3 or b[2] not in (4, None) or len(s) != 3 or (None not in (b[0], s[0]) and b[0] != s[0]) \
            or (None not in (b[1], s[2]) and b[1] != s[2]):
        raise ShapeError(f"non_max_suppression: boxes must be [B, N, 4] and scores [B, C, N], got {fmt_shape(b)} "
                         f"and {fmt_shape(s)}")
    return (None, 3)


register(OpDef("non_max_suppression", ("boxes", "scores"), _nms,
               params=(Param("max_per_class", INT, 0), Param("iou_threshold", FLOAT, 0.0),
                       Param("score_threshold", OPT_FLOAT, None), Param("center_point_box", BOOL, False)),
               shape=_nms_shape, dtype=lambda dtypes, **p: np.dtype("int64"),
               doc="greedy non-maximum suppression per batch entry and class: [K, 3] int64 rows (batch, class, box) "
                   "of the kept boxes, best first (ONNX NonMaxSuppression)"))
