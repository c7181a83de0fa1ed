"""Named caches: the one form of process-wide mutable state outside the op registry and the tuning table.

A ``NamedCache`` is a map with a name, a bound and a ``clear()``: at most ``size`` entries, the
least recently used (stored or found by ``get``) going first when a new one would exceed that,
guarded by its own lock (any thread may store). ``once(key)`` is the "warn once per op" form: True the first time a key
is seen, False after (until ``clear()`` or eviction), so a warning given once per op and
storage types cannot grow a set without end.

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

    __slots__ = ("name", "size", "_items", "_lock")

    def __init__(self, name: str, size: int):
        if not isinstance(size, int) or isinstance(size, bool) or size < 1:
            raise ParamValueError(f"NamedCache {name!r}: size must be an int >= 1 (entries kept), got {size!r}")
        self.name = name
        self.size = size
        self._items: OrderedDict = OrderedDict()
        self._lock = threading.Lock()

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
            self._items.pop(key, None)
            self._items[key] = value
            while len(self._items) > self.size:
                self._items.popitem(last=False)

    def once(self, key) -> bool:
        """True the first time ``key`` is seen (it is then stored), False while it is held."""
        if key in self._items:
            return False
        with self._lock:
            if key in self._items:
                return False
            self._items[key] = True
            while len(self._items) > self.size:
                self._items.popitem(last=False)
        return True

    def discard(self, key) -> None:
        with self._lock:
            self._items.pop(key, None)

    def clear(self) -> None:
        """Forget every entry."""
        with self._lock:
            self._items.clear()

    def __contains__(self, key) -> bool:
        return key in self._items

    def __len__(self) -> int:
        return len(self._items)

    def __repr__(self) -> str:
        return f"NamedCache({self.name!r}, {len(self._items)}/{self.size} entries)"
