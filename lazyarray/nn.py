"""``la.nn``: the neural-network ops of the registry (``dense``, ``softmax``, ``dropout``, ...)."""
from __future__ import annotations

from .functions import namespace

globals().update(namespace("nn"))
__all__ = sorted(namespace("nn"))
