"""Per-signature caches of compiled graphs: bounded, and loud about accidental recompiles.

``CachedOp`` keeps one compiled program per input signature and a hybridized block one traced
graph per signature. Fed ever new shapes, either would grow without bound (a CNN fed 500 batch
sizes kept 500 programs). ``SignatureCache`` bounds them: at most ``size`` entries, and when a
new one would exceed that, the least recently used goes. Recency is tracked cheaply: a hit
stamps the entry with the number of the latest compile (one attribute store on the hot path),
so eviction drops the entry unused for the most compiles.

After ``warn_at`` compiles a ``RecompileWarning`` names what changed between the previous
signature and the new one (which input, which dim), once per cause, with both signatures.

The default size is ``DEFAULT_SIZE`` (64), or ``LAZYARRAY_CACHE_SIZE`` from the environment;
``CachedOp(sym, cache_size=...)`` and ``block.hybridize(cache_size=...)`` set it per object.
"""
from __future__ import annotations

import os
import warnings

from ..errors import ParamError, ParamValueError

DEFAULT_SIZE = 64
RECOMPILE_WARN_AT = 8


class RecompileWarning(UserWarning):
    """One graph compiled (or traced) for many input signatures (varying shapes?)."""


def default_size() -> int:
    text = os.environ.get("LAZYARRAY_CACHE_SIZE", "")
    return int(text) if text.isdigit() and int(text) > 0 else DEFAULT_SIZE


class SignatureCache:
    """``key -> value`` for at most ``size`` keys; values must accept an attribute ``used``.

    Read on the hot path with ``cache.items.get(key)`` then ``value.used = cache.epoch``.
    """

    def __init__(self, what: str, size: int | None = None, warn_at: int = RECOMPILE_WARN_AT):
        if size is not None and (not isinstance(size, int) or isinstance(size, bool) or size < 1):
            error = ParamValueError if isinstance(size, int) and not isinstance(size, bool) else ParamError
            raise error(f"{what}: cache_size must be a positive int (the number of input signatures kept "
                        f"compiled; None for the default, {default_size()}), got {size!r}"[:300])
        self.what = what
        self.size = size or default_size()
        self.warn_at = warn_at
        self.items: dict = {}
        self.epoch = 0  # number of compiles so far
        self.evictions = 0
        self._last_key = None
        self._warned: set = set()

    def __len__(self) -> int:
        return len(self.items)

    def add(self, key, value, describe) -> None:
        """Store a freshly compiled ``value`` for ``key``. ``describe(old_key, new_key)`` returns
        ``(causes, text)``: hashable causes of the difference and the text of both signatures."""
        self.epoch += 1
        value.used = self.epoch
        if self.epoch > self.warn_at and self._last_key is not None:
            causes, text = describe(self._last_key, key)
            new = [c for c in causes if c not in self._warned]
            if new or not causes:
                self._warned.update(causes)
                warnings.warn(
                    f"{self.what} compiled {self.epoch} times (once per new input signature; keeping the "
                    f"{self.size} most recently used). {text}. Varying shapes recompile: pad or bucket them, "
                    "or keep shapes fixed.", RecompileWarning, stacklevel=4)
        self._last_key = key
        if key not in self.items and len(self.items) >= self.size:
            oldest = min(self.items, key=lambda k: self.items[k].used)
            del self.items[oldest]
            self.evictions += 1
        self.items[key] = value

    def clear(self) -> None:
        self.items.clear()
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

