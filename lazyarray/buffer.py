"""Buffers: who may write a backend array, and how we notice that somebody did.

A buffer is the memory behind a backend array (NumPy / CuPy). Two facts about it matter
to correctness and both live here, outside the graph:

* **read-only**: constants of a graph and values a graph shares are frozen with the
  backend's own flag (``writeable=False``), so a write raises instead of changing every
  later result (``freeze``);
* **version**: every in-place write through lazyarray (``x += 1``, ``x[i] = v``, ``out=``,
  ``Parameter.set_data``, optimizer updates) bumps a counter of the memory it wrote
  (``bump``). Whoever keeps a value for later (an autograd record, a constant captured
  by a lazy graph) remembers the version it saw and checks it before reading (PyTorch's
  saved-tensor check).

The counter belongs to the *root* of the memory (the array that owns it), so every view
shares it: writing ``x.T`` changes ``x``'s version too. Counters are kept in a side table
keyed by the root and dropped when the root dies, so creating an array costs nothing:
only writers and keepers touch the table. That is why this is a table and not a
``Buffer`` object per array (an object per eager result would cost the hot path).
"""
from __future__ import annotations

import weakref

import numpy as np

_VERSIONS: dict[int, list] = {}  # id(root) -> [version, weakref to the root]


def root(value):
    """The array that owns ``value``'s memory (``value`` itself when it owns it)."""
    base = getattr(value, "base", None)
    if base is None:  # the common case: it owns its memory
        return value
    while base is not None and hasattr(base, "base") and hasattr(base, "shape"):
        value = base
        base = getattr(value, "base", None)
    return value


def version(value) -> int:
    """How many in-place writes lazyarray has made to ``value``'s memory (0: none)."""
    rec = _VERSIONS.get(id(root(value)))
    return 0 if rec is None else rec[0]


def bump(value) -> None:
    """Record an in-place write to ``value``'s memory."""
    r = root(value)
    key = id(r)
    rec = _VERSIONS.get(key)
    if rec is not None and rec[1]() is r:
        rec[0] += 1
        return
    try:
        ref = weakref.ref(r, lambda _, key=key: _VERSIONS.pop(key, None))
    except TypeError:  # a storage type without weak references: nothing can outlive it unseen
        return
    _VERSIONS[key] = [1, ref]


def cells(values) -> list:
    """The version records of ``values`` (arrays that own their memory: their own roots), made where
    missing: ``cell[0]`` is ``version(value)``, counted up in place by every ``bump`` while the array
    lives, so a keeper that holds the arrays reads all their versions in one pass (``param_cache.py``)
    instead of a ``version`` call each."""
    out = []
    for v in values:
        key = id(v)
        rec = _VERSIONS.get(key)
        if rec is None or rec[1]() is not v:
            try:
                rec = [0, weakref.ref(v, lambda _, key=key: _VERSIONS.pop(key, None))]
            except TypeError:  # (no weak references: a cell nobody counts; the caller keeps nothing)
                return []
            _VERSIONS[key] = rec
        out.append(rec)
    return out


def any_exposed(values) -> bool:
    """Whether any of ``values`` (arrays that own their memory) was handed out writable (``exposed``);
    one test while no memory at all is (the usual case)."""
    return bool(_EXPOSED) and any(map(exposed, values))


def freeze(value):
    """Make ``value`` read-only (a constant): later writes raise instead of changing it."""
    flags = getattr(value, "flags", None)
    if flags is not None and getattr(flags, "writeable", False):
        try:
            flags.writeable = False
        except (ValueError, AttributeError):  # CuPy arrays have no such flag
            pass
    return value


def is_frozen(value) -> bool:
    flags = getattr(value, "flags", None)
    return flags is not None and hasattr(flags, "writeable") and not flags.writeable


# Memory that left lazyarray writable: NumPy's view of a live buffer (``np.asarray(x)``) or a
# DLPack capsule. Writes through those aliases bump no version, so nothing derived from such memory
# may be cached on the strength of its version (ops/weight_pack.py asks ``exposed`` first).
_EXPOSED: dict[int, weakref.ref] = {}


def expose(value) -> None:
    """Record that ``value``'s memory has a writable alias outside lazyarray (for good: the alias
    may live anywhere)."""
    r = root(value)
    key = id(r)
    ref = _EXPOSED.get(key)
    if ref is not None and ref() is r:
        return
    try:
        _EXPOSED[key] = weakref.ref(r, lambda _, key=key: _EXPOSED.pop(key, None))
    except TypeError:
        pass


def exposed(value) -> bool:
    """Whether ``value``'s memory was handed out writable (``expose``)."""
    r = root(value)
    ref = _EXPOSED.get(id(r))
    return ref is not None and ref() is r


def versioned(value) -> bool:
    """Whether ``value``'s version tells every write to it, so that what is derived from it (a
    transformed weight, a content hash, a parameter-only step's result) may be kept until the
    version changes: a NumPy array that owns its memory (a view's owner may be written through
    another view; a compiled program rewrites the buffers it hands out without bumping a version)
    and was never handed out writable (writes through ``np.asarray(x)`` bump no version)."""
    return value.__class__ is np.ndarray and value.base is None and not exposed(value)

