"""``nn.conv2d_act``'s activations value by value, for the compiled convolution loops that apply them in
the loop that computes the convolution (``conv1d``, ``pointwise_loop``): one pass and one call a layer.

``activate_value`` rounds op by op as the recorded ops do, as ``kernels/conv_act.py``'s compiled pass
does (``relu``: NumPy's NaN rule; ``hardsigmoid``: multiply, add, ``minimum(t, 1)``, ``maximum(t, 0)``
with NumPy's NaN and signed-zero rules; ``hardswish``: times the input), so a loop's activation of a
value is that pass's bit for bit; ``activate_row`` does the same along a row, one loop per
activation (so each vectorizes: ``depthwise``'s write-out). Both are compiled inlined (``jit.inlined``)
into the loops that call them.
``act_params`` gives a loop its arguments once per activation and dtype: the code and one small array
of ``(alpha, beta, 0, 1)`` in the dtype (one argument where four scalars cost a compiled call four
unboxings: issue #35, a batch-1 layer's call is a microsecond or two).
"""
from __future__ import annotations

import functools

import numpy as np

from .. import jit
from ..ops.conv_act import ACTIVATIONS

NO_ACT = -1  # the activation code of a plain convolution (else the index in ACTIVATIONS)


@jit.inlined
def activate_value(u, code, alpha, beta, zero, one):  # pragma: no cover  (compiled by numba)
    """``u`` activated as ``conv_act._act_in_place`` rounds it (code -1: none, 0 relu, 1 hardsigmoid,
    2 hardswish)."""
    if code == 0:
        return u if (u > zero) | (u != u) else zero
    if code < 0:
        return u
    t = u * alpha
    t = t + beta
    t = one if t > one else t
    t = zero if t < zero else t
    return t if code == 1 else u * t


@jit.inlined
def activate_row(yr, ar, bo, code, alpha, beta, zero, one):  # pragma: no cover  (compiled by numba)
    """``yr[i] = activate_value(ar[i] + bo, ...)`` for a row (``bo`` -0.0 where there is no bias: adding
    it leaves every value, -0.0 and NaN included, as it is), one loop per activation, so each
    vectorizes where ``activate_value``'s branches per value kept the loop scalar."""
    if code == 0:
        for i in range(yr.shape[0]):
            u = ar[i] + bo
            yr[i] = u if (u > zero) | (u != u) else zero
    elif code < 0:
        for i in range(yr.shape[0]):
            yr[i] = ar[i] + bo
    elif code == 1:
        for i in range(yr.shape[0]):
            t = (ar[i] + bo) * alpha
            t = t + beta
            t = one if t > one else t
            yr[i] = zero if t < zero else t
    else:
        for i in range(yr.shape[0]):
            u = ar[i] + bo
            t = u * alpha
            t = t + beta
            t = one if t > one else t
            t = zero if t < zero else t
            yr[i] = u * t


def act_code(act: str | None) -> int:
    """``activate_value``'s code of the activation ``act`` (None: ``NO_ACT``)."""
    return NO_ACT if act is None else ACTIVATIONS.index(act)


@functools.lru_cache(maxsize=64)
def act_params(dtype, alpha: float, beta: float) -> np.ndarray:
    """``(alpha, beta, 0, 1)`` in ``dtype``: a loop's activation scalars as one read-only array."""
    p = np.array([alpha, beta, 0, 1], np.dtype(dtype))
    p.flags.writeable = False
    return p
