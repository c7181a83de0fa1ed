"""``nn.layer_scale_residual``'s implementations (``ops/layer_scale.py``: ConvNeXt's ``r + transpose(gamma * y)``,
one op made by the inference pass ``graph/passes/layer_scale.py``) and its chooser.

``compiled`` (float32 / float64 NumPy arrays of one dtype, a 4-D ``y`` permuted by (0, 3, 1, 2), a 1-D ``gamma``
per channel, ``r`` and ``out`` of the output's shape, ``out`` sharing no memory with ``y``, numba on): one loop
over the output, each element ``r + gamma[c] * y[n, h, w, c]``, the product rounded to the dtype before the sum
as the recorded multiply and add round them: bit for bit, one pass instead of a multiply writing a
channels-last value and an add reading it through a transposed view (measured, one thread, float32: ConvNeXt's
[1, 16, 8, 8] 7.5 -> 2.6 us, [8, 32, 4, 4] 12.1 -> 6.9 us). Any input layout (views: numba reads their strides).
``reference``, the op's kernel (the recorded ufuncs), elsewhere.
"""
from __future__ import annotations

import numpy as np

from .. import jit
from ..ops.layer_scale import layer_scale_residual_kernel
from ..tuning_table import current
from .impl import Choice, Impl
from .runner import Bound, fixed_binder, ran

NCHW_OF_NHWC = (0, 3, 1, 2)  # (the permutation ``compiled`` takes: channels-last back to NCHW)


@jit.tiered
def _scale_add_nhwc(y, gamma, r, out):  # pragma: no cover  (compiled by numba)
    """``out[n, c, h, w] = r[n, c, h, w] + gamma[c] * y[n, h, w, c]``, two roundings per element as the ufuncs'."""
    for n in range(out.shape[0]):
        for c in range(out.shape[1]):
            g = gamma[c]
            for h in range(out.shape[2]):
                for w in range(out.shape[3]):
                    out[n, c, h, w] = r[n, c, h, w] + g * y[n, h, w, c]


def _fits(xp, y, gamma, r, axes, out) -> bool:
    """Whether ``compiled`` takes these arrays (numba aside)."""
    if xp is not np or y.__class__ is not np.ndarray or gamma.__class__ is not np.ndarray \
            or r.__class__ is not np.ndarray or tuple(axes) != NCHW_OF_NHWC or y.ndim != 4:
        return False
    d = y.dtype
    n, h, w, c = y.shape
    if d not in (np.float32, np.float64) or gamma.dtype != d or r.dtype != d or gamma.shape != (c,) \
            or r.shape != (n, c, h, w):
        return False
    return out is None or (out.__class__ is np.ndarray and out.dtype == d and out.shape == r.shape
                           and not np.may_share_memory(out, y))


def _compiled(xp, y, gamma, r, axes=NCHW_OF_NHWC, out=None):
    """The compiled loop into ``out`` (made where None); None where it does not apply (the reference runs)."""
    if not _fits(xp, y, gamma, r, axes, out):
        return None
    kern = jit.compiled(_scale_add_nhwc)
    if kern is None:
        return None
    if out is None:
        out = np.empty(r.shape, r.dtype)
    if out.size:
        kern(y, gamma, r, out)
    return out


def _reference(xp, y, gamma, r, axes=NCHW_OF_NHWC, out=None):
    return layer_scale_residual_kernel(xp, y, gamma, r, axes=axes, out=out)


REFERENCE = Impl("layer_scale_residual", "reference", _reference, "any: the recorded ops (multiply, transpose, add)")
COMPILED = Impl("layer_scale_residual", "compiled", _compiled,
                "NumPy float32/float64 of one dtype, y 4-D permuted by (0, 3, 1, 2), gamma per channel, out not "
                "overlapping y, numba on: one loop, each element r + gamma * y rounded as the two ufuncs round it",
                fallback=REFERENCE)
_CHOICES = {impl: Choice(impl) for impl in (COMPILED, REFERENCE)}


def choose_layer_scale_residual(xp, y, gamma, r, axes=NCHW_OF_NHWC, out=None) -> Choice:
    """What runs layer_scale_residual of these arrays (tuning ``layer_scale_compiled``)."""
    fits = current().layer_scale_compiled and jit.enabled() and _fits(xp, y, gamma, r, axes, out)
    return _CHOICES[COMPILED if fits else REFERENCE]


def run_layer_scale_residual(xp, y, gamma, r, axes=NCHW_OF_NHWC, out=None):
    """layer_scale_residual by the implementation ``choose_layer_scale_residual`` picks (``reference`` where
    ``compiled`` declines); the op's kernel in every call."""
    choice = choose_layer_scale_residual(xp, y, gamma, r, axes, out)
    args = (xp, y, gamma, r, axes, out)
    return ran(choice, choice.impl.run(*args), _CHOICES, args, (y, r))


def bind_layer_scale_residual(xp, y, gamma, r, out=None, axes=NCHW_OF_NHWC) -> Bound:
    """The compiled step's binding: the choice made once for the step's arrays (its avals, memory orders and
    planned output, which shares no memory with ``y`` in any buffer set where it shares none in this one, are
    fixed); ``compiled`` then runs with only numba looked up per call (``jit.tiered``: None in a program's first
    run, where the reference runs), not ``_fits``' checks (3.6 of a 7.6 us call at ConvNeXt's batch 1)."""
    choice = choose_layer_scale_residual(xp, y, gamma, r, axes, out)
    if choice.impl is not COMPILED or out is None:
        return _BIND_FIXED(xp, y, gamma, r, out=out, axes=axes)

    def fn(y, gamma, r, out=None):
        kern = jit.compiled(_scale_add_nhwc)
        if kern is None or out is None:
            return _reference(np, y, gamma, r, axes, out)
        kern(y, gamma, r, out)
        return out

    return Bound(choice, fn)


_BIND_FIXED = fixed_binder(choose_layer_scale_residual, _CHOICES, ("axes",))

# op name -> its implementations, runner, chooser and binder (``kernels.choose``, ``kernels.bind``)
IMPLS = {"layer_scale_residual": (COMPILED, REFERENCE)}
RUNNERS = {"layer_scale_residual": run_layer_scale_residual}
CHOOSERS = {"layer_scale_residual": choose_layer_scale_residual}
BINDERS = {"layer_scale_residual": bind_layer_scale_residual}
