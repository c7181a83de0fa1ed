"""Named caches: the one form of process-wide mutable state outside the op registry and the tuning table.

A ``NamedCache`` is a map with a name, a bound and a ``clear()``: at most ``size`` entries, the
least recently used (stored or found by ``get``; ``peek`` and ``get_or_make``'s hits, the hot
paths' look-ups, leave the order as it is) going first when a new one would exceed that,
guarded by its own lock (any thread may store). ``once(key)`` is the "warn once per op" form: True the first time a key
is seen, False after (until ``clear()`` or eviction), so a warning given once per op and
storage types cannot grow a set without end. ``get_or_make(key, make)`` is the "compile once" form:
on a miss one thread calls ``make()`` while the others wait for its value (a lock that only guarded
a module's table folds into its cache). ``drop``, when given, is called with each value the cache
lets go (evicted, replaced, discarded or cleared): a cache that owns a resource (a thread pool)
shuts it down there.

``tools/arch_report.py`` counts every other module-level dict, list, set, lock or thread-local
as mutable state outside the registry, the tuning table and the named caches (target 0), and
``tests/test_architecture.py`` fails on a new one.

    >>> from lazyarray.caches import NamedCache
    >>> seen = NamedCache("example warnings", size=2)
    >>> seen.once("relu"), seen.once("relu"), len(seen)
    (True, False, 1)
    >>> seen.clear(); len(seen)
    0
"""
from __future__ import annotations

import threading
from collections import OrderedDict

from .errors import ParamValueError

_MISSING = object()


class NamedCache:
    """``key -> value`` for at most ``size`` keys (least recently used evicted first), with ``clear()``."""

    __slots__ = ("name", "size", "drop", "peek", "_items", "_lock", "_making")

    def __init__(self, name: str, size: int, drop=None):
        if not isinstance(size, int) or isinstance(size, bool) or size < 1:
            raise ParamValueError(f"NamedCache {name!r}: size must be an int >= 1 (entries kept), got {size!r}")
        self.name = name
        self.size = size
        self.drop = drop  # called with each value let go (None: nothing to release)
        self._items: OrderedDict = OrderedDict()
        # ``peek(key, default=None)``: the value stored under ``key``, else ``default``, leaving the order
        # as it is: the hot paths' look-up (the map's own ``get``, no Python frame; ``clear()`` keeps the map)
        self.peek = self._items.get
        self._lock = threading.Lock()
        self._making = threading.RLock()  # (re-entrant: a make() may fill another key of the same cache)

    def get(self, key, default=None):
        """The value stored under ``key`` (now the most recently used), else ``default``."""
        value = self._items.get(key, _MISSING)
        if value is _MISSING:
            return default
        try:
            self._items.move_to_end(key)
        except KeyError:  # (evicted by another thread meanwhile: the value found is still good)
            pass
        return value

    def put(self, key, value) -> None:
        """Store ``value`` under ``key`` (the most recent entry), evicting the oldest past ``size``."""
        with self._lock:
            gone = self._items.pop(key, _MISSING)
            self._items[key] = value
            gone = [] if gone is _MISSING or gone is value else [gone]
            while len(self._items) > self.size:
                gone.append(self._items.popitem(last=False)[1])
        self._dropped(gone)

    def get_or_make(self, key, make, *args):
        """The value stored under ``key``; on a miss, ``make(*args)``'s, stored. One thread makes at a
        time: the others wait, then find what it made (a kernel compiled once, a probe run once).

        >>> c = NamedCache("made", size=4)
        >>> c.get_or_make("k", lambda: 42), c.get_or_make("k", lambda: 0)
        (42, 42)
        """
        value = self._items.get(key, _MISSING)
        if value is not _MISSING:
            return value
        with self._making:
            value = self._items.get(key, _MISSING)
            if value is _MISSING:
                value = make(*args)
                self.put(key, value)
        return value

    def once(self, key) -> bool:
        """True the first time ``key`` is seen (it is then stored), False while it is held."""
        if key in self._items:
            return False
        with self._lock:
            if key in self._items:
                return False
            self._items[key] = True
            gone = [self._items.popitem(last=False)[1] for _ in range(len(self._items) - self.size)]
        self._dropped(gone)
        return True

    def discard(self, key) -> None:
        with self._lock:
            gone = self._items.pop(key, _MISSING)
        if gone is not _MISSING:
            self._dropped([gone])

    def clear(self) -> None:
        """Forget every entry (``drop`` is called with each value)."""
        with self._lock:
            gone = list(self._items.values())
            self._items.clear()
        self._dropped(gone)

    def _dropped(self, values: list) -> None:
        if self.drop is not None:
            for v in values:
                self.drop(v)

    def values(self) -> list:
        """The values held now (a copy: least recently used first)."""
        with self._lock:
            return list(self._items.values())

    def __contains__(self, key) -> bool:
        return key in self._items

    def __len__(self) -> int:
        return len(self._items)

    def __repr__(self) -> str:
        return f"NamedCache({self.name!r}, {len(self._items)}/{self.size} entries)"
