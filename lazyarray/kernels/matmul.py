"""``matmul``'s implementations and the function that chooses between them (``choose_matmul``).

``ops/nn.py`` holds the reference kernel (``blas``: NumPy's matmul, a stack times a matrix as one
product over all its rows). With several threads set, OpenBLAS splits any product of more than
262,144 multiply-adds over its threads; for the products of a small transformer (a batch-8 Swin
block's (512, 32) @ (32, 64), 2 MFLOP) the split costs more than it saves, and when another
process holds the second core the waiting thread spins: measured on the shared 2-core machine,
that product took 35 ms on two BLAS threads against 0.3 ms on one, and the Swin model's batch-8
call ran 24x onnxruntime's time on 2 threads against 3.5x on 1 (``benchmarks/real_models.py``).
``one_blas_thread`` is the reference's call with BLAS held at one thread (``blas_threads.py``'s
size policy, as dense and conv2d use it) for products of fewer than ``MAX_FLOPS``.

Products of ``MAX_FLOPS`` or more share BLAS's threads as before that change (``blas``): the MLP's
backward at batch 1024 has two of 10.5 MFLOP, (1024, 10) @ (10, 512) and (10, 1024) @ (1024, 512),
which took 121 and 153 us on two threads against 209 and 232 us held at one (medians of 1500 calls,
alternating, 2-core machine); products of 7.9-12.8 MFLOP of other shapes gained as much
(``blas_threads.MIN_PARALLEL_FLOPS``, 16 MFLOP, stays the bound for dense and conv2d).

A product BLAS runs on one thread whatever its setting (``blas_threads.serial_anyway``: OpenBLAS's
small-matrix kernels take float32 calls of at most ``SMALL_PRODUCT`` multiply-adds on one thread)
is ``blas``: the switch would only cost. The MLP's backward at batch 64 has two such products,
(64, 10) @ (10, 512) and (10, 64) @ (64, 512); held at one thread they took 37 and 23 us in the
training step against 22 and 15 us left alone (``benchmarks/training_loop.py``, ``la.profile()``).

A floating product of ``blas_threads.MIN_PARALLEL_FLOPS`` or more, a matrix or a C-ordered stack times a
matrix, is ``row_blocks`` with several threads set: its rows in blocks over the pool, each on one BLAS
thread (``blas_rows.py``: one BLAS thread's values whatever the thread count or the contention guard's
state, and a thread held back by another process costs one block's wait, not the product's).
"""
from __future__ import annotations

import itertools
import math

import numpy as np

from ..mode import MODE, PROFILING
from ..ops import registry
from ..threads import blas_one_thread, num_threads
from . import blas_rows
from .blas_threads import MIN_PARALLEL_FLOPS, SERIAL_ANYWAY_FLOPS, one_thread, serial_anyway
from .impl import Choice, Impl
from .profile import current as current_profile
from .runner import Bound, direct


def flops_of(sa: tuple, sb: tuple) -> tuple[float, float]:
    """(floating-point operations of a product of shapes ``sa @ sb``, multiply-adds of one matrix
    product of its stack): the shapes alone, whatever the memory order."""
    if not sa or not sb:
        return 0.0, 0.0
    one = float((sa[-2] if len(sa) > 1 else 1) * sa[-1] * (sb[-1] if len(sb) > 1 else 1))
    if len(sa) <= 2 and len(sb) <= 2:
        return 2.0 * one, one
    batch = 1
    for da, db in itertools.zip_longest(reversed(sa[:-2]), reversed(sb[:-2]), fillvalue=1):
        batch *= max(da, db) if da and db else 0
    return 2.0 * batch * one, one


def products(a, b) -> tuple[float, float]:
    """(floating-point operations of ``a @ b``, multiply-adds of its largest single BLAS call)."""
    flops, one = flops_of(a.shape, b.shape)
    if a.ndim <= 2 and b.ndim <= 2:
        return flops, one
    # a C-ordered stack times a matrix is one product over all its rows (nn.rows_matmul)
    return flops, flops / 2 if b.ndim == 2 and a.flags.c_contiguous else one


# one_blas_thread below this many floating-point operations (above: both threads pay, see the module)
MAX_FLOPS = 8e6
_reference = registry.get("matmul").kernel  # (ops/nn.py's, registered before this layer loads)


def _largest_float32(a, b, largest: float) -> float | None:
    """``largest`` (the multiply-adds of the product's largest BLAS call) where both are float32
    (the calls OpenBLAS's small-matrix kernels take), else None."""
    return largest if a.dtype == np.float32 == b.dtype else None


def _one_blas_thread(xp, a, b, out=None):
    flops, largest = products(a, b)
    with one_thread(flops, _largest_float32(a, b, largest)):
        return _reference(xp, a, b, out=out)


def _row_blocks(xp, a, b, out=None):
    if not _row_blocks_case(a, b) or (out is not None and not (out.dtype == a.dtype and out.flags.c_contiguous)):
        # (not its case, or NumPy would compute into another order with other operand roles, other bits:
        # the reference's values as on one thread set, on one BLAS thread)
        with blas_one_thread():
            return _reference(xp, a, b, out=out)
    rows, n = math.prod(a.shape[:-1]), b.shape[1]
    y = blas_rows.multiply(a.reshape(rows, a.shape[-1]), b, None if out is None else out.reshape(rows, n))
    return y.reshape(a.shape[:-1] + (n,)) if out is None else out


def _row_blocks_case(a, b) -> bool:
    """NumPy operands of one dtype, a matrix or a C-ordered stack (one product over all its rows, as
    the reference's ``nn.rows_matmul``) times a matrix."""
    return a.__class__ is np.ndarray and b.__class__ is np.ndarray and b.ndim == 2 and a.dtype == b.dtype \
        and (a.ndim == 2 or (a.ndim > 2 and a.flags.c_contiguous))


def _takes_row_blocks(a, b) -> bool:
    """``row_blocks``' case (``_row_blocks_case``) and a product ``blas_rows.applies`` takes."""
    if not _row_blocks_case(a, b):
        return False
    return blas_rows.applies(math.prod(a.shape[:-1]), a.shape[-1], b.shape[1], a.dtype)


BLAS = Impl("matmul", "blas", _reference, "NumPy's matmul (the reference), BLAS on every thread set")
ONE_BLAS_THREAD = Impl("matmul", "one_blas_thread", _one_blas_thread,
                       "several threads set and a floating product of fewer than MAX_FLOPS that "
                       "BLAS would share (not blas_threads.serial_anyway): the reference with BLAS held at "
                       "one thread")
ROW_BLOCKS = Impl("matmul", "row_blocks", _row_blocks,
                  "several threads set and a floating product of MIN_PARALLEL_FLOPS or more, a matrix or a "
                  "C-ordered stack times a matrix: row blocks over the pool, each on one BLAS thread (the values "
                  "of one BLAS thread; into another order than C, the reference on one BLAS thread)", threads=True)
IMPLS = (ROW_BLOCKS, ONE_BLAS_THREAD, BLAS)
_BLAS, _ONE, _ROWS = Choice(BLAS), Choice(ONE_BLAS_THREAD), Choice(ROW_BLOCKS)


def choose_matmul(xp, a, b, out=None) -> Choice:
    """What runs ``matmul`` of these arrays."""
    if num_threads() == 1 or xp is not np or a.dtype.kind != "f" or b.dtype.kind != "f":
        return _BLAS
    flops, largest = products(a, b)
    if flops >= MIN_PARALLEL_FLOPS and _takes_row_blocks(a, b):
        return _ROWS
    if not SERIAL_ANYWAY_FLOPS < flops < MAX_FLOPS or serial_anyway(flops, _largest_float32(a, b, largest)):
        return _BLAS
    return _ONE


def order_decides(xp, a, b) -> bool:
    """Whether ``choose_matmul``'s answer for ``a @ b`` could change with ``a``'s memory order: a
    stack times a matrix with several threads set, both float32, of a size between
    ``SERIAL_ANYWAY_FLOPS`` and ``MAX_FLOPS`` (where ``products``' largest call decides), or a floating
    one of ``MIN_PARALLEL_FLOPS`` or more (``row_blocks`` takes a C-ordered stack only). Elsewhere
    the shapes decide: a batch-1 transformer's (1, 7, 32) @ (32, 32) is ``blas`` in any order, and a
    step asking per call paid ~10 us a product on two threads (T5's b1 call: 428 -> 565 us)."""
    if a.ndim <= 2 or b.ndim != 2 or num_threads() == 1 or xp is not np:
        return False
    flops, _ = flops_of(a.shape, b.shape)
    if flops >= MIN_PARALLEL_FLOPS:  # (row_blocks takes a C-ordered stack only)
        return a.dtype.kind == "f"
    return a.dtype == np.float32 == b.dtype and SERIAL_ANYWAY_FLOPS < flops < MAX_FLOPS


def bind_matmul(xp, a, b, out=None) -> Bound | None:
    """A compiled step's ``Bound`` (``kernels.bind``): ``choose_matmul``'s choice, fixed by the avals, the
    thread count and the tuning table, run directly; None (the per-call runner) where the stack's memory
    order decides it (``order_decides``; on one thread it is ``blas`` whatever the order: T5's bias-free
    projections)."""
    if order_decides(xp, a, b):
        return None
    choice = choose_matmul(xp, a, b)
    return Bound(choice, direct(choice, {}, xp, arity=2))


def run_matmul(xp, a, b, out=None):
    """matmul by the implementation ``choose_matmul`` picks (the op's runner)."""
    choice = choose_matmul(xp, a, b)
    y = _reference(xp, a, b, out=out) if choice is _BLAS else choice.impl.run(xp, a, b, out=out)
    if MODE.get() & PROFILING:
        current_profile().chose(choice)
    return y


BINDERS = {"matmul": bind_matmul}
