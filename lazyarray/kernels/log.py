"""``LAZYARRAY_LOG=kernels`` (or ``la.config.log_kernels = True``): each new choice, logged once.

A choice is logged the first time its (op, implementation, shapes) is seen, at INFO on the
``lazyarray.kernels`` logger (a stderr handler is added to it when it has none, so the setting
alone shows the lines); a bounded memo keeps a loop from logging every call.
"""
from __future__ import annotations

import functools
import logging

from .impl import Choice

LOGGER = logging.getLogger("lazyarray.kernels")


@functools.lru_cache(maxsize=1024)
def _once(op: str, label: str, shapes: tuple) -> None:
    if not LOGGER.handlers and not logging.getLogger().handlers:
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("lazyarray.kernels: %(message)s"))
        LOGGER.addHandler(handler)
        LOGGER.setLevel(logging.INFO)
    LOGGER.info("%s[%s] for %s", op, label, ", ".join(str(list(s)) for s in shapes))


def log_choice(choice: Choice, *arrays) -> None:
    """Log ``choice`` for arrays of these shapes, unless it was logged for them already."""
    _once(choice.impl.op, choice.label(), tuple(tuple(getattr(a, "shape", ())) for a in arrays if a is not None))


def clear() -> None:
    """Forget what was logged (each choice is logged again once)."""
    _once.cache_clear()
