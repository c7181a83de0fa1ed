"""The mode of this thread / task: which of lazyarray's recorders are on.

One ``ContextVar`` holds every flag, so the dispatcher's hot path reads one value and takes its
fast path only when it is 0: bit ``DEFERRED`` (ops record nodes, ``la.deferred()``), bit
``RECORDING`` (``autograd.record()`` is active), bit ``PROFILING`` (``la.profile()`` times
kernels) and bit ``AUTOCAST`` (``la.amp.autocast()``: ops' inputs cast by the amp policy). It sits on the ground floor so every layer can read it (the kernels layer asks whether
autograd records; the executor whether a profile is on) without importing the layers that set it.
"""
from __future__ import annotations

import contextvars

MODE: contextvars.ContextVar[int] = contextvars.ContextVar("lazyarray_mode", default=0)
DEFERRED, RECORDING, PROFILING = 1, 2, 4
AUTOCAST = 8  # la.amp's per-op dtype policy is on (dispatch.AUTOCAST_POLICY says how)


def set_mode_bit(bit: int, on: bool) -> contextvars.Token:
    """Turn one flag of the mode on or off for this context; returns the token to reset it."""
    mode = MODE.get()
    return MODE.set(mode | bit if on else mode & ~bit)


def is_recording() -> bool:
    """True inside ``autograd.record()`` (and not inside ``pause()``)."""
    return bool(MODE.get() & RECORDING)


def is_profiling() -> bool:
    """True inside ``la.profile()``."""
    return bool(MODE.get() & PROFILING)
