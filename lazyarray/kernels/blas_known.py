"""What BLAS does with a small float32 product, known without timing it.

``blas_threads.small_calls_serial`` asks whether BLAS runs a float32 product of at most
``SMALL_PRODUCT`` multiply-adds on one thread whatever its setting. Its probe times such products
for 30-250 ms of CPU (a "no" takes the longest: it tries window after window), once per process,
in the first run after a program's first that asks: the second call of a batch-8 ConvNeXt or Swin
at two threads cost 185-250 ms CPU against a steady call of 2-3 ms, two thirds of it the probe.
The answer can often be known without it:

* from the library (``by_library``): OpenBLAS multiplies such products on its small-matrix kernels
  only on cores that have them (SkylakeX and later); on the cores in ``NO_SMALL_KERNEL``
  (threadpoolctl's ``architecture``, OpenBLAS's core name) it shares every product of more than
  262,144 multiply-adds over its threads, so the answer is no, for the versions it was checked
  against (``CHECKED_UP_TO``; the development machine's OpenBLAS 0.3.31 on its Haswell kernels:
  the probe said no). A no is the safe answer (each small product then switches BLAS to one
  thread: microseconds, the same values), so the rule only ever says no;
* from a probe this machine ran before (``kept``, ``keep``): the probe's answer is kept in a
  small JSON file next to the compiled-kernel cache (``jit.cache_dir()``; none where that is
  off), under a key of everything the answer depends on (``machine_key``): every BLAS library
  NumPy loaded (API, implementation, version, core name, file, threading layer, thread count)
  and the CPU (model name, flags, logical CPUs, machine type). Another library, version, thread
  count or CPU is another key: probed again. At most ``KEPT`` answers, written atomically
  (``fileio.write_atomic``); an unreadable file is an empty one.

Without threadpoolctl nothing is known (no libraries to key on): the probe runs as before.
"""
from __future__ import annotations

import functools
import hashlib
import json
import os
import platform

from .. import jit
from ..caches import NamedCache
from ..fileio import write_atomic
from ..threads import blas_libraries

# OpenBLAS core names (lower case) with no small-matrix kernel for float32 products: x86-64 cores
# before AVX-512 (OpenBLAS runs Zen 1-3 on its Haswell kernels and names them Zen)
NO_SMALL_KERNEL = frozenset({
    "haswell", "zen", "sandybridge", "nehalem", "core2", "penryn", "dunnington", "atom", "prescott",
    "barcelona", "bobcat", "bulldozer", "piledriver", "steamroller", "excavator", "opteron", "opteron_sse3"})
# ... as far as the OpenBLAS versions up to this one go (a later one may add small kernels: probed)
CHECKED_UP_TO = (0, 3, 31)
FILE = "blas_small_products.json"  # (in jit.cache_dir(): the kept answers, key -> bool)
KEPT = 16  # answers kept in the file (the oldest goes first)

# path of the answers' file -> {key: answer} as read (once per process and path) and as written since
STORED = NamedCache("BLAS small products: kept answers", 4)


def answer() -> bool | None:
    """Whether BLAS runs small float32 products on one thread, as the library says (``by_library``) or
    a probe on this machine found before (``kept``); None where neither knows."""
    libs = blas_libraries()
    found = by_library(libs)
    return found if found is not None else kept(machine_key(libs))


def by_library(libs: list) -> bool | None:
    """False where every BLAS library in ``libs`` (threadpoolctl's ``info()``) is an OpenBLAS of at most
    ``CHECKED_UP_TO`` on a core in ``NO_SMALL_KERNEL``; else None (unknown: probe)."""
    if not libs:
        return None
    for lib in libs:
        if lib.get("internal_api") != "openblas" or str(lib.get("architecture", "")).lower() not in NO_SMALL_KERNEL:
            return None
        version = _version(lib.get("version"))
        if version is None or version > CHECKED_UP_TO:
            return None
    return False


def _version(text) -> tuple | None:
    """The first three numbers of a version string ("0.3.31.188.0" -> (0, 3, 31)); None if not numbers."""
    parts = str(text or "").split(".")[:3]
    return tuple(int(p) for p in parts) if len(parts) == 3 and all(p.isdigit() for p in parts) else None


# The probe's version in every key: answers an earlier probe kept are not read (version 2: a window beside a busy
# core no longer passes for a serial one, ``blas_threads._measure``)
PROBE_VERSION = 2


def machine_key(libs: list | None = None) -> str | None:
    """A digest of what the probe's answer depends on: every BLAS library (``libs``, default NumPy's:
    API, implementation, version, core name, file, threading layer, thread count) and the CPU
    (``cpu_identity``), and the probe's version. None without libraries to name (no threadpoolctl)."""
    libs = blas_libraries() if libs is None else libs
    if not libs:
        return None
    fields = ("user_api", "internal_api", "prefix", "version", "architecture", "filepath", "threading_layer",
              "num_threads")
    named = sorted(repr(tuple(lib.get(f) for f in fields)) for lib in libs)
    return hashlib.sha256(repr((named, cpu_identity(), PROBE_VERSION)).encode()).hexdigest()


@functools.lru_cache(maxsize=1)  # (read once per process: the CPU does not change under it)
def cpu_identity() -> tuple:
    """(model name, flags, logical CPUs, machine type): ``/proc/cpuinfo``'s first processor where there
    is one, else ``platform.processor()``."""
    model, flags = "", ""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                name, _, value = line.partition(":")
                name = name.strip()
                if name == "model name" and not model:
                    model = value.strip()
                elif name in ("flags", "Features") and not flags:
                    flags = value.strip()
                if model and flags:
                    break
    except OSError:
        pass
    return model or platform.processor(), flags, os.cpu_count(), platform.machine()


def kept(key: str | None) -> bool | None:
    """The probe's answer kept under ``key`` in this machine's file, else None."""
    path = _path()
    if key is None or not path:
        return None
    found = STORED.get_or_make(path, _read, path).get(key)
    return found if isinstance(found, bool) else None


def keep(found: bool, key: str | None = None) -> None:
    """Keep the probe's answer ``found`` under ``key`` (default ``machine_key()``, taken now: the libraries
    and thread counts it was probed with), the oldest of more than ``KEPT`` answers dropped."""
    key = machine_key() if key is None else key
    path = _path()
    if key is None or not path:
        return
    answers = {k: v for k, v in _read(path).items() if k != key}  # (the file as it is now: other processes' too)
    answers[key] = bool(found)
    answers = dict(list(answers.items())[-KEPT:])
    try:
        write_atomic(path, json.dumps(answers).encode())
    except OSError:  # (a read-only or vanished directory: the answer holds in this process only)
        return
    STORED.put(path, answers)


def forget() -> None:
    """Delete this machine's kept answers (each key is probed again) and the copy read."""
    path = _path()
    if path:
        try:
            os.remove(path)
        except OSError:
            pass
    STORED.clear()


def _path() -> str:
    root = jit.cache_dir()
    return os.path.join(root, FILE) if root and os.path.isdir(root) else ""


def _read(path: str) -> dict:
    try:
        with open(path, encoding="utf-8") as f:
            got = json.load(f)
    except (OSError, ValueError):
        return {}
    return {k: v for k, v in got.items() if isinstance(v, bool)} if isinstance(got, dict) else {}
