"""``nn.conv2d_act``'s implementations (``ops/conv_act.py``: a convolution and its activation, one
op made by the inference pass ``graph/passes/conv_activation.py``) and its chooser.

Both run the convolution by ``choose_conv2d``'s choice (so every conv2d implementation applies,
and the label names it: ``conv2d_act[compiled, pointwise]``), then the activation in place on the
output: ``compiled``, one numba pass over the output's memory (float32/float64 NumPy arrays, numba
on, an output stored C-ordered, channels last or batch last), rounding op by op as the recorded ops
(``relu``; ``hardsigmoid``: multiply, add, ``minimum(t, 1)``, ``maximum(t, 0)`` with NumPy's NaN and
signed-zero rules; ``hardswish``: times the input), so the values are the recorded graph's bit for
bit; ``ufuncs``, the reference's NumPy calls (``ops/conv_act.activate``), elsewhere. Both take values
stored in any order (``ANY_ORDER``): the executor stores them batch last where it would conv2d's
(``kernels.takes_batch_last``, with conv2d's condition ``conv_batch_last.columns_fit``).
"""
from __future__ import annotations

import functools

import numpy as np

from .. import jit
from ..mode import MODE, PROFILING
from ..ops import conv
from ..ops.conv_act import ACTIVATIONS, activate
from ..tuning_table import current
from .conv2d import choose_conv2d, run_conv2d
from .depthwise import FLOATS
from .impl import ANY_ORDER, Choice, Impl
from .log import log_choice
from .profile import current as current_profile


@jit.tiered
def _act_in_place(a, code, alpha, beta, zero, one):  # pragma: no cover  (compiled by numba)
    """``a`` (flat) activated in place: code 0 relu, 1 hardsigmoid, 2 hardswish (one loop each, so
    each vectorizes)."""
    if code == 0:
        for i in range(a.shape[0]):
            u = a[i]
            a[i] = u if (u > zero) | (u != u) else zero
    elif code == 1:
        for i in range(a.shape[0]):
            t = a[i] * alpha
            t = t + beta
            t = one if t > one else t  # (NumPy's minimum / maximum: a NaN stays, -0.0 stays)
            a[i] = zero if t < zero else t
    else:
        for i in range(a.shape[0]):
            u = a[i]
            t = u * alpha
            t = t + beta
            t = one if t > one else t
            t = zero if t < zero else t
            a[i] = u * t


def flat_view(y):
    """A 1-D view of all of ``y``'s (4-D) values when it is stored C-ordered, channels last or batch
    last; else None."""
    if y.flags.c_contiguous:
        return y.reshape(-1)
    for order in ((0, 2, 3, 1), (1, 2, 3, 0)):
        t = y.transpose(order)
        if t.flags.c_contiguous:
            return t.reshape(-1)
    return None


@functools.lru_cache(maxsize=64)
def _scalars(dtype, act: str, alpha: float, beta: float) -> tuple:
    """The compiled pass's arguments after the array, in ``dtype`` (made once per activation and dtype)."""
    d = dtype.type
    return ACTIVATIONS.index(act), d(alpha), d(beta), d(0), d(1)


def _compiled(xp, y, act, alpha, beta):
    flat = flat_view(y) if xp is np and y.dtype.char in "fd" else None
    kern = None if flat is None else jit.compiled(_act_in_place)
    if kern is None:
        return None
    kern(flat, *_scalars(y.dtype, act, alpha, beta))
    return y


def _ufuncs(xp, y, act, alpha, beta):
    return activate(xp, y, act, alpha, beta)


UFUNCS = Impl("conv2d_act", "ufuncs", _ufuncs,
              "any: the convolution by conv2d's choice, then the activation's NumPy calls in place (the reference's)",
              layout=ANY_ORDER)
COMPILED = Impl("conv2d_act", "compiled", _compiled,
                "float32/float64 NumPy output stored C-ordered, channels last or batch last, numba on: the "
                "convolution by conv2d's choice, then one compiled pass of the activation in place",
                layout=ANY_ORDER, fallback=UFUNCS)


@functools.lru_cache(maxsize=256)
def _choice(impl: Impl, conv_choice: Choice) -> Choice:
    return Choice(impl, (conv_choice.label(),))


def choose_conv2d_act(xp, x, weight, bias=None, stride=(1, 1), padding=(0, 0), dilation=(1, 1), groups=1,
                      act="relu", alpha=0.2, beta=0.5, out=None) -> Choice:
    """What runs conv2d_act of these arrays (``kernels.choose``): the activation's implementation, noted
    with the convolution's choice."""
    if x.dtype == np.float16 and weight.dtype == np.float16:
        return Choice(UFUNCS, ("float16 via float32",))
    geo = conv.geometry(stride, padding, dilation)
    conv_choice = choose_conv2d(xp, x, weight, out, *geo, groups)
    fits = xp is np and np.result_type(x.dtype, weight.dtype) in FLOATS and jit.enabled()
    return _choice(COMPILED if fits else UFUNCS, conv_choice)


def run_conv2d_act(xp, x, weight, bias=None, stride=(1, 1), padding=(0, 0), dilation=(1, 1), groups=1,
                   act="relu", alpha=0.2, beta=0.5, out=None):
    """conv2d_act: the convolution by ``choose_conv2d``'s choice (its fallback where it declines), then
    the activation by ``compiled`` (``ufuncs`` where it declines); the op's kernel in every call."""
    if x.dtype == np.float16 and weight.dtype == np.float16:  # (conv2d's half path, then the reference's)
        y = run_conv2d(xp, x, weight, bias, stride, padding, dilation, groups, out)
        return activate(xp, y, act, alpha, beta)
    geo = conv.geometry(stride, padding, dilation)
    t = current()
    conv_choice = choose_conv2d(xp, x, weight, out, *geo, groups, t)
    y = conv_choice.impl.run(xp, x, weight, bias, *geo, groups, out)
    if y is None:  # (declined at run time: its fallback runs)
        conv_choice = Choice(conv_choice.impl.fallback)
        y = conv_choice.impl.run(xp, x, weight, bias, *geo, groups, out)
    impl = COMPILED
    if _compiled(xp, y, act, alpha, beta) is None:
        impl = UFUNCS
        activate(xp, y, act, alpha, beta)
    if MODE.get() & PROFILING:
        current_profile().chose(_choice(impl, conv_choice))
    if t.log_kernels:
        log_choice(_choice(impl, conv_choice), x, weight)
    return y


IMPLS = {"conv2d_act": (COMPILED, UFUNCS)}
RUNNERS = {"conv2d_act": run_conv2d_act}
CHOOSERS = {"conv2d_act": choose_conv2d_act}
