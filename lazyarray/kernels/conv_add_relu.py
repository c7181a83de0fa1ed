"""``nn.conv2d_add_relu``'s implementations (``ops/conv_add_relu.py``: a convolution, a residual added
to it and the relu of the sum, one op made by the inference pass ``graph/passes/conv_residual.py``)
and its chooser.

``write_out``: where conv2d's choice is ``blocked`` (ResNet's 3x3 layers of few filters), its compiled
loop adds the residual and takes the relu as it writes each output row (``conv_blocked``'s ``r``):
no pass over the output after the convolution. ``compiled``: the convolution by conv2d's choice,
then one compiled pass ``y = maximum(y + r, 0)`` over the output (float32/float64, both arrays
C-ordered, numba on). ``ufuncs``: the convolution by conv2d's choice, then NumPy's ``add`` and
``maximum`` in place (the reference's calls), anywhere else. Each rounds as the recorded ``conv2d``,
``add`` and ``relu`` steps round (the sums in the dtype, a NaN kept, -0.0 made +0.0 as ``relu``'s
compiled pass makes it), so the values are the unfused graph's bit for bit under the same conv2d
choice. A compiled step binds the choice once (``bind_conv2d_add_relu``).
"""
from __future__ import annotations

import functools

import numpy as np

from .. import jit
from ..mode import MODE, PROFILING
from ..ops import conv
from ..ops.elementwise import relu_kernel
from ..tuning_table import current
from .blocked_region import bound_residual, conv2d_blocked_region
from .conv2d import BLOCKED, BLOCKED_REGION, bind_conv2d, choose_conv2d, run_conv2d
from .conv_blocked import conv2d_blocked, geometry, make_blocked, plane_fits, residual_fits
from .depthwise import FLOATS
from .impl import ANY_ORDER, Choice, Impl
from .log import log_choice
from .phase_planes import with_fill
from .profile import current as current_profile
from .runner import Bound


@jit.tiered
def _add_relu_flat(y, r, zero):  # pragma: no cover  (compiled by numba)
    """``y = maximum(y + r, 0)`` in place over flat arrays, rounded as ``add`` then ``relu`` (a NaN stays)."""
    for i in range(y.shape[0]):
        u = y[i] + r[i]
        y[i] = u if (u > zero) | (u != u) else zero


@functools.lru_cache(maxsize=4)
def _zero(dtype):
    return dtype.type(0)


def _ufuncs(xp, y, r):
    xp.add(y, r, out=y)
    return relu_kernel(xp, y, out=y)


def _compiled(xp, y, r):
    ok = xp is np and y.dtype in FLOATS and r.dtype == y.dtype and r.shape == y.shape \
        and y.flags.c_contiguous and r.flags.c_contiguous
    kern = jit.compiled(_add_relu_flat) if ok else None
    if kern is None:
        return None
    kern(y.reshape(-1), r.reshape(-1), _zero(y.dtype))
    return y


UFUNCS = Impl("conv2d_add_relu", "ufuncs", _ufuncs,
              "any: the convolution by conv2d's choice, then NumPy's add and maximum in place (the reference's)",
              layout=ANY_ORDER)
COMPILED = Impl("conv2d_add_relu", "compiled", _compiled,
                "float32/float64 NumPy output and residual of one dtype, both C-ordered, numba on: the convolution "
                "by conv2d's choice, then one compiled pass y = maximum(y + residual, 0)", fallback=UFUNCS)


def _write_out(xp, x, weight, residual, bias=None, stride=(1, 1), padding=(0, 0), dilation=(1, 1), groups=1,
               out=None):
    return conv2d_blocked(xp, x, weight, bias, stride, padding, dilation, groups, out, residual)


WRITE_OUT = Impl("conv2d_add_relu", "write_out", _write_out,
                 "conv2d's choice blocked, a C-ordered residual of the output's shape and dtype, conv_residual_write_out "
                 "on: the residual added and the relu taken in blocked's write-out (no pass after it)",
                 fallback=COMPILED)


def _write_out_region(xp, x, weight, residual, bias=None, stride=(1, 1), padding=(0, 0), dilation=(1, 1), groups=1,
                      out=None):
    return conv2d_blocked_region(xp, x, weight, bias, stride, padding, dilation, groups, out, residual)


WRITE_OUT_REGION = Impl("conv2d_add_relu", "write_out_region", _write_out_region,
                        "conv2d's choice blocked_region, write_out's case: write_out's loop over the threads in one "
                        "compiled parallel region (write_out's values bit for bit; write_out while contended)",
                        threads=True, fallback=WRITE_OUT)
IMPLS = {"conv2d_add_relu": (WRITE_OUT_REGION, WRITE_OUT, COMPILED, UFUNCS)}


@functools.lru_cache(maxsize=256)
def _choice(impl: Impl, conv_choice: Choice) -> Choice:
    return Choice(impl, (conv_choice.label(),))


def _pick(xp, x, weight, residual, conv_choice: Choice, t) -> Impl:
    """The implementation given the convolution's choice (``t``: the tuning table)."""
    if not (xp is np and x.dtype in FLOATS and weight.dtype == x.dtype and residual.dtype == x.dtype
            and jit.enabled()):
        return UFUNCS
    if conv_choice.impl in (BLOCKED, BLOCKED_REGION) and t.conv_residual_write_out and residual.flags.c_contiguous:
        return WRITE_OUT if conv_choice.impl is BLOCKED else WRITE_OUT_REGION
    return COMPILED


def _choices(xp, x, weight, residual, geo, groups, out) -> tuple[Choice, Choice]:
    t = current()
    conv_choice = choose_conv2d(xp, x, weight, out, *geo, groups, t)
    return _choice(_pick(xp, x, weight, residual, conv_choice, t), conv_choice), conv_choice


def choose_conv2d_add_relu(xp, x, weight, residual, bias=None, stride=(1, 1), padding=(0, 0), dilation=(1, 1),
                           groups=1, out=None) -> Choice:
    """What runs conv2d_add_relu of these arrays (``kernels.choose``), noted with the convolution's choice."""
    if x.dtype == np.float16 and weight.dtype == np.float16:
        return Choice(UFUNCS, ("float16 via float32",))
    return _choices(xp, x, weight, residual, conv.geometry(stride, padding, dilation), groups, out)[0]


def _after(xp, y, residual) -> Impl:
    """The residual added and the relu taken in place on ``y`` by ``compiled`` (``ufuncs`` where it declines)."""
    if _compiled(xp, y, residual) is None:
        _ufuncs(xp, y, residual)
        return UFUNCS
    return COMPILED


def run_conv2d_add_relu(xp, x, weight, residual, bias=None, stride=(1, 1), padding=(0, 0), dilation=(1, 1),
                        groups=1, out=None):
    """conv2d_add_relu: ``write_out`` where chosen and it runs; else the convolution by conv2d's runner, then
    ``compiled`` (``ufuncs`` where it declines); the op's kernel in every call."""
    if x.dtype == np.float16 and weight.dtype == np.float16:  # (conv2d's half path, then the reference's)
        return _ufuncs(xp, run_conv2d(xp, x, weight, bias, stride, padding, dilation, groups, out), residual)
    geo = conv.geometry(stride, padding, dilation)
    choice, conv_choice = _choices(xp, x, weight, residual, geo, groups, out)
    y = _write_out_region(xp, x, weight, residual, bias, *geo, groups, out) if choice.impl is WRITE_OUT_REGION \
        else None
    if y is None and choice.impl is WRITE_OUT_REGION:  # (declined: contended, or a pool thread)
        choice, conv_choice = _choice(WRITE_OUT, Choice(BLOCKED)), Choice(BLOCKED)
    y = _write_out(xp, x, weight, residual, bias, *geo, groups, out) if y is None and choice.impl is WRITE_OUT else y
    if y is None:
        y = conv_choice.impl.run(xp, x, weight, bias, *geo, groups, out)
        if y is None:  # (declined at run time: its fallback runs)
            conv_choice = Choice(conv_choice.impl.fallback)
            y = conv_choice.impl.run(xp, x, weight, bias, *geo, groups, out)
        choice = _choice(_after(xp, y, residual), conv_choice)
    if MODE.get() & PROFILING:
        current_profile().chose(choice)
    if current().log_kernels:
        log_choice(choice, x, weight)
    return y


def bind_conv2d_add_relu(xp, x, weight, residual, bias=None, stride=(1, 1), padding=(0, 0), dilation=(1, 1),
                         groups=1, out=None) -> Bound | None:
    """A compiled step's ``Bound`` (``kernels.bind``): ``write_out`` with its kernel, phase tables and
    weight shape fixed once where chosen for the step's arrays (``_bound_write_out``); else the
    convolution bound as ``bind_conv2d`` binds it, then the pass. None for half precision."""
    if x.dtype == np.float16 and weight.dtype == np.float16:
        return None
    geo = conv.geometry(stride, padding, dilation)
    choice, conv_choice = _choices(xp, x, weight, residual, geo, groups, out)
    conv_bound = bind_conv2d(xp, x, weight, bias, stride, padding, dilation, groups, out=out)
    conv_fn = conv_bound.fn

    def fn(x, w, r, b=None, out=None):
        y = conv_fn(x, w, out=out) if b is None else conv_fn(x, w, b, out=out)
        _after(xp, y, r)
        return y

    if choice.impl in (WRITE_OUT, WRITE_OUT_REGION):
        lean = _bound_write_out(x, weight, residual, bias, geo, out, fn)
        if lean is not None and choice.impl is WRITE_OUT_REGION:  # (over the threads; write_out's when it declines)
            lean = bound_residual(x, weight, residual, bias, *geo, out, lean) or lean
        if lean is not None:
            return Bound(choice, lean, scratch=False)  # (blocked's loop reads no scratch)
        choice = _choice(COMPILED, conv_choice)
    return Bound(choice, fn, scratch=conv_bound.scratch)


def _bound_write_out(x, weight, residual, bias, geo, out, other):
    """``write_out``'s call for a step: ``fn(x, w, r[, b], out=)`` runs blocked's loop with the residual
    into a C-ordered ``out`` and takes any other call (another memory order, no output, a residual the
    write-out cannot take) to ``other``. None where this call would not run the loop into ``out``."""
    if out is None or not (x.flags.c_contiguous and out.flags.c_contiguous and residual_fits(residual, out)):
        return None
    ho, wo = conv.out_size(x, weight, *geo)
    kern = with_fill(make_blocked) if plane_fits(ho, wo) else None
    n, (o, c, kh, kw) = x.shape[0], weight.shape
    if kern is None or out.shape != (n, o, ho, wo):
        return None
    wshape, args, no_bias = (o, c, kh * kw), geometry(*x.shape[2:], kh, kw, *geo), np.zeros(0, x.dtype)

    planned = out

    def fn(x, w, r, b=None, out=None):  # (the step's planned output: its residual is never its memory)
        if out is not planned and (out is None or not out.flags.c_contiguous or np.may_share_memory(r, out)) \
                or not (x.flags.c_contiguous and w.flags.c_contiguous and r.flags.c_contiguous):
            return other(x, w, r, b, out=out)
        kern(x, w.reshape(wshape), no_bias if b is None else b, out, r, False, *args, 0, n, 0, o)
        return out

    return fn


RUNNERS = {"conv2d_add_relu": run_conv2d_add_relu}
CHOOSERS = {"conv2d_add_relu": choose_conv2d_add_relu}
BINDERS = {"conv2d_add_relu": bind_conv2d_add_relu}
