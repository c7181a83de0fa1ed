"""Views made once per buffer set: a view step of a pooled planned buffer leaves the run loop.

A compiled program's pooled buffers are allocated once per buffer set (``Program._new_set``) and
reused run after run at the same addresses, so a view of one (``reshape``, ``transpose``,
``expand_dims``, ``squeeze``, ``broadcast_to``: NumPy returns an alias, no data is read) is the same
array object every run. Such a step is made when the set is made, and the run loop no longer
calls it: a transformer's head split (``reshape`` then ``transpose``), its mask's ``expand_dims``
chains. The memory plan is unchanged (it already counts a view as living in its base's buffer,
keeping the base alive while the view is read), and so are the values: the view shows whatever
the steps write into the buffer, when they write it.

Which steps qualify: a one-input view op of the list below on the CPU, its input a value written
into a pooled (not handed-out) planned buffer in C order, or a view made once itself; its output
not handed to the caller. ``reshape``, ``expand_dims`` and ``squeeze`` of C-ordered memory are
C-ordered views; ``reshape`` is taken only of such memory (of anything else NumPy may copy, and a
copy made once would not follow the buffer's later contents). ``explain()`` lists these steps with
the implementation ``view made once``.
"""
from __future__ import annotations

# op -> whether its view of C-ordered memory is C-ordered too (NumPy returns views for every one of
# them on C-ordered input; only ``reshape`` needs C-ordered input to return a view)
MADE_ONCE_OPS = {"reshape": True, "expand_dims": True, "squeeze": True, "transpose": False, "broadcast_to": False}


def made_once(specs, pooled_c: set[int], out_slots: set[int], fresh_kind, copies: set[int]) -> dict[int, tuple]:
    """``{step index: (fn, input slot, output slot, params)}`` of the steps made once per buffer
    set, in schedule order. ``pooled_c``: slots of values in pooled planned buffers in C order;
    ``fresh_kind``: the step kind of kernels that return their result; ``copies``: ids of the
    ownership copy nodes (never made once)."""
    contiguous = {s: True for s in pooled_c}  # slot -> whether that memory is in C order
    out = {}
    for k, sp in enumerate(specs):
        node = sp.node
        c_out = MADE_ONCE_OPS.get(node.op.name)
        if c_out is None or sp.kind is not fresh_kind or len(sp.ins) != 1 or len(sp.outs) != 1 \
                or id(node) in copies or sp.outs[0] in out_slots or node.avals[0].device.kind != "cpu":
            continue
        src = sp.ins[0]
        c_in = contiguous.get(src)
        if c_in is None or (node.op.name == "reshape" and not c_in):
            continue
        contiguous[sp.outs[0]] = c_in and c_out
        out[k] = (sp.fn, src, sp.outs[0], dict(node.params))
    return out


def make_views(slots: list, once: tuple) -> None:
    """Fill a new buffer set's made-once view slots (``once``: ``(fn, input, output, params)`` in
    schedule order, so a view of a view finds its input made)."""
    for fn, a, o, kw in once:
        slots[o] = fn(slots[a], **kw)
