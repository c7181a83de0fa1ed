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

An x whose images are C-ordered blocks at a larger batch stride (a batch's channel concatenation
written in place, ``executor/concat_in_place.py``) runs ``compiled`` as its (N, C, H*W) rows: a view,
the values a C-ordered copy would give. A compiled step binds ``compiled`` once (``bind``): the
kernel, its scalars and the rows' shapes made at binding, each call checking only what a planned
buffer or another input could change (x's and out's dtype, shape and strides as bound, the
statistics', out not partly over x); any other call runs the generic binding. (DenseNet at batch 1:
its eight batch norms' per-call checks and reshapes cost about four times their 5 us passes.)
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
from .covering_view import covering
from .impl import ANY_ORDER, Choice, Impl
from .pool_jit import overlap
from .runner import Bound, direct, noted

FLOATS = (np.dtype(np.float32), np.dtype(np.float64))


@jit.tiered
def _norm_relu(x, out, gamma, beta, mean, var, eps, zero):  # pragma: no cover  (compiled by numba)
    """x, out (P, C, Q): per channel c the scale and shift, then ``maximum(x * scale + shift, 0)`` op
    by op into out (which may be x). The channels are gamma's: x may be a covering view with more
    (``_rows``), whose channels past gamma's are never read."""
    for c in range(gamma.shape[0]):
        s = gamma[c] / np.sqrt(var[c] + eps)
        t = beta[c] - mean[c] * s
        for p in range(x.shape[0]):
            src = x[p, c]
            dst = out[p, c]
            for q in range(src.shape[0]):
                u = src[q] * s
                u = u + t
                dst[q] = u if (u > zero) | (u != u) else zero


def _images_c(a, ax: int) -> bool:
    """Whether ``a`` (channels on axis 1, ``ax``) is a batch of C-ordered images at a larger batch
    stride: ``a[0]`` C-ordered, its rows ``a.reshape(N, C, rest)`` then a view."""
    return ax == 1 and a.ndim >= 3 and a.shape[0] > 1 and a.size > 0 and a[0].flags.c_contiguous \
        and a.strides[0] >= a[0].nbytes


def _rows(x):
    """x (N, C, ...) whose images are C-ordered blocks at a batch stride as C-ordered (N, C', Q) rows
    whose ``[:, :C]`` are x's (``covering_view.covering``: numba's loads from an "any" layout array ran
    3.5x slower, 8 x 12 x 16 x 16 floats 131 against 38 us); x's (N, C, Q) rows where no such view is."""
    c = covering(x) if x.ndim == 4 else None
    if c is None:
        return _as_rows(x, None, 1)
    return c.reshape(c.shape[0], c.shape[1], c.shape[2] * c.shape[3])


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
    elif _images_c(x, ax) and (out is None or out.flags.c_contiguous or _images_c(out, ax)):
        if out is None:
            out = np.empty(x.shape, x.dtype)
        elif out.__class__ is not np.ndarray or out.dtype != x.dtype or out.shape != x.shape \
                or out is not x and overlap(out, x):
            return None
        if gamma.shape[0] != x.shape[1]:
            return None
        kern(_rows(x), _as_rows(out, None, 1), gamma, beta, mean, var, *_scalars(x.dtype, eps))
        return out
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


def _rows_shape(a) -> tuple:
    return (a.shape[0], a.shape[1], math.prod(a.shape[2:]))


def _fast(x, out, stats, eps, other):
    """``compiled``'s call bound once (the module's docstring), or None where the binding's arrays do
    not take it: x C-ordered or images C-ordered at a batch stride, out C-ordered, not x's memory."""
    if out is None or out.__class__ is not np.ndarray or x.__class__ is not np.ndarray or x.ndim < 2 \
            or out.shape != x.shape or out.dtype != x.dtype or not out.flags.c_contiguous or out is x \
            or x.dtype not in FLOATS or not _stats_fit(x, *stats) \
            or not (x.flags.c_contiguous or _images_c(x, 1)):
        return None
    kern = jit.compiled(_norm_relu)
    if kern is None:
        return None
    dtype, shape, x_strides, o_strides, rows = x.dtype, x.shape, x.strides, out.strides, _rows_shape(x)
    cs, e, z = (x.shape[1],), *_scalars(x.dtype, eps)
    strided = not x.flags.c_contiguous
    seen = [None, None]  # (the x of the last strided call, its covering rows: a planned slot's view is made once)

    def fn(x, gamma, beta, mean, var, out=None):
        if out is None or x.__class__ is not np.ndarray or out.__class__ is not np.ndarray \
                or x.dtype != dtype or out.dtype != dtype or x.shape != shape or out.shape != shape \
                or x.strides != x_strides or out.strides != o_strides or overlap(out, x) \
                or not _stats_fit(x, gamma, beta, mean, var) or gamma.shape != cs or beta.shape != cs \
                or mean.shape != cs or var.shape != cs:
            return other(x, gamma, beta, mean, var, out=out)
        if strided:
            if seen[0] is not x:
                seen[0], seen[1] = x, _rows(x)
            kern(seen[1], out.reshape(rows), gamma, beta, mean, var, e, z)
        else:
            kern(x.reshape(rows), out.reshape(rows), gamma, beta, mean, var, e, z)
        return out

    return fn


def bind_batch_norm_relu(xp, x, gamma, beta, mean, var, out=None, eps=1e-5, axis=1) -> Bound:
    """A compiled step's ``Bound``: ``compiled`` made once (``_fast``) where its arrays take it, else
    the chosen implementation's run bound to the parameters (its fallback where it declines)."""
    choice = choose_batch_norm_relu(xp, x, gamma, beta, mean, var, eps=eps, axis=axis, out=out)
    fn = direct(choice, _CHOICES, xp, (eps, axis), arity=5)
    if choice.impl is COMPILED and xp is np and getattr(x, "ndim", 0) >= 2 and axis % x.ndim == 1:
        fixed = _fast(x, out, (gamma, beta, mean, var), eps, fn)
        if fixed is not None:
            return Bound(choice, fixed, scratch=False)
    return Bound(choice, fn, scratch=False)


# op name -> its implementations, runner, chooser and binder (``kernels.choose``, ``kernels.bind``)
IMPLS = {"batch_norm_relu": (COMPILED, UFUNCS)}
RUNNERS = {"batch_norm_relu": run_batch_norm_relu}
CHOOSERS = {"batch_norm_relu": choose_batch_norm_relu}
BINDERS = {"batch_norm_relu": bind_batch_norm_relu}
