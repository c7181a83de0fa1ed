"""A product too large for one thread, in row blocks over the pool, each block on one BLAS thread.

OpenBLAS shares a product of ``blas_threads.MIN_PARALLEL_FLOPS`` or more over its own threads, and
the calling thread waits for them all at the end: when another process holds a core the OS holds one
of them back and the product waits a time slice (measured on the shared 2-core development machine,
its load at 9: a (512, 64) @ (64, 256) float32 product, 17 MFLOP, took 5.7 ms a call on BLAS's two
threads against 1.1 ms in two row blocks over the pool; (400, 512) @ (512, 512) 84 against 25 ms).
Its values hang on the thread count too: the rows at a BLAS thread's edge take other micro-kernels,
so a float32 product on two BLAS threads differs from one thread's in its last bits.

``multiply(a, b, out)`` cuts the rows of ``a @ b`` into blocks (``cuts``: at most ``PARTS``, every cut
a multiple of ``ROW_ALIGN`` rows) and hands them to ``threads.split`` with BLAS held at one thread:
each thread takes the next block as it finishes, so a thread the OS holds back leaves the rest to the
others, and the caller waits for one block at most. While the contention guard says another process
holds a core (``contention.contended``) the blocks run in order on the calling thread.

Values: OpenBLAS computes each element of a product from its row of ``a`` and column of ``b`` with
the micro-kernel of its tile (12 rows of a float32 product on the Haswell kernels, 2 of a float64
one: measured, a cut anywhere else changed the last bits of the rows beside it); the tiles' K order
depends on K alone. So blocks cut at multiples of ``ROW_ALIGN`` (48, a multiple of the tile heights
of 2-16 and 24 rows) give the bits of the whole product on one BLAS thread, on any thread, in any order,
contended or not: one BLAS thread, several threads and the guard's window all give the same values.
A probe (``exact``, once per dtype: a product cut at ``ROW_ALIGN`` against the whole one, on one BLAS
thread) checks it for this process's BLAS; where it differs nothing here applies (BLAS's own threads,
as before). Each block also stays above ``SMALL_PRODUCT`` multiply-adds (OpenBLAS's small-matrix
kernels take smaller float32 calls on the cores that have them: another kernel, other bits).
"""
from __future__ import annotations

import numpy as np

from .. import threads
from ..caches import NamedCache
from ..tuning_table import current
from . import contention
from .blas_threads import MIN_PARALLEL_FLOPS, SMALL_PRODUCT

ROW_ALIGN = 48  # every cut a multiple of this many rows (OpenBLAS's tile heights: 12 float32, 2 float64 here)
PARTS = 8  # at most this many blocks (even shares on 2-4 threads; a thread held back costs one block's wait)
MIN_UNITS = 4  # ... and at least this many ROW_ALIGN-row units to share
FLOATS = (np.dtype(np.float32), np.dtype(np.float64))

EXACT = NamedCache("BLAS row blocks: exact cuts", 4)  # dtype -> whether aligned cuts keep the bits


def cuts(rows: int, k: int, n: int) -> list | None:
    """The blocks ``[(lo, hi), ...]`` of a ``(rows, k) @ (k, n)`` product: its rows in units of
    ``ROW_ALIGN`` (the last maybe short) shared as evenly as whole units allow among at most ``PARTS``
    blocks, each above ``SMALL_PRODUCT`` multiply-adds; None for fewer than ``MIN_UNITS`` units (two
    threads could not share them evenly: BLAS's own threads split the columns too) or where fewer than
    two blocks are that large. A function of the shape alone."""
    units = -(-rows // ROW_ALIGN)
    if units < MIN_UNITS:
        return None
    for parts in range(min(PARTS, units), 1, -1):
        q, r = divmod(units, parts)
        blocks, lo = [], 0
        for i in range(parts):
            hi = min(rows, lo + (q + (i < r)) * ROW_ALIGN)
            blocks.append((lo, hi))
            lo = hi
        if all((hi - lo) * k * n > SMALL_PRODUCT for lo, hi in blocks):
            return blocks
    return None


def applies(rows: int, k: int, n: int, dtype) -> bool:
    """Whether ``multiply`` takes a ``(rows, k) @ (k, n)`` product of NumPy operands of ``dtype`` (the
    caller checks they are NumPy arrays of one dtype): several threads set and the tuning table's
    ``blas_row_blocks``, a floating dtype whose aligned cuts keep the bits (``exact``), a product of
    ``MIN_PARALLEL_FLOPS`` or more (smaller ones run on one BLAS thread, ``blas_threads``) and rows for
    two blocks (``cuts``)."""
    if 2.0 * rows * k * n < MIN_PARALLEL_FLOPS or threads.num_threads() < 2 or not current().blas_row_blocks:
        return False
    return dtype in FLOATS and cuts(rows, k, n) is not None and exact(dtype)


def multiply(a, b, out=None):
    """``a @ b`` (2-D, ``applies``) into ``out`` (C-ordered, ``a``'s dtype; None: a new array), in
    the row blocks of ``cuts``, each on one BLAS thread (see the module)."""
    rows, k = a.shape
    n = b.shape[1]
    y = np.empty((rows, n), a.dtype) if out is None else out
    blocks = cuts(rows, k, n) or [(0, rows)]

    def block(p):
        lo, hi = p
        np.dot(a[lo:hi], b, out=y[lo:hi])

    with threads.blas_one_thread():  # (split holds it too; in the pool or on one thread it would not)
        if contention.contended():
            for p in blocks:
                block(p)
        else:
            threads.split(blocks, block)
    return y


def exact(dtype) -> bool:
    """Whether this process's BLAS gives a product cut at ``ROW_ALIGN`` rows the bits of the whole
    one (probed once per dtype, on one BLAS thread)."""
    found = EXACT.peek(dtype)
    return found if found is not None else EXACT.get_or_make(dtype, _probe, np.dtype(dtype))


def _probe(dtype) -> bool:
    rows, k, n = 3 * ROW_ALIGN + 37, 151, 151  # (blocks above SMALL_PRODUCT; a ragged last tile; odd cuts)
    grid = np.arange(rows * k, dtype=np.float64).reshape(rows, k)
    a = np.sin(grid).astype(dtype)
    b = np.cos(np.arange(k * n, dtype=np.float64).reshape(k, n) * 0.37).astype(dtype)
    with threads.blas_one_thread():
        whole = a @ b
        parts = np.empty_like(whole)
        for lo, hi in ((0, ROW_ALIGN), (ROW_ALIGN, 3 * ROW_ALIGN), (3 * ROW_ALIGN, rows)):
            np.dot(a[lo:hi], b, out=parts[lo:hi])
        bt = np.ascontiguousarray(b.T).T  # (the transposed operand of x @ w.T)
        whole_t = a @ bt
        parts_t = np.empty_like(whole_t)
        for lo, hi in ((0, 2 * ROW_ALIGN), (2 * ROW_ALIGN, rows)):  # (even cuts too)
            np.dot(a[lo:hi], bt, out=parts_t[lo:hi])
    return bool(np.array_equal(whole, parts) and np.array_equal(whole_t, parts_t))
