"""The user's frames: where lazyarray's own code ends and the caller's begins.

Everything here runs on error and warning paths only (the recording hot path keeps its own
memo of which code objects are the package's: ``graph.node.IN_PACKAGE``):

* ``warn(message, category)``: ``warnings.warn`` with the ``stacklevel`` of the first frame
  outside the package, so the warning names the user's file and line whichever path (a
  function, an operator, a block call, a materialization) reached the code that warns.
* ``without_internal_frames(tb)``: a traceback with the package's frames left out (what JAX's
  traceback filtering does), so an error raised deep inside a model ends at the user's line.
"""
from __future__ import annotations

import os
import sys
import warnings
from types import TracebackType

PKG_DIR = os.path.dirname(os.path.abspath(__file__))
_PREFIX = PKG_DIR + os.sep


def in_package(filename: str) -> bool:
    """Is ``filename`` one of lazyarray's own source files?"""
    return filename.startswith(_PREFIX)


def user_stacklevel(skip: int = 1) -> int:
    """The ``stacklevel`` (as ``warnings.warn`` counts it from the function ``skip`` frames out
    from here) of the first frame outside the package."""
    frame, level = sys._getframe(skip), 1
    while frame is not None and in_package(frame.f_code.co_filename):
        frame, level = frame.f_back, level + 1
    return level


def warn(message: str, category: type[Warning]) -> None:
    """``warnings.warn(message, category)`` attributed to the user's line (the first frame outside
    the package), so ``warnings.filterwarnings(module=...)`` and the printed location are the user's."""
    warnings.warn(message, category, stacklevel=user_stacklevel(2) + 1)


def without_internal_frames(tb: TracebackType | None) -> tuple[TracebackType | None, int]:
    """``(traceback, dropped)``: ``tb`` without the package's frames, and how many were dropped.

    The traceback then ends at the user's innermost line (None where no frame is the user's: the
    ``raise`` that re-raises it adds its own frame); the chain is rebuilt from new traceback
    objects, ``tb`` is left as it was."""
    frames = []
    while tb is not None:
        frames.append(tb)
        tb = tb.tb_next
    kept = [t for t in frames if not in_package(t.tb_frame.f_code.co_filename)]
    out = None
    for t in reversed(kept):
        out = TracebackType(out, t.tb_frame, t.tb_lasti, t.tb_lineno)
    return out, len(frames) - len(kept)
