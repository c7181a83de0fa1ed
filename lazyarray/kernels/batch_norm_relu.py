"""``nn.batch_norm_relu``'s implementations (``ops/batch_norm_relu.py``: an inference batch norm and
its relu, one op made by the inference pass ``graph/passes/batch_norm_relu.py``) and its chooser.

``compiled``: one numba pass (float32/float64 NumPy arrays, the statistics of x's dtype, numba on):
per channel the scale ``gamma / sqrt(var + eps)`` and shift ``beta - mean * scale`` rounded as
``batch_norm`` computes them (the same scalar operations in the same dtype), then each value's
``x * scale``, ``+ shift`` and ``maximum(., 0)`` (NumPy's rules: a NaN stays, -0.0 becomes 0.0), so
the values are the recorded ops' bit for bit; the values are walked in their memory order, so an
array stored batch last (``executor/batch_last.py``) or channels last runs as it is, written straight
into the planned buffer when that has x's memory order. ``ufuncs``, the reference's NumPy calls
(the batch norm's multiply and add, then the relu in place), elsewhere and where ``compiled``
declines at run time (a first run of a compiled program: ``jit.tiered``; an out of another order).
"""
from __future__ import annotations

import functools
import math

import numpy as np

from .. import jit
from ..mode import MODE, PROFILING
from ..ops.batch_norm_relu import batch_norm_relu_kernel
from ..ops.elementwise import memory_order
from ..tuning_table import current
from .impl import ANY_ORDER, Choice, Impl
from .pool_jit import overlap
from .runner import fixed_binder, noted

FLOATS = (np.dtype(np.float32), np.dtype(np.float64))


@jit.tiered
def _norm_relu(x, out, gamma, beta, mean, var, eps, zero):  # pragma: no cover  (compiled by numba)
    """x, out (P, C, Q): per channel c the scale and shift, then ``maximum(x * scale + shift, 0)`` op
    by op into out (which may be x)."""
    for c in range(x.shape[1]):
        s = gamma[c] / np.sqrt(var[c] + eps)
        t = beta[c] - mean[c] * s
        for p in range(x.shape[0]):
            src = x[p, c]
            dst = out[p, c]
            for q in range(src.shape[0]):
                u = src[q] * s
                u = u + t
                dst[q] = u if (u > zero) | (u != u) else zero


def _same_place(a, b) -> bool:
    return a.__array_interface__["data"][0] == b.__array_interface__["data"][0] and a.strides == b.strides


def _as_rows(a, order, k):
    """``a`` (stored in ``order``) as (P, C, Q): the axes before the channel's in memory, it, the rest."""
    m = a if order is None else a.transpose(order)
    s = m.shape
    return m.reshape(math.prod(s[:k]), s[k], math.prod(s[k + 1:]))


@functools.lru_cache(maxsize=64)
def _scalars(dtype, eps: float) -> tuple:
    """The compiled pass's eps and zero in ``dtype`` (made once per dtype and eps)."""
    return dtype.type(eps), dtype.type(0)


def _stats_fit(x, gamma, beta, mean, var) -> bool:
    """Whether the statistics are 1-D NumPy arrays of x's dtype."""
    d = x.dtype
    return gamma.__class__ is beta.__class__ is mean.__class__ is var.__class__ is np.ndarray \
        and gamma.dtype == d and beta.dtype == d and mean.dtype == d and var.dtype == d \
        and gamma.ndim == beta.ndim == mean.ndim == var.ndim == 1


def _compiled(xp, x, gamma, beta, mean, var, eps, axis, out):
    """One compiled pass; None where it does not apply (the caller runs ``ufuncs``)."""
    if xp is not np or x.__class__ is not np.ndarray or x.dtype not in FLOATS or x.ndim == 0 \
            or not _stats_fit(x, gamma, beta, mean, var):
        return None
    kern = jit.compiled(_norm_relu)
    if kern is None:
        return None
    ax = axis % x.ndim
    if x.flags.c_contiguous and (out is None or out.flags.c_contiguous):
        order, k = None, ax
    else:
        order = memory_order(x)
        if order is None:
            return None
        k = order.index(ax)
    if out is None:
        out = np.empty_like(x, order="K") if order is not None else np.empty(x.shape, x.dtype)
    elif out.__class__ is not np.ndarray or out.dtype != x.dtype or out.shape != x.shape:
        return None
    elif out is not x and np.may_share_memory(out, x) and not _same_place(out, x) and overlap(out, x):
        return None  # (a partial overlap: NumPy's ufuncs buffer such operands)
    if order is not None and not out.transpose(order).flags.c_contiguous:
        return None  # (an out stored in another order)
    kern(_as_rows(x, order, k), _as_rows(out, order, k), gamma, beta, mean, var, *_scalars(x.dtype, eps))
    return out


def _ufuncs(xp, x, gamma, beta, mean, var, eps, axis, out):
    return batch_norm_relu_kernel(xp, x, gamma, beta, mean, var, eps, axis, out=out)


UFUNCS = Impl("batch_norm_relu", "ufuncs", _ufuncs, "any: the batch norm's multiply and add, then the relu in "
              "place (the reference's NumPy calls)", layout=ANY_ORDER)
COMPILED = Impl("batch_norm_relu", "compiled", _compiled, "float32/float64 NumPy arrays, statistics of x's dtype, "
                "numba on: scale, shift and relu in one compiled pass in x's memory order", layout=ANY_ORDER,
                fallback=UFUNCS)
_CHOICES = {impl: Choice(impl) for impl in (COMPILED, UFUNCS)}


def _compiles(xp, x) -> bool:
    return xp is np and x.__class__ is np.ndarray and x.dtype in FLOATS and jit.enabled()


def choose_batch_norm_relu(xp, x, *stats, eps=1e-5, axis=1, out=None) -> Choice:
    """What runs batch_norm_relu of ``x``."""
    return _CHOICES[COMPILED if _compiles(xp, x) else UFUNCS]


def run_batch_norm_relu(xp, x, gamma, beta, mean, var, eps=1e-5, axis=1, out=None):
    """batch_norm_relu by the implementation ``choose_batch_norm_relu`` picks (``ufuncs`` where
    ``compiled`` declines); the op's kernel in every call."""
    args = (xp, x, gamma, beta, mean, var, eps, axis, out)
    y = _compiled(*args) if _compiles(xp, x) else None
    choice = _CHOICES[COMPILED]
    if y is None:
        y, choice = _ufuncs(*args), _CHOICES[UFUNCS]
    if MODE.get() & PROFILING or current().log_kernels:
        noted(choice, x)
    return y


# op name -> its implementations, runner, chooser and binder (``kernels.choose``, ``kernels.bind``)
IMPLS = {"batch_norm_relu": (COMPILED, UFUNCS)}
RUNNERS = {"batch_norm_relu": run_batch_norm_relu}
CHOOSERS = {"batch_norm_relu": choose_batch_norm_relu}
BINDERS = {"batch_norm_relu": fixed_binder(choose_batch_norm_relu, _CHOICES, ("eps", "axis"))}
