"""What runs on a Dask worker: one region of a global graph on one piece.

The region travels as its JSON text (scattered once per worker, so every task of the run on
that worker reads the same string object); the worker parses it and compiles a ``CachedOp``
for each physical input signature once, keeping the last few in a small LRU table
(``_COMPILED``), so the tasks of one piece size share one compiled program.
"""
from __future__ import annotations

import threading
from collections import OrderedDict

import numpy as np

from .. import rng
from ..executor.cached_op import CachedOp
from ..graph.symbol import Symbol
from .pieces import localize

_COMPILED: OrderedDict = OrderedDict()  # (json text, input signature) -> (CachedOp, input names)
_PARSED: OrderedDict = OrderedDict()  # json text -> Symbol
_LOCK = threading.Lock()  # threaded workers (LocalCluster(processes=False)) share the tables
_MAX = 32


def run_region(text: str, names: tuple, *arrays) -> tuple:
    """The outputs (NumPy arrays) of the graph ``text`` on one piece whose inputs ``names`` are ``arrays``."""
    arrays = [np.asarray(a) for a in arrays]
    key = (text, tuple((a.shape, a.dtype.str) for a in arrays))
    with _LOCK:
        op = _get(_COMPILED, key)
        if op is None:
            sym = _get(_PARSED, text)
            if sym is None:
                sym = _put(_PARSED, text, Symbol.from_json(text))
            local = localize(sym, {n: a.shape for n, a in zip(names, arrays)})
            op = _put(_COMPILED, key, CachedOp(local))
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


def _get(table: OrderedDict, key):
    v = table.get(key)
    if v is not None:
        table.move_to_end(key)
    return v


def _put(table: OrderedDict, key, value):
    table[key] = value
    if len(table) > _MAX:
        table.popitem(last=False)
    return value
