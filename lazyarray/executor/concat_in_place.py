"""Concatenations written in place by their producers: the concatenate step leaves the program.

A ``concatenate`` whose parts are each one contiguous stretch of its result (the axis is the
first one longer than 1: a batch of one image's channels, rows of a matrix) need not copy: the
memory planner places each part at its offset of the result's memory (``Value.view_of`` /
``view_at``), the step that computes a part writes straight into that view, and the result is a
view of memory already filled when the concatenation would have run. DenseNet concatenates every
earlier feature map of a block before each layer: the concatenations nest (each one's parts are a
prefix of the next one's), so a block's features all live in one buffer, written once.

Which concatenations (``candidates``): the tuning-table field ``concat_in_place``; one output, its
parts and result the same dtype and device, in C order (no batch-last / units-major layout), the
result not handed to the caller (nor any view of it); each part written into its planned buffer
by its step (``out=``), not a view, not given from outside, not handed out, not a part twice.
``place`` then decides, from the last concatenation to the first, where each part lives: a part
already placed by a later concatenation fixes where this one's result lies; a new part may not
share a byte with another value except the concatenations that contain it. A concatenation's
result is a part of another only where its own is written in place too (a concatenate step
allocates its result: it is never ``writable``). Where a rule fails
the concatenation runs as a step (it copies). Reads of a part elsewhere need nothing: the part
is a view of the buffer, alive as long as the buffer is.

A batch of images concatenated on the channel axis (``axis`` 1, ``N`` > 1: a SqueezeNet fire
module's expand pair at batch 8) has parts that are no one stretch of the result: image ``i`` of a
part lies at the part's channel offset of the result's image ``i``. Such a part is planned as a view
at a batch stride (``Value.view_stride``: the images, the result's image bytes apart; its images
C-ordered blocks, ``buffer_set.fill_views``) where its step's kernels write such an output in place
(``STRIDED_WRITERS``: the convolutions, whose loops and products take an output whose images are
C-ordered blocks at any batch stride, ``conv_direct.images_c_ordered``; any other of their
implementations writes it through a copy, never a wrong value; the pools, whose loops index any
strides); the CPU only, each new part of one step of those ops. A batch's concatenations nest as
the others do (``_batch_nest``: a DenseNet block at batch 8, whose parts are a pool's output and
the layers' convolutions): every placed value's images lie the outermost result's image bytes
apart, so an inner result is a view at that stride too, and its readers take a strided input
(``batch_norm_relu[compiled]`` reads it through a C-ordered covering view, ``covering_view.py``).

``explain()`` lists such steps with the implementation ``written in place``; the producers'
``memory`` column shows their offsets in the concatenation's buffer.
"""
from __future__ import annotations

import math
from dataclasses import replace
from typing import NamedTuple

from .plan import Step, Value

IN_PLACE = "written in place"  # the implementation explain() shows for such a concatenate
# ops whose every kernel writes an output whose images are C-ordered blocks at a batch stride (in
# place, or through a copy; the pools' loops index any strides): a part of a batch's concatenation may
# be such a view when one makes it
STRIDED_WRITERS = frozenset({"conv2d", "conv2d_act", "max_pool2d", "max_pool2d_relu", "avg_pool2d"})


class Strided(NamedTuple):
    """The concatenations of a batch (``images``: step -> N) and the slots that may be parts of them
    (``writers``: outputs of ``STRIDED_WRITERS``' steps written into planned buffers)."""
    images: dict
    writers: frozenset


class ImageStride(NamedTuple):
    """A layout's memory order (``buffer_set.fill_views``): the value's images C-ordered blocks
    ``stride`` bytes apart."""
    stride: int


def image_stride(val: Value) -> ImageStride | None:
    """The layout of a part planned at a batch stride (``Value.view_stride``); None for any other."""
    return ImageStride(val.view_stride[1]) if val.view_stride else None


def candidates(specs, orders: dict, handed: set[int], planned) -> tuple[dict[int, tuple], set[int], Strided]:
    """``({step: byte offset of each part in the result's image}, writable slots, Strided)`` of the
    concatenate steps that could be written in place; ``writable``: slots written into planned buffers
    in C order by their step (``planned``: the step kinds that write so); ``Strided``: the
    concatenations of a batch on the channel axis and the slots their parts may be."""
    writable = {o for sp in specs if sp.kind in planned and not sp.node.op.view for o in sp.outs
                if orders.get(o) is None and o not in handed}
    writers = frozenset(o for sp in specs if sp.node.op.name in STRIDED_WRITERS and len(sp.outs) == 1
                        and sp.node.avals[0].device.kind == "cpu" for o in sp.outs if o in writable)
    found, images = {}, {}
    for k, sp in enumerate(specs):
        node = sp.node
        if node.op.name != "concatenate" or len(sp.outs) != 1 or not sp.planned or sp.outs[0] in handed \
                or orders.get(sp.outs[0]) is not None:
            continue
        out = node.avals[0]
        ax = node.params.get("axis", 0) % len(out.shape) if out.shape else 0
        if not out.shape or len(set(sp.ins)) != len(sp.ins):
            continue
        n = math.prod(out.shape[:ax])
        if n != 1 and (ax != 1 or n < 1 or out.device.kind != "cpu"):
            continue
        avals = [e.aval for e in node.inputs]
        if any(a.dtype != out.dtype or a.device != out.device or a.shape is None or None in a.shape for a in avals):
            continue
        offsets, at = [], 0
        for a in avals:
            offsets.append(at)
            at += a.nbytes // n
        if at * n == out.nbytes:
            found[k] = tuple(offsets)
            if n != 1:
                images[k] = n
    return found, writable, Strided(images, writers)


def place(values: list[Value], steps: list[Step], concats: dict[int, tuple],
          writable: set[int], strided: Strided | None = None) -> tuple[list[Value], frozenset[int]]:
    """``(values, steps written in place)``: ``values`` with each placed part a view of its
    concatenation's memory (``view_of`` the outermost result, ``view_at`` its byte offset; a part of
    a batch's concatenation, ``strided``, its images at the result's image stride: ``view_stride``).

    >>> vals = [Value(8, external=True), Value(8), Value(8), Value(16), Value(16, escapes=True)]
    >>> steps = [Step((0,), (1,)), Step((0,), (2,)), Step((1, 2), (3,)), Step((3,), (4,))]
    >>> new, done = place(vals, steps, {2: (0, 8)}, {1, 2})
    >>> [(v.view_of, v.view_at) for v in new[1:4]], sorted(done)
    ([(3, 0), (3, 8), (None, 0)], [2])
    """
    pos: dict[int, tuple[int, int]] = {}  # value -> (root value, byte offset there)
    placed_outs: set[int] = set()  # results of the concatenations written in place (containers)
    done = set()
    strides: dict[int, tuple] = {}  # part at a batch stride -> (images, the root's image bytes)
    images, writers = strided if strided is not None else ({}, frozenset())
    for k in sorted(concats, reverse=True):
        st = steps[k]
        c, parts, offs = st.outputs[0], st.inputs, concats[k]
        if not _plannable(values[c]) or len(set(parts)) != len(parts):
            continue
        if k not in images and (c in strides or any(v in strides for v in parts)):
            continue
        if k in images:
            if _batch_nest(values, c, parts, offs, images[k], pos, strides, writable & writers, placed_outs):
                placed_outs.add(c)
                done.add(k)
            continue
        target = pos.get(c)
        if target is None:
            target = next(((pos[v][0], pos[v][1] - o) for v, o in zip(parts, offs) if v in pos), (c, 0))
        root, p = target
        new = [(v, p + o) for v, o in zip(parts, offs) if v not in pos]
        if p < 0 or p + values[c].nbytes > values[root].nbytes \
                or any(pos[v] != (root, p + o) for v, o in zip(parts, offs) if v in pos) \
                or any(v not in writable or not _plannable(values[v]) or v == root for v, _ in new) \
                or not _apart([(v, at, values[v].nbytes) for v, at in new], values, pos, root, placed_outs | {c}):
            continue
        if c != root:
            pos[c] = target
        for v, at in new:
            pos[v] = (root, at)
        placed_outs.add(c)
        done.add(k)
    out = list(values)
    for v, (root, at) in pos.items():
        out[v] = replace(values[v], view_of=root, view_at=at, view_stride=strides.get(v, ()))
    return out, frozenset(done)


def _batch_nest(values: list[Value], c: int, parts: tuple, offs: tuple, n: int, pos: dict, strides: dict,
                writers: set[int], containers: set[int]) -> bool:
    """Place a batch's concatenation ``c`` (``n`` images; ``offs``: its parts' byte offsets in its
    image) at a batch stride, nested as ``place`` nests the others; True where it is. Positions are
    byte offsets in an image of the root (the outermost result), every placed value's images the
    root's image bytes apart (``strides``). Rules: ``c`` and its placed parts placed at a batch stride
    of ``n`` images (the same root, at their offsets), each new part planned and written by a
    ``STRIDED_WRITERS`` step, sharing no byte of an image with a placed value but the
    concatenations that contain it."""
    if (c in pos and strides.get(c, (0,))[0] != n) or any(v in pos and strides.get(v, (0,))[0] != n for v in parts):
        return False
    target = pos.get(c)
    if target is None:
        target = next(((pos[v][0], pos[v][1] - o) for v, o in zip(parts, offs) if v in pos), (c, 0))
    root, p = target
    image, own = values[root].nbytes // n, values[c].nbytes // n
    new = [(v, p + o) for v, o in zip(parts, offs) if v not in pos]
    if p < 0 or p + own > image or any(pos[v] != (root, p + o) for v, o in zip(parts, offs) if v in pos) \
            or any(v not in writers or not _plannable(values[v]) or v in (root, c) for v, _ in new) \
            or not _apart([(v, at, values[v].nbytes // n) for v, at in new], values, pos, root,
                          containers | {c}, n):
        return False
    if c != root:
        pos[c], strides[c] = target, (n, image)
    for v, at in new:
        pos[v], strides[v] = (root, at), (n, image)
    return True


def _plannable(v: Value) -> bool:
    return not v.external and v.view_of is None and not v.escapes and v.nbytes > 0 and not v.runtime


def _apart(new: list, values: list[Value], pos: dict, root: int, containers: set[int], images: int = 1) -> bool:
    """True when no new part ``(value, offset, bytes)`` shares a byte of ``root``'s memory (of each of
    its ``images``) with a placed value, other than a placed concatenation's result that contains the
    part whole."""
    for v, at, size in new:
        end = at + size
        for w, (r, a) in pos.items():
            b = a + values[w].nbytes // images
            if r == root and a < end and at < b and not (w in containers and a <= at and end <= b):
                return False
    return True
