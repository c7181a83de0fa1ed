"""Where an error happened in the user's model, said once: the block path and the user's frames.

An error raised while a block runs (its eager ``forward``, a deferred or hybridize trace, or a
compiled graph of a hybridized block) gets one note, ``in block 1.body.0 (Conv2D)``: the path of
the innermost block that was running (or that recorded the failing node), from the outermost
block called. The note is written where the error is first seen and rewritten, never added
again, as the error leaves each enclosing block, so a nesting depth of ten still gives one line.

At the same boundary the traceback loses lazyarray's own frames (``user_frames``; JAX does the
same), so it ends at the user's line; a second note says how many frames were left out and how
to keep them (``la.config.full_tracebacks``, ``LAZYARRAY_FULL_TRACEBACK=1``).

Notes are Python 3.11's ``BaseException.add_note`` (``__notes__``): the message itself is left as
the op wrote it. Everything here runs on error paths only.
"""
from __future__ import annotations

from . import tuning_table
from .user_frames import without_internal_frames

# The attribute an exception carries while it crosses blocks: (anchor, path, block note, frames
# note, frames dropped). ``path`` is a ``Node.block`` tuple ``((name, type name), ...)`` below
# ``anchor``, the block it is relative to (None: a node's path whose root block is not known yet).
_WHERE = "_lazyarray_where"


def block_text(path: tuple, root_type: str | None) -> str:
    """``in block 1.body.0 (Conv2D)``; ``in block (top) (Net)`` for the outermost block itself."""
    if path:
        return f"in block {'.'.join(name for name, _ in path)} ({path[-1][1]})"
    return f"in block (top) ({root_type})"


def from_node(exc: BaseException, block: tuple | None) -> BaseException:
    """Mark ``exc`` (a failure of a node a block recorded, ``Node.block``) with that block's path; the
    block running the graph gives the root when the error leaves it (``leaving_block``)."""
    if block and getattr(exc, _WHERE, None) is None:
        _set(exc, None, tuple(block), None, 0)
    return exc


def leaving_block(exc: BaseException, block, child_name) -> BaseException:
    """``exc`` as it leaves ``block``'s call (to be raised again there, as it is: ``raise
    leaving_block(exc, ...)`` keeps its ``__cause__``): its block note names the innermost block from
    ``block`` down, and its traceback keeps the user's frames only. ``child_name(block, child)``: the
    name ``block`` holds ``child`` by (its type's name when it holds it by none)."""
    where = getattr(exc, _WHERE, None)
    if where is None:
        anchor, path, dropped = block, (), 0
    else:
        anchor, path, _, _, dropped = where
        if anchor is None:  # a node's path, relative to the block running its graph
            anchor = block
        elif anchor is not block:
            path = ((child_name(block, anchor), type(anchor).__name__),) + path
            anchor = block
    if not tuning_table.current().full_tracebacks:
        tb, n = without_internal_frames(exc.__traceback__)
        exc.__traceback__ = tb
        # (the first entry is the block call's own frame, which the caller's ``raise`` adds again)
        dropped += max(n - 1, 0)
    _set(exc, anchor, path, type(anchor).__name__, dropped)
    return exc


def _set(exc: BaseException, anchor, path: tuple, root_type, dropped: int) -> None:
    old = getattr(exc, _WHERE, None)
    where = block_text(path, root_type) if (path or root_type) else None
    frames = (f"(lazyarray left {dropped} of its own frames out of this traceback; "
              "la.config.full_tracebacks = True keeps them)") if dropped else None
    notes = getattr(exc, "__notes__", None)
    if notes is None:
        notes = exc.__notes__ = []
    _replace(notes, old[2] if old else None, where, 0)
    _replace(notes, old[3] if old else None, frames, len(notes))
    setattr(exc, _WHERE, (anchor, path, where, frames, dropped))


def _replace(notes: list, old, new, at: int) -> None:
    """Put note ``new`` where ``old`` was (the same object), else at ``at``."""
    i = next((k for k, n in enumerate(notes) if n is old), None) if old is not None else None
    if i is not None:
        if new is None:
            del notes[i]
        else:
            notes[i] = new
    elif new is not None:
        notes.insert(at, new)
