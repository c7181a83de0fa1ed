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
from ..ndarray import NDArray
from .pieces import localize

_MAX = 32
PROGRAMS = NamedCache("distributed worker programs", _MAX)  # (json text, input signature) -> CachedOp
PARSED = NamedCache("distributed worker regions", _MAX)  # json text -> Symbol
_LOCK = threading.Lock()  # threaded workers (LocalCluster(processes=False)): one compiles a region at a time


def _program(text: str, names: tuple, arrays: list) -> CachedOp:
    """The compiled program of the graph ``text`` for the shapes and dtypes of ``arrays`` (kept in ``PROGRAMS``)."""
    key = (text, tuple((tuple(a.shape), np.dtype(a.dtype).str) for a in arrays))
    with _LOCK:
        op = PROGRAMS.get(key)
        if op is None:
            sym = PARSED.get(text)
            if sym is None:
                sym = Symbol.from_json(text)
                PARSED.put(text, sym)
            op = CachedOp(localize(sym, {n: tuple(a.shape) for n, a in zip(names, arrays)}))
            PROGRAMS.put(key, op)
    return op


def run_region(text: str, names: tuple, *arrays) -> tuple:
    """The outputs (NumPy arrays) of the graph ``text`` on one piece whose inputs ``names`` are ``arrays``."""
    arrays = [np.asarray(a) for a in arrays]
    out = _program(text, names, arrays)(**dict(zip(names, arrays)))
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


def run_step_region(text: str, names: tuple, seed: int, *arrays) -> tuple:
    """``run_region_seeded`` without its copies, for a replica's step (``replica.local``): ``arrays`` may
    be ``NDArray`` (the replica's parameters, passed as they are: no copy of the parameters each step)
    or NumPy; the outputs are the program's own values (fresh memory each run, but where the graph
    passes an input through: then that input's value), to be read, not written (``local`` packs
    them into new buckets)."""
    arrays = [a if isinstance(a, NDArray) else np.asarray(a) for a in arrays]
    with rng.drawing_from(np.random.default_rng(seed)):
        out = _program(text, names, arrays)(**dict(zip(names, arrays)))
    out = out if isinstance(out, list) else [out]
    return tuple(_host(o) for o in out)


def _host(a: NDArray) -> np.ndarray:
    v = a._materialize()
    return v if v.__class__ is np.ndarray else a.asnumpy()


def clear() -> None:
    """Forget the compiled programs and parsed regions (the next task compiles again)."""
    with _LOCK:
        PROGRAMS.clear()
        PARSED.clear()
