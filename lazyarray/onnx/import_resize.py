"""ONNX ``Resize`` -> registry ops, with the spec's coordinate transformations, ``antialias`` and
``tf_crop_and_resize``.

``Resize`` is separable: each resized axis is a ``take`` of indices (nearest) or a weighted sum of
``take``s (linear, cubic), the indices and weights computed at load time in NumPy from the output
positions mapped back to input coordinates. With ``antialias=1`` a downscaling (scale < 1) linear or
cubic filter is stretched by ``1 / scale``: every input pixel ``j`` with ``|scale * (j - x)|`` inside
the kernel's support contributes ``kernel(scale * (j - x))``, normalized to sum 1 (edge pixels
clamped, or dropped with ``exclude_outside``). ``tf_crop_and_resize`` maps the output onto the ``roi``
box of the input; positions falling outside the input take ``extrapolation_value``.
"""
from __future__ import annotations

import math

import numpy as np

from .. import sym as S
from .import_ops import OnnxNode, check_size, constant, dtype_of, fold_too_large


def resize(n: OnnxNode) -> list:
    n.arity(1, 4)
    x = n.inputs[0]
    shape = n.known_shape(0, "Resize")
    rank = len(shape)
    mode = n.attr("mode", "nearest")
    ctm = n.attr("coordinate_transformation_mode", "half_pixel")
    antialias = bool(n.attr("antialias", 0))
    if mode not in ("nearest", "linear", "cubic"):
        n.fail(f"mode={mode!r}: expected nearest, linear or cubic")
    if antialias and mode == "nearest":
        n.fail("antialias=1 applies to the linear and cubic modes, not nearest")
    axes = n.attr("axes")
    axes = list(range(rank)) if axes is None else [a % rank for a in axes]
    ins = [shape[a] for a in axes]
    scales, sizes = _scales_and_sizes(n, shape, axes, ins)
    _check_sizes(n, shape, axes, scales, sizes, mode, antialias)
    rois = _rois(n, len(axes)) if ctm == "tf_crop_and_resize" else [None] * len(axes)
    dt = dtype_of(x)
    wdt = dt if np.dtype(dt).kind == "f" else np.float32  # (the input's: weights of every axis alike)
    outside = np.zeros((1,) * rank, dtype=bool)  # tf_crop_and_resize: output positions off the input
    for a, size_in, size_out, scale, roi in zip(axes, ins, sizes, scales, rois):
        if size_in == size_out and scale == 1.0 and roi in (None, (0.0, 1.0)):
            continue
        if size_out == 0:  # an empty axis: no positions to map (and a scale of 0 to divide by)
            x = S.take(x, constant(np.zeros(0, np.int64)), axis=a)
            continue
        coords = _coords(ctm, np.arange(size_out, dtype=np.float64), scale, size_in, size_out, roi)
        wshape = [1] * rank
        wshape[a] = size_out
        if roi is not None:
            outside = outside | ((coords < 0) | (coords > size_in - 1)).reshape(wshape)
        x = _resample_axis(n, x, a, coords, size_in, scale, wshape, mode, antialias, wdt)
    if outside.any():
        fill = S.full_like(x, fill_value=float(n.attr("extrapolation_value", 0.0)))
        x = S.where(constant(outside), fill, x)
    if dtype_of(x) != dt:
        x = S.cast(S.round(x) if np.dtype(dt).kind in "iu" else x, dtype=dt)
    return [x]


def _scales_and_sizes(n: OnnxNode, shape, axes: list, ins: list) -> tuple:
    """``(scales, sizes)`` per resized axis, from the ``scales`` or the ``sizes`` input (with
    ``keep_aspect_ratio_policy``)."""
    scales = n.const(2, "scales")
    sizes = n.const(3, "sizes")
    scales = None if scales is None or np.asarray(scales).size == 0 else [float(v) for v in np.asarray(scales)]
    sizes = None if sizes is None or np.asarray(sizes).size == 0 else np.asarray(sizes).reshape(-1).tolist()
    if sizes is not None:
        if len(sizes) != len(axes):
            n.fail(f"sizes={sizes} needs one entry per axis {axes}")
        if not all(isinstance(o, int) and o >= 0 for o in sizes):
            n.fail(f"sizes={sizes}: output sizes must be integers >= 0")
        if any(o and i == 0 for o, i in zip(sizes, ins)):
            n.fail(f"sizes={sizes}: an axis of length 0 (input shape {tuple(shape)}) cannot be resized to a "
                   "non-zero length")
        policy = n.attr("keep_aspect_ratio_policy", "stretch")
        if policy == "stretch":
            return [o / i if i else 1.0 for o, i in zip(sizes, ins)], sizes  # (an empty axis stays empty)
        pick = min if policy == "not_larger" else max
        s = pick((o / i for o, i in zip(sizes, ins) if i), default=1.0)
        return [s] * len(axes), [int(math.floor(s * i + 0.5)) for i in ins]
    if scales is None:
        n.fail("needs scales or sizes")
    if len(scales) != len(axes):
        n.fail(f"scales={scales} needs one entry per axis {axes}")
    if not all(math.isfinite(v) and v > 0 for v in scales):
        n.fail(f"scales={scales}: scales must be finite and > 0")
    return scales, [int(math.floor(i * s)) for i, s in zip(ins, scales)]


def _check_sizes(n: OnnxNode, shape, axes: list, scales: list, sizes: list, mode: str, antialias: bool) -> None:
    """Refuse a result, or index and weight tables, too large to make (before they are made)."""
    out_shape = list(shape)
    for a, o in zip(axes, sizes):
        out_shape[a] = o
    if all(isinstance(d, int) for d in out_shape):  # the result's size, before the tables are made
        check_size(n, out_shape, dtype_of(n.inputs[0]))
    mode_taps = {"nearest": 1, "linear": 2, "cubic": 4}[mode]
    table = 0  # bytes of the index and weight tables made while loading (and their float64 coordinates)
    for o, sc in zip(sizes, scales):
        taps = mode_taps
        if antialias and 0 < sc < 1.0:  # the stretched kernel's taps (_antialias_taps)
            reach = (1.0 if mode == "linear" else 2.0) / sc
            taps = 2 * math.ceil(reach) + 2 if reach < 2**62 else 2**63
        table += o * (1 + 2 * taps) * 8 + taps  # (+ taps: many taps over an empty output are work too)
    fold_too_large(n, table, f"the index and weight tables of output sizes {sizes} (scales {scales})")


def _resample_axis(n: OnnxNode, x, a: int, coords: np.ndarray, size_in: int, scale: float, wshape: list,
                   mode: str, antialias: bool, wdt):
    """``x`` resampled along axis ``a`` at input coordinates ``coords``: a ``take`` (nearest) or a
    weighted sum of ``take``s (linear, cubic; stretched by ``antialias`` when downscaling) with
    weights of dtype ``wdt``."""
    if mode == "nearest":
        idx = np.clip(_nearest(n, coords), 0, size_in - 1).astype(np.int64)
        return S.take(x, constant(idx), axis=a)
    a_cubic, exclude = float(n.attr("cubic_coeff_a", -0.75)), bool(n.attr("exclude_outside", 0))
    if antialias and scale < 1.0:
        taps = _antialias_taps(coords, size_in, scale, mode, a_cubic, exclude)
    else:
        taps = _linear_taps(coords, size_in) if mode == "linear" else _cubic_taps(coords, size_in, a_cubic, exclude)
    y = None
    for idx, w in taps:
        term = S.multiply(S.take(x, constant(idx.astype(np.int64)), axis=a),
                          constant(w.astype(wdt).reshape(wshape)))
        y = term if y is None else S.add(y, term)
    return y


def _rois(n: OnnxNode, k: int) -> list[tuple[float, float]]:
    """tf_crop_and_resize's box per resized axis: ``roi`` is [starts..., ends...] (normalized)."""
    roi = n.const(1, "roi")
    if roi is None or np.asarray(roi).size != 2 * k:
        n.fail(f"coordinate_transformation_mode='tf_crop_and_resize' needs a roi of {2 * k} values "
               f"(a start and an end per resized axis), got {None if roi is None else np.asarray(roi).tolist()}")
    r = [float(v) for v in np.asarray(roi).reshape(-1)]
    return [(r[i], r[k + i]) for i in range(k)]


def _coords(ctm: str, i: np.ndarray, scale: float, size_in: int, size_out: int, roi=None) -> np.ndarray:
    if ctm == "half_pixel_symmetric":
        adjust = size_out / (scale * size_in)
        center = size_in / 2
        return center * (1 - adjust) + (i + 0.5) / scale - 0.5
    size_out = scale * size_in  # the spec's other formulas use the unrounded output length
    if ctm == "half_pixel":
        return (i + 0.5) / scale - 0.5
    if ctm == "pytorch_half_pixel":
        return (i + 0.5) / scale - 0.5 if size_out > 1 else np.zeros_like(i)
    if ctm == "align_corners":
        return i * (size_in - 1) / (size_out - 1) if size_out > 1 else np.zeros_like(i)
    if ctm == "asymmetric":
        return i / scale
    if ctm == "tf_crop_and_resize":
        start, end = roi
        span = (end - start) * (size_in - 1)
        step = i * span / (size_out - 1) if size_out != 1 else np.full_like(i, span / 2)
        return start * (size_in - 1) + step
    raise ValueError(ctm)


def _nearest(n: OnnxNode, x: np.ndarray) -> np.ndarray:
    how = n.attr("nearest_mode", "round_prefer_floor")
    if how == "round_prefer_floor":
        return np.ceil(x - 0.5)
    if how == "round_prefer_ceil":
        return np.floor(x + 0.5)
    if how == "floor":
        return np.floor(x)
    if how == "ceil":
        return np.ceil(x)
    return n.fail(f"nearest_mode={how!r}: expected round_prefer_floor, round_prefer_ceil, floor or ceil")


def _linear_taps(x: np.ndarray, size: int):
    lo = np.floor(x)
    r = x - lo
    return [(np.clip(lo, 0, size - 1), 1.0 - r), (np.clip(lo + 1, 0, size - 1), r)]


def _cubic_kernel(t: np.ndarray, a: float) -> np.ndarray:
    t = np.abs(t)
    near = ((a + 2) * t - (a + 3)) * t * t + 1
    far = ((a * t - 5 * a) * t + 8 * a) * t - 4 * a
    return np.where(t <= 1, near, np.where(t < 2, far, 0.0))


def _cubic_taps(x: np.ndarray, size: int, a: float, exclude: bool):
    lo = np.floor(x)
    idx = [lo + k for k in (-1, 0, 1, 2)]
    ws = [_cubic_kernel(i - x, a) for i in idx]
    return _edges(idx, ws, size, exclude)


def _antialias_taps(x: np.ndarray, size: int, scale: float, mode: str, a: float, exclude: bool):
    """The kernel stretched by ``1 / scale``: taps over every pixel within its support of ``x``."""
    support = 1.0 if mode == "linear" else 2.0
    reach = math.ceil(support / scale)
    lo = np.floor(x) - reach
    idx = [lo + k for k in range(2 * reach + 2)]
    t = [scale * (i - x) for i in idx]
    ws = [np.clip(1.0 - np.abs(u), 0.0, 1.0) for u in t] if mode == "linear" else [_cubic_kernel(u, a) for u in t]
    total = sum(ws)
    return _edges(idx, [w / total for w in ws], size, exclude)


def _edges(idx: list, ws: list, size: int, exclude: bool):
    """Taps past the input read its edge pixel, or with ``exclude`` get weight 0 (the rest renormalized)."""
    if exclude:
        ws = [np.where((i >= 0) & (i < size), w, 0.0) for i, w in zip(idx, ws)]
        total = sum(ws)
        ws = [w / np.where(total == 0, 1.0, total) for w in ws]
    return [(np.clip(i, 0, size - 1), w) for i, w in zip(idx, ws)]
