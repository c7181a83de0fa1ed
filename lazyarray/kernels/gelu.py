"""gelu, gelu_grad and gelu_with_grad: the chunked implementation and its chooser.

``ops/norm.py`` holds the reference kernels (every pass over the whole array). Elementwise kernels
of many passes run here chunk by chunk (``chunks``): each chunk's temporaries stay in cache, chunks
over ``la.set_num_threads`` threads. Each value is the same operations either way: the same bits.
``compiled`` (gelu's erf form, NumPy float32, numba on) runs the reference's operations value by value in one
loop LLVM vectorizes, in float32 (4096 values 26 -> 3.4 us against the reference) or, where the tuning table's
``gelu_erf_float64``, in float64 rounded once (within 2.9e-7 of the exact GELU over [-8, 8], against 1.1e-6;
about twice the time): the same bits again.
"""
from __future__ import annotations

import numpy as np

from .. import jit
from ..ops import registry
from ..ops.norm import ERF32_CLAMP, ERF32_P, ERF32_Q, SQRT_HALF64, gelu_grad_values, gelu_slope, gelu_values
from ..threads import chunked
from ..tuning_table import current
from .impl import Choice, Impl
from .runner import keyword_binder, noted

# Measured (GELU on 1M float32, one thread): 16K-element chunks 3.8 ms, 64K 2.9 ms, 128K 2.75 ms
# (the per-call overhead of a few dozen ufunc calls per chunk dominates small chunks).
CHUNK_ELEMENTS = 1 << 16


def _fits(xp, arrays, out) -> bool:
    """Equally shaped NumPy operands of at least 4 chunks (not 0-d), ``out`` C-contiguous."""
    shape = arrays[-1].shape
    return bool(shape) and xp is np and arrays[-1].size >= 4 * CHUNK_ELEMENTS \
        and all(a.shape == shape for a in arrays) and (out is None or out.flags.c_contiguous)


def in_chunks(kernel, xp, *arrays, approximation="none", out=None):
    """``kernel(xp, *arrays, approximation, out)`` over contiguous chunks of the operands (``_fits``)."""
    n, shape = arrays[-1].size, arrays[-1].shape
    flat = [np.ascontiguousarray(a).reshape(-1) for a in arrays]
    res = np.empty(shape, np.result_type(*arrays)) if out is None else out
    dest = res.reshape(-1)

    def work(bounds):
        for lo, hi in bounds:
            kernel(xp, *[f[lo:hi] for f in flat], approximation=approximation, out=dest[lo:hi])

    chunked(n, CHUNK_ELEMENTS, res.nbytes, work)
    return res


def with_grad_in_chunks(xp, x, approximation="none", out=None):
    """``(gelu(x), d gelu(x) / dx)`` chunk by chunk (``gelu_slope`` of each chunk)."""
    y, d = (np.empty(x.shape, x.dtype), np.empty(x.shape, x.dtype)) if out is None else out
    flat, fy, fd = np.ascontiguousarray(x).reshape(-1), y.reshape(-1), d.reshape(-1)

    def work(bounds):
        for lo, hi in bounds:
            gelu_slope(np, flat[lo:hi], approximation, fy[lo:hi], fd[lo:hi])

    chunked(flat.size, CHUNK_ELEMENTS, 2 * y.nbytes, work)
    return y, d


GELU = Impl("gelu", "chunks", lambda xp, *a, **p: in_chunks(gelu_values, xp, *a, **p),
            "NumPy, 4 x CHUNK_ELEMENTS values or more: every pass per chunk while in cache, over the threads",
            threads=True)
GELU_GRAD = Impl("gelu_grad", "chunks", lambda xp, *a, **p: in_chunks(gelu_grad_values, xp, *a, **p),
                 "as gelu's chunks, operands of one shape", threads=True)
WITH_GRAD = Impl("gelu_with_grad", "chunks", with_grad_in_chunks, "as gelu's chunks", threads=True)
_CHOICES = {impl.op: Choice(impl) for impl in (GELU, GELU_GRAD, WITH_GRAD)}
_REFERENCE = {name: registry.get(name).kernel for name in _CHOICES}


def _with_grad_fits(xp, x) -> bool:
    return xp is np and x.ndim > 0 and x.size >= 4 * CHUNK_ELEMENTS and x.dtype.kind == "f"


def _runner(name, fits, impl):
    choice = _CHOICES[name]
    reference = _REFERENCE[name]

    def run(xp, *arrays, approximation="none", out=None):
        if not fits(xp, arrays, out):
            return reference(xp, *arrays, approximation=approximation, out=out)
        y = impl.run(xp, *arrays, approximation=approximation, out=out)
        noted(choice, *arrays)
        return y

    def choose(xp, *arrays, approximation="none", out=None) -> Choice | None:
        return choice if fits(xp, arrays, out) else None

    run.__doc__ = f"{name} in chunks where they apply (``{impl.when}``), else the reference kernel."
    return run, choose


run_gelu, choose_gelu = _runner("gelu", _fits, GELU)
run_gelu_grad, choose_gelu_grad = _runner("gelu_grad", _fits, GELU_GRAD)
run_with_grad, choose_with_grad = _runner("gelu_with_grad", lambda xp, arrays, out: _with_grad_fits(xp, arrays[0]),
                                          WITH_GRAD)


# -- gelu[compiled]: the exact (erf) GELU of float32 values in one compiled loop -------------------
# ``ops/norm.py``'s erf (``erf_rational``: x P(x^2) / Q(x^2), +-1 from +-ERF32_CLAMP on, Eigen's and XLA's float32
# rational) and GELU in its ``erf_dtype()``: [1 / sqrt(2), the clamp, 0.5, 1, P..., Q...] in float32 and in float64,
# the loop's constants (numba would compute in float64 with Python float literals): their dtype is the loop's
def _coeffs(dtype):
    k = np.array((SQRT_HALF64, ERF32_CLAMP, 0.5, 1.0) + ERF32_P + ERF32_Q, dtype)
    k.flags.writeable = False
    return k


COEFFS32, COEFFS64 = _coeffs(np.float32), _coeffs(np.float64)


@jit.tiered
def _gelu_erf_loop(x, out, k):
    """``gelu_values(np, x)`` of a flat float32 ``x`` into ``out``: the same operations in the same order per
    value, in the dtype of the constants ``k`` (``erf_dtype()``: x times k[0] is of it): x * k[0], clipped to
    +-k[1] with NaN kept, the two Horner chains, p * c / q, +-1 from the clamp on, + 1, * x, * 0.5, rounded to
    float32 once where float64, each rounded as NumPy's ufuncs round it: equal values, bit for bit. (The
    constants are read into locals first, and the division is ``np.true_divide``, not ``/``, whose zero check
    under numba's Python error model keeps LLVM from vectorizing the loop.)"""
    s, hi, half, one = k[0], k[1], k[2], k[3]
    p0, p1, p2, p3, p4 = k[4], k[5], k[6], k[7], k[8]
    q0, q1, q2, q3, q4, q5, q6 = k[9], k[10], k[11], k[12], k[13], k[14], k[15]
    lo = -hi
    for i in range(x.shape[0]):
        v = x[i]
        c = v * s
        e = hi if c > hi else c
        e = lo if e < lo else e
        c2 = e * e
        p = c2 * p0 + p1
        p = p * c2 + p2
        p = p * c2 + p3
        p = p * c2 + p4
        q = c2 * q0 + q1
        q = q * c2 + q2
        q = q * c2 + q3
        q = q * c2 + q4
        q = q * c2 + q5
        q = q * c2 + q6
        t = np.true_divide(p * e, q)
        t = one if c >= hi else t
        t = -one if c <= lo else t
        out[i] = (t + one) * v * half


def _compiled(xp, x, approximation="none", out=None):
    """gelu by ``_gelu_erf_loop`` (chunk by chunk over the threads when large), or None where compiled
    kernels are off (a program's first run: ``jit.tiered``)."""
    kern = jit.compiled(_gelu_erf_loop)
    if kern is None:
        return None
    y = np.empty(x.shape, x.dtype) if out is None else out
    k = COEFFS64 if current().gelu_erf_float64 else COEFFS32  # (``erf_dtype()``, cheaper)
    flat, dest = x.reshape(-1), y.reshape(-1)
    if flat.size < 4 * CHUNK_ELEMENTS:
        kern(flat, dest, k)
        return y

    def work(bounds):
        for lo, hi in bounds:
            kern(flat[lo:hi], dest[lo:hi], k)

    chunked(flat.size, CHUNK_ELEMENTS, y.nbytes, work)
    return y


COMPILED = Impl("gelu", "compiled", _compiled,
                "approximation='none', NumPy float32, x and out C-ordered, numba on: the reference's "
                "operations value by value in one compiled loop (chunks over the threads when large), bit for bit",
                threads=True, fallback=GELU)
_COMPILED = Choice(COMPILED)


def _compiled_fits(xp, x, approximation, out) -> bool:
    return xp is np and approximation == "none" and x.__class__ is np.ndarray and x.dtype == np.float32 \
        and x.ndim > 0 and x.flags.c_contiguous and (out is None or (out.__class__ is np.ndarray and out.dtype ==
                                                                     np.float32 and out.shape == x.shape
                                                                     and out.flags.c_contiguous)) and jit.enabled()


def choose_gelu_compiled(xp, x, approximation="none", out=None) -> Choice | None:
    """``compiled`` where it applies, else as ``choose_gelu``."""
    return _COMPILED if _compiled_fits(xp, x, approximation, out) else choose_gelu(xp, x, approximation=approximation,
                                                                                   out=out)


def run_gelu_compiled(xp, x, approximation="none", out=None):
    """gelu by ``compiled`` where it applies (and numba runs it), else as ``run_gelu``."""
    if _compiled_fits(xp, x, approximation, out):
        y = _compiled(xp, x, approximation, out)
        if y is not None:
            noted(_COMPILED, x)
            return y
    return run_gelu(xp, x, approximation=approximation, out=out)


# op name -> its implementations, runner, and chooser for a call's arguments (``kernels.choose``)
IMPLS = {"gelu": (COMPILED, GELU), "gelu_grad": (GELU_GRAD,), "gelu_with_grad": (WITH_GRAD,)}
RUNNERS = {"gelu": run_gelu_compiled, "gelu_grad": run_gelu_grad, "gelu_with_grad": run_with_grad}
CHOOSERS = {"gelu": choose_gelu_compiled, "gelu_grad": choose_gelu_grad, "gelu_with_grad": choose_with_grad}
# (their choices are fixed by a compiled step's avals and planned output: the reference bound where none applies)
# (``compiled`` declines where numba does not run: its fallback, ``chunks``, then runs)
BINDERS = {name: keyword_binder(CHOOSERS[name], {GELU: _CHOICES["gelu"]}, name, _REFERENCE[name]) for name in CHOOSERS}
