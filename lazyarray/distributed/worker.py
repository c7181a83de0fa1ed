"""What runs on a Dask worker: one region of a global graph on one piece.

The region travels as its JSON text (scattered once per worker, so every task of the run on
that worker reads the same string object); the worker parses it and compiles a ``CachedOp``
for each physical input signature once, keeping the last few in a small LRU table
(``PROGRAMS``, a ``caches.NamedCache``), so the tasks of one piece size share one compiled program.
"""
from __future__ import annotations

import threading

import numpy as np

from .. import rng
from ..caches import NamedCache
from ..executor.cached_op import CachedOp
from ..graph.symbol import Symbol
from .pieces import localize

_MAX = 32
PROGRAMS = NamedCache("distributed worker programs", _MAX)  # (json text, input signature) -> CachedOp
PARSED = NamedCache("distributed worker regions", _MAX)  # json text -> Symbol
_LOCK = threading.Lock()  # threaded workers (LocalCluster(processes=False)): one compiles a region at a time


def run_region(text: str, names: tuple, *arrays) -> tuple:
    """The outputs (NumPy arrays) of the graph ``text`` on one piece whose inputs ``names`` are ``arrays``."""
    arrays = [np.asarray(a) for a in arrays]
    key = (text, tuple((a.shape, a.dtype.str) for a in arrays))
    with _LOCK:
        op = PROGRAMS.get(key)
        if op is None:
            sym = PARSED.get(text)
            if sym is None:
                sym = Symbol.from_json(text)
                PARSED.put(text, sym)
            op = CachedOp(localize(sym, {n: a.shape for n, a in zip(names, arrays)}))
            PROGRAMS.put(key, op)
    out = op(**dict(zip(names, arrays)))
    out = out if isinstance(out, list) else [out]
    return tuple(o.asnumpy() for o in out)


def run_region_seeded(text: str, names: tuple, seed: int, *arrays) -> tuple:
    """``run_region`` with the random draws of the graph (dropout masks) taken from a generator
    seeded with ``seed``: a piece draws the same masks wherever and however often it runs.

    The generator is this thread's only (``rng.drawing_from``), so threaded workers
    (``LocalCluster(processes=False)``) never draw from each other's generators.
    """
    with rng.drawing_from(np.random.default_rng(seed)):
        return run_region(text, names, *arrays)


def clear() -> None:
    """Forget the compiled programs and parsed regions (the next task compiles again)."""
    with _LOCK:
        PROGRAMS.clear()
        PARSED.clear()
