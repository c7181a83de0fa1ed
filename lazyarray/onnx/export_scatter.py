"""Export of the scatter ops and ``non_max_suppression``: ``scatter_along_axis`` -> ScatterElements,
``scatter_nd`` -> ScatterND (``reduce`` -> ``reduction``: add/mul from opset 16, max/min from 18),
``non_max_suppression`` -> NonMaxSuppression (its limits as constant inputs), ``bitcast`` ->
BitCast (opset 26)."""
from __future__ import annotations

import numpy as np

from .export_base import elem_type, fail, in_dtype, out_dtype

_REDUCTION_OPSET = {"none": 11, "add": 16, "mul": 16, "max": 18, "min": 18}


def _reduction(g, node) -> str:
    red = node.params.get("reduce", "none")
    if g.opset < _REDUCTION_OPSET[red]:
        raise fail(g, node, f"reduce={red!r} needs ONNX opset {_REDUCTION_OPSET[red]} (export with that opset)")
    return red


def _scatter_along_axis(g, node, ins):
    return [g.op("ScatterElements", ins, axis=int(node.params.get("axis", 0)), reduction=_reduction(g, node))]


def _scatter_nd(g, node, ins):
    return [g.op("ScatterND", ins, reduction=_reduction(g, node))]


def _non_max_suppression(g, node, ins):
    if any(in_dtype(node, i) != np.float32 for i in (0, 1)):
        raise fail(g, node, "ONNX NonMaxSuppression takes float32 boxes and scores only (cast them first)")
    p = node.params
    limits = [g.ints([int(p.get("max_per_class", 0))]), g.const(np.array([p.get("iou_threshold", 0.0)], np.float32))]
    if p.get("score_threshold") is not None:
        limits.append(g.const(np.array([p["score_threshold"]], np.float32)))
    return [g.op("NonMaxSuppression", list(ins) + limits, center_point_box=int(bool(p.get("center_point_box"))))]


def _bitcast(g, node, ins):
    if g.opset < 26:
        raise fail(g, node, "BitCast is ONNX opset 26: export with opset=26")
    return [g.op("BitCast", ins, to=elem_type(out_dtype(node)))]


CONVERTERS = {"scatter_along_axis": _scatter_along_axis, "scatter_nd": _scatter_nd,
              "non_max_suppression": _non_max_suppression, "bitcast": _bitcast}
