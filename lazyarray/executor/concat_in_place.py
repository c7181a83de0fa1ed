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

``explain()`` lists such steps with the implementation ``written in place``; the producers'
``memory`` column shows their offsets in the concatenation's buffer.
"""
from __future__ import annotations

import math
from dataclasses import replace

from .plan import Step, Value

IN_PLACE = "written in place"  # the implementation explain() shows for such a concatenate


def candidates(specs, orders: dict, handed: set[int], planned) -> tuple[dict[int, tuple], set[int]]:
    """``({step: byte offset of each part in the result}, writable slots)`` of the concatenate
    steps that could be written in place; ``writable``: slots written into planned buffers in C
    order by their step (``planned``: the step kinds that write so)."""
    writable = {o for sp in specs if sp.kind in planned and not sp.node.op.view for o in sp.outs
                if orders.get(o) is None and o not in handed}
    found = {}
    for k, sp in enumerate(specs):
        node = sp.node
        if node.op.name != "concatenate" or len(sp.outs) != 1 or not sp.planned or sp.outs[0] in handed \
                or orders.get(sp.outs[0]) is not None:
            continue
        out = node.avals[0]
        ax = node.params.get("axis", 0) % len(out.shape) if out.shape else 0
        if not out.shape or math.prod(out.shape[:ax]) != 1 or len(set(sp.ins)) != len(sp.ins):
            continue
        avals = [e.aval for e in node.inputs]
        if any(a.dtype != out.dtype or a.device != out.device or a.shape is None or None in a.shape for a in avals):
            continue
        offsets, at = [], 0
        for a in avals:
            offsets.append(at)
            at += a.nbytes
        if at == out.nbytes:
            found[k] = tuple(offsets)
    return found, writable


def place(values: list[Value], steps: list[Step], concats: dict[int, tuple],
          writable: set[int]) -> tuple[list[Value], frozenset[int]]:
    """``(values, steps written in place)``: ``values`` with each placed part a view of its
    concatenation's memory (``view_of`` the outermost result, ``view_at`` its byte offset).

    >>> vals = [Value(8, external=True), Value(8), Value(8), Value(16), Value(16, escapes=True)]
    >>> steps = [Step((0,), (1,)), Step((0,), (2,)), Step((1, 2), (3,)), Step((3,), (4,))]
    >>> new, done = place(vals, steps, {2: (0, 8)}, {1, 2})
    >>> [(v.view_of, v.view_at) for v in new[1:4]], sorted(done)
    ([(3, 0), (3, 8), (None, 0)], [2])
    """
    pos: dict[int, tuple[int, int]] = {}  # value -> (root value, byte offset there)
    placed_outs: set[int] = set()  # results of the concatenations written in place (containers)
    done = set()
    for k in sorted(concats, reverse=True):
        st = steps[k]
        c, parts, offs = st.outputs[0], st.inputs, concats[k]
        if not _plannable(values[c]) or len(set(parts)) != len(parts):
            continue
        target = pos.get(c)
        if target is None:
            target = next(((pos[v][0], pos[v][1] - o) for v, o in zip(parts, offs) if v in pos), (c, 0))
        root, p = target
        new = [(v, p + o) for v, o in zip(parts, offs) if v not in pos]
        if p < 0 or p + values[c].nbytes > values[root].nbytes \
                or any(pos[v] != (root, p + o) for v, o in zip(parts, offs) if v in pos) \
                or any(v not in writable or not _plannable(values[v]) or v == root for v, _ in new) \
                or not _apart(new, values, pos, root, placed_outs | {c}):
            continue
        if c != root:
            pos[c] = target
        for v, at in new:
            pos[v] = (root, at)
        placed_outs.add(c)
        done.add(k)
    out = list(values)
    for v, (root, at) in pos.items():
        out[v] = replace(values[v], view_of=root, view_at=at)
    return out, frozenset(done)


def _plannable(v: Value) -> bool:
    return not v.external and v.view_of is None and not v.escapes and v.nbytes > 0 and not v.runtime


def _apart(new: list, values: list[Value], pos: dict, root: int, containers: set[int]) -> bool:
    """True when no new part shares a byte of ``root``'s memory with a placed value, other than
    a placed concatenation's result that contains the part whole."""
    for v, at in new:
        end = at + values[v].nbytes
        for w, (r, a) in pos.items():
            b = a + values[w].nbytes
            if r == root and a < end and at < b and not (w in containers and a <= at and end <= b):
                return False
    return True
