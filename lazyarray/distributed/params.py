"""Parameters of ``la.distributed.run`` resident on the workers, by content hash: sent once per model.

A broadcast NumPy input of ``run`` (a block's parameters, a symbol's weights) is named by the
hash of its bytes, dtype and shape (``content_hash``). Two bounded tables keep it:

* on each worker, ``HELD`` (a ``caches.NamedCache``: hash -> the read-only array, at most
  ``HELD_ENTRIES`` arrays, least recently used out first; ``clear()`` on the worker forgets them);
* on the client, ``SENT`` (hash and scheduler address -> ``_Copies``: one Dask future per worker whose
  value is the array, made on that worker by ``keep`` or ``take``, and the future of the array's
  *source*; at most ``SENT_ENTRIES``). The client keeps no array: only the futures, which hold the
  workers' copies alive while the entry lives.

The client hashes an array once per buffer version (``hash_of``: ``HASHES``, keyed by the array's
identity and ``buffer.version``, as ``ops/derived.py`` keys a weight's derived copies), so a call
whose parameters did not change since the last pays no hashing; an in-place update (``set_data``,
``Trainer.step``, ``x[...] = v``) bumps the version and the next call hashes (and sends) anew.

``resident(call, arrays, workers)`` gives, for each array, its future on every worker: from ``SENT``
when every worker still has its future (no message at all), else it asks the workers which hashes
they already hold (one ``client.run``) and gives those a ``take`` task; the array goes to the
others once, as the argument of one *source* task (sent to the scheduler once, run on one worker),
and each of them gets a ``keep`` task reading it (worker to worker). A region task of piece ``i``
reads the future of the worker it is pinned to: no parameter moves between workers, and none
moves from the client after the first call.

Why a source task and not a scattered future: Dask cannot make scattered data again (a scattered
key lost with its worker cancels what reads it, "already forgotten", and the Active Memory
Manager drops a broadcast's extra replicas, so one worker's death can lose it), while a task
that carries its data in its arguments can be run again by the scheduler, which holds them. A
``keep`` runs on its worker by preference only (``workers=[w]``, other workers allowed), so a
copy lost with its worker is made again elsewhere: with ``durable=True`` (``run(compute=False)``,
whose graph the caller computes later) every copy is a ``keep``, and the graph survives a worker's
death. A ``take`` (a worker's own table) is faster but only that worker can make it: ``run(compute=True)``
plans the call again when a worker is lost, so it may use them.
"""
from __future__ import annotations

import hashlib
import weakref

import numpy as np

from ..buffer import version, versioned
from ..caches import NamedCache

HELD_ENTRIES = 512  # arrays a worker process keeps (ResNet-18: 62 arrays, so several models)
SENT_ENTRIES = 512  # (scheduler, hash) entries the client keeps
HELD = NamedCache("distributed run parameters held on this worker", HELD_ENTRIES)  # hash -> np.ndarray
SENT = NamedCache("distributed run parameter futures", SENT_ENTRIES)  # (scheduler, hash) -> _Copies
HASH_ENTRIES = 2048  # arrays whose hash the client keeps (a few models' parameters)
# id(array) -> (weak reference to it, its buffer version, its content hash)
HASHES = NamedCache("distributed run parameter hashes by array and buffer version", HASH_ENTRIES)


def content_hash(value: np.ndarray) -> str:
    """The content hash of ``value``: its dtype, shape and bytes (blake2b, 128 bits)."""
    h = hashlib.blake2b(digest_size=16)
    h.update(f"{value.dtype.str}{value.shape}".encode())
    h.update(np.ascontiguousarray(value).reshape(-1).view(np.uint8))  # (any fixed-size dtype, 0-d too)
    return h.hexdigest()


def hash_of(value: np.ndarray) -> str:
    """``content_hash(value)``, kept per array and buffer version where that is sound: ``value`` owns its
    memory and was never handed out writable (``buffer.versioned``). Any other array is hashed at
    every call."""
    if not versioned(value):
        return content_hash(value)
    key, now = id(value), version(value)  # (the version before hashing: a write meanwhile makes it stale)
    entry = HASHES.get(key)
    if entry is not None and entry[0]() is value and entry[1] == now:
        return entry[2]
    h = content_hash(value)
    HASHES.put(key, (weakref.ref(value), now, h))  # (a dead array's entry: its reference says so)
    return h


# -- on a worker -------------------------------------------------------------------------------------------
def keep(key: str, value) -> np.ndarray:
    """Hold ``value`` under its hash ``key`` on this worker; the value (the task's result stays here)."""
    value = np.asarray(value)
    value.flags.writeable = False
    HELD.put(key, value)
    return value


def source(value) -> np.ndarray:
    """The array a source task carries in its own arguments (so the scheduler can run it again)."""
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
class _Copies:
    """``SENT``'s entry for one array: ``futures`` (worker -> the future of its copy there), ``source``
    (the future of a task that carries the array itself, so the scheduler can run it again; None
    while every copy came from the workers' own tables) and ``taken`` (the workers whose copy is a
    ``take`` of their table: only that worker can make it)."""

    __slots__ = ("futures", "source", "taken")

    def __init__(self):
        self.futures: dict = {}
        self.source = None
        self.taken: set = set()

    def has(self, worker: str, durable: bool) -> bool:
        f = self.futures.get(worker)
        return f is not None and _usable(f) and not (durable and worker in self.taken)

    def covers(self, workers: list[str], durable: bool) -> bool:
        return all(self.has(w, durable) for w in workers)


def _usable(future) -> bool:
    return future.status in ("pending", "finished")


def resident(call, arrays: dict[str, np.ndarray], workers: list[str], *, durable: bool = False) -> dict[str, dict]:
    """For each named array, ``{worker: future}`` of its copy on every worker (see the module docs).

    ``call`` is the ``bounded.BoundedCall`` of the run: every message is bounded by its deadline.
    ``durable``: every copy is a ``keep`` of the array's source task, which carries the array (the
    scheduler holds it while the copies live), with ``workers=[w]`` as a preference only: a copy
    lost with its worker is made again by Dask on another worker, so a graph reading the copies
    survives a worker's death (``run(compute=False)``: the caller computes it later, unguarded).
    Else a worker whose table already holds the array gives its copy by ``take`` (nothing is sent),
    which that worker alone can make (``run(compute=True)`` plans the call again instead).
    """
    scheduler = call.scheduler_address()
    hashes = {name: hash_of(v) for name, v in arrays.items()}
    out, todo = {}, {}
    for name, h in hashes.items():
        entry = SENT.get((scheduler, h))
        if entry is not None and entry.covers(workers, durable):
            out[name] = entry.futures
        else:
            todo.setdefault(h, (name, entry or _Copies()))
    if not todo:
        return out
    have = {} if durable else call.run_on_workers(held, list(todo), workers)  # worker -> hashes it holds
    for h, (name, entry) in todo.items():
        for w in [w for w in entry.futures if w not in workers]:  # (gone: not made again for this table)
            del entry.futures[w]
            entry.taken.discard(w)
        need = [w for w in workers if not entry.has(w, durable)]
        make = [w for w in need if durable or h not in have.get(w, ())]
        if make and (entry.source is None or not _usable(entry.source)):
            # (a copy: an in-process worker would hold the caller's own buffer, and keep() freezes it)
            entry.source = call.submit(source, np.array(arrays[name], copy=True), key=f"la-param-source-{h}",
                                       worker=None, carries_data=True)
        for w in need:
            if w in make:
                entry.futures[w] = call.submit(keep, h, entry.source, key=f"la-param-keep-{h}-{_tag(w)}", worker=w,
                                               loose=True)
                entry.taken.discard(w)
            else:
                entry.futures[w] = call.submit(take, h, key=f"la-param-take-{h}-{_tag(w)}", worker=w)
                entry.taken.add(w)
        SENT.put((scheduler, h), entry)
        out[name] = entry.futures
    for name, h in hashes.items():
        out.setdefault(name, SENT.get((scheduler, h)).futures)
    return out


def _tag(worker: str) -> str:
    return hashlib.blake2b(worker.encode(), digest_size=6).hexdigest()
