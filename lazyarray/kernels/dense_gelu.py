"""``dense_gelu``: a dense layer and the exact GELU after it in one step, the bias added in the GELU's loop.

A transformer's feed-forward block and ConvNeXt's inverted bottleneck compute ``gelu(dense(x, w, b))``: the
product writes the layer's values, ``dense`` adds the bias (one more pass), and ``gelu[compiled]`` reads them
again in a step of its own. Where the executor merges the two steps (``executor/epilogue.py``, tuning
``dense_gelu``), ``dense`` writes the product without its bias and one compiled loop (``_bias_gelu_rows``) adds
the bias to each value and applies ``gelu[compiled]``'s operations to it while it is in a register: one pass
instead of two, one step's dispatch instead of two.

**Values.** The bias is added in x's dtype, one rounding, as ``dense``'s in-place add rounds it, and the GELU is
``kernels/gelu.py``'s ``gelu_erf_value``, the operations of its compiled loop, in the dtype of the same constants
(``COEFFS32``, or ``COEFFS64`` under ``gelu_erf_float64``): the two steps' values bit for bit. Only where
``gelu[compiled]`` would run (approximation ``'none'``, float32, numba on, fewer than its chunked size of
values) and the dense layer's output is C-ordered (rows, units); elsewhere the two kernels run as the two steps
did. The GELU's row is staged in a small local array (``tmp``), so the loops vectorize when the GELU is planned
in place on the dense value (a loop reading and writing one array through two arguments runs scalar: 4096 values
9.5 -> 40 us measured).

``explain()`` and ``la.profile()`` name the merged step ``nn.dense+nn.gelu[<the dense layer's choice>]``, as
the dense and relu pair's (``executor/epilogue.py``); tuning ``dense_gelu=False`` keeps the two steps.
"""
from __future__ import annotations

import numpy as np

from .. import jit
from ..tuning_table import current
from .gelu import CHUNK_ELEMENTS, COEFFS32, COEFFS64, gelu_constants, gelu_erf_value


@jit.tiered
def _bias_gelu_rows(constants, value):
    """The kernel (``jit.made_with`` it, ``gelu_constants`` and ``gelu_erf_value``): ``g[r] = gelu(y[r] +
    bias)`` for the C-ordered (rows, n) ``y`` and ``g`` (possibly the same memory): each sum rounded to y's
    dtype, then ``gelu_erf_value`` of it in the dtype of ``k`` (``kernels/gelu.py``)."""
    def rows(y, bias, g, k):  # pragma: no cover  (compiled by numba)
        s, hi, lo, half, one, p, q = constants(k)
        n = y.shape[1]
        tmp = np.empty(n, y.dtype)
        for r in range(y.shape[0]):
            yr, gr = y[r], g[r]
            for j in range(n):
                tmp[j] = yr[j] + bias[j]
            for j in range(n):
                gr[j] = value(tmp[j], s, hi, lo, half, one, p, q)

    return rows


_F32 = np.dtype(np.float32)


def fused_kernel(y, bias, g):
    """``_bias_gelu_rows`` compiled where it takes these arrays (see the module doc), else None."""
    if bias is None or y.__class__ is not np.ndarray or g.__class__ is not np.ndarray \
            or bias.__class__ is not np.ndarray or y.dtype != _F32 or g.dtype != _F32 or bias.dtype != _F32 \
            or y.size == 0 or bias.shape != y.shape[-1:] or g.shape != y.shape or not y.flags.c_contiguous \
            or not g.flags.c_contiguous or y.size >= 4 * CHUNK_ELEMENTS or not jit.enabled():
        return None
    return jit.made_with(_bias_gelu_rows, gelu_constants, gelu_erf_value)


def dense_gelu(dense, gelu, x, weight, bias, y, g):
    """``gelu(dense(x, weight, bias))``: the dense value into ``y``, its GELU into ``g`` (``y`` itself where
    the plan runs it in place), with ``dense`` and ``gelu`` the two steps' kernels (the registry's runners or
    their bound choices). By ``_bias_gelu_rows`` where ``fused_kernel`` gives it (``y`` then holds the product
    without its bias), else the two kernels as the two steps ran them."""
    return _run(fused_kernel(y, bias, g), dense, gelu, x, weight, bias, y, g)


def _run(kern, dense, gelu, x, weight, bias, y, g):
    if kern is None:
        dense(x, weight, bias, out=y)
        return gelu(y, out=g)
    dense(x, weight, None, out=y)
    n = y.shape[-1]
    kern(y.reshape(-1, n), bias, g.reshape(-1, n), COEFFS64 if current().gelu_erf_float64 else COEFFS32)
    return g


def step_runner():
    """``dense_gelu`` for one program step, its arrays' checks (``fused_kernel``) made once per (y, bias, g)
    objects: a step's planned buffers and parameters are the same objects run after run, and an array's shape,
    dtype and memory order do not change (``jit.enabled()`` is still asked per call: the tuning table's
    ``jit``)."""
    memo = [None, None, None, None]  # (y, bias, g, the compiled kernel) of the last fused call

    def run(dense, gelu, x, weight, bias, y, g):
        if y is memo[0] and bias is memo[1] and g is memo[2] and jit.enabled():
            kern = memo[3]
        else:
            kern = fused_kernel(y, bias, g)
            memo[:] = (y, bias, g, kern) if kern is not None else (None, None, None, None)
        return _run(kern, dense, gelu, x, weight, bias, y, g)

    return run
