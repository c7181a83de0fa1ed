"""Packed dense weights: a contiguous copy of ``weight.T``, kept while the weight is unchanged.

``dense(x, w)`` computes ``x @ w.T`` with ``w`` shaped (units, in_units). NumPy hands the
transposed view to BLAS as a column-major operand, and OpenBLAS runs that product up to 2x
slower than on a row-major (in_units, units) copy: measured on one thread, 64 x 784 @ 784 x 512
takes 0.67 ms through the view and 0.56 ms on the copy; 4 rows, 0.22 against 0.11 ms. One row
(a matrix-vector product) and narrow outputs (10 units) run as fast or faster through the view.
So ``transposed(w, rows)`` returns the copy where it pays and the view elsewhere.

The copy is derived data, and a stale one would be a silently wrong result, so it is kept only
while it provably equals ``w.T``:

* **keyed on the array object and its buffer version** (``buffer.version``): every in-place
  write through lazyarray (``x[...] = v``, ``out=``, ``Parameter.set_data``, ``Trainer.step``)
  bumps the version, and a bumped version misses (the stale copy is dropped then). A new value
  set by ``set_data`` is a new array object: it misses too. The entry holds the array weakly
  and dies with it, so an ``id`` reused by a later array never finds it.
* **only arrays that own their memory** (``w.base is None``). Every buffer a compiled program
  plans or hands out is a view into one raw byte buffer that the program rewrites at later
  runs without bumping a version (intermediates every run; a returned output once nobody holds
  it), so those are never packed. Views of user arrays are never packed either: their memory
  has another owner whose writes this table does not see.
* **only after a second call at the same version**: a weight updated between calls (a training
  loop) would pay a copy per step for one product; it is never packed. Inference (the weight
  unchanged since the last call) packs at its second call.

* **never memory handed out writable**: ``np.asarray(w)`` (NumPy's view of the live buffer) and
  a DLPack export mark the memory *exposed* (``buffer.expose``), since writes through those
  aliases bump no version; an exposed weight runs through the view from then on (and a copy
  packed before is ignored).

Memory: a packed weight is one extra copy of it (``packed_bytes()``), held as long as the weight
lives and is unchanged. All copies together stay within ``LAZYARRAY_PACK_BUDGET_MB`` (default
1024): past it, further weights run through the view. ``LAZYARRAY_PACK_WEIGHTS=0`` turns packing off.
"""
from __future__ import annotations

import os
import threading
import weakref

import numpy as np

from ..buffer import exposed, version

MIN_ROWS = 2  # one row is a matrix-vector product: the view is as fast
MIN_UNITS = 32  # narrow outputs (a 10-class head) run faster through the view at every batch
MIN_ELEMENTS = 4096  # below this the lookup costs more than the copy saves

ENABLED = [os.environ.get("LAZYARRAY_PACK_WEIGHTS", "1").strip().lower() not in ("0", "false", "off", "no")]


def _budget_from_env() -> int:
    raw = os.environ.get("LAZYARRAY_PACK_BUDGET_MB", "1024")
    try:
        mb = float(raw)
    except ValueError:
        mb = -1.0
    if not mb >= 0:
        raise ValueError(f"LAZYARRAY_PACK_BUDGET_MB must be a number of MiB >= 0, got {raw!r}")
    return int(mb * 2**20)


BUDGET = [_budget_from_env()]  # bytes all packed copies may hold together
_HELD = [0]  # bytes they hold now (changed under _lock)

_lock = threading.Lock()

# id(weight) -> (weak reference to it, its buffer version, the packed copy or None). Entries are
# replaced, never changed, and only while still the entry read: a thread storing a copy cannot
# overwrite a newer entry (a write another thread noticed meanwhile).
_ENTRIES: dict[int, tuple] = {}


def _nbytes(e) -> int:
    return 0 if e is None or e[2] is None else e[2].nbytes


def _forget(key: int, ref) -> None:
    with _lock:
        e = _ENTRIES.get(key)
        if e is not None and e[0] is ref:
            del _ENTRIES[key]
            _HELD[0] -= _nbytes(e)


def _replace(key: int, old: tuple, new: tuple) -> None:
    with _lock:
        if _ENTRIES.get(key) is old:
            _ENTRIES[key] = new
            _HELD[0] += _nbytes(new) - _nbytes(old)


def transposed(w, rows: int):
    """``w.T`` for the product ``x @ w.T`` of ``rows`` rows: a packed contiguous copy where that
    pays and is sound (see the module), else the transposed view."""
    if rows < MIN_ROWS or w.__class__ is not np.ndarray or w.base is not None or w.ndim != 2 \
            or w.shape[0] < MIN_UNITS or w.size < MIN_ELEMENTS or not ENABLED[0]:
        return w.T
    if exposed(w):  # a writable alias outside lazyarray: its writes bump no version
        return w.T
    key = id(w)
    now = version(w)
    e = _ENTRIES.get(key)
    if e is not None and e[0]() is w:
        if e[1] != now:  # written since: the copy is stale, drop it
            _replace(key, e, (e[0], now, None))
            return w.T
        if e[2] is not None:
            return e[2]
        if _HELD[0] + w.nbytes > BUDGET[0]:  # the copies already hold the budget
            return w.T
        pack = np.ascontiguousarray(w.T)  # second call at this version: the weight holds still
        pack.flags.writeable = False  # ours alone: nobody may write it
        if version(w) == now:  # (a write that ended during the copy bumped it: keep nothing)
            _replace(key, e, (e[0], now, pack))
        return pack
    try:
        ref = weakref.ref(w, lambda r, key=key: _forget(key, r))
    except TypeError:
        return w.T
    with _lock:
        _HELD[0] -= _nbytes(_ENTRIES.get(key))  # (an entry of a dead array with the same id)
        _ENTRIES[key] = (ref, now, None)
    return w.T


def packed_operand(b, rows: int):
    """``b`` for the product ``a @ b`` of ``rows`` rows. When ``b`` (K, N) is exactly the transposed
    view ``w.T`` of a weight ``w`` (N, K) that owns its memory (``x @ w.T`` written by hand, an
    imported ONNX Gemm with ``transB``), that is ``transposed(w, rows)``; otherwise ``b`` itself."""
    w = b.base
    if w is None or rows < MIN_ROWS or b.__class__ is not np.ndarray or w.__class__ is not np.ndarray \
            or b.ndim != 2 or w.base is not None or not b.flags.f_contiguous or w.shape != b.shape[::-1] \
            or w.dtype != b.dtype or not w.flags.c_contiguous:
        return b
    # b is F-ordered, as large as w and inside w's buffer: it covers it from its first byte, so
    # b[i, j] and w[j, i] are the same element
    return transposed(w, rows)


def packed_bytes() -> int:
    """Bytes held by packed copies now (each is one extra copy of a weight)."""
    return _HELD[0]


def packed_count() -> int:
    """How many weights have a packed copy now."""
    return sum(e[2] is not None for e in list(_ENTRIES.values()))


def clear() -> None:
    """Drop every packed copy (they are rebuilt at the second call of an unchanged weight)."""
    with _lock:
        _ENTRIES.clear()
        _HELD[0] = 0
