"""``nn.squeeze_excite``'s implementations (``ops/squeeze_excite.py``: a squeeze-excitation block, one op
made by the inference pass ``graph/passes/squeeze_excite.py``) and its chooser.

``compiled`` (issue #35: MobileNetV3's gates were four steps of a few dozen values each at batch 1):
one numba pass per image over float32/float64 NumPy arrays of one dtype, x and the output C-ordered
(N, C, H, W), numba on, H * W at most two of NumPy's pairwise blocks (``pairwise_sum.BLOCK``: a
16 x 16 image; a split NumPy's ``add.reduce`` makes as two blocks). Each channel's mean is
``np.mean``'s bit for bit (the pairwise row sum ``mean[compiled]`` compiles, divided in float64 and
rounded once); the bias add, relu, hardsigmoid and the product with x round op by op as the recorded
ops do. The two 1 x 1 convolutions are dot products summed in channel order, where the recorded
graph's ``conv2d[pointwise]`` sums in BLAS's order: the gate agrees with the reference within float
rounding (about ``(C + R) * eps`` relative to the sums of the products' magnitudes; tested rtol 1e-5
float32, 1e-12 float64), not bit for bit. ``ordered`` gives ``compiled``'s values bit for bit with NumPy
calls (the terms of each dot product added in channel order, over the batch at once): it runs where
``compiled`` declines at run time, so the kernel is ``jit.tiered`` (a program's first run neither loads
nor compiles it, and every call gives the same values). Written into the planned buffer, x's own
included (each image's means are taken before its values are scaled). ``reference``, the op's kernel
(the recorded ops' kernels in turn), elsewhere (numba off, other arrays).
"""
from __future__ import annotations

import functools

import numpy as np

from .. import jit
from ..ops.squeeze_excite import squeeze_excite_kernel
from .impl import Choice, Impl
from .pairwise_sum import BLOCK, with_row_sum
from .runner import Bound, direct, ran

FLOATS = (np.dtype(np.float32), np.dtype(np.float64))


@jit.tiered
def _squeeze_excite_with(row_sum, squares_sum):
    """The compiled pass of ``compiled``, calling the compiled ``row_sum`` (``pairwise_sum.py``)."""
    def squeeze_excite(x, w1, b1, w2, b2, out, split, divisor, alpha, beta, zero, one):
        """x, out (N, C, P): per image the channels' means (one pairwise block, or two where ``split``),
        the squeeze ``relu(w1 @ s + b1)``, the gate ``hardsigmoid(w2 @ h + b2)``, then ``out = x * gate``
        (into x itself by a loop over one array: with x and out both, the two pointers' overlap test
        failed and the product ran scalar, a fifth of the pass at batch 8)."""
        s = np.empty(x.shape[1], x.dtype)
        h = np.empty(w1.shape[0], x.dtype)
        same = x.ctypes.data == out.ctypes.data  # (into x itself; else out and x share no memory)
        for img in range(x.shape[0]):
            for c in range(x.shape[1]):
                row = x[img, c]
                t = row_sum(row, zero) if split == 0 else zero + (row_sum(row[:split], zero)
                                                                  + row_sum(row[split:], zero))
                s[c] = t / divisor
            for r in range(w1.shape[0]):
                acc = zero
                for c in range(x.shape[1]):
                    acc += w1[r, c, 0, 0] * s[c]
                u = acc + b1[r]
                h[r] = u if (u > zero) | (u != u) else zero
            for c in range(x.shape[1]):
                acc = zero
                for r in range(w1.shape[0]):
                    acc += w2[c, r, 0, 0] * h[r]
                t = (acc + b2[c]) * alpha
                t = t + beta
                t = one if t > one else t  # (NumPy's minimum / maximum: a NaN stays, -0.0 stays)
                g = zero if t < zero else t
                dst = out[img, c]
                if same:  # (one array read and written: a loop LLVM vectorizes without a runtime overlap test)
                    for q in range(dst.shape[0]):
                        dst[q] = dst[q] * g
                else:
                    src = x[img, c]
                    for q in range(src.shape[0]):
                        dst[q] = src[q] * g

    return squeeze_excite


@functools.lru_cache(maxsize=64)
def _plan(p: int, dtype, alpha: float, beta: float):
    """``(split, divisor, alpha, beta, zero, one)`` for rows of ``p`` values in ``dtype``: ``split`` 0 for one
    pairwise block, else where NumPy's pairwise sum splits a row of two blocks; None where a row is empty
    or more than two blocks."""
    split = 0
    if p > BLOCK:
        split = p // 2 - (p // 2) % 8
        if p - split > BLOCK:
            return None
    if p == 0:
        return None
    t = dtype.type
    return split, np.float64(p), t(alpha), t(beta), t(0), t(1)


def _arrays_fit(x, w1, b1, w2, b2) -> bool:
    """Whether every array is a NumPy array of x's float dtype, x 4-D and C-ordered."""
    d = x.dtype
    return x.__class__ is w1.__class__ is b1.__class__ is w2.__class__ is b2.__class__ is np.ndarray \
        and d in FLOATS and w1.dtype == d and b1.dtype == d and w2.dtype == d and b2.dtype == d \
        and x.ndim == 4 and x.flags.c_contiguous


def _compiled(xp, x, w1, b1, w2, b2, alpha, beta, out):
    """One compiled pass; None where it does not apply (the caller runs ``reference``)."""
    if xp is not np or not _arrays_fit(x, w1, b1, w2, b2):
        return None
    n, c, hh, ww = x.shape
    plan = _plan(hh * ww, x.dtype, alpha, beta)
    kern = None if plan is None else with_row_sum(_squeeze_excite_with)
    if kern is None:
        return None
    if out is None:
        out = np.empty(x.shape, x.dtype)
    elif out.__class__ is not np.ndarray or out.dtype != x.dtype or out.shape != x.shape \
            or not out.flags.c_contiguous or (out is not x and np.may_share_memory(out, x)):
        return None
    kern(x.reshape(n, c, hh * ww), w1, b1, w2, b2, out.reshape(n, c, hh * ww), *plan)
    return out


def _ordered(xp, x, w1, b1, w2, b2, alpha, beta, out):
    """``compiled``'s values bit for bit with NumPy calls (a compiled program's first run, where the tiered
    kernel is not loaded: ``jit.tiered``): ``np.mean``, then each dot product's terms added in channel order
    over the batch, the bias, relu and hardsigmoid as the compiled pass rounds them, the product. None where
    the arrays do not fit (the caller runs ``reference``)."""
    if xp is not np or not _arrays_fit(x, w1, b1, w2, b2) or x.shape[2] * x.shape[3] == 0:
        return None
    t = x.dtype.type
    zero, one, alpha, beta = t(0), t(1), t(alpha), t(beta)
    s = np.mean(x, axis=(2, 3))
    acc = np.zeros((x.shape[0], w1.shape[0]), x.dtype)
    for c in range(x.shape[1]):
        acc = acc + w1[:, c, 0, 0] * s[:, c:c + 1]
    u = acc + b1
    h = np.where((u > zero) | (u != u), u, zero)
    acc = np.zeros(s.shape, x.dtype)
    for r in range(w1.shape[0]):
        acc = acc + w2[:, r, 0, 0] * h[:, r:r + 1]
    g = (acc + b2) * alpha
    g = g + beta
    g = np.where(g > one, one, g)
    g = np.where(g < zero, zero, g)
    return np.multiply(x, g[:, :, None, None], out=out)


def _reference(xp, x, w1, b1, w2, b2, alpha, beta, out):
    return squeeze_excite_kernel(xp, x, w1, b1, w2, b2, alpha, beta, out=out)


REFERENCE = Impl("squeeze_excite", "reference", _reference, "any: the recorded ops' kernels in turn (np.mean, "
                 "two 1x1 convolutions with their relu and hardsigmoid, multiply)")
ORDERED = Impl("squeeze_excite", "ordered", _ordered, "compiled's case where its kernel is not loaded (a program's "
               "first run): its values bit for bit by NumPy calls, the dot products' terms added in channel order",
               fallback=REFERENCE)
COMPILED = Impl("squeeze_excite", "compiled", _compiled, "float32/float64 NumPy arrays of one dtype, x C-ordered, "
                "H * W up to two pairwise blocks (256 values), numba on: means, both 1x1 layers and the product "
                "in one compiled pass per image (the gate within float rounding of the reference)",
                fallback=ORDERED)
_CHOICES = {impl: Choice(impl) for impl in (COMPILED, ORDERED, REFERENCE)}


def choose_squeeze_excite(xp, x, w1, b1, w2, b2, alpha=0.2, beta=0.5, out=None) -> Choice:
    """What runs squeeze_excite of these arrays."""
    fits = xp is np and jit.enabled() and _arrays_fit(x, w1, b1, w2, b2) \
        and _plan(x.shape[2] * x.shape[3], x.dtype, alpha, beta) is not None
    return _CHOICES[COMPILED if fits else REFERENCE]


def run_squeeze_excite(xp, x, w1, b1, w2, b2, alpha=0.2, beta=0.5, out=None):
    """squeeze_excite by the implementation ``choose_squeeze_excite`` picks (``reference`` where
    ``compiled`` declines); the op's kernel in every call."""
    choice = choose_squeeze_excite(xp, x, w1, b1, w2, b2, alpha, beta)
    args = (xp, x, w1, b1, w2, b2, alpha, beta, out)
    return ran(choice, choice.impl.run(*args), _CHOICES, args, (x,))


def _bound_in_place(x, alpha, beta, generic):
    """A compiled step's call of ``compiled``'s pass into x itself (the planned buffer MobileNetV3's
    blocks get) with what the step's avals fix fetched once (the kernel, the plan, the flat shape):
    ``fn(x, w1, b1, w2, b2, out=)`` checks only that ``out`` is x and x a C-ordered NumPy array, and
    takes any other call to ``generic`` (issue #35: at batch 1 the per-call checks cost four times the
    pass). None where the pass does not run (its plan None, numba off, a program's first run)."""
    n, c, hh, ww = x.shape
    plan = _plan(hh * ww, x.dtype, alpha, beta)
    kern = None if plan is None else with_row_sum(_squeeze_excite_with)
    if kern is None:
        return None
    flat = (n, c, hh * ww)

    def fn(x, w1, b1, w2, b2, out=None):
        if out is not x or x.__class__ is not np.ndarray or not x.flags.c_contiguous:
            return generic(x, w1, b1, w2, b2, out=out)
        rows = x.reshape(flat)
        kern(rows, w1, b1, w2, b2, rows, *plan)
        return out

    return fn


def bind_squeeze_excite(xp, x, w1, b1, w2, b2, out=None, alpha=0.2, beta=0.5) -> Bound:
    """A compiled step's ``Bound``: ``choose_squeeze_excite``'s choice (fixed by the step's avals, memory
    orders and tuning table) with its run bound; ``compiled`` into x itself by ``_bound_in_place``."""
    choice = choose_squeeze_excite(xp, x, w1, b1, w2, b2, alpha, beta, out)
    generic = direct(choice, _CHOICES, xp, (alpha, beta), arity=5)
    fast = _bound_in_place(x, alpha, beta, generic) if choice.impl is COMPILED else None
    return Bound(choice, fast or generic)


# op name -> its implementations, runner, chooser and binder (``kernels.choose``, ``kernels.bind``)
IMPLS = {"squeeze_excite": (COMPILED, ORDERED, REFERENCE)}
RUNNERS = {"squeeze_excite": run_squeeze_excite}
CHOOSERS = {"squeeze_excite": choose_squeeze_excite}
BINDERS = {"squeeze_excite": bind_squeeze_excite}
