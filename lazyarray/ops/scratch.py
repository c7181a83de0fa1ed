"""Per-thread scratch buffers for kernels' temporaries (im2col columns, padded copies, Winograd tiles).

A temporary up to ``SCRATCH_MAX_BYTES`` comes from a buffer this thread keeps and reuses call
after call: a fresh allocation this large is new memory from the OS each time, and its page faults
cost as much as the copy into it (the demo CNN's second conv at batch 64: 663 KB of columns,
230 us per call with fresh memory, about 110 us reusing it). With several threads it matters more:
page faults of one process take a shared lock, so threads that allocate as they go wait on each
other (Winograd chunks on 2 threads ran no faster than on one until their tiles came from here).
Larger temporaries are allocated.
"""
from __future__ import annotations

import math
import threading

import numpy as np

SCRATCH_MAX_BYTES = 4 << 20
_LOCAL = threading.local()


def scratch(xp, slot, shape, dtype):
    """An uninitialized array of ``shape`` in this thread's scratch buffer ``slot`` (any hashable
    name: a kernel's temporaries that are alive at the same time use different slots; nothing a
    kernel returns may be one)."""
    dtype = np.dtype(dtype)
    nbytes = math.prod(shape) * dtype.itemsize
    if xp is not np or nbytes > SCRATCH_MAX_BYTES:
        return xp.empty(shape, dtype=dtype)
    bufs = getattr(_LOCAL, "bufs", None)
    if bufs is None:
        bufs = _LOCAL.bufs = {}
    buf = bufs.get(slot)
    if buf is None or buf.nbytes < nbytes:
        buf = bufs[slot] = np.empty(max(nbytes, 64 << 10), dtype=np.uint8)
    return buf[:nbytes].view(dtype).reshape(shape)
