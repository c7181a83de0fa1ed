"""ONNX ``LRN`` (local response normalization across channels, AlexNet / GoogLeNet / ZFNet) -> registry ops.

The spec: ``y = x / (bias + alpha / size * s) ** beta`` where ``s[n, c, ...]`` sums ``x[n, i, ...] ** 2``
over the channels ``c - floor((size - 1) / 2) <= i <= c + ceil((size - 1) / 2)`` that exist. The
window sum is the squares zero-padded on the channel axis plus ``size`` shifted slices of them, so
the result is made of ``square``, ``pad``, ``getitem``, ``add``, ``power`` and ``divide``: it
differentiates and exports like any graph, with no LRN op in the registry.
"""
from __future__ import annotations

from .. import sym as S
from .import_ops import Converter, OnnxNode


def lrn(n: OnnxNode) -> list:
    n.arity(1)
    x = n.inputs[0]
    size = n.attr("size")
    if size is None or int(size) < 1:
        n.fail(f"needs the attribute size >= 1, got {size!r}")
    size = int(size)
    alpha, beta, bias = float(n.attr("alpha", 1e-4)), float(n.attr("beta", 0.75)), float(n.attr("bias", 1.0))
    rank = n.rank(0, "LRN")
    if rank < 2:
        n.fail(f"needs an input of rank 2 or more (N, C, ...), got rank {rank}")
    before, after = (size - 1) // 2, size - 1 - (size - 1) // 2
    sq = S.square(x)
    padded = S.pad(sq, pad_width=((0, 0), (before, after)) + ((0, 0),) * (rank - 2)) if size > 1 else sq
    total = None
    for k in range(size):  # the window of channel c starts at padded channel c
        win = S.getitem(padded, key=(slice(None), slice(k, -(size - 1 - k) or None)))
        total = win if total is None else S.add(total, win)
    scale = S.add(S.multiply(total, alpha / size), bias)
    return [S.divide(x, S.power(scale, beta))]


LRN_CONVERTERS: dict[str, Converter] = {"LRN": lrn}
