"""Views made once per buffer set: a view step of a pooled planned buffer leaves the run loop.

A compiled program's pooled buffers are allocated once per buffer set (``Program._new_set``) and
reused run after run at the same addresses, so a view of one (``reshape``, ``transpose``,
``expand_dims``, ``squeeze``, ``broadcast_to``, a basic-index ``getitem``: NumPy returns an alias, no
data is read) is the same array object every run. Such a step is made when the set is made, and the
run loop no longer calls it: a transformer's head split (``reshape`` then ``transpose``), a packed
q/k/v's parts (``getitem``, then the split of each), its mask's ``expand_dims`` chains. The memory
plan is unchanged (it already counts a view as living in its base's buffer, keeping the base alive
while the view is read), and so are the values: the view shows whatever the steps write into the
buffer, when they write it.

Which steps qualify: a one-input view op of the list below on the CPU, its input a value written
into a pooled (not handed-out) planned buffer in C order, or a view made once itself; its output
not handed to the caller, and an array (not a 0-d ``getitem``: NumPy returns a scalar). Each value's
strides are followed from its buffer's C order on a stand-in array (``_stand_in``: the shape and
strides, no memory of that size), so a ``reshape`` is taken only where NumPy can make it a view of
those strides (of anything else it copies, and a copy made once would not follow the buffer's later
contents). ``explain()`` lists these steps with the implementation ``view made once``.
"""
from __future__ import annotations

import numpy as np

MADE_ONCE_OPS = ("reshape", "expand_dims", "squeeze", "transpose", "broadcast_to", "getitem")


def _stand_in(aval):
    """An array of ``aval``'s shape and dtype in C order that owns no memory of that size (one element
    whose strides claim the rest): its views' shapes and strides are the real value's, and nothing
    here ever reads it. None for a shape that is not all ints."""
    shape = tuple(aval.shape)
    if not all(isinstance(d, (int, np.integer)) for d in shape):
        return None
    strides, step = [], aval.dtype.itemsize
    for d in reversed(shape):
        strides.append(step)
        step *= max(int(d), 1)
    return np.lib.stride_tricks.as_strided(np.zeros(1, aval.dtype), shape, tuple(reversed(strides)))


def _basic(key) -> bool:
    """True for a key NumPy answers with a view: ints, slices, None and ``...`` (not a bool: NumPy
    indexes with a boolean scalar as a mask, a copy)."""
    parts = key if isinstance(key, tuple) else (key,)
    return all(p is None or p is Ellipsis or isinstance(p, slice) or (isinstance(p, int) and not isinstance(p, bool))
               for p in parts)


def _view(name: str, a, node):
    """The view ``node`` makes of ``a`` (a stand-in), or None where NumPy would copy (a ``reshape`` the
    strides do not allow: the shape assignment refuses without reading) or not return an array."""
    shape = tuple(node.avals[0].shape)
    if name == "getitem":
        key = node.params.get("key")
        return a[key] if _basic(key) and shape else None  # (a 0-d index: a NumPy scalar)
    if name == "transpose":
        return a.transpose(node.params.get("axes"))
    if name == "broadcast_to":
        return np.broadcast_to(a, shape)
    return _reshaped(a, shape)  # reshape, expand_dims, squeeze: the same elements in a new shape


def _reshaped(a, shape):
    """``a`` (a stand-in) reshaped as a view, or None where NumPy would copy. Never a copy: a stand-in's
    memory is one element, and copying it reads what its strides claim (the shape setter copies first,
    then refuses: a segmentation fault on a large value). NumPy < 2.1 has no ``copy=`` in ``reshape``:
    there only C-ordered values are reshaped."""
    if a.flags.c_contiguous:
        return a.reshape(shape)
    try:
        return np.reshape(a, shape, copy=False)
    except (TypeError, ValueError):  # (a copy needed, or no ``copy=``)
        return None


def made_once(specs, pooled_c: set[int], out_slots: set[int], fresh_kind, copies: set[int]) -> dict[int, tuple]:
    """``{step index: (fn, input slot, output slot, params)}`` of the steps made once per buffer
    set, in schedule order. ``pooled_c``: slots of values in pooled planned buffers in C order;
    ``fresh_kind``: the step kind of kernels that return their result; ``copies``: ids of the
    ownership copy nodes (never made once)."""
    layouts: dict = {}  # slot -> a stand-in with that value's shape and strides (``_stand_in``)
    out = {}
    for k, sp in enumerate(specs):
        node = sp.node
        name = node.op.name
        if name not in MADE_ONCE_OPS or sp.kind is not fresh_kind or len(sp.ins) != 1 or len(sp.outs) != 1 \
                or id(node) in copies or sp.outs[0] in out_slots or node.avals[0].device.kind != "cpu":
            continue
        src = sp.ins[0]
        a = layouts.get(src)
        if a is None and src in pooled_c:
            a = layouts[src] = _stand_in(node.inputs[0].aval)
        v = None if a is None else _view(name, a, node)
        if v is None:
            continue
        layouts[sp.outs[0]] = v
        out[k] = (sp.fn, src, sp.outs[0], dict(node.params))
    return out


def make_views(slots: list, once: tuple) -> None:
    """Fill a new buffer set's made-once view slots (``once``: ``(fn, input, output, params)`` in
    schedule order, so a view of a view finds its input made)."""
    for fn, a, o, kw in once:
        slots[o] = fn(slots[a], **kw)
