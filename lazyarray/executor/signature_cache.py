"""Per-signature caches of compiled graphs: bounded, and loud about accidental recompiles.

``CachedOp`` keeps one compiled program per input signature and a hybridized block one traced
graph per signature. Fed ever new shapes, either would grow without bound (a CNN fed 500 batch
sizes kept 500 programs). ``SignatureCache`` bounds them: at most ``size`` entries, and when a
new one would exceed that, the least recently used goes. Recency is tracked cheaply: a hit
stamps the entry with the number of the latest compile (one attribute store on the hot path),
so eviction drops the entry unused for the most compiles.

After ``warn_at`` compiles a ``RecompileWarning`` names what changed between the previous
signature and the new one (which input, which dim), once per cause, with both signatures.

The default size is the tuning table's ``cache_size`` (``DEFAULT_SIZE``, 64, or ``LAZYARRAY_CACHE_SIZE``
at import, or ``la.tuning(cache_size=...)``), read when a cache is made;
``CachedOp(sym, cache_size=...)`` and ``block.hybridize(cache_size=...)`` set it per object.

Entries are also weighed in bytes: ``add(key, value, describe, nbytes)`` records what the entry
holds (a compiled program: the buffers of its memory plan, forward and backward), and while the
total is above ``max_bytes`` the least recently used entries go (the newest always stays, however
large: it is about to run). The budget is the tuning table's ``cache_bytes`` (``DEFAULT_BYTES``, 256 MiB,
or ``LAZYARRAY_CACHE_BYTES``, an int such as ``536870912`` or ``5e8``), or ``cache_bytes=`` of
``CachedOp`` / ``hybridize``.
Both bounds are enforced when an entry is added, never on a hit: the hot path is unchanged.
"""
from __future__ import annotations

from ..errors import ParamError, ParamValueError
from ..tuning_table import DEFAULTS, current
from ..user_frames import warn

DEFAULT_SIZE = DEFAULTS["cache_size"]  # 64
DEFAULT_BYTES = DEFAULTS["cache_bytes"]  # 256 MiB
RECOMPILE_WARN_AT = 8


class RecompileWarning(UserWarning):
    """One graph compiled (or traced) for many input signatures (varying shapes?)."""


def default_size() -> int:
    """The tuning table's ``cache_size`` (``LAZYARRAY_CACHE_SIZE`` at import, else ``DEFAULT_SIZE``)."""
    return current().cache_size


def default_bytes() -> int:
    """The tuning table's ``cache_bytes`` (``LAZYARRAY_CACHE_BYTES`` at import, else ``DEFAULT_BYTES``)."""
    return current().cache_bytes


class SignatureCache:
    """``key -> value`` for at most ``size`` keys; values must accept an attribute ``used``.

    Read on the hot path with ``cache.items.get(key)`` then ``value.used = cache.epoch``.
    """

    def __init__(self, what: str, size: int | None = None, warn_at: int = RECOMPILE_WARN_AT,
                 max_bytes: int | None = None):
        if size is not None and (not isinstance(size, int) or isinstance(size, bool) or size < 1):
            error = ParamValueError if isinstance(size, int) and not isinstance(size, bool) else ParamError
            raise error(f"{what}: cache_size must be a positive int (the number of input signatures kept "
                        f"compiled; None for the default, {default_size()}), got {size!r}"[:300])
        if max_bytes is not None and (not isinstance(max_bytes, int) or isinstance(max_bytes, bool) or max_bytes < 0):
            error = ParamValueError if isinstance(max_bytes, int) and not isinstance(max_bytes, bool) else ParamError
            raise error(f"{what}: cache_bytes must be an int >= 0 (the bytes the compiled signatures may hold; "
                        f"None for the default, {default_bytes()}), got {max_bytes!r}"[:300])
        self.what = what
        self.size = size or default_size()
        self.max_bytes = default_bytes() if max_bytes is None else max_bytes
        self.nbytes = 0  # what the entries hold together (the sum of ``_weights``)
        self._weights: dict = {}
        self.warn_at = warn_at
        self.items: dict = {}
        self.epoch = 0  # number of compiles so far
        self.evictions = 0
        self._last_key = None
        self._warned: set = set()

    def __len__(self) -> int:
        return len(self.items)

    def add(self, key, value, describe, nbytes: int = 0) -> None:
        """Store a freshly compiled ``value`` for ``key``, holding ``nbytes``. ``describe(old_key, new_key)``
        returns ``(causes, text)``: hashable causes of the difference and the text of both signatures."""
        self.epoch += 1
        value.used = self.epoch
        if self.epoch > self.warn_at and self._last_key is not None:
            causes, text = describe(self._last_key, key)
            new = [c for c in causes if c not in self._warned]
            if new or not causes:
                self._warned.update(causes)
                warn(
                    f"{self.what} compiled {self.epoch} times (once per new input signature; keeping the "
                    f"{self.size} most recently used). {text}. Varying shapes recompile: pad or bucket them, "
                    "or keep shapes fixed.", RecompileWarning)
        self._last_key = key
        if key not in self.items and len(self.items) >= self.size:
            self._evict(min(self.items, key=lambda k: self.items[k].used))
        self.nbytes += nbytes - self._weights.get(key, 0)
        self._weights[key] = nbytes
        self.items[key] = value
        while self.nbytes > self.max_bytes and len(self.items) > 1:  # (the newest stays: it runs next)
            self._evict(min((k for k in self.items if k != key), key=lambda k: self.items[k].used))

    def _evict(self, key) -> None:
        del self.items[key]
        self.nbytes -= self._weights.pop(key, 0)
        self.evictions += 1

    def clear(self) -> None:
        self.items.clear()
        self._weights.clear()
        self.nbytes = 0
        self._last_key = None


def describe_change(names, old_inputs, new_inputs, other_changed: str = "") -> list:
    """Causes of a recompile: ``(input name, "dim k" | "rank" | "dtype" | "device")`` for each
    input (``(shape, dtype, device, ...)``) that changed, plus ``("", other_changed)`` if given."""
    causes = []
    for nm, a, b in zip(names, old_inputs, new_inputs):
        if a[0] != b[0]:
            if len(a[0]) == len(b[0]):
                causes += [(nm, f"dim {d}") for d, (p, q) in enumerate(zip(a[0], b[0])) if p != q]
            else:
                causes.append((nm, "rank"))
        if a[1] != b[1]:
            causes.append((nm, "dtype"))
        if a[2] is not b[2]:
            causes.append((nm, "device"))
    if other_changed:
        causes.append(("", other_changed))
    return causes


def causes_text(causes: list, label: str = "input") -> str:
    return ", ".join(f"{label} {nm!r} {field}" if nm != "" else field for nm, field in causes) or "nothing visible"

