"""Packed dense weights: a contiguous copy of ``weight.T``, kept while the weight is unchanged.

``dense(x, w)`` computes ``x @ w.T`` with ``w`` shaped (units, in_units). NumPy hands the
transposed view to BLAS as a column-major operand, and OpenBLAS runs that product up to 2x
slower than on a row-major (in_units, units) copy: measured on one thread, 64 x 784 @ 784 x 512
takes 0.67 ms through the view and 0.56 ms on the copy; 4 rows, 0.22 against 0.11 ms. One row
(a matrix-vector product) and narrow outputs (10 units) run as fast or faster through the view.
So ``transposed(w, rows)`` returns the copy where it pays and the view elsewhere. Some BLAS builds
round a product through the copy otherwise than through the view (OpenBLAS 0.3.31's SkylakeX kernels
on an AMD EPYC: 7 x 32 @ 32 x 128 float32, a few values an ulp apart), so a weight's first call (the
view) and its later ones (the copy) may differ in their last bits there; both are the product to
float rounding, and comparisons of two paths bit for bit compare them at one packing state.

The copy is derived data, kept by ``derived.py`` (one table, one budget and one off switch for
every copy derived from a weight): per weight array and buffer version, only for arrays owning
their memory, only from the second call at an unchanged version (training never packs), never
for memory handed out writable. ``packed_bytes()`` counts every derived copy (Winograd's
transformed kernels too), ``packed_count()`` the packed transposes; ``LAZYARRAY_PACK_BUDGET_MB``
(default 1024) bounds them all and ``LAZYARRAY_PACK_WEIGHTS=0`` turns them all off.
"""
from __future__ import annotations

import numpy as np

from . import derived

MIN_ROWS = 2  # one row is a matrix-vector product: the view is as fast
MIN_UNITS = 32  # narrow outputs (a 10-class head) run faster through the view at every batch
MIN_ELEMENTS = 4096  # below this the lookup costs more than the copy saves
WHAT = "T"  # the derivation's name in derived.py's table


def transposed(w, rows: int):
    """``w.T`` for the product ``x @ w.T`` of ``rows`` rows: a packed contiguous copy where that
    pays and is sound (see the module), else the transposed view."""
    if rows < MIN_ROWS or w.__class__ is not np.ndarray or w.base is not None or w.ndim != 2 \
            or w.shape[0] < MIN_UNITS or w.size < MIN_ELEMENTS:
        return w.T
    pack = derived.derived(w, WHAT, lambda: np.ascontiguousarray(w.T), w.nbytes)
    return w.T if pack is None else pack


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
    """Bytes held by copies derived from weights now (packed transposes, transformed kernels)."""
    return derived.held_bytes()


def packed_count() -> int:
    """How many weights have a packed copy of their transpose now."""
    return derived.held_count(WHAT)


def clear() -> None:
    """Drop every derived copy (they are rebuilt at the second call of an unchanged weight)."""
    derived.clear()
