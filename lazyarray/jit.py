"""Compiled CPU kernels, when numba is installed (the ``jit`` extra).

Some kernels are many small NumPy calls over a few hundred kilobytes: a max pool folds its
window's taps one ufunc call at a time, a pooled batch norm adds a relu, a multiply and an add.
Each call pays a few microseconds and a pass over memory, and NumPy's float ``maximum`` runs at
a third of the speed of its ``add`` on the development machine. One compiled loop over the
same values does the work in one pass (``ops/pool_jit.py``: the demo CNN's pooled batch norm
44-67 -> 13 us).

``compiled(fn)`` gives ``fn`` compiled by ``numba.njit`` (``nogil``: our thread pool runs beside
it; no ``fastmath``: every operation rounds as NumPy's does, so a compiled kernel returns the
values of the NumPy path it stands for, which the tests check), or None when numba is not
installed or the tuning table's ``jit`` is off (``LAZYARRAY_JIT=0`` at import, ``la.tuning(jit=False)``,
``la.config.jit = False``); ``set_enabled`` switches the process-wide default at run time (the tests
compare both paths). The environment is read once, by the tuning table, because a relu of a small
activation takes about a microsecond: reading the environment at each call cost twice that.
Kernels compile on first use per argument types (a fraction of a second, once per process) and
are not cached on disk: nothing is loaded from a file. ``import lazyarray`` never imports numba.

``parallel_ready()`` says whether a kernel may open a numba parallel region (``ops/conv_parallel.py``,
``ops/dense_parallel.py``):
its worker threads spin briefly between regions, so a region costs a few microseconds where
handing work to a Python thread pool costs 50-70 us of thread wake-ups on the development
machine. That needs a thread-safe threading layer (OpenMP or TBB; numba's fallback
``workqueue`` aborts the process when two threads launch at once) and the process that first
asked (GNU OpenMP does not survive ``fork``: a forked child takes the serial kernels).
``use_threads(n)`` sets how many threads this thread's regions use.
"""
from __future__ import annotations

import functools
import importlib
import os
import threading

from .tuning_table import config, current, from_environment_only

_COMPILED: dict = {}
_LOCK = threading.Lock()


def enabled() -> bool:
    """True when compiled kernels run: numba is importable and the tuning table's ``jit`` is on
    (``LAZYARRAY_JIT`` at import, ``la.tuning(jit=...)``, ``set_enabled``)."""
    return current().jit and _numba() is not None


def set_enabled(on: bool | None) -> None:
    """Compiled kernels on or off from now on, process-wide (``la.config.jit``; on only where numba is
    installed); None: as the environment says (``LAZYARRAY_JIT``, read again)."""
    config.jit = from_environment_only("jit") if on is None else bool(on)


@functools.lru_cache(maxsize=1)  # (the probe: numba looked up once; ``_numba.cache_clear()`` looks again)
def _numba():
    try:
        import numba
    except ImportError:
        numba = None
    except Exception as exc:  # an installed numba that cannot load (built for another NumPy): NumPy kernels
        import warnings

        warnings.warn(f"lazyarray: numba failed to import ({type(exc).__name__}: {exc}); compiled kernels "
                      f"are off and the NumPy kernels run (fix or uninstall numba, or set LAZYARRAY_JIT=0)",
                      RuntimeWarning, stacklevel=3)
        numba = None
    return numba


def clear() -> None:
    """Forget the compiled kernels (each compiles again on its next use) and the numba lookup."""
    with _LOCK:
        _COMPILED.clear()
    _numba.cache_clear()


def compiled(fn):
    """``fn`` compiled for the CPU (``numba.njit(nogil=True)``), or None where compiled kernels
    are off (``enabled()``): the caller then runs its NumPy path.

    >>> import numpy as np
    >>> def total(a):
    ...     s = 0.0
    ...     for v in a:
    ...         s += v
    ...     return s
    >>> k = compiled(total)
    >>> float((k or total)(np.arange(4.0)))
    6.0
    """
    if not current().jit or _numba() is None:  # (``enabled()`` inline: this runs once per kernel call)
        return None
    k = _COMPILED.get(fn)
    if k is None:
        with _LOCK:
            k = _COMPILED.get(fn)
            if k is None:
                k = _COMPILED[fn] = _numba().njit(nogil=True, cache=False)(fn)
    return k


_PARALLEL: list = []  # [pid, ready] once asked
_REGION = threading.local()  # .threads: what this thread last gave numba.set_num_threads
# numba's threading layers by name -> the pools that provide them (``numba.np.ufunc.<pool>``); the
# default tries TBB, then OpenMP, then workqueue (not thread-safe: never used here)
_LAYERS = {"default": ("tbbpool", "omppool"), "threadsafe": ("tbbpool", "omppool"),
           "omp": ("omppool",), "tbb": ("tbbpool",), "safe": ("tbbpool",), "forksafe": ("tbbpool",)}


def parallel_ready() -> bool:
    """True when compiled kernels are on and may open numba parallel regions in this process."""
    if not enabled():
        return False
    state = _PARALLEL
    if state:
        return state[1] and state[0] == os.getpid()
    with _LOCK:
        if not _PARALLEL:
            numba = _numba()
            ready = False
            for pool in _LAYERS.get(str(numba.config.THREADING_LAYER).lower(), ()):
                try:
                    importlib.import_module(f"numba.np.ufunc.{pool}")
                except Exception:  # (ImportError, or a library that fails to load)
                    continue
                ready = True
                break
            _PARALLEL[:] = [os.getpid(), ready]
    return parallel_ready()


def use_threads(n: int) -> None:
    """This thread's numba parallel regions run on ``n`` threads (at most numba's pool size)."""
    if getattr(_REGION, "threads", None) != n:
        numba = _numba()
        numba.set_num_threads(max(1, min(n, numba.config.NUMBA_NUM_THREADS)))
        _REGION.threads = n
