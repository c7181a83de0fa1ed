"""Kernels' scratch memory (im2col columns, padded copies, Winograd tiles): from the memory plan in a
compiled program, from a bounded per-thread arena in an eager call.

A kernel asks ``scratch(xp, slot, shape, dtype)`` for an uninitialized array; temporaries alive at
the same time use different slots. Where it comes from is the *arena* bound to the calling thread:

* a compiled step on the CPU whose op declares a ``workspace`` (``OpDef.workspace``) gets a planned buffer of
  that many bytes, reused like any planned buffer (``executor/plan.py``: it counts in
  ``peak_bytes``); its ``Arena`` is made with the program's buffer set and lives in the workspace's
  slot (``workspace_arena``), the step lends it to its thread while the kernel runs
  (``bind_workspace``), and each slot is carved from it once and kept, run after run;
* anywhere else (an eager call, a worker thread of a split kernel) the thread's own arena in
  ``ARENAS`` (a named cache by thread): one buffer per slot, grown to the largest request up to
  ``SCRATCH_MAX_BYTES`` and reused call after call; ``ARENAS.clear()`` drops them all.

A request that does not fit (a planned workspace smaller than what the implementation the kernel
chose uses, or an eager one over the limit) is an ordinary allocation, freed with its array.
"""
from __future__ import annotations

import contextvars
import math
import threading

import numpy as np

from ..caches import NamedCache

# im2col columns and padded copies up to this size come from a thread's arena, reused call after
# call: a fresh allocation this large is new memory from the OS each time, and its page faults cost
# as much as the copy into it (the demo CNN's second conv at batch 64: 663 KB of columns, 230 us
# per call with fresh memory, about 110 us reusing it). Larger ones are allocated.
SCRATCH_MAX_BYTES = 4 << 20
# Slots 0-1: im2col's padded copy and columns; 2-5: Winograd's tiles (``winograd.py``,
# ``winograd4.py``). Kernels split over threads (``threads.split``) need them more: page faults
# take a process-wide lock, so threads that allocate as they go wait on each other (Winograd chunks
# on 2 threads ran no faster than on 1 until their temporaries came from here).
SCRATCH_SLOTS = 6
_ALIGN = 64  # slots carved from a planned workspace start at multiples of this


class Arena:
    """One set of scratch slots and the memos of views into them (``thread_memo``).

    ``raw``: a planned workspace (a 1-D uint8 array) the slots are carved from, or None for a
    thread's own arena, whose slots are separate buffers."""

    __slots__ = ("raw", "bufs", "memos", "top", "used")

    def __init__(self, raw=None):
        self.raw = raw
        self.bufs: list = [None] * SCRATCH_SLOTS
        self.memos: dict = {}
        self.top = 0  # bytes of ``raw`` carved so far
        self.used = False  # some slot has a buffer

    def take(self, xp, slot: int, nbytes: int):
        """Slot ``slot``'s buffer with at least ``nbytes`` bytes (uint8), or None: allocate."""
        buf = self.bufs[slot]
        if buf is not None and buf.nbytes >= nbytes:
            return buf
        if self.raw is None:
            if xp is not np or nbytes > SCRATCH_MAX_BYTES:
                return None
            buf = np.empty(max(nbytes, 64 << 10), dtype=np.uint8)
        else:
            at = -(-self.top // _ALIGN) * _ALIGN
            if at + nbytes > self.raw.nbytes or type(self.raw) is not np.ndarray or xp is not np:
                return None
            # its own array object (not a view of ``raw``): views of it have it as their ``base``,
            # which is how conv's memo of views knows they are still this slot's
            buf = np.frombuffer(memoryview(self.raw[at:at + nbytes]), dtype=np.uint8)
            self.top = at + nbytes
        self.bufs[slot] = buf
        self.used = True
        return buf


# thread ident -> the thread's own arena (eager calls, a split's workers): at most 64 threads' (threads
# come and go: a finished one's arena is never asked again); ``ARENAS.clear()`` drops them all
ARENAS = NamedCache("scratch arenas of threads", 64)
class Lent:
    """What compiled steps lend the thread named ``thread``: the running step's workspace ``arena``
    (None between such steps). One per context and thread (``_LENT``), made at the first step with a
    workspace that runs there and kept: a step lends its arena by two attribute stores instead of a
    ContextVar set and reset (about 0.5 us a step on the development machine)."""

    __slots__ = ("thread", "arena")

    def __init__(self, thread: int):
        self.thread = thread
        self.arena: Arena | None = None


# What compiled steps lend this context's thread (``Lent``), or None before the first. (It names its
# thread: a context copied into another thread never shares the lent workspace, that thread lends its own.)
_LENT: contextvars.ContextVar[Lent | None] = contextvars.ContextVar("lazyarray_scratch_lent", default=None)
_ident = threading.get_ident


def current_arena() -> Arena:
    """The arena of the calling thread: the planned workspace lent to it, else its own."""
    lent = _LENT.get()
    ident = _ident()
    if lent is not None and lent.arena is not None and lent.thread == ident:
        return lent.arena
    own = ARENAS.peek(ident)
    return own if own is not None else ARENAS.get_or_make(ident, Arena)


def scratch(xp, slot: int, shape, dtype):
    """An uninitialized array of ``shape`` in scratch buffer number ``slot`` of the calling thread's
    arena (a kernel's temporaries that are alive at the same time use different slots; nothing a
    kernel returns may be one)."""
    dtype = np.dtype(dtype)
    nbytes = math.prod(shape) * dtype.itemsize
    arena = current_arena()
    buf = arena.take(xp, slot, nbytes)
    if buf is None:
        return xp.empty(shape, dtype=dtype)
    return buf[:nbytes].view(dtype).reshape(shape)


def slot_buffers() -> list | None:
    """The current arena's buffers by slot (None before its first ``scratch``): a memo of views
    into them is valid while they are the same objects."""
    arena = current_arena()
    return arena.bufs if arena.used else None


def thread_memo(name: str) -> dict:
    """A dict the current arena keeps under ``name`` (views into its scratch buffers, made once per
    geometry; the caller bounds it)."""
    memos = current_arena().memos
    memo = memos.get(name)
    if memo is None:
        memo = memos[name] = {}
    return memo


def workspace_bytes(op, in_avals, params) -> int:
    """Scratch bytes ``op`` declares (``OpDef.workspace``) for inputs of ``in_avals``; 0 when it
    declares none or a size is unknown."""
    if op.workspace is None or any(a.shape is None or None in a.shape for a in in_avals):
        return 0
    return sum(math.prod(shape) * np.dtype(dtype).itemsize for _, shape, dtype in op.workspace(in_avals, **params))


def planned_workspace_bytes(op, in_avals, params) -> int:
    """The bytes a compiled step's workspace takes from the plan: what ``op`` declares, on the CPU.
    On a GPU kernels allocate their temporaries from CuPy's pool (``scratch`` carves NumPy
    memory only), so no planned buffer would be used: 0."""
    if any(a.device is not None and a.device.kind != "cpu" for a in in_avals):
        return 0
    return workspace_bytes(op, in_avals, params)


def workspace_arena(raw) -> Arena:
    """The arena of a planned workspace ``raw`` (a 1-D uint8 view of a pooled buffer), made once per
    buffer set (``Program``): the slots carved from it and the memos of views into them stay valid
    run after run, for as long as the set lives."""
    return Arena(raw)


def bind_workspace(step, slot: int):
    """``step(slots)`` with ``slots[slot]`` (its workspace's ``Arena``, ``workspace_arena``) lent to
    the calling thread as its scratch while it runs; what was lent before (a step of an enclosing
    program running this one) is lent again after."""
    def run(s):
        lent = _LENT.get()
        if lent is None or lent.thread != _ident():  # (first here, or a context copied from another thread)
            lent = Lent(_ident())
            _LENT.set(lent)
        before = lent.arena
        lent.arena = s[slot]
        try:
            step(s)
        finally:
            lent.arena = before

    return run
