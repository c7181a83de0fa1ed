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
Kernels compile on first use per argument types (a fraction of a second each; a model's first
call compiles a dozen) and are cached on disk, in the tuning table's ``jit_cache_dir`` (the user's
cache directory + ``lazyarray/numba``; ``LAZYARRAY_JIT_CACHE_DIR``, ``0``: no disk cache): the next
process loads them (numba's cache, its index keyed on numba's version, the kernel's source file and
the CPU). The directory is capped (``CACHE_CAP_BYTES``: past it, the oldest files go when a process
first compiles) and ``clear_disk_cache()`` empties it; an unwritable directory means no disk cache
(one warning), an unreadable or corrupt entry compiles again. ``import lazyarray`` never imports numba.

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

import contextlib
import contextvars
import functools
import hashlib
import importlib
import importlib.util
import logging
import os
import sys
import tempfile
import time
import types
import warnings

from . import jit_load, jit_signatures
from .caches import NamedCache
from .gc_scope import collected_after
from .mode import MODE, PROFILING
from .tuning_table import config, current, from_environment_only

# kernel function -> its numba dispatcher (one per kernel function of the package; an evicted one
# loads again from the disk cache)
COMPILED = NamedCache("compiled kernels", 1024)
# code object -> ``code_digest`` (equal code objects have equal digests: code compares its bytecode, names
# and constants, each constant with its type)
DIGESTS = NamedCache("code digests", 1024)
# a kernel maker (``made_with``) -> the kernel function it made with its compiled helpers (the function
# ``compiled`` compiles and keeps; the disk cache keys it by the code it captures)
MADE = NamedCache("kernels made with inlined helpers", 32)
CACHE_CAP_BYTES = 256 << 20  # the disk cache's size: a model zoo's kernels take a few MiB
_LOG = logging.getLogger("lazyarray.jit")
# True while a compiled program's first run takes the NumPy kernels (``first_run``)
_FIRST_RUN: contextvars.ContextVar[bool] = contextvars.ContextVar("lazyarray_jit_first_run", default=False)


def enabled() -> bool:
    """True when compiled kernels run: numba is installed and the tuning table's ``jit`` is on
    (``LAZYARRAY_JIT`` at import, ``la.tuning(jit=...)``, ``set_enabled``). Until numba is imported
    (by the first kernel ``compiled`` gives) its package being found answers, so a chooser asking does
    not import it (0.17 s of CPU on the development machine: a program's first run of tiered kernels
    only, ``first_run``, never pays it); one that then fails to import answers False from there (its
    kernels' callers run their NumPy paths, as they do where compiled kernels are off)."""
    return current().jit and _installed()


def _installed() -> bool:
    if not _findable():
        return False
    if "numba" in sys.modules or _numba.cache_info().currsize:  # (imported, or its import tried: as it went)
        return _numba() is not None
    return True


@functools.lru_cache(maxsize=1)  # (looked for once per process; ``clear()`` looks again)
def _findable() -> bool:
    """Whether the numba package is there to import (found, not imported)."""
    try:
        return importlib.util.find_spec("numba") is not None
    except (ImportError, ValueError):
        return False


def tiered(fn):
    """Mark the kernel ``fn`` as one whose callers' NumPy path gives its values bit for bit (or within
    the bound its module states: ``fused_attention[head_loop]``): in a compiled program's first run
    (``first_run``) ``compiled(fn)`` is None and that path runs, so the run neither loads ``fn`` from the
    disk cache nor compiles it. Returns ``fn``."""
    fn.lazyarray_tiered = True
    return fn


def declined(fn) -> bool:
    """Whether ``fn`` is ``tiered`` and this is a program's first run: ``compiled(fn)`` gives None
    there (and so does ``kernels/pairwise_sum.with_row_sum`` for a tiered maker of kernels)."""
    return _FIRST_RUN.get() and getattr(fn, "lazyarray_tiered", False)


def inlined(fn):
    """Mark ``fn`` as a helper that ``compiled`` compiles to be inlined into every compiled kernel
    that calls it (numba's ``inline="always"``: a call per row of a short row costs its arguments'
    reference counting, 1.5x a kernel's time, ``kernels/pairwise_sum.py``). Returns ``fn``."""
    fn.lazyarray_inlined = True
    return fn


def made_with(make, *helpers):
    """``make(*helpers)`` compiled (``compiled``), each helper (``inlined``) compiled to be inlined into
    it, made once per ``make`` (a maker always takes the same helpers): a kernel that calls a shared
    per-value or per-row helper (``kernels/gelu.py``'s ``gelu_erf_value``, ``phase_planes.FILL``). None
    where compiled kernels are off, or ``make`` is ``tiered`` and this is a program's first run (numba
    not looked up; the kernel made is tiered as its maker, so ``compiled`` declines it there too)."""
    fn = MADE.peek(make)
    if fn is None:
        if declined(make) or not enabled():
            return None
        fn = MADE.get_or_make(make, _made, make, helpers)
    return compiled(fn)  # (a call's path: one look-up here, then ``compiled``'s)


def _made(make, helpers):
    fn = make(*(compiled(h, always=True) for h in helpers))
    return tiered(fn) if getattr(make, "lazyarray_tiered", False) else fn


def contracted(fn):
    """Mark ``fn`` as a kernel whose multiply-adds ``compiled`` may contract into fused ones (numba's
    ``fastmath={"contract"}``, nothing else of fastmath): for kernels that already sum in another order
    than their reference and say so (``kernels/conv_blocked.py``: 13% off its loop). Returns ``fn``."""
    fn.lazyarray_contracted = True
    return fn


@contextlib.contextmanager
def first_run():
    """The code inside is a compiled program's first run (``CachedOp``, per input signature; a cached
    backward's): the kernels marked ``tiered`` are not loaded or compiled there (``compiled`` gives
    None; their callers run the NumPy path, which gives the same values) but at the program's second
    run, unless the tuning table's ``jit_first_run`` is on or a profile records (``la.profile()``,
    ``explain()``: they show what later calls run). A program run once (a first call, ``evaluate``,
    a script) then does not wait for numba: loading a cached kernel took 5-15 ms on the development
    machine (a small CNN's first call loaded two or three), compiling one seconds. Kernels whose
    values differ from their fallback's (``conv2d[direct]``'s sums in another order) and those with
    tiers of their own (``fused``, ``foreach``) are not marked. (Threads of the pool do not see it:
    a kernel run in a thread split may still load.)

    >>> import numpy as np
    >>> k = tiered(lambda a: a + 1.0)
    >>> with first_run():
    ...     compiled(k) is None
    True
    """
    if current().jit_first_run or MODE.get() & PROFILING:
        yield
        return
    token = _FIRST_RUN.set(True)
    try:
        yield
    finally:
        _FIRST_RUN.reset(token)


def in_first_run() -> bool:
    """Whether this thread / task runs a program's first run with the tiered kernels off (``first_run``)."""
    return _FIRST_RUN.get()


def set_enabled(on: bool | None) -> None:
    """Compiled kernels on or off from now on, process-wide (``la.config.jit``; on only where numba is
    installed); None: as the environment says (``LAZYARRAY_JIT``, read again)."""
    config.jit = from_environment_only("jit") if on is None else bool(on)


@functools.lru_cache(maxsize=1)  # (the probe: numba looked up once; ``_numba.cache_clear()`` looks again)
def _numba():
    try:
        # (a first import's ~90,000 objects pay the full collection they make due: gc_scope.py; a later
        # lookup, after ``clear()``, finds numba imported and collects nothing)
        with contextlib.nullcontext() if "numba" in sys.modules else collected_after():
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
    """Forget the compiled kernels (each compiles again on its next use, or loads from the disk
    cache), the numba lookup and the disk cache's checks."""
    COMPILED.clear()
    _numba.cache_clear()
    _findable.cache_clear()
    _usable_dir.cache_clear()


def cache_dir() -> str:
    """The directory compiled kernels are cached in (``la.config.jit_cache_dir``); '' when off."""
    return current().jit_cache_dir


def clear_disk_cache(path: str | None = None) -> int:
    """Delete the cached kernels under ``path`` (default ``cache_dir()``): each compiles again in the
    next process. Returns the number of files deleted."""
    return prune_disk_cache(0, path)


def prune_disk_cache(cap: int = CACHE_CAP_BYTES, path: str | None = None) -> int:
    """Delete the least recently written cache files under ``path`` (default ``cache_dir()``) until
    the rest take at most ``cap`` bytes (3/4 of it once past it, so that pruning is rare); done once
    per process and directory, before the first kernel compiles. Returns the files deleted."""
    root = path or cache_dir()
    if not root:
        return 0
    files = []
    for dirpath, _, names in os.walk(root):
        for name in names:
            if name.endswith((".nbi", ".nbc")) or ".tmp." in name:
                path = os.path.join(dirpath, name)
                try:
                    st = os.stat(path)
                except OSError:
                    continue
                files.append((st.st_mtime, st.st_size, path))
    total = sum(size for _, size, _ in files)
    if total <= cap:
        return 0
    deleted, target = 0, cap * 3 // 4
    for _, size, path in sorted(files):
        if total <= target:
            break
        try:
            os.remove(path)
        except OSError:
            continue
        total -= size
        deleted += 1
    return deleted


@functools.lru_cache(maxsize=8)  # (once per directory and process: made, checked writable, pruned to the cap)
def _usable_dir(root: str) -> str:
    """``root`` when kernels can be cached there (made and pruned), else '' after one warning."""
    if not root:
        return ""
    try:
        os.makedirs(root, exist_ok=True)
        tempfile.TemporaryFile(dir=root).close()
    except OSError as exc:
        warnings.warn(f"lazyarray: the compiled-kernel cache directory {root!r} is not writable ({exc}); "
                      f"kernels compile in every process (set LAZYARRAY_JIT_CACHE_DIR or "
                      f"la.config.jit_cache_dir to a writable directory, or to 0 to turn this off)",
                      RuntimeWarning, stacklevel=4)
        return ""
    prune_disk_cache(CACHE_CAP_BYTES, root)
    return root


def compiled(fn, always: bool = False):
    """``fn`` compiled for the CPU (``numba.njit(nogil=True)``, cached on disk in ``cache_dir()``),
    or None where compiled kernels are off (``enabled()``), or ``fn`` is ``tiered`` and this is a
    program's first run (``first_run``): the caller then runs its NumPy path. ``always``: the kernel
    even there (one compiled into another, ``conv_regions``).

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
    if not current().jit:
        return None
    # (``declined`` inline, before numba is looked up: a first run of tiered kernels only does not import
    # it; this runs once per kernel call, and a bound step's kernels ask it on every call)
    if not always and _FIRST_RUN.get() and getattr(fn, "lazyarray_tiered", False):
        return None
    k = COMPILED.peek(fn)
    if k is not None:
        return k if _numba() is not None else None  # (``enabled()`` inline)
    return None if _numba() is None else COMPILED.get_or_make(fn, _njit, fn)


def _njit(fn):
    numba = _numba()
    k = numba.njit(nogil=True, inline="always" if getattr(fn, "lazyarray_inlined", False) else "never",
                   fastmath={"contract"} if getattr(fn, "lazyarray_contracted", False) else False)(fn)
    _cache_on_disk(k, fn)
    jit_signatures.reuse_readonly(k, numba.types)  # (writable arrays take a read-only signature it has)
    _compile_listener()
    return k


def compile_ns_within(start_ns: int, end_ns: int) -> int:
    """Nanoseconds this thread spent in numba compiling (or loading from the disk cache) kernels
    between ``start_ns`` and ``end_ns`` (``time.perf_counter_ns``): ``la.profile()`` counts that
    apart from the kernel call that paid it (``op[numba compile]``)."""
    spans = _COMPILES.get()[2]
    if not spans or spans[-1][1] <= start_ns:
        return 0
    return sum(max(0, min(e, end_ns) - max(s, start_ns)) for s, e in spans)


@functools.lru_cache(maxsize=1)  # (installed once per process: numba keeps its listeners)
def _compile_listener() -> None:
    """Note each outermost hold of numba's compiler lock (loading a kernel from the disk cache or
    compiling it) on this thread as a (start, end) span in
    ``_COMPILES`` (the last 32), for ``compile_ns_within``."""
    event = importlib.import_module("numba.core.event")

    class Spans(event.Listener):
        def on_start(self, ev):
            depth, start, spans = _COMPILES.get()
            _COMPILES.set((depth + 1, time.perf_counter_ns() if depth == 0 else start, spans))

        def on_end(self, ev):
            depth, start, spans = _COMPILES.get()
            depth = max(depth - 1, 0)
            if depth == 0:
                spans = (*spans[-31:], (start, time.perf_counter_ns()))
            _COMPILES.set((depth, start, spans))

    event.register("numba:compiler_lock", Spans())  # (held while a kernel loads from the cache or compiles)


def _one(x):
    return x + 1.0


def warm_up() -> bool:
    """Pay numba's one-time start now (its import and its typing and target registries, about a
    second on the development machine, 0.4 s of it numba importing SciPy's BLAS) rather than in the
    first call that runs a compiled kernel: call it at program start, or in a background thread.
    Loads (or compiles and caches) one tiny kernel; True when compiled kernels are on."""
    k = compiled(_one)
    return k is not None and k(1.0) == 2.0


def cache_stats() -> tuple[int, int]:
    """``(compiled, loaded)``: how many kernel signatures this process compiled and how many it loaded
    from the disk cache, over the kernels ``compiled`` gave."""
    kernels = COMPILED.values()
    loaded = sum(sum(k.stats.cache_hits.values()) for k in kernels)
    return sum(len(k.overloads) for k in kernels) - loaded, loaded


def _cache_on_disk(kernel, fn) -> None:
    """Give the numba dispatcher ``kernel`` a disk cache in ``cache_dir()`` (where it is usable), made
    when the kernel first loads or compiles (``LazyDiskCache``)."""
    root = _usable_dir(cache_dir())
    if root:
        kernel._cache = LazyDiskCache(fn, root)  # (numba's enable_caching(), with our directory)


class LazyDiskCache:
    """A kernel's disk cache (``_disk_cache_class``), made when numba first asks it for something: a
    signature to load or save. A dispatcher made only to be compiled into other kernels (``blocked``'s
    passes, ``with_row_sum``'s sums), whose callers load from the cache with it inside, never asks:
    making its cache (its locator, the source file's stamp, its index's paths) took about 0.2 ms of a
    model's first call per dispatcher on the development machine. ``fn`` has no source file (made by
    ``exec``): numba's ``NullCache``, the kernel compiled in each process."""

    def __init__(self, fn, root: str):
        self._fn, self._root, self._made = fn, root, None

    def __getattr__(self, name):  # (``load_overload``, ``save_overload``, ``flush``, ``cache_path``)
        if name in ("_fn", "_root", "_made"):  # (not set yet: an instance being copied)
            raise AttributeError(name)
        return getattr(self.made(), name)

    def made(self):
        """The cache itself (made now if not yet)."""
        if self._made is None:
            try:
                self._made = _disk_cache_class()(self._fn, self._root)
            except Exception as exc:  # (no source file, e.g. a function made by exec): compiled in each process
                _LOG.debug("lazyarray.jit: %s not cached on disk (%s)", getattr(self._fn, "__qualname__", self._fn), exc)
                self._made = importlib.import_module("numba.core.caching").NullCache()
        return self._made


def _code_key(value):
    """What identifies a closure's captured value across processes: a compiled function by its
    Python code, its own captured values and whether it is ``inlined`` (numba pickles a dispatcher
    with a per-process id), anything else as it is."""
    py_func = getattr(value, "py_func", None)
    if py_func is None:
        return value
    cells = tuple(_code_key(c.cell_contents) for c in py_func.__closure__ or ())  # (a closure's constants)
    return (py_func.__module__, py_func.__qualname__, code_digest(py_func.__code__), cells,
            getattr(py_func, "lazyarray_inlined", False))


def code_digest(code) -> str:
    """A digest of what ``code`` computes that is the same in every process: its bytecode, names and
    constants (nested code by its own digest). Not ``marshal.dumps(code)``: marshal flags an object
    referenced more than once by its reference count in this process (a constant ``0.0`` shared with
    other code), so its bytes, and a key made of them, differed between processes and a kernel whose
    closure held such a function compiled again in each (``extrema_rows``: 0.8 s a process). Worked
    out once per code object (``DIGESTS``: a kernel's index key digests every compiled function its
    closure holds, at each load; kernels share their inlined helpers)."""
    found = DIGESTS.peek(code)
    if found is None:
        found = _digest(code)
        DIGESTS.put(code, found)
    return found


def _digest(code) -> str:
    parts = (code.co_code, code.co_names, code.co_varnames, code.co_freevars, code.co_cellvars,
             code.co_argcount, code.co_posonlyargcount, code.co_kwonlyargcount, code.co_flags,
             tuple(_const_key(c) for c in code.co_consts))
    return hashlib.sha256(repr(parts).encode()).hexdigest()


def _const_key(c):
    """A code constant as a value whose ``repr`` is the same in every process (a frozenset's order
    follows the string hash's seed: sorted; a float's ``repr`` tells -0.0 from 0.0)."""
    if isinstance(c, types.CodeType):
        return code_digest(c)
    if isinstance(c, tuple):
        return tuple(_const_key(v) for v in c)
    if isinstance(c, frozenset):
        return ("frozenset", tuple(sorted(repr(_const_key(v)) for v in c)))
    return type(c).__name__, repr(c)


@functools.lru_cache(maxsize=1)  # (one class, made once numba is imported)
def _disk_cache_class():
    """numba's ``FunctionCache`` kept under a directory we name, keyed across processes for closures
    over compiled functions, and never failing a call: a bad entry compiles again, a failed write
    leaves the kernel uncached."""
    caching = importlib.import_module("numba.core.caching")
    serialize = importlib.import_module("numba.core.serialize")
    lazy_link = jit_load.impl_class(caching.CompileResultCacheImpl, importlib.import_module("numba.core.compiler"),
                                    importlib.import_module("llvmlite.binding").parse_bitcode)

    class Locator(caching.UserProvidedCacheLocator):
        def __init__(self, py_func, py_file, root):
            self._py_file = py_file
            self._lineno = py_func.__code__.co_firstlineno
            self._cache_path = os.path.join(root, self.get_suitable_cache_subpath(py_file))

    class Rooted:  # (stands where numba lists locator classes: it asks each ``from_function``)
        def __init__(self, root):
            self.root = root

        def from_function(self, py_func, py_file):
            return Locator(py_func, py_file, self.root) if os.path.isfile(py_file) else None

    class Impl(lazy_link):  # (numba's, its entries loaded without parsing their linking bitcode: jit_load.py)
        def __init__(self, py_func, root):
            self._locator_classes = [Rooted(root)]
            super().__init__(py_func)

    class DiskCache(jit_load.HeldIndex, caching.FunctionCache):
        def __init__(self, py_func, root):
            self._impl_class = functools.partial(Impl, root=root)
            self._rest = self.held = None  # (``_index_key``'s part past the signature; ``index``'s read)
            super().__init__(py_func)

        def load_overload(self, sig, target_context):
            try:
                return super().load_overload(sig, target_context)
            except Exception as exc:  # (a corrupt or foreign entry: compile again)
                _LOG.debug("lazyarray.jit: cache entry of %s unreadable (%s)", self._name, exc)
                return None

        def save_overload(self, sig, data):
            try:
                super().save_overload(sig, data)
            except Exception:  # (a corrupt index: start it again, once)
                try:
                    self._cache_file.flush()
                    super().save_overload(sig, data)
                except Exception as exc:  # (disk full, directory gone): the kernel runs, uncached
                    _LOG.debug("lazyarray.jit: %s not saved to the cache (%s)", self._name, exc)

        def _index_key(self, sig, codegen):
            # (numba's key, but captured compiled functions as their code, see _code_key; the part past
            # the signature worked out once per codegen)
            if self._rest is None or self._rest[0] is not codegen:
                self._rest = codegen, codegen.magic_tuple(), _code_hashes(self._py_func, serialize.dumps)
            return sig, self._rest[1], self._rest[2]

    return DiskCache


def _code_hashes(py_func, dumps) -> tuple:
    """The code part of a kernel's cache key: digests of its bytecode and of its captured values
    (``_code_key``; ``dumps``: numba's pickler)."""
    cells = py_func.__closure__ or ()
    captured = dumps(tuple(_code_key(c.cell_contents) for c in cells)) if cells else b""
    return hashlib.sha256(py_func.__code__.co_code).hexdigest(), hashlib.sha256(captured).hexdigest()


# None -> (the pid of the process that first asked, whether its threading layer is thread-safe): asked
# once; another process (a forked child) gets False
PARALLEL = NamedCache("numba parallel layer", 1)
# What this thread / task last gave numba.set_num_threads (numba keeps it per thread; None: nothing yet)
_REGION_THREADS: contextvars.ContextVar[int | None] = contextvars.ContextVar("lazyarray_numba_threads", default=None)
# This thread's numba compiles: (nesting depth, start of the outermost, the last 32 (start, end) spans)
_COMPILES: contextvars.ContextVar[tuple] = contextvars.ContextVar("lazyarray_numba_compiles", default=(0, 0, ()))
# numba's threading layers by name -> the pools that provide them (``numba.np.ufunc.<pool>``); the
# default tries TBB, then OpenMP, then workqueue (not thread-safe: never used here)
_LAYERS = {"default": ("tbbpool", "omppool"), "threadsafe": ("tbbpool", "omppool"),
           "omp": ("omppool",), "tbb": ("tbbpool",), "safe": ("tbbpool",), "forksafe": ("tbbpool",)}


def parallel_ready() -> bool:
    """True when compiled kernels are on and may open numba parallel regions in this process."""
    if not enabled():
        return False
    pid, ready = PARALLEL.peek(None) or PARALLEL.get_or_make(None, _first_ask)
    return ready and pid == os.getpid()


def _first_ask() -> tuple[int, bool]:
    """(this process, whether numba's threading layer lets two threads launch regions at once)."""
    numba = _numba()
    if numba is None:  # (``enabled()`` said yes before numba's import was tried, and it failed)
        return os.getpid(), False
    for pool in _LAYERS.get(str(numba.config.THREADING_LAYER).lower(), ()):
        try:
            importlib.import_module(f"numba.np.ufunc.{pool}")
        except Exception:  # (ImportError, or a library that fails to load)
            continue
        return os.getpid(), True
    return os.getpid(), False


def use_threads(n: int) -> None:
    """This thread's numba parallel regions run on ``n`` threads (at most numba's pool size)."""
    if _REGION_THREADS.get() != n:
        numba = _numba()
        numba.set_num_threads(max(1, min(n, numba.config.NUMBA_NUM_THREADS)))
        _REGION_THREADS.set(n)
