"""Threads for chunked kernels: ``la.set_num_threads(n)`` and a shared pool.

Kernels that stream large arrays (fused elementwise groups, row-wise softmax) cut their work
into cache-sized chunks and hand the chunks to this pool; NumPy ufuncs and reductions release
the GIL, so the chunks run in parallel. One setting rules them all, and BLAS too when
threadpoolctl is installed (the ``threads`` extra).

Kernels whose work is mostly BLAS products over independent pieces (a convolution's images) run
the pieces on this pool instead, each product on one BLAS thread (``split``): BLAS's own threads
would otherwise share each product while the copies and transforms around it ran on one core.
"""
from __future__ import annotations

import contextvars
import numbers
import os
import threading
from concurrent.futures import ThreadPoolExecutor

from .caches import NamedCache
from .errors import ParamError, ParamValueError
from .tuning_table import current

MIN_PARALLEL_BYTES = 8 << 20  # below this a thread hand-off costs more than it saves (measured: a 1.6 MB
# SGD update ran slower on 2 threads than on 1)

# The fewest multiply-adds a kernel spreads over threads with ``split`` (a convolution's products
# over its images; the tuning table's ``min_split_macs``, 2**24): about a millisecond of products,
# against tens of microseconds of hand-offs.


def default_threads() -> int:
    """The thread count before any ``la.set_num_threads``: the tuning table's ``default_threads``
    when positive (``OMP_NUM_THREADS`` at import, where set to a positive integer, as OpenBLAS,
    OpenMP and PyTorch read it: ``OMP_NUM_THREADS=1`` makes every pool of the process, ours too,
    one thread), else the cores this process may run on."""
    n = current().default_threads
    if n > 0:
        return n
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):  # (no affinity on this platform)
        return os.cpu_count() or 1


class _Pool:
    """The thread count and the executor of that many threads (its threads start at its first task)."""

    __slots__ = ("threads", "executor")

    def __init__(self, n: int):
        self.threads = n
        self.executor = ThreadPoolExecutor(n, thread_name_prefix="lazyarray", initializer=_mark_pool_thread)

    def shut_down(self) -> None:
        self.executor.shutdown(wait=False)


# The one pool: None -> the _Pool of ``la.set_num_threads``' count. Setting a count replaces it and
# shuts the old one down; ``POOL.clear()`` shuts it down and goes back to ``default_threads()``.
POOL = NamedCache("thread pool", 1, drop=_Pool.shut_down)
# True on the pool's threads and on a thread working on its share of a ``split`` (its work runs inline)
_IN_POOL: contextvars.ContextVar[bool] = contextvars.ContextVar("lazyarray_in_pool", default=False)


def set_num_threads(n: int) -> None:
    """Threads for chunked kernels and (where threadpoolctl is installed) BLAS: ``la.set_num_threads(n)``."""
    if not isinstance(n, numbers.Integral) or isinstance(n, bool):
        raise ParamError(f"set_num_threads: n must be an int (the number of threads), got {type(n).__name__} "
                         f"{n!r}"[:300])
    n = int(n)
    if n < 1:
        raise ParamValueError(f"set_num_threads: n must be >= 1 (1 runs kernels on the calling thread only), "
                              f"got {n}")
    POOL.put(None, _Pool(n))  # (the pool of the old count is shut down: its running tasks finish)
    try:  # BLAS honours the same count when threadpoolctl is available (an optional extra)
        from threadpoolctl import threadpool_limits
    except ImportError:
        return
    threadpool_limits(n)
    blas_changed()  # looked up again on the next switch (the limit above reached every BLAS)


def num_threads() -> int:
    """The threads of ``la.set_num_threads`` (before any: ``default_threads()``)."""
    pool = POOL.peek(None)
    return (pool if pool is not None else _current_pool()).threads


def _current_pool() -> _Pool:
    pool = POOL.peek(None)
    return pool if pool is not None else POOL.get_or_make(None, _default_pool)


def _default_pool() -> _Pool:
    return _Pool(default_threads())


def _pool() -> ThreadPoolExecutor:
    return _current_pool().executor


def _mark_pool_thread() -> None:
    _IN_POOL.set(True)


def in_pool() -> bool:
    """True on one of the pool's threads, and on a thread while it works on its share of a ``split``:
    work started there runs inline (no nested hand-offs)."""
    return _IN_POOL.get()


def chunked(rows: int, per: int, nbytes: int, work) -> None:
    """Run ``work(bounds)`` over ``[(lo, hi), ...]`` chunks of ``per`` rows covering ``rows``: one
    call per worker thread (each gets every n-th chunk, and may keep scratch buffers across its
    chunks), or one call on this thread when the array is small or one thread is set."""
    bounds = [(lo, min(lo + per, rows)) for lo in range(0, rows, per)]
    pool = _current_pool()
    n = min(pool.threads, len(bounds))
    if n > 1 and nbytes >= MIN_PARALLEL_BYTES and not in_pool():
        list(pool.executor.map(work, [bounds[k::n] for k in range(n)]))
    else:
        work(bounds)


class _BlasSerial:
    """BLAS on one thread while any ``split`` runs (process-wide, as BLAS's setting is): entered by
    the first split, restored to the thread counts it found by the last one out, so overlapping
    splits from several threads never restore too early. threadpoolctl's controllers are looked up
    once (a library scan, milliseconds); each switch is then one C call per BLAS library. For
    OpenBLAS that call is threadpoolctl's unguarded setter: its public one ignores every Python
    thread but the first to set a limit (``la.set_num_threads`` on the main thread), and a split
    may start on any thread; the depth count here is what keeps threads from fighting over it.
    Each library is read and set through the C functions threadpoolctl itself calls (``_switches``):
    its Python methods made a switch to one thread and back cost ~18 us against ~5 (measured on the
    2-core development machine: a batch-8 ViT called it 14 times a call on 2 threads)."""

    def __init__(self):
        self.lock = threading.Lock()
        self.depth = 0
        self.saved: list = []
        self.controllers = None
        self.libraries: list = []  # (threadpoolctl's controllers, for their ``info()``)
        # every BLAS library was on one thread when the controllers were looked up: entering is then
        # free (a batch-1 dense layer paid ~4 us for the check). ``la.set_num_threads`` and
        # ``blas_changed`` look again.
        self.serial = False

    def _blas(self) -> list:
        if self.controllers is None:
            try:
                from threadpoolctl import ThreadpoolController
            except ImportError:  # without threadpoolctl BLAS keeps its threads (oversubscribed, still correct)
                self.controllers, self.libraries = [], []
            else:
                self.libraries = [c for c in ThreadpoolController().lib_controllers if c.user_api == "blas"]
                self.controllers = [_switches(c) for c in self.libraries]
            self.serial = all((get() or 1) <= 1 for get, _ in self.controllers)
        return self.controllers

    def __enter__(self):
        if self.controllers is None:
            with self.lock:
                self._blas()
        if self.serial:
            return self
        with self.lock:
            if self.depth == 0:
                self.saved = [(get, setter, get()) for get, setter in self._blas()]
                for _, setter, n in self.saved:
                    if n is not None and n > 1:
                        setter(1)
            self.depth += 1
        return self

    def __exit__(self, *exc):
        if self.depth == 0:  # entered while BLAS was serial: nothing was switched
            return False
        with self.lock:
            self.depth -= 1
            if self.depth == 0:
                for _, setter, n in self.saved:
                    if n is not None and n > 1:
                        setter(n)
                self.saved = []
        return False


_BLAS = _BlasSerial()


def _switches(controller) -> tuple:
    """``(get, set)``: a threadpoolctl BLAS controller's thread count getter and setter. For OpenBLAS
    the C functions its ``get_num_threads`` and unguarded setter call (OpenMP's where OpenBLAS runs on
    OpenMP, else OpenBLAS's own), called directly; for other libraries (or symbols not found) its
    methods (the setter the unguarded one where it has it, see ``_BlasSerial``)."""
    setter = getattr(controller, "_real_set_num_threads", controller.set_num_threads)
    symbol = getattr(controller, "_get_symbol", None)
    if controller.internal_api != "openblas" or symbol is None:
        return controller.get_num_threads, setter
    if getattr(controller, "threading_layer", None) == "openmp":
        get, put = symbol("omp_get_max_threads"), symbol("omp_set_num_threads")
    else:
        get, put = symbol("openblas_get_num_threads"), symbol("openblas_set_num_threads")
    if get is None or put is None:
        return controller.get_num_threads, setter
    return get, put


def blas_one_thread() -> _BlasSerial:
    """A context in which BLAS runs on one thread (process-wide, counted like ``split``'s own
    region): a kernel that splits several times, or calls BLAS between splits, switches once."""
    return _BLAS


def blas_changed() -> None:
    """Say that BLAS's thread counts were changed outside ``la.set_num_threads`` (e.g. with
    threadpoolctl): ``blas_one_thread`` looks at them again."""
    with _BLAS.lock:
        _BLAS.controllers = None
        _BLAS.serial = False  # (until the next lookup says so)


def blas_libraries() -> list:
    """threadpoolctl's description of each BLAS library NumPy loaded (``info()``: its API, implementation,
    version, core name (``architecture``, OpenBLAS's), file and thread count; empty without threadpoolctl)."""
    _BLAS._blas()
    return [c.info() for c in _BLAS.libraries]


def blas_thread_counts() -> list:
    """The thread count of each BLAS library NumPy loaded (as ``blas_one_thread`` sees them; empty
    without threadpoolctl)."""
    return [get() for get, _ in _BLAS._blas()]


def split_threads(macs: int, pieces: int) -> int:
    """Threads to ``split`` a kernel of ``macs`` multiply-adds in at most ``pieces`` independent
    pieces over (a convolution's images); 1: run it whole, its products on BLAS's threads. With
    fewer pieces than threads a split would leave cores idle that BLAS's threads would use.
    Below the tuning table's ``min_split_macs`` the hand-offs would cost more than they save."""
    n = num_threads()
    return n if macs >= current().min_split_macs and pieces >= n else 1


def split(parts: list, work) -> None:
    """Run ``work(part)`` for every part: spread over the pool's threads (this thread works too)
    with BLAS on one thread meanwhile, or in order on this thread when one thread is set, there is
    one part, or this is already one of the pool's threads (no nested hand-offs: a pool waiting on
    itself would deadlock). Each thread takes the next part when done with its last, so a thread
    the OS holds back (another process on its core) leaves more of the parts to the others. After
    an error no thread starts another part; the first error is re-raised here once every thread
    has stopped."""
    pool = _current_pool()
    n = min(pool.threads, len(parts))
    if n <= 1 or in_pool():
        for p in parts:
            work(p)
        return
    queue = iter(parts)
    lock = threading.Lock()
    failed = []

    def share():
        while not failed:
            with lock:
                p = next(queue, _DONE)
            if p is _DONE:
                return
            try:
                work(p)
            except BaseException:
                failed.append(True)
                raise

    with _BLAS:
        futures = [pool.executor.submit(share) for _ in range(1, n)]
        token = _IN_POOL.set(True)  # (this thread's parts run their own work inline, as the pool's do)
        try:
            share()
        finally:
            _IN_POOL.reset(token)
            for f in futures:  # wait for every share before BLAS gets its threads back
                f.exception()
        for f in futures:
            f.result()


_DONE = object()


POOL.put(None, _default_pool())  # (the count at import, as the environment gave it)
