"""relu and relu_grad: their implementations and choosers.

``ops/elementwise.py`` holds the reference kernels (``maximum(x, 0)``; ``g * (y > 0)`` in two
passes). Large float arrays run faster here: one compiled loop (``elementwise_jit.py``) where
numba is installed, else ``maximum`` against a zero row (NumPy's SIMD loop for two arrays), in
chunks of rows over ``la.set_num_threads`` threads when large. Every path gives ``maximum``'s
values (NaN kept, -0.0 made 0.0), bit for bit.
"""
from __future__ import annotations

import numpy as np

from .. import jit, threads
from ..caches import NamedCache
from ..mode import MODE, PROFILING
from ..ops.elementwise import memory_order, relu_grad_kernel
from ..tuning_table import current
from . import relu_step
from .elementwise_jit import RELU, RELU_GRAD, relu_4d
from .impl import ANY_ORDER, Choice, Impl
from .runner import Bound, direct, fixed_binder, noted, ran

# NumPy (2.x) runs ``maximum`` of an array and a scalar 2-3x slower than of two contiguous arrays
# (only the latter take its SIMD loop): relu of a contiguous float array compares against a
# zero row of this many elements, the array read as rows of that length (plus a shorter tail).
# Below half a row the plain call costs less than the dispatch (the zero row's or the compiled loop's:
# about 2.5 us of Python around a loop of 1 us, against 1.8 us for ``maximum`` of 2048 float32).
_ZERO_ROW = 8192
ZERO_ROW_ARRAYS = NamedCache("relu zero rows", 8)  # dtype -> a read-only row of _ZERO_ROW zeros
JIT_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))  # the dtypes relu compiles for
UNITS = {d: (d.type(0), d.type(1)) for d in JIT_FLOATS}  # (0, 1) in each: the compiled loops' constants


def _zero_row(dtype):
    row = ZERO_ROW_ARRAYS.peek(dtype)
    return row if row is not None else ZERO_ROW_ARRAYS.get_or_make(dtype, _new_zero_row, dtype)


def _new_zero_row(dtype):
    row = np.zeros(_ZERO_ROW, dtype)
    row.flags.writeable = False
    return row


def _maximum(xp, x, out):
    return xp.maximum(x, 0, out=out)


def _relu_compiled(xp, x, out):
    res = compiled_elementwise(RELU, (x,), out)  # one compiled loop where numba is installed
    if res is not None:
        return res
    kern = jit.compiled(relu_4d) if x.ndim == 4 and out is not None else None  # (two layouts: blocked)
    if kern is not None and out.shape == x.shape and out.__class__ is np.ndarray \
            and not np.may_share_memory(out, x):
        kern(x, out, UNITS[x.dtype][0])
        return out
    return None  # (declined: zero_rows runs)


def _relu_zero_rows(xp, x, out):
    order = memory_order(x)
    if order is None or (out is not None and (out.shape != x.shape or memory_order(out) != order)):
        return None  # (declined: maximum runs)
    res = np.empty_like(x) if out is None else out  # (empty_like keeps x's memory order)
    zeros, n = _zero_row(x.dtype), x.size
    flat, dst = x.transpose(order).reshape(-1), res.transpose(order).reshape(-1)
    rows = -(-n // _ZERO_ROW)
    if n % rows == 0:  # rows of equal length up to the zero row's cover x in one call
        width = n // rows
        _relu_rows(flat.reshape(rows, width), zeros[:width], dst.reshape(rows, width))
        return res
    whole = n - n % _ZERO_ROW
    if whole:
        _relu_rows(flat[:whole].reshape(-1, _ZERO_ROW), zeros, dst[:whole].reshape(-1, _ZERO_ROW))
    if whole < n:
        np.maximum(flat[whole:], zeros[:n - whole], out=dst[whole:])
    return res


# Rows per chunk when relu's rows are spread over threads (2 MB of float32): a large activation
# (ResNet-18's first stage at batch 64: 16 MB) is a pass over memory that two cores share.
_RELU_CHUNK_ROWS = 64


def _relu_rows(src, zeros, dst):
    """``maximum(src, zeros)`` row by row into ``dst``: one call, or under ``la.set_num_threads(n > 1)``
    and at least ``threads.MIN_PARALLEL_BYTES`` chunks of rows over the threads (``threads.chunked``)."""
    if threads.num_threads() == 1 or dst.nbytes < threads.MIN_PARALLEL_BYTES:
        np.maximum(src, zeros, out=dst)
        return

    def work(bounds):
        for lo, hi in bounds:
            np.maximum(src[lo:hi], zeros, out=dst[lo:hi])

    threads.chunked(src.shape[0], _RELU_CHUNK_ROWS, dst.nbytes, work)


def _relu_grad_compiled(xp, y, g, out):
    return compiled_elementwise(RELU_GRAD, (y, g), out)  # (None: declined, two_passes runs)


def compiled_elementwise(kernels, inputs, out):
    """A compiled loop (``elementwise_jit.py``) over arrays of one shape and memory order (C order
    or the executor's batch last): ``kernels[0](*flat inputs, flat result, 0, 1)`` into ``out``
    or a new array stored like the first input, ``kernels[1 + k](*flat inputs, 0, 1)`` when
    ``out`` is input k itself. None where that does not apply (numba absent or off, layouts that
    differ, an ``out`` sharing memory with an input without being that input: NumPy's ufuncs
    buffer such operands), and the caller runs its NumPy path."""
    kern = jit.compiled(kernels[0])
    if kern is None:
        return None
    first = inputs[0]
    shape = first.shape
    if out is not None and (out.shape != shape or out.__class__ is not np.ndarray):
        return None
    order = None if first.flags.c_contiguous else memory_order(first)
    if order is None and not first.flags.c_contiguous:  # (stored in no order a flat view can walk)
        return None
    for a in inputs[1:] if out is None else inputs[1:] + (out,):  # (loops: cheaper than any() here)
        if a.shape != shape or ((not a.flags.c_contiguous) if order is None else memory_order(a) != order):
            return None
    flats = [a.reshape(-1) if order is None else a.transpose(order).reshape(-1) for a in inputs]
    if out is None:
        out = np.empty_like(first)  # (keeps first's memory order)
    else:
        for k, a in enumerate(inputs):
            if out is a:  # in place: the loop that writes that input's buffer
                jit.compiled(kernels[1 + k])(*flats, *UNITS[first.dtype])
                return out
            if np.may_share_memory(out, a):
                return None
    kern(*flats, out.reshape(-1) if order is None else out.transpose(order).reshape(-1), *UNITS[first.dtype])
    return out


MAXIMUM = Impl("relu", "maximum", _maximum, "small, integer or non-NumPy arrays, or layouts no flat view walks: "
               "NumPy's maximum (the reference)")
ZERO_ROWS = Impl("relu", "zero_rows", _relu_zero_rows, "a large float array of one memory order: maximum against "
                 "a zero row (NumPy's SIMD loop), rows over the threads from threads.MIN_PARALLEL_BYTES",
                 threads=True, layout=ANY_ORDER, fallback=MAXIMUM)
COMPILED = Impl("relu", "compiled", _relu_compiled, "zero_rows' case in float32 / float64 on one thread or under "
                "threads.MIN_PARALLEL_BYTES, numba installed: one compiled loop", layout=ANY_ORDER,
                fallback=ZERO_ROWS)
RELU_IMPLS = (COMPILED, ZERO_ROWS, MAXIMUM)
GRAD_TWO_PASSES = Impl("relu_grad", "two_passes", relu_grad_kernel, "g * (y > 0) as two NumPy passes (the reference)")
GRAD_COMPILED = Impl("relu_grad", "compiled", _relu_grad_compiled, "large float32 / float64 arrays of one memory "
                     "order, numba installed: one compiled pass", fallback=GRAD_TWO_PASSES)
GRAD_IMPLS = (GRAD_COMPILED, GRAD_TWO_PASSES)
_CHOICES = {impl: Choice(impl) for impl in RELU_IMPLS + GRAD_IMPLS}
_FLAT = Choice(COMPILED, (relu_step.FLAT,))  # relu[compiled, flat]: kernels/relu_step.py


def _one_region(a) -> bool:
    """One compiled loop (numba on) rather than rows over threads: one thread set, or too few bytes
    to split."""
    return jit.enabled() and (threads.num_threads() == 1 or a.nbytes < threads.MIN_PARALLEL_BYTES)


def _small(xp, x, out) -> bool:
    """NumPy's maximum: small, integer or non-NumPy arrays, or an ``out`` of another dtype."""
    return x.size < _ZERO_ROW // 2 or xp is not np or x.dtype.kind != "f" or (out is not None and out.dtype != x.dtype)


def _large(x) -> Choice:
    if x.__class__ is np.ndarray and x.dtype in JIT_FLOATS and _one_region(x):
        return _CHOICES[COMPILED]
    return _CHOICES[ZERO_ROWS]


def choose_relu(xp, x, out=None) -> Choice:
    """What runs relu of ``x`` (into ``out``)."""
    return _CHOICES[MAXIMUM] if _small(xp, x, out) else _large(x)


def run_relu(xp, x, out=None):
    """relu by the implementation ``choose_relu`` picks (the op's kernel in every call)."""
    if _small(xp, x, out):  # (a batch-1 layer: one test, one ufunc call and the note's two reads)
        y = xp.maximum(x, 0, out=out)
        if MODE.get() & PROFILING or current().log_kernels:
            noted(_CHOICES[MAXIMUM], x)
        return y
    choice = _large(x)
    return ran(choice, choice.impl.run(xp, x, out), _CHOICES, (xp, x, out), (x,))


def choose_relu_grad(xp, y, g, out=None) -> Choice:
    """What runs relu_grad of ``y``, ``g`` (into ``out``)."""
    if xp is np and g.size >= _ZERO_ROW // 2 and g.__class__ is np.ndarray and y.__class__ is np.ndarray \
            and g.dtype in JIT_FLOATS and y.dtype == g.dtype and (out is None or out.dtype == g.dtype) \
            and _one_region(g):
        return _CHOICES[GRAD_COMPILED]
    return _CHOICES[GRAD_TWO_PASSES]


def run_relu_grad(xp, y, g, out=None):
    """relu_grad by the implementation ``choose_relu_grad`` picks."""
    choice = choose_relu_grad(xp, y, g, out)
    return ran(choice, choice.impl.run(xp, y, g, out), _CHOICES, (xp, y, g, out), (y, g))


def bind_relu(xp, x, out=None) -> Bound:
    """A compiled step's relu: ``choose_relu``'s choice bound (``runner.fixed_binder``), and where it is
    ``compiled`` of C-ordered arrays, that choice called on flat views first (``kernels/relu_step.py``)."""
    choice = choose_relu(xp, x, out)
    general = direct(choice, _CHOICES, xp, arity=1)
    if relu_step.applies(choice, COMPILED, x, out, current()):
        return relu_step.bound(_FLAT, RELU, x, general)
    return Bound(choice, general)


# op name -> its implementations, runner, and chooser for a call's arguments (``kernels.choose``)
IMPLS = {"relu": RELU_IMPLS, "relu_grad": GRAD_IMPLS}
RUNNERS = {"relu": run_relu, "relu_grad": run_relu_grad}
CHOOSERS = {"relu": choose_relu, "relu_grad": choose_relu_grad}
# (their choices are fixed by a compiled step's avals, layouts, tuning table and threads)
BINDERS = {"relu": bind_relu, "relu_grad": fixed_binder(choose_relu_grad, _CHOICES)}
