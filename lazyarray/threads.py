"""Threads for chunked kernels: ``la.set_num_threads(n)`` and a shared pool.

Kernels that stream large arrays (fused elementwise groups, row-wise softmax) cut their work
into cache-sized chunks and hand the chunks to this pool; NumPy ufuncs and reductions release
the GIL, so the chunks run in parallel. One setting rules them all, and BLAS too when
threadpoolctl is installed (the ``threads`` extra).
"""
from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor

MIN_PARALLEL_BYTES = 8 << 20  # below this a thread hand-off costs more than it saves (measured: a 1.6 MB
# SGD update ran slower on 2 threads than on 1)

_THREADS = [os.cpu_count() or 1]
_POOL: list = [None]
_LOCK = threading.Lock()


def set_num_threads(n: int) -> None:
    """Threads for chunked kernels and (where threadpoolctl is installed) BLAS: ``la.set_num_threads(n)``."""
    n = int(n)
    if n < 1:
        raise ValueError(f"set_num_threads: n must be >= 1, got {n}")
    with _LOCK:
        _THREADS[0] = n
        if _POOL[0] is not None:
            _POOL[0].shutdown(wait=False)
            _POOL[0] = None
    try:  # BLAS honours the same count when threadpoolctl is available (an optional extra)
        from threadpoolctl import threadpool_limits
    except ImportError:
        return
    threadpool_limits(n)


def num_threads() -> int:
    return _THREADS[0]


def _pool() -> ThreadPoolExecutor:
    with _LOCK:
        if _POOL[0] is None:
            _POOL[0] = ThreadPoolExecutor(_THREADS[0], thread_name_prefix="lazyarray")
        return _POOL[0]


def chunked(rows: int, per: int, nbytes: int, work) -> None:
    """Run ``work(bounds)`` over ``[(lo, hi), ...]`` chunks of ``per`` rows covering ``rows``: one
    call per worker thread (each gets every n-th chunk, and may keep scratch buffers across its
    chunks), or one call on this thread when the array is small or one thread is set."""
    bounds = [(lo, min(lo + per, rows)) for lo in range(0, rows, per)]
    n = min(_THREADS[0], len(bounds))
    if n > 1 and nbytes >= MIN_PARALLEL_BYTES:
        list(_pool().map(work, [bounds[k::n] for k in range(n)]))
    else:
        work(bounds)
