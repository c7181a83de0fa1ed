"""A compiled program's buffers: allocating them and cutting them into the views its slots hold.

``Program`` (``program.py``) allocates each planned buffer as raw bytes and fills its slots with
views at the plan's offsets (``fill_views``); the memory it hands out is taken back for the next
run only when nobody holds it any more (``unheld``).
"""
from __future__ import annotations

import sys

import numpy as np

from ..device import on_device
from ..errors import OutOfMemoryError
from .concat_in_place import ImageStride


def fill_views(slots: list, raw, views) -> tuple:
    made = []
    for dtype, shape, nbytes, off, order, at in views:  # one view per layout, shared by the slots that use it
        if isinstance(order, ImageStride):  # a part of a batch's concatenation: images ``order.stride`` bytes apart
            v = _images_apart(raw, dtype, shape, off, order.stride)
        elif order is None:
            v = raw[off:off + nbytes].view(dtype).reshape(shape)
        else:  # stored in ``order`` (batch_last.py, units_major.py): the logical shape as a view with permuted strides
            v = raw[off:off + nbytes].view(dtype).reshape(tuple(shape[i] for i in order))
            v = v.transpose(tuple(np.argsort(order).tolist()))
        made.append(v)
        for slot in at:
            slots[slot] = v
    return tuple(made)


def _images_apart(raw, dtype, shape, off: int, stride: int):
    """A view of ``raw`` from byte ``off`` of ``shape`` whose images (the first axis) are C-ordered
    blocks ``stride`` bytes apart (``concat_in_place.py``: a part of a batch's concatenation)."""
    dtype = np.dtype(dtype)
    inner = [dtype.itemsize]
    for d in reversed(shape[2:]):
        inner.append(inner[-1] * max(int(d), 1))
    span = (shape[0] - 1) * stride + (inner[-1] * shape[1] if len(shape) > 1 else dtype.itemsize)
    base = raw[off:off + span]
    return np.ndarray(shape, dtype, buffer=base, strides=(stride,) + tuple(reversed(inner)))


def unheld(last) -> bool:
    """True when nothing outside this program references the memory a run handed out: not the
    arrays it returned, nor any view of them (a NumPy view's ``base`` is the memory's owner, so
    every view anyone made counts on ``raw``), and nobody froze it. Then the next run may
    write its outputs there instead of allocating (and faulting in) fresh pages."""
    raw, made = last
    # raw: our tuple, the name ``raw``, each of our views' base, getrefcount's argument; a view:
    # our tuple, the loop's variable, getrefcount's argument (a loop, not all(...): no generator
    # per output and run)
    if sys.getrefcount(raw) != 3 + len(made):
        return False
    for v in made:
        if sys.getrefcount(v) != 3 or not v.flags.writeable:
            return False
    return True


def alloc(device, nbytes: int):
    try:
        if device.kind != "gpu":
            return np.empty(nbytes, dtype=np.uint8)
        with on_device(device):
            return device.xp.empty(nbytes, dtype=np.uint8)
    except MemoryError as exc:
        raise OutOfMemoryError(
            f"a compiled graph's planned buffer of {nbytes:,} bytes on {device} could not be allocated: {exc}; "
            "use smaller inputs (e.g. a smaller batch), or free memory held elsewhere") from exc

