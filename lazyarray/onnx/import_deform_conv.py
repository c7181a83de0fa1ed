"""ONNX DeformConv (2-D) -> registry ops: each kernel tap of each output position reads the input
at its regular position plus a learned offset, bilinearly (taps past the border read zero), times
the optional modulation mask; the sampled columns then meet the weight in one grouped matmul.

Offsets are ``[N, offset_group * kh * kw * 2, oh, ow]`` ((dy, dx) per tap), shared by the input
channels of each offset group; the samples are ``take_along_axis`` reads of the flattened image.
"""
from __future__ import annotations

import numpy as np

from .. import sym as S
from .import_ops import Converter, OnnxNode, constant, dtype_of


def deform_conv(n: OnnxNode) -> list:
    n.arity(3, 5)
    x, w, off, bias, mask = n.inputs[0], n.inputs[1], n.inputs[2], n.input(3), n.input(4)
    xs, ws, os_ = (n.known_shape(i, "DeformConv") for i in range(3))
    if len(xs) != 4:
        n.fail(f"DeformConv supports 2-D images ([N, C, H, W]) only, got input shape {xs}")
    (nb, c, h, wd), (oc, cpg, kh, kw) = xs, ws
    group, og = int(n.attr("group", 1)), int(n.attr("offset_group", 1))
    sh, sw = n.attr("strides", [1, 1])
    dh, dw = n.attr("dilations", [1, 1])
    pt, pl, _, _ = n.attr("pads", [0, 0, 0, 0])
    oh, ow = os_[2], os_[3]
    k = kh * kw
    if c != cpg * group or oc % group or c % og or os_[:2] != (nb, og * k * 2):
        n.fail(f"DeformConv shapes do not fit: X {xs}, W {ws}, offset {os_}, group {group}, offset_group {og}")
    dt = dtype_of(x)
    # regular sampling positions per (tap row/col, output row/col)
    rows = (np.arange(kh)[:, None] * dh + np.arange(oh)[None, :] * sh - pt).astype(dt)  # [kh, oh]
    cols = (np.arange(kw)[:, None] * dw + np.arange(ow)[None, :] * sw - pl).astype(dt)  # [kw, ow]
    off6 = S.reshape(off, shape=(nb, og, kh, kw, 2, oh, ow))
    py = S.add(S.getitem(off6, key=(Ellipsis, 0, slice(None), slice(None))),
               constant(rows.reshape(1, 1, kh, 1, oh, 1)))
    px = S.add(S.getitem(off6, key=(Ellipsis, 1, slice(None), slice(None))),
               constant(cols.reshape(1, 1, 1, kw, 1, ow)))
    q = k * oh * ow
    py, px = S.reshape(py, shape=(nb, og, 1, q)), S.reshape(px, shape=(nb, og, 1, q))
    img = S.reshape(x, shape=(nb, og, c // og, h * wd))
    y0, x0 = S.floor(py), S.floor(px)
    fy, fx = S.subtract(py, y0), S.subtract(px, x0)
    sampled = None
    for ty, wy in ((y0, S.subtract(1.0, fy)), (S.add(y0, 1.0), fy)):
        for tx, wx in ((x0, S.subtract(1.0, fx)), (S.add(x0, 1.0), fx)):
            inside = S.logical_and(S.logical_and(S.greater_equal(ty, 0.0), S.less_equal(ty, h - 1.0)),
                                   S.logical_and(S.greater_equal(tx, 0.0), S.less_equal(tx, wd - 1.0)))
            index = S.add(S.multiply(S.cast(S.clip(ty, 0.0, h - 1.0), dtype="int64"), wd),
                          S.cast(S.clip(tx, 0.0, wd - 1.0), dtype="int64"))
            weight = S.where(inside, S.multiply(wy, wx), S.zeros_like(wy))
            term = S.multiply(S.take_along_axis(img, index, axis=3), weight)  # [N, og, C/og, q]
            sampled = term if sampled is None else S.add(sampled, term)
    if mask is not None:
        sampled = S.multiply(sampled, S.reshape(mask, shape=(nb, og, 1, q)))
    cols_ = S.reshape(sampled, shape=(nb, group, cpg * k, oh * ow))  # channel-major, then tap
    wg = S.reshape(w, shape=(1, group, oc // group, cpg * k))
    y = S.reshape(S.matmul(wg, cols_), shape=(nb, oc, oh, ow))
    if bias is not None:
        y = S.add(y, S.reshape(bias, shape=(1, oc, 1, 1)))
    return [y]


DEFORM_CONV_CONVERTERS: dict[str, Converter] = {"DeformConv": deform_conv}
