"""Derived copies of weights: a value computed from a weight (its packed transpose for ``dense``,
``weight_pack.py``; its Winograd-transformed kernels for ``conv2d``, ``winograd.py``), kept while
the weight is unchanged so that inference computes it once.

A derived copy is keyed by (weight array, its buffer version, ``what``: a name of the derivation).
A stale copy would be a silently wrong result, so one is kept only while it provably follows from
the weight's current values:

* **keyed on the array object and its buffer version** (``buffer.version``): every in-place
  write through lazyarray (``x[...] = v``, ``out=``, ``Parameter.set_data``, ``Trainer.step``)
  bumps the version, and a bumped version misses (the weight's stale copies are dropped then).
  A new value set by ``set_data`` is a new array object: it misses too. The entry holds the
  array weakly and dies with it, so an ``id`` reused by a later array never finds it.
* **only arrays that own their memory** (``w.base is None``). Every buffer a compiled program
  plans or hands out is a view into one raw byte buffer that the program rewrites at later
  runs without bumping a version (intermediates every run; a returned output once nobody holds
  it), so those are never cached. Views of user arrays are never cached either: their memory
  has another owner whose writes this table does not see.
* **only from the second call at the same version**: a weight updated between calls (a training
  loop) would pay for keeping a copy per step it uses once; it never gets one. Inference (the
  weight unchanged since the last call) stores its copies at the second call.
* **never memory handed out writable**: ``np.asarray(w)`` (NumPy's view of the live buffer) and
  a DLPack export mark the memory *exposed* (``buffer.expose``), since writes through those
  aliases bump no version; an exposed weight is derived afresh at every call from then on (and
  a copy kept before is ignored).

Copies are read-only (nobody may write them: they are shared by every later call). Memory: all
copies together (``held_bytes()``) stay within the tuning table's ``keep_weights_budget`` (``LAZYARRAY_PACK_BUDGET_MB``, default 1024): past it,
further copies are computed at every call instead. ``keep_weights=False`` (``LAZYARRAY_PACK_WEIGHTS=0``) turns caching off.
"""
from __future__ import annotations

import threading
import weakref

import numpy as np

from ..buffer import version, versioned
from ..tuning_table import current

_HELD = [0]  # bytes they hold now (changed under _lock)

_lock = threading.Lock()

# id(weight) -> (weak reference to it, its buffer version, {what: copy}). Entries (and their
# dicts) are replaced, never changed, and only while still the entry read: a thread storing a copy
# cannot overwrite a newer entry (a write another thread noticed meanwhile).
_ENTRIES: dict[int, tuple] = {}


def _budget() -> int:
    """Bytes all derived copies may hold together (the tuning table's ``keep_weights_budget``)."""
    return current().keep_weights_budget


def _nbytes(e) -> int:
    return 0 if e is None else sum(c.nbytes for c in e[2].values())


def _forget(key: int, ref) -> None:
    with _lock:
        e = _ENTRIES.get(key)
        if e is not None and e[0] is ref:
            del _ENTRIES[key]
            _HELD[0] -= _nbytes(e)


def _replace(key: int, old: tuple, new: tuple) -> bool:
    with _lock:
        if _ENTRIES.get(key) is not old:
            return False
        _ENTRIES[key] = new
        _HELD[0] += _nbytes(new) - _nbytes(old)
        return True


def cacheable(w) -> bool:
    """Whether copies derived from ``w`` may be kept at all (a NumPy array owning its memory, never
    handed out writable, caching on)."""
    return current().keep_weights and versioned(w)


def keeps(w, nbytes: int = 0) -> bool:
    """Whether copies derived from ``w`` are kept (``derived`` serves one) or will be from the
    second call at ``w``'s version on: ``w`` may be kept at all and either has copies at its
    version or the budget has room for ``nbytes`` more. A cheap look-up with no side effect, for
    choosing an algorithm by whether its derived operand comes for free; the answer does not
    change from a weight's first call to its second, so neither does the choice (nor the values'
    rounding), unless the budget fills up meanwhile."""
    if not cacheable(w):
        return False
    e = _ENTRIES.get(id(w))
    if e is not None and e[0]() is w and e[1] == version(w) and e[2]:
        return True
    return _HELD[0] + nbytes <= _budget()


def _freeze(copy):
    copy.flags.writeable = False  # ours alone: nobody may write it
    base = copy.base
    if base is not None and base.__class__ is np.ndarray:  # (a view of a scratch-free allocation)
        base.flags.writeable = False
    return copy


def derived(w, what: str, make, nbytes: int):
    """The copy ``make()`` derived from weight ``w`` (``what`` names the derivation; ``nbytes`` is
    its size, to check the budget before making it): the kept copy while ``w`` is unchanged, made
    and kept at the second call at ``w``'s version where sound (see the module), else ``None``:
    the caller derives it afresh, unkept."""
    if not cacheable(w):
        return None
    key = id(w)
    now = version(w)
    e = _ENTRIES.get(key)
    if e is not None and e[0]() is w:
        if e[1] != now:  # written since: its copies are stale, drop them
            _replace(key, e, (e[0], now, {}))
            return None
        copy = e[2].get(what)
        if copy is not None:
            return copy
        if _HELD[0] + nbytes > _budget():  # the copies already hold the budget
            return None
        copy = _freeze(make())  # second call at this version: the weight holds still
        while version(w) == now:  # (a write that ended during make bumped it: keep nothing)
            if _replace(key, e, (e[0], now, {**e[2], what: copy})):
                break
            e = _ENTRIES.get(key)  # another thread stored another copy meanwhile: add to its entry
            if e is None or e[0]() is not w or e[1] != now:
                break
        return copy
    try:
        ref = weakref.ref(w, lambda r, key=key: _forget(key, r))
    except TypeError:
        return None
    with _lock:
        _HELD[0] -= _nbytes(_ENTRIES.get(key))  # (an entry of a dead array with the same id)
        _ENTRIES[key] = (ref, now, {})
    return None


def held_bytes() -> int:
    """Bytes held by derived copies now."""
    return _HELD[0]


def held_count(what: str | None = None) -> int:
    """How many copies are held now (of derivation ``what``, or of any)."""
    return sum(len(e[2]) if what is None else (what in e[2]) for e in list(_ENTRIES.values()))


def clear() -> None:
    """Drop every derived copy (they are made again at the second call of an unchanged weight)."""
    with _lock:
        _ENTRIES.clear()
        _HELD[0] = 0
