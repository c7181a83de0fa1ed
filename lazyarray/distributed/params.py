"""Parameters of ``la.distributed.run`` resident on the workers, by content hash: sent once per model.

A broadcast NumPy input of ``run`` (a block's parameters, a symbol's weights) is named by the
hash of its bytes, dtype and shape (``content_hash``). Two bounded tables keep it:

* on each worker, ``HELD`` (a ``caches.NamedCache``: hash -> the read-only array, at most
  ``HELD_ENTRIES`` arrays, least recently used out first; ``clear()`` on the worker forgets them);
* on the client, ``SENT`` (hash and scheduler address -> one Dask future per worker whose value is
  the array, made on that worker by ``keep`` or ``take``; at most ``SENT_ENTRIES``). The client keeps
  no array: only the futures, which hold the workers' copies alive while the entry lives.

``resident(call, arrays, workers)`` gives, for each array, its future on every worker: from ``SENT``
when every worker still has its future (no message at all), else it asks the workers which hashes
they already hold (one ``client.run``), sends the others once (one broadcast scatter to the
workers that lack them) and submits one pinned ``keep`` / ``take`` task per worker and array. A
region task of piece ``i`` reads the future of the worker it is pinned to: no parameter moves
between workers, and none moves from the client after the first call.
"""
from __future__ import annotations

import hashlib

import numpy as np

from ..caches import NamedCache

HELD_ENTRIES = 512  # arrays a worker process keeps (ResNet-18: 62 arrays, so several models)
SENT_ENTRIES = 512  # (scheduler, hash) entries the client keeps
HELD = NamedCache("distributed run parameters held on this worker", HELD_ENTRIES)  # hash -> np.ndarray
SENT = NamedCache("distributed run parameter futures", SENT_ENTRIES)  # (scheduler, hash) -> {worker: future}


def content_hash(value: np.ndarray) -> str:
    """The content hash of ``value``: its dtype, shape and bytes (blake2b, 128 bits)."""
    h = hashlib.blake2b(digest_size=16)
    h.update(f"{value.dtype.str}{value.shape}".encode())
    h.update(np.ascontiguousarray(value).reshape(-1).view(np.uint8))  # (any fixed-size dtype, 0-d too)
    return h.hexdigest()


# -- on a worker -------------------------------------------------------------------------------------------
def keep(key: str, value) -> np.ndarray:
    """Hold ``value`` under its hash ``key`` on this worker; the value (the task's result stays here)."""
    value = np.asarray(value)
    value.flags.writeable = False
    HELD.put(key, value)
    return value


def take(key: str) -> np.ndarray:
    """The array held under ``key`` on this worker (``held`` said it is here)."""
    value = HELD.get(key)
    if value is None:  # (evicted between the question and this task: rare, named)
        raise KeyError(f"la.distributed.run: parameter {key} is no longer held on this worker (more than "
                       f"{HELD_ENTRIES} arrays were sent since); call run again: it sends it anew")
    return value


def held(keys: list[str]) -> list[str]:
    """Those of ``keys`` this worker holds."""
    return [k for k in keys if HELD.get(k) is not None]


def clear() -> None:
    """Forget the arrays held on this worker (run it there: ``client.run(params.clear)``)."""
    HELD.clear()


# -- on the client -----------------------------------------------------------------------------------------
def _alive(entry, workers) -> bool:
    return entry is not None and all(w in entry and entry[w].status in ("pending", "finished") for w in workers)


def resident(call, arrays: dict[str, np.ndarray], workers: list[str]) -> dict[str, dict]:
    """For each named array, ``{worker: future}`` of its copy on every worker (see the module docs).

    ``call`` is the ``bounded.BoundedCall`` of the run: every message is bounded by its deadline.
    """
    scheduler = call.scheduler_address()
    hashes = {name: content_hash(v) for name, v in arrays.items()}
    out, missing = {}, {}
    for name, h in hashes.items():
        entry = SENT.get((scheduler, h))
        if _alive(entry, workers):
            out[name] = entry
        else:
            missing.setdefault(h, name)
    if not missing:
        return out
    have = call.run_on_workers(held, list(missing), workers)  # worker -> hashes it holds
    for h, name in missing.items():
        lacking = [w for w in workers if h not in have.get(w, ())]
        sent = call.scatter(arrays[name], f"parameter {name!r}", broadcast=True, workers=lacking) if lacking else None
        entry = {}
        for w in workers:
            if w in lacking:
                entry[w] = call.submit(keep, h, sent, key=f"la-param-keep-{h}-{_tag(w)}", worker=w)
            else:
                entry[w] = call.submit(take, h, key=f"la-param-take-{h}-{_tag(w)}", worker=w)
        SENT.put((scheduler, h), entry)
        out[name] = entry
    for name, h in hashes.items():
        out.setdefault(name, SENT.get((scheduler, h)))
    return out


def _tag(worker: str) -> str:
    return hashlib.blake2b(worker.encode(), digest_size=6).hexdigest()
