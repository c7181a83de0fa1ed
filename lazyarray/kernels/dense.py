"""``nn.dense``'s implementations and the one function that chooses among them (``choose_dense``).

``ops/nn.py`` holds the reference kernel (``x @ weight.T + bias``, one ``matmul``); these compute
the same values faster for the layouts and sizes a compiled program hands them:

* ``gemv``: one row written into its planned buffer (batch-1 inference): BLAS's matrix-vector
  product through the transposed view, as fast as a packed copy and on one BLAS thread as on two;
* ``region``: the same with a weight of ``dense_region_min_weight_bytes`` or more and several
  threads: one compiled parallel region by blocks of units (``dense_regions.py``), each core
  keeping its share of the weight in its cache; without numba it declines and ``gemv`` runs;
* ``units_major``: several rows into a units-major planned buffer (``executor/units_major.py``):
  one BLAS call computes ``w @ x.T`` into it;
* ``stack``: an input of more than two dims into a C-ordered planned buffer, one dtype: one
  ``ndarray.dot`` over all its rows into the buffer's (rows, units) view, then the bias added in
  place (``add(matmul(x, w), b)`` of an imported transformer's projections, made one ``dense`` by
  ``graph/passes/matmul_bias.py``): half the calls and checks of ``rows``; small products on one
  BLAS thread, as ``gemm``'s, through the weight's transposed view (no packed copy to look up);
* ``rows``: an input of more than two dims: one product over all its rows (``nn.rows_matmul``);
* ``row_blocks``: a product of ``blas_threads.MIN_PARALLEL_FLOPS`` or more with several threads set: its
  rows in blocks over the pool, each on one BLAS thread (``blas_rows.py``: the values of one BLAS thread
  whatever the thread count, and a thread held back by another process costs one block's wait);
* ``gemm``: rows times the transposed weight (a packed copy where it pays, ``ops/weight_pack.py``),
  small products on one BLAS thread (``blas_threads.py``).
"""
from __future__ import annotations

import math

import numpy as np

from .. import jit, threads
from ..mode import MODE, PROFILING
from ..ops import registry
from ..ops.nn import rows_matmul
from ..ops.weight_pack import transposed
from ..tuning_table import current
from . import blas_rows, dense_regions
from .blas_threads import MIN_PARALLEL_FLOPS, SERIAL_ANYWAY_FLOPS, UNCHANGED, one_thread
from .elementwise import JIT_FLOATS, UNITS
from .elementwise_jit import add_relu_cols_in_place, add_relu_rows_in_place
from .impl import Choice, Impl
from .log import log_choice
from .profile import current as current_profile
from .runner import Bound, direct


def _biased(y, bias):
    if bias is not None:
        y += bias
    return y


def _gemv(xp, x, weight, bias, out):
    x.dot(weight.T, out=out)
    if bias is not None:  # (inline: a batch-1 layer's call is a microsecond)
        out += bias
    return out


def _region(xp, x, weight, bias, out):
    if not dense_regions.dense_row(x, weight, out):
        return None  # (declined: gemv runs)
    return _biased(out, bias)


def _blas_policy(xp, x, weight, rows: int):
    """``one_thread``'s context for a product of ``rows`` rows by ``weight`` (``_stack``'s and ``_gemm``'s
    size policy, which ``rows`` and ``units_major`` once skipped: an eager 1 MFLOP layer shared BLAS's
    two threads and took 20-40 ms a call beside busy cores against 0.15 ms on one)."""
    flops = 2.0 * rows * weight.shape[0] * weight.shape[1]
    if not isinstance(x, np.ndarray) or rows <= 1 or flops <= SERIAL_ANYWAY_FLOPS:
        return UNCHANGED
    return one_thread(flops, flops / 2 if x.dtype == np.float32 == weight.dtype else None)


def _units_major(xp, x, weight, bias, out):
    with _blas_policy(xp, x, weight, x.shape[0]):
        y = xp.matmul(x, weight.T, out=out)
    return _biased(y, bias)


def _stack(xp, x, weight, bias, out):
    k = x.shape[-1]
    rows = x.size // k if k else math.prod(x.shape[:-1])
    y = out.reshape(rows, weight.shape[0])  # (a view: out is C-ordered)
    flops = 2.0 * rows * weight.shape[0] * k  # (small products on one BLAS thread, as gemm's)
    serial = one_thread(flops, flops / 2 if x.dtype == np.float32 else None) \
        if rows > 1 and flops > SERIAL_ANYWAY_FLOPS else UNCHANGED
    if serial is UNCHANGED:  # (a non-contiguous x: reshape copies it, the product is the same)
        x.reshape(rows, k).dot(weight.T, out=y)  # (a lean product: the view, ``_bound_stack``)
    elif flops >= MIN_PARALLEL_FLOPS:  # (BLAS's threads, behind the contention guard: blas_guard.py)
        with serial:
            x.reshape(rows, k).dot(weight.T, out=y)  # (the same call as left alone)
    else:
        with serial:
            x.reshape(rows, k).dot(transposed(weight, rows), out=y)
    if bias is not None:
        np.add(y, bias, out=y)
    return out


def _rows(xp, x, weight, bias, out):
    rows = math.prod(x.shape[:-1])
    with _blas_policy(xp, x, weight, rows):
        y = rows_matmul(xp, x, transposed(weight, rows), out)
    return _biased(y, bias)


def _row_blocks(xp, x, weight, bias, out):
    k, units = x.shape[-1], weight.shape[0]
    rows = math.prod(x.shape[:-1])
    y = blas_rows.multiply(x.reshape(rows, k), transposed(weight, rows),
                           None if out is None else out.reshape(rows, units))
    if bias is not None:
        np.add(y, bias, out=y)
    return out if out is not None else y.reshape(x.shape[:-1] + (units,))


def _takes_row_blocks(x, weight, out) -> bool:
    """``row_blocks``' case: NumPy operands of one floating dtype, an output to make or a C-ordered one
    of that dtype, a product ``blas_rows.applies`` takes."""
    if x.__class__ is not np.ndarray or weight.__class__ is not np.ndarray or x.ndim < 2 or weight.ndim != 2 \
            or x.dtype != weight.dtype:
        return False
    if out is not None and not (out.__class__ is np.ndarray and out.dtype == x.dtype and out.flags.c_contiguous):
        return False
    return blas_rows.applies(math.prod(x.shape[:-1]), x.shape[-1], weight.shape[0], x.dtype)


def _gemm(xp, x, weight, bias, out):
    rows = x.shape[0] if x.ndim == 2 else 1
    wt = transposed(weight, rows)  # (a packed copy where it pays: weight_pack.py)
    flops = 2.0 * rows * weight.shape[0] * weight.shape[1]  # (small products: blas_threads.py)
    # (one row: NumPy hands it to gemv, as fast on one BLAS thread as on two, so the 2.5 us switch
    # would only cost)
    serial = one_thread(flops, flops / 2 if x.dtype == np.float32 == weight.dtype else None) \
        if rows > 1 and flops > SERIAL_ANYWAY_FLOPS else UNCHANGED
    if x.__class__ is np.ndarray and weight.__class__ is np.ndarray and x.ndim == 2 \
            and x.dtype == weight.dtype and (out is None or (out.dtype == x.dtype and out.flags.carray)):
        if serial is UNCHANGED:  # (no ``with``: a batch-1 layer's call stays lean)
            y = x.dot(wt, out=out)  # the same product as matmul at half its per-call cost (0.4 vs 1 us)
        else:
            with serial:
                y = x.dot(wt, out=out)
    else:
        with serial:
            y = xp.matmul(x, wt, out=out)
    return _biased(y, bias)


GEMV = Impl("dense", "gemv", _gemv, "one row into its planned buffer: BLAS's matrix-vector product")
REGION = Impl("dense", "region", _region, "gemv's case with a weight of dense_region_min_weight_bytes or more "
              "and several threads: one compiled parallel region by blocks of units", threads=True, fallback=GEMV)
UNITS_MAJOR = Impl("dense", "units_major", _units_major, "several rows into a units-major planned buffer: "
                   "w @ x.T in one BLAS call", layout="units major")
STACK = Impl("dense", "stack", _stack, "an input of more than 2 dims into a C-ordered planned buffer: one "
              "ndarray.dot over all its rows into the buffer, the bias added in place")
ROWS = Impl("dense", "rows", _rows, "an input of more than 2 dims: one product over all its rows")
ROW_BLOCKS = Impl("dense", "row_blocks", _row_blocks, "several threads set and a floating product of "
                  "MIN_PARALLEL_FLOPS or more with rows for two blocks: row blocks over the pool, each on one "
                  "BLAS thread (the values of one BLAS thread)", threads=True)
GEMM = Impl("dense", "gemm", _gemm, "rows times the transposed weight (packed where it pays), small products "
            "on one BLAS thread")

IMPLS = (REGION, GEMV, ROW_BLOCKS, UNITS_MAJOR, STACK, ROWS, GEMM)
_CHOICES = {impl: Choice(impl) for impl in IMPLS}


def choose_dense(xp, x, weight, out, t) -> Choice:
    """What runs ``nn.dense`` of these arrays under the tuning table ``t``."""
    if out is not None and x.__class__ is np.ndarray and weight.__class__ is np.ndarray \
            and out.__class__ is np.ndarray and x.ndim == 2 and x.shape[0] == 1 \
            and x.dtype == weight.dtype == out.dtype and out.flags.carray:  # (what ndarray.dot accepts)
        return _CHOICES[REGION if weight.nbytes >= t.dense_region_min_weight_bytes else GEMV]
    if _takes_row_blocks(x, weight, out):
        return _CHOICES[ROW_BLOCKS]
    if x.ndim > 2:
        if out is not None and x.__class__ is np.ndarray and weight.__class__ is np.ndarray \
                and out.__class__ is np.ndarray and x.dtype == weight.dtype == out.dtype and out.flags.carray \
                and t.dense_stack:
            return _CHOICES[STACK]
        return _CHOICES[ROWS]
    if x.ndim == 2 and x.shape[0] > 1 and out is not None and not out.flags.c_contiguous \
            and out.T.flags.c_contiguous:  # (one row is both C- and F-ordered: a batch-1 call skips this)
        return _CHOICES[UNITS_MAJOR]
    return _CHOICES[GEMM]


def run_dense(xp, x, weight, bias=None, out=None):
    """nn.dense by the implementation ``choose_dense`` picks (the op's kernel in every call)."""
    t = current()
    choice = choose_dense(xp, x, weight, out, t)
    y = choice.impl.run(xp, x, weight, bias, out)
    if y is None:  # (declined at run time: its fallback runs)
        choice = _CHOICES[choice.impl.fallback]
        y = choice.impl.run(xp, x, weight, bias, out)
    if MODE.get() & PROFILING:
        current_profile().chose(choice)
    if t.log_kernels:
        log_choice(choice, x, weight)
    return y


def choose_for_call(xp, x, weight, bias=None, out=None) -> Choice:
    """``choose_dense`` for a call's arguments as the op takes them (``kernels.choose``)."""
    return choose_dense(xp, x, weight, out, current())


def bind_dense(xp, x, weight, bias=None, out=None) -> Bound:
    """A compiled step's ``Bound`` (``kernels.bind``): ``choose_dense``'s choice, which the step's avals,
    its output's planned layout and the tuning table fix, run directly (``gemv`` where ``region``
    declines); ``stack`` with its sizes found once (``_bound_stack``)."""
    choice = choose_dense(xp, x, weight, out, current())
    if choice.impl is STACK and bias is not None:
        return Bound(choice, _bound_stack(x, weight))
    return Bound(choice, direct(choice, _CHOICES, xp, (None,) if bias is None else (), arity=3))


def _bound_stack(x, weight):
    """``_stack`` for a step's shapes, with what they fix found once (issue #35: a small transformer's
    projections are a few microseconds of arithmetic each): the rows, the product's view of the output and
    whether BLAS is left alone (a product below ``SERIAL_ANYWAY_FLOPS``). A lean product reads the weight
    through its transposed view, as ``_stack`` does: a packed copy (``weight_pack``) saves less than its
    per-call look-up costs there (measured, float32, one thread, loaded 2-core machine: 17 x 32 @ 32 x 128
    10.7 us through the view, 9.4 on the copy, 13.1 with the look-up; 56 rows 27.1, 25.9, 29.9). The same
    calls on the same operands as ``_stack``: its values bit for bit. Another product than the bound one's
    (a serial switch to find per call) runs ``_stack`` itself."""
    k, units = x.shape[-1], weight.shape[0]
    rows = math.prod(x.shape[:-1])
    lean = not (rows > 1 and 2.0 * rows * units * k > SERIAL_ANYWAY_FLOPS)
    if not lean:
        return lambda x, weight, bias, out=None: _stack(np, x, weight, bias, out)

    def run(x, weight, bias, out=None):
        y = out.reshape(rows, units)  # (a view: out is C-ordered)
        x.reshape(rows, k).dot(weight.T, out=y)
        if bias is not None:  # (None: the product alone, for an epilogue that adds it: dense_gelu.py)
            np.add(y, bias, out=y)
        return out

    return run


BINDERS = {"dense": bind_dense}


def dense_relu(dense, relu, x, weight, bias, out):
    """``relu(dense(x, weight, bias))`` written into ``out`` in place (NumPy arrays), with ``dense``
    and ``relu`` the registry's kernels bound to NumPy: the executor's step for a dense layer whose
    relu works in place on its planned buffer (``executor/epilogue.py``). Where numba is installed,
    ``dense`` writes the product without the bias, then one compiled pass adds the bias and applies
    relu while each value is in a register (``elementwise_jit.add_relu_*_in_place``, the values of
    the two ops bit for bit): one pass over the layer's values instead of two. Elsewhere, and for
    layouts or sizes it does not take, it runs the two kernels."""
    kern = None
    if bias is not None and bias.__class__ is np.ndarray and out.__class__ is np.ndarray and out.ndim == 2 \
            and out.dtype in JIT_FLOATS and bias.dtype == out.dtype and bias.ndim == 1 \
            and (threads.num_threads() == 1 or out.nbytes < threads.MIN_PARALLEL_BYTES):
        if out.flags.c_contiguous:
            kern, mem = jit.compiled(add_relu_cols_in_place), out
        elif out.T.flags.c_contiguous:  # (a units-major value: memory (units, rows))
            kern, mem = jit.compiled(add_relu_rows_in_place), out.T
    if kern is None:
        dense(x, weight, bias, out=out)
        return relu(out, out=out)
    dense(x, weight, None, out=out)
    kern(mem, bias, *UNITS[out.dtype])
    return out


assert registry.get("dense").writes_out  # (the runner honours out= as the reference does)


RESIDUAL = "residual"  # the note of a dense step that runs its residual add too: ``dense[stack, residual]``


def dense_residual(dense, add, dense_ins: tuple, dense_out, add_ins: tuple, add_out):
    """``dense(x, weight, bias)`` into ``dense_out``, then ``add`` of that value and a residual (either
    operand order) into ``add_out`` (the dense value's buffer, the residual's or one of its own), with
    ``dense`` and ``add`` the steps' own kernels (the registry's runners or the dense layer's bound
    choice): the executor's step for a dense layer and the residual add after it
    (``executor/epilogue.py``). The two kernels run as the two steps ran them, in the same order into
    the same memory: the values bit for bit, one step instead of two. ``explain()`` names the dense
    layer's choice with the note ``residual``."""
    dense(*dense_ins, out=dense_out)
    add(*add_ins, out=add_out)
    if MODE.get() & PROFILING:
        c = choose_dense(np, dense_ins[0], dense_ins[1], dense_out, current())
        current_profile().chose(Choice(c.impl, c.notes + (RESIDUAL,)))
    return add_out
