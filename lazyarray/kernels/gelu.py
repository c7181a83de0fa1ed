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


@jit.inlined
def gelu_constants(k):  # pragma: no cover  (compiled inlined by numba)
    """The loop constants of ``k`` (``COEFFS32`` / ``COEFFS64``) as locals for ``gelu_erf_value``: (scale,
    clamp, -clamp, 0.5, 1, P, Q), read once before a loop (read per value from ``k``, LLVM cannot keep them
    in registers across the loop's stores, and the loop does not vectorize)."""
    return (k[0], k[1], -k[1], k[2], k[3], (k[4], k[5], k[6], k[7], k[8]),
            (k[9], k[10], k[11], k[12], k[13], k[14], k[15]))


@jit.inlined
def gelu_erf_value(v, s, hi, lo, half, one, p, q):  # pragma: no cover  (compiled inlined by numba)
    """``gelu_values(np, v)`` of one value in the dtype of the constants (``gelu_constants``): v * s,
    clipped to +-hi with NaN kept, the two Horner chains, p * c / q, +-1 from the clamp on, + 1, * v, * 0.5,
    each rounded as NumPy's ufuncs round it. (The division is ``np.true_divide``, not ``/``, whose zero
    check under numba's Python error model keeps LLVM from vectorizing the loop.)"""
    c = v * s
    e = hi if c > hi else c
    e = lo if e < lo else e
    c2 = e * e
    pv = c2 * p[0] + p[1]
    pv = pv * c2 + p[2]
    pv = pv * c2 + p[3]
    pv = pv * c2 + p[4]
    qv = c2 * q[0] + q[1]
    qv = qv * c2 + q[2]
    qv = qv * c2 + q[3]
    qv = qv * c2 + q[4]
    qv = qv * c2 + q[5]
    qv = qv * c2 + q[6]
    t = np.true_divide(pv * e, qv)
    t = one if c >= hi else t
    t = -one if c <= lo else t
    return (t + one) * v * half


@jit.tiered
def _gelu_erf_loop(constants, value):
    """The kernel (``jit.made_with`` it, ``gelu_constants`` and ``gelu_erf_value``): ``gelu_values(np, x)``
    of a flat float32 ``x`` into ``out``, ``gelu_erf_value`` per value in the dtype of the constants ``k``
    (``erf_dtype()``: x times k[0] is of it), rounded to float32 once where float64: equal values, bit for
    bit."""
    def loop(x, out, k):  # pragma: no cover  (compiled by numba)
        s, hi, lo, half, one, p, q = constants(k)
        for i in range(x.shape[0]):
            out[i] = value(x[i], s, hi, lo, half, one, p, q)

    return loop


def _compiled(xp, x, approximation="none", out=None):
    """gelu by ``_gelu_erf_loop`` (chunk by chunk over the threads when large), or None where compiled
    kernels are off (a program's first run: ``jit.tiered``)."""
    kern = jit.made_with(_gelu_erf_loop, gelu_constants, gelu_erf_value)
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


def choose_gelu_compiled(xp, x, approximation="none", out=None) -> Choice | None:
    """``compiled`` or ``compiled_tanh`` where one applies, else as ``choose_gelu``."""
    c = _compiled_choice(xp, x, approximation, out)
    return c if c is not None else choose_gelu(xp, x, approximation=approximation, out=out)


def run_gelu_compiled(xp, x, approximation="none", out=None):
    """gelu by ``compiled`` or ``compiled_tanh`` where one applies (and numba runs it), else as ``run_gelu``."""
    c = _compiled_choice(xp, x, approximation, out)
    if c is not None:
        y = c.impl.run(xp, x, approximation, out)
        if y is not None:
            noted(c, x)
            return y
    return run_gelu(xp, x, approximation=approximation, out=out)


# -- gelu[compiled_tanh]: the tanh GELU of float32 values in float64, rounded once -------------------------------
# 0.5 x (1 + tanh(u)) = x / (1 + e^(-2u)), u = sqrt(2/pi) (x + 0.044715 x^3): no cancellation anywhere (1 + tanh(u)
# near -1 is 2 e^(2u) / (1 + e^(2u))). e^z as scan_jit's unary_fast makes it, in loops LLVM vectorizes (no call into
# the C library per value): z = k ln 2 + r, |r| <= ln 2 / 2, e^r by its Taylor series to r^8 / 8! (relative error
# under 3e-10), 2^k from the bits of _ROUND + z / ln 2. Every value within 3e-10 (relative) of the exact one before
# its one rounding to float32: within 1 ulp of the exact tanh GELU (0.5 ulp but where the exact value lies within
# 3e-10 of a rounding boundary); NumPy's float32 operations (the reference) are a few ulp from it.
_LOG2E, _LN2, _ROUND = 1.4426950408889634, 0.6931471805599453, 6755399441055744.0
_EXP_MAX = 700.0  # (x / (1 + e^700) is -0 in float32 for every float32 x, as x / inf)
_SHIFT, _ONE_BITS = np.uint64(52), np.uint64(1023 << 52)
_TANH_C = float(np.sqrt(2.0 / np.pi))
_TANH_AC = 0.044715 * _TANH_C


def _gelu_tanh_loop(x, out):
    """The tanh GELU of a flat float32 ``x`` into ``out`` (see above); NaN stays NaN, +-inf give
    +inf and NaN as NumPy's operations do (0.5 * -inf * (1 + -1))."""
    n = x.shape[0]
    vals = np.empty(n, np.float64)
    scales = np.empty(n, np.float64)
    bits = scales.view(np.uint64)
    for i in range(n):
        v = np.float64(x[i])
        z = -2.0 * (v * (_TANH_C + _TANH_AC * (v * v)))
        z = z if z < _EXP_MAX else _EXP_MAX  # (NaN: clamped, x itself keeps it NaN)
        z = z if z > -_EXP_MAX else -_EXP_MAX
        t = _ROUND + z * _LOG2E  # (k = round(z / ln 2) in its low bits)
        k = t - _ROUND
        r = z - k * _LN2
        r2 = r * r
        r4 = r2 * r2  # (Estrin's scheme: a short chain of dependent operations)
        vals[i] = ((1.0 + r) + r2 * (0.5 + r * (1 / 6))) + r4 * (((1 / 24) + r * (1 / 120)) + r2 * (
            (1 / 720 + r * (1 / 5040)) + r2 * (1 / 40320)))
        scales[i] = t
    for i in range(n):  # (2^k from t's bits in integer ops that vectorize: no float-to-int conversion)
        bits[i] = (bits[i] << _SHIFT) + _ONE_BITS
    for i in range(n):
        v = np.float64(x[i])
        y = np.true_divide(v, 1.0 + vals[i] * scales[i])  # (not /: its zero check keeps the loop scalar)
        out[i] = y if v > -np.inf else v * 0.0  # (-inf: NaN, as the reference's -inf * 0)


def _compiled_tanh(xp, x, approximation="tanh", out=None):
    """gelu's tanh form by ``_gelu_tanh_loop`` (chunk by chunk over the threads when large), or None where
    numba does not run."""
    kern = jit.compiled(_gelu_tanh_loop)
    if kern is None:
        return None
    y = np.empty(x.shape, x.dtype) if out is None else out
    flat, dest = x.reshape(-1), y.reshape(-1)
    if flat.size < 4 * CHUNK_ELEMENTS:
        kern(flat, dest)
        return y

    def work(bounds):
        for lo, hi in bounds:
            kern(flat[lo:hi], dest[lo:hi])

    chunked(flat.size, CHUNK_ELEMENTS, y.nbytes, work)
    return y


COMPILED_TANH = Impl("gelu", "compiled_tanh", _compiled_tanh,
                     "approximation='tanh', NumPy float32, x and out C-ordered, numba on, the tuning table's "
                     "gelu_tanh_compiled: x / (1 + e^(-2u)) in float64 in one compiled loop, rounded once (within 1 "
                     "ulp of the exact tanh GELU; not the reference's float32 bits)", threads=True, fallback=GELU)
_COMPILED_TANH = Choice(COMPILED_TANH)


def _float32_flat(xp, x, out) -> bool:
    return xp is np and x.__class__ is np.ndarray and x.dtype == np.float32 and x.ndim > 0 \
        and x.flags.c_contiguous and (out is None or (out.__class__ is np.ndarray and out.dtype == np.float32
                                                       and out.shape == x.shape and out.flags.c_contiguous))


def _compiled_choice(xp, x, approximation, out) -> Choice | None:
    """``compiled`` or ``compiled_tanh`` where one applies (numba on), else None."""
    if not _float32_flat(xp, x, out) or not jit.enabled():
        return None
    if approximation == "none":
        return _COMPILED
    return _COMPILED_TANH if approximation == "tanh" and current().gelu_tanh_compiled else None


# op name -> its implementations, runner, and chooser for a call's arguments (``kernels.choose``)
IMPLS = {"gelu": (COMPILED, COMPILED_TANH, GELU), "gelu_grad": (GELU_GRAD,), "gelu_with_grad": (WITH_GRAD,)}
RUNNERS = {"gelu": run_gelu_compiled, "gelu_grad": run_gelu_grad, "gelu_with_grad": run_with_grad}
CHOOSERS = {"gelu": choose_gelu_compiled, "gelu_grad": choose_gelu_grad, "gelu_with_grad": choose_with_grad}
# (their choices are fixed by a compiled step's avals and planned output: the reference bound where none applies)
# (``compiled`` declines where numba does not run: its fallback, ``chunks``, then runs)
BINDERS = {name: keyword_binder(CHOOSERS[name], {GELU: _CHOICES["gelu"]}, name, _REFERENCE[name]) for name in CHOOSERS}
