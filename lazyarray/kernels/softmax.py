"""softmax, log_softmax and the softmax cross entropy: the row-chunked implementation and choosers.

``ops/nn.py`` holds the reference kernels (max, exp, sum and divide over the whole array). Large
NumPy arrays normalized along their last axis run here chunk of rows by chunk (``rows``): each
chunk goes through every pass while it is in cache, chunks over ``la.set_num_threads`` threads.
Every row is the same operations on the same values: the same bits.

``in_place`` (for ``kernels/attention.py``'s scores) is the reference's operations on a C-ordered
array's rows of at most ``BLOCK`` values in place: the row maxima and the subtraction in one
compiled pass, NumPy's ``exp`` (numba's is not NumPy's, see ``fused_mixed.py``), the row sums
(NumPy's ``add.reduce`` of such a row written out: one block of its pairwise summation) and the
division in another: the same bits as the reference, three calls instead of five NumPy ones.
"""
from __future__ import annotations

import numpy as np

from .. import jit, threads
from ..ops import registry
from ..ops.nn import sce_of
from .impl import Choice, Impl
from .pairwise_sum import BLOCK, with_row_sum
from .runner import keyword_binder, noted

ROW_CHUNK_BYTES = 256 << 10  # rows per chunk of a row-wise kernel: a chunk and its result stay in L2


def by_rows(xp, x, axis) -> bool:
    """Large NumPy arrays normalized along the last axis run row-chunk by row-chunk: each chunk
    goes through max, exp, sum and divide while it is in cache (one pass over memory instead of
    five), over ``la.set_num_threads`` threads."""
    return xp is np and x.ndim >= 1 and axis in (-1, x.ndim - 1) and x.nbytes >= (1 << 20) and x.shape[-1] > 0


def _rows_chunked(x, rows_fn):
    x2 = x.reshape(-1, x.shape[-1])
    out = np.empty(x2.shape, x.dtype)
    per = max(1, ROW_CHUNK_BYTES // max(1, x2.shape[1] * x.itemsize))

    def work(bounds):
        col = np.empty((min(per, x2.shape[0]), 1), x.dtype)
        for lo, hi in bounds:
            rows_fn(x2[lo:hi], out[lo:hi], col[:hi - lo])

    threads.chunked(x2.shape[0], per, x.nbytes, work)
    return out.reshape(x.shape)


def _softmax_rows(x, o, col):
    np.max(x, axis=1, keepdims=True, out=col)
    np.subtract(x, col, out=o)
    np.exp(o, out=o)
    np.sum(o, axis=1, keepdims=True, out=col)
    np.divide(o, col, out=o)


def _log_softmax_rows(x, o, col):
    np.max(x, axis=1, keepdims=True, out=col)
    np.subtract(x, col, out=o)
    e = np.exp(o)
    np.sum(e, axis=1, keepdims=True, out=col)
    np.log(col, out=col)
    np.subtract(o, col, out=o)


def _softmax_by_rows(xp, x, axis=-1, out=None):
    return _rows_chunked(x, _softmax_rows)


def _log_softmax_by_rows(xp, x, axis=-1, out=None):
    return _rows_chunked(x, _log_softmax_rows)



@jit.tiered
def _max_subtract(s, zero):
    """s[r] -= max(s[r]) for each row of a 2-D ``s``: ``np.maximum.reduce``'s maximum (a NaN wins,
    a tie keeps the first), then one subtraction per value."""
    for r in range(s.shape[0]):
        row = s[r]
        m = row[0]
        for i in range(1, row.shape[0]):
            v = row[i]
            if v > m or v != v:
                if m == m:
                    m = v
        for i in range(row.shape[0]):
            row[i] = row[i] - m


@jit.tiered
def _divide_by_sums_with(row_sum, squares_sum):
    """The second pass of ``in_place`` calling the compiled ``row_sum`` (``pairwise_sum.py``)."""
    def divide_by_sums(s, zero):
        """s[r] /= sum(s[r]) for each row of a 2-D ``s`` of at most ``BLOCK`` columns, each sum as
        NumPy's ``add.reduce`` makes it (``row_sum``)."""
        for r in range(s.shape[0]):
            row = s[r]
            t = row_sum(row, zero)
            for i in range(row.shape[0]):
                row[i] = row[i] / t

    return divide_by_sums


def divide_kernel():
    """``in_place``'s second pass compiled (each row of a 2-D array of at most ``BLOCK`` columns divided
    by its sum as NumPy's ``add.reduce`` makes it), or None where compiled kernels are off or this is
    a program's first run (``kernels/attention.py``'s ``compiled`` finds it once per step)."""
    return with_row_sum(_divide_by_sums_with)


def in_place(s) -> bool:
    """``s`` (C-ordered, NumPy float32 / float64, rows of 1 to ``BLOCK`` values along its last axis)
    replaced by its softmax along the last axis, the reference's values bit for bit; False (``s``
    untouched) where it does not apply or compiled kernels are off."""
    if not (0 < s.shape[-1] <= BLOCK and s.flags.c_contiguous and s.dtype in (np.float32, np.float64)):
        return False
    sub, div = jit.compiled(_max_subtract), with_row_sum(_divide_by_sums_with)
    if sub is None or div is None:
        return False
    rows, zero = s.reshape(-1, s.shape[-1]), s.dtype.type(0)
    sub(rows, zero)
    np.exp(s, out=s)
    div(rows, zero)
    return True


SOFTMAX_ROWS = Impl("softmax", "rows", _softmax_by_rows, "NumPy, the last axis, 1 MiB or more: chunks of rows "
                    "through every pass while in cache, over the threads", threads=True)
LOG_SOFTMAX_ROWS = Impl("log_softmax", "rows", _log_softmax_by_rows, "as softmax's rows", threads=True)
SCE_ROWS = Impl("softmax_cross_entropy", "rows", lambda xp, logits, labels, out=None: sce_of(xp, logits, labels, run_log_softmax),
                "its log_softmax by rows where that applies", threads=True)
_SOFTMAX, _LOG_SOFTMAX, _SCE = Choice(SOFTMAX_ROWS), Choice(LOG_SOFTMAX_ROWS), Choice(SCE_ROWS)
_REFERENCE = {name: registry.get(name).kernel for name in ("softmax", "log_softmax", "softmax_cross_entropy")}


def choose_softmax(xp, x, axis=-1, out=None) -> Choice | None:
    """``rows`` for softmax of ``x`` along ``axis`` where it applies, else None (the reference)."""
    return _SOFTMAX if x.size and by_rows(xp, x, axis) else None


def choose_log_softmax(xp, x, axis=-1, out=None) -> Choice | None:
    """``rows`` for log_softmax where it applies, else None (the reference)."""
    return _LOG_SOFTMAX if x.size and by_rows(xp, x, axis) else None


def choose_sce(xp, logits, labels, out=None) -> Choice | None:
    """``rows`` for the loss where its log_softmax runs by rows, else None (the reference)."""
    return _SCE if logits.size and by_rows(xp, logits, -1) else None


def run_softmax(xp, x, axis=-1, out=None):
    """softmax by rows where ``choose_softmax`` says so, else the reference kernel."""
    if x.size and by_rows(xp, x, axis):
        y = _softmax_by_rows(xp, x, axis)
        noted(_SOFTMAX, x)
        return y
    return _REFERENCE["softmax"](xp, x, axis)


def run_log_softmax(xp, x, axis=-1, out=None):
    """log_softmax by rows where ``choose_log_softmax`` says so, else the reference kernel."""
    if x.size and by_rows(xp, x, axis):
        y = _log_softmax_by_rows(xp, x, axis)
        noted(_LOG_SOFTMAX, x)
        return y
    return _REFERENCE["log_softmax"](xp, x, axis)


def run_sce(xp, logits, labels, out=None):
    """The softmax cross entropy with its log_softmax by rows where that applies."""
    if logits.size and by_rows(xp, logits, -1):
        y = sce_of(xp, logits, labels, run_log_softmax)
        noted(_SCE, logits)
        return y
    return _REFERENCE["softmax_cross_entropy"](xp, logits, labels)


# op name -> its implementations, runner, and chooser for a call's arguments (``kernels.choose``)
IMPLS = {"softmax": (SOFTMAX_ROWS,), "log_softmax": (LOG_SOFTMAX_ROWS,), "softmax_cross_entropy": (SCE_ROWS,)}
RUNNERS = {"softmax": run_softmax, "log_softmax": run_log_softmax, "softmax_cross_entropy": run_sce}
CHOOSERS = {"softmax": choose_softmax, "log_softmax": choose_log_softmax, "softmax_cross_entropy": choose_sce}
# (their choices are fixed by a compiled step's avals: the reference kernel bound where none applies)
BINDERS = {name: keyword_binder(CHOOSERS[name], {}, name, _REFERENCE[name]) for name in CHOOSERS}
