"""ONNX RoiAlign -> registry ops: each region of interest is cut into ``output_height x
output_width`` bins and each bin averages (or takes the max of) ``sampling_ratio^2`` bilinear
samples of its batch entry's feature map.

The sample positions are separable (rows from the ROI's y range, columns from its x range) and
follow ONNX's reference: ``half_pixel`` shifts the ROI by -0.5 (``output_half_pixel`` keeps it and
makes it at least 1 x 1), a sample further than one pixel outside the map reads 0, others clamp to
the map; in ``max`` mode a sample is the largest of its four weighted corners. The samples are
``take_along_axis`` reads of the flattened maps of the ROIs' batch entries. ``sampling_ratio=0``
(adaptive: the count follows each ROI's size) is refused: the graph needs a fixed count.
"""
from __future__ import annotations

import numpy as np

from .. import sym as S
from .import_ops import Converter, OnnxNode, constant, dtype_of


def _text(n: OnnxNode, name: str, default: str) -> str:
    v = n.attr(name, default)
    return v.decode() if isinstance(v, bytes) else str(v)


def _axis_samples(start, length, bins: int, ratio: int, size: int):
    """Positions along one axis [R, bins * ratio]: (low index, high index, high weight, inside)."""
    frac = (np.arange(bins)[:, None] + (np.arange(ratio)[None, :] + 0.5) / ratio).reshape(1, -1)
    pos = S.add(S.expand_dims(start, axis=1), S.multiply(S.expand_dims(S.divide(length, float(bins)), axis=1),
                                                         constant(frac.astype(dtype_of(start)))))
    inside = S.logical_and(S.greater_equal(pos, -1.0), S.less_equal(pos, float(size)))
    pos = S.maximum(pos, 0.0)
    low = S.floor(pos)
    edge = S.greater_equal(low, size - 1.0)
    low = S.where(edge, S.full_like(low, fill_value=size - 1.0), low)
    high = S.where(edge, low, S.add(low, 1.0))
    w_high = S.where(edge, S.zeros_like(pos), S.subtract(pos, low))
    return S.cast(low, dtype="int64"), S.cast(high, dtype="int64"), w_high, inside


def roi_align(n: OnnxNode) -> list:
    n.arity(3)
    x, rois, batch = n.inputs
    xs = n.known_shape(0, "RoiAlign")
    r = n.known_shape(1, "RoiAlign")[0]
    if len(xs) != 4:
        n.fail(f"RoiAlign takes an [N, C, H, W] input, got {xs}")
    _, c, h, w = xs
    ph, pw = int(n.attr("output_height", 1)), int(n.attr("output_width", 1))
    ratio = int(n.attr("sampling_ratio", 0))
    mode = _text(n, "mode", "avg")
    ctm = _text(n, "coordinate_transformation_mode", "half_pixel")
    if ratio < 1:
        n.fail("RoiAlign sampling_ratio=0 (adaptive: the sample count follows each ROI's size) is not supported; "
               "give a positive sampling_ratio")
    if mode not in ("avg", "max") or ctm not in ("half_pixel", "output_half_pixel"):
        n.fail(f"RoiAlign mode={mode!r} coordinate_transformation_mode={ctm!r} is not supported")
    scale = float(n.attr("spatial_scale", 1.0))
    half = ctm == "half_pixel"
    box = S.subtract(S.multiply(rois, scale), 0.5) if half else S.multiply(rois, scale)
    x0, y0, x1, y1 = (S.getitem(box, key=(slice(None), i)) for i in range(4))
    rw, rh = S.subtract(x1, x0), S.subtract(y1, y0)
    if not half:
        rw, rh = S.maximum(rw, 1.0), S.maximum(rh, 1.0)
    ylo, yhi, wy, yin = _axis_samples(y0, rh, ph, ratio, h)  # [R, ph * ratio]
    xlo, xhi, wx, xin = _axis_samples(x0, rw, pw, ratio, w)  # [R, pw * ratio]

    def grid(a, b):  # [R, Y] x [R, X] -> [R, 1, Y * X]
        return S.reshape(S.add(S.expand_dims(a, axis=2), S.expand_dims(b, axis=1)), shape=(r, 1, -1))

    def outer(a, b):
        return S.reshape(S.multiply(S.expand_dims(a, axis=2), S.expand_dims(b, axis=1)), shape=(r, 1, -1))
    inside = S.cast(S.reshape(S.logical_and(S.expand_dims(yin, axis=2), S.expand_dims(xin, axis=1)),
                              shape=(r, 1, -1)), dtype=dtype_of(x))
    maps = S.take(S.reshape(x, shape=(xs[0], c, h * w)), S.cast(batch, dtype="int64"), axis=0)  # [R, C, H*W]
    corners = []
    for yi, wyi in ((ylo, S.subtract(1.0, wy)), (yhi, wy)):
        for xi, wxi in ((xlo, S.subtract(1.0, wx)), (xhi, wx)):
            idx = grid(S.multiply(yi, w), xi)
            corners.append(S.multiply(S.take_along_axis(maps, idx, axis=2), S.multiply(outer(wyi, wxi), inside)))
    if mode == "avg":
        v = S.add(S.add(corners[0], corners[1]), S.add(corners[2], corners[3]))
    else:
        v = S.maximum(S.maximum(corners[0], corners[1]), S.maximum(corners[2], corners[3]))
    v = S.reshape(v, shape=(r, c, ph, ratio, pw, ratio))
    if mode == "avg":
        return [S.divide(S.sum(v, axis=(3, 5)), float(ratio * ratio))]
    return [S.max(v, axis=(3, 5))]


ROI_ALIGN_CONVERTERS: dict[str, Converter] = {"RoiAlign": roi_align}
