"""ONNX operators that place values back into an image by position -> ``scatter_along_axis``:
MaxUnpool (each value to the flat index MaxPool recorded) and Col2Im (each column entry of each
sliding block added to the pixel it was read from, the inverse of im2col). The positions depend only
on static shapes and attributes, so they are constants built at load time; the values are scattered
over the flattened image in one op (overlapping Col2Im blocks add up)."""
from __future__ import annotations

import itertools

import numpy as np

from .. import sym as S
from .import_ops import Converter, OnnxNode, constant, dtype_of


def max_unpool(n: OnnxNode) -> list:
    n.arity(2, 3)
    x, idx = n.inputs[0], n.inputs[1]
    xs = n.known_shape(0, "MaxUnpool")
    k = len(xs) - 2
    kernel = list(n.attr("kernel_shape", []))
    if len(kernel) != k:
        n.fail(f"MaxUnpool kernel_shape {kernel} does not fit a {len(xs)}-D input")
    strides = list(n.attr("strides", [1] * k))
    pads = list(n.attr("pads", [0] * 2 * k))
    full = list(xs[:2]) + [(xs[2 + i] - 1) * strides[i] - pads[i] - pads[k + i] + kernel[i] for i in range(k)]
    out = n.ints(2, "MaxUnpool output_shape") or full
    if len(out) != len(xs) or any(o < f for o, f in zip(out, full)) or tuple(out[:2]) != tuple(xs[:2]):
        n.fail(f"MaxUnpool output_shape {out} must keep the batch and channels of {xs} and hold {full}")
    total = int(np.prod(full))
    flat = S.scatter_along_axis(constant(np.zeros(total, np.dtype(dtype_of(x)))),
                                S.reshape(S.cast(idx, dtype="int64"), shape=(-1,)), S.reshape(x, shape=(-1,)))
    y = S.reshape(flat, shape=tuple(full))
    if list(out) != full:  # the unpooled image sits at the start of a larger output
        y = S.pad(y, pad_width=tuple((0, o - f) for o, f in zip(out, full)))
    return [y]


def col2im(n: OnnxNode) -> list:
    n.arity(3)
    x = n.inputs[0]
    xs = n.known_shape(0, "Col2Im")
    image, block = n.ints(1, "Col2Im image_shape"), n.ints(2, "Col2Im block_shape")
    d = len(image)
    if len(xs) != 3 or len(block) != d:
        n.fail(f"Col2Im takes [N, C * prod(block), L] with image and block shapes of one length, got {xs}, "
               f"{image}, {block}")
    dil = list(n.attr("dilations", [1] * d))
    strides = list(n.attr("strides", [1] * d))
    pads = list(n.attr("pads", [0] * 2 * d))
    padded = [image[i] + pads[i] + pads[d + i] for i in range(d)]
    blocks = [(padded[i] - dil[i] * (block[i] - 1) - 1) // strides[i] + 1 for i in range(d)]
    kprod, lprod = int(np.prod(block)), int(np.prod(blocks))
    if min(blocks) < 1 or xs[1] % kprod or xs[2] != lprod:
        n.fail(f"Col2Im input {xs} does not hold C * {kprod} rows of {blocks} = {lprod} sliding blocks "
               f"for image {image}")
    channels = xs[1] // kprod
    # the padded-image position of every (kernel tap, block) column entry, in the input's row-major order
    pos = np.empty((kprod, lprod), np.int64)
    for t, tap in enumerate(itertools.product(*(range(b) for b in block))):
        for b, at in enumerate(itertools.product(*(range(m) for m in blocks))):
            pos[t, b] = np.ravel_multi_index(tuple(at[i] * strides[i] + tap[i] * dil[i] for i in range(d)), padded)
    idx = constant(np.broadcast_to(pos.reshape(1, 1, -1), (xs[0], channels, kprod * lprod)).copy(), owned=True)
    zeros = S.zeros_like(S.getitem(S.reshape(x, shape=(xs[0], channels, -1)), key=(Ellipsis, slice(0, 1))))
    canvas = S.broadcast_to(zeros, shape=(xs[0], channels, int(np.prod(padded))))
    y = S.scatter_along_axis(canvas, idx, S.reshape(x, shape=(xs[0], channels, -1)), axis=2, reduce="add")
    y = S.reshape(y, shape=(xs[0], channels) + tuple(padded))
    if any(pads):
        y = S.getitem(y, key=(slice(None), slice(None)) + tuple(slice(pads[i], pads[i] + image[i]) for i in range(d)))
    return [y]


UNPOOL_CONVERTERS: dict[str, Converter] = {"MaxUnpool": max_unpool, "Col2Im": col2im}
