"""Per-thread scratch buffers for kernels' temporaries (im2col columns, padded copies, Winograd tiles).

A kernel asks ``scratch(xp, slot, shape, dtype)`` for an uninitialized array; the slot's buffer is
kept by the thread and reused call after call, grown when a larger one is asked for. Memory the
plan does not see (``OpDef.workspace`` states its size for the allocation check and ``explain()``).
"""
from __future__ import annotations

import math
import threading

import numpy as np

# im2col columns and padded copies up to this size come from a per-thread scratch buffer, reused
# call after call: a fresh allocation this large is new memory from the OS each time, and its page
# faults cost as much as the copy into it (the demo CNN's second conv at batch 64: 663 KB of
# columns, 230 us per call with fresh memory, about 110 us reusing it). Larger ones are allocated.
SCRATCH_MAX_BYTES = 4 << 20
_SCRATCH = threading.local()
# Slots 0-1: im2col's padded copy and columns; 2-5: Winograd's tiles (``winograd.py``,
# ``winograd4.py``). Kernels split over threads (``threads.split``) need them more: page faults
# take a process-wide lock, so threads that allocate as they go wait on each other (Winograd chunks
# on 2 threads ran no faster than on 1 until their temporaries came from here).
SCRATCH_SLOTS = 6


def scratch(xp, slot: int, shape, dtype):
    """An uninitialized array of ``shape`` in this thread's scratch buffer number ``slot`` (a
    kernel's temporaries that are alive at the same time use different slots; nothing a kernel
    returns may be one)."""
    dtype = np.dtype(dtype)
    nbytes = math.prod(shape) * dtype.itemsize
    if xp is not np or nbytes > SCRATCH_MAX_BYTES:
        return xp.empty(shape, dtype=dtype)
    bufs = getattr(_SCRATCH, "bufs", None)
    if bufs is None:
        bufs = _SCRATCH.bufs = [None] * SCRATCH_SLOTS
    buf = bufs[slot]
    if buf is None or buf.nbytes < nbytes:
        buf = bufs[slot] = np.empty(max(nbytes, 64 << 10), dtype=np.uint8)
    return buf[:nbytes].view(dtype).reshape(shape)


def slot_buffers() -> list | None:
    """This thread's scratch buffers by slot (None before its first ``scratch``): a memo of views
    into them is valid while they are the same objects."""
    return getattr(_SCRATCH, "bufs", None)


def thread_memo(name: str) -> dict:
    """A dict this thread keeps under ``name`` (views into its scratch buffers, made once per
    geometry; the caller bounds it)."""
    memo = getattr(_SCRATCH, name, None)
    if memo is None:
        memo = {}
        setattr(_SCRATCH, name, memo)
    return memo
