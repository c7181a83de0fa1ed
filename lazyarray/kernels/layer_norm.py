"""``nn.layer_norm``'s implementation ``in_place`` and its chooser.

``ops/norm.py`` holds the reference kernel. ``in_place`` is the layer norm as ONNX's
``LayerNormalization`` is written out in ops (``graph/passes/layer_norm.py`` makes the op from
them), in their order: the row means (``np.mean``'s sum and division), ``x - mean`` into the
output, the mean of its squares, ``+ eps``, ``sqrt``, ``1 / s``, then ``* inv``, ``* gamma``, ``+ beta``
in place. The same values as those ops bit for bit (and as the reference up to rounding: its sum
of squares is an ``einsum``), in twelve NumPy calls on preallocated memory: the output, one column
of row statistics and the squares (the thread's scratch from 64 KiB on), where the written-out form ran six to nine program
steps, each with its own buffer. For the last axis of NumPy float32 / float64 values whose
parameters share their dtype, up to ``layer_norm_in_place_max_bytes`` (larger ones: the
reference, which makes no squared copy).
"""
from __future__ import annotations

import numpy as np

from ..ops import registry
from ..ops.scratch import scratch
from ..tuning_table import current
from .impl import Choice, Impl
from .runner import noted

SCRATCH_FROM_BYTES = 64 << 10  # (as kernels/attention.py: smaller squares are a plain allocation)
_REFERENCE = registry.get("layer_norm").kernel


def _fits(xp, x, gamma, beta, axis) -> bool:
    return (xp is np and x.ndim > 0 and x.size > 0 and axis % x.ndim == x.ndim - 1
            and x.dtype in (np.float32, np.float64) and gamma.dtype == x.dtype == beta.dtype
            and x.nbytes <= current().layer_norm_in_place_max_bytes)


def _in_place(xp, x, gamma, beta, axis=-1, eps=1e-5, out=None):
    n = np.intp(x.shape[-1])  # (np.mean divides by the count as an intp: the same operation)
    y = np.empty(x.shape, x.dtype) if out is None else out
    col = np.empty(x.shape[:-1] + (1,), x.dtype)
    sq = np.empty(x.shape, x.dtype) if x.nbytes < SCRATCH_FROM_BYTES else scratch(np, 0, x.shape, x.dtype)
    np.add.reduce(x, axis=-1, keepdims=True, out=col)
    np.true_divide(col, n, out=col, casting="unsafe")
    np.subtract(x, col, out=y)
    np.square(y, out=sq)
    np.add.reduce(sq, axis=-1, keepdims=True, out=col)
    np.true_divide(col, n, out=col, casting="unsafe")
    np.add(col, x.dtype.type(eps), out=col)
    np.sqrt(col, out=col)
    np.divide(x.dtype.type(1), col, out=col)
    np.multiply(y, col, out=y)
    np.multiply(y, gamma, out=y)
    np.add(y, beta, out=y)
    return y


IN_PLACE = Impl("layer_norm", "in_place", _in_place,
                "NumPy float32 / float64, the last axis, parameters of x's dtype, up to "
                "layer_norm_in_place_max_bytes: the written-out ops' NumPy calls on preallocated memory")
_CHOICE = Choice(IN_PLACE)


def choose_layer_norm(xp, x, gamma, beta, axis=-1, eps=1e-5, out=None) -> Choice | None:
    """``in_place`` where it applies, else None (the reference)."""
    return _CHOICE if _fits(xp, x, gamma, beta, axis) else None


def run_layer_norm(xp, x, gamma, beta, axis=-1, eps=1e-5, out=None):
    """layer_norm by ``in_place`` where it applies, else the reference kernel."""
    if not _fits(xp, x, gamma, beta, axis):
        return _REFERENCE(xp, x, gamma, beta, axis=axis, eps=eps, out=out)
    y = _in_place(xp, x, gamma, beta, axis, eps, out)
    noted(_CHOICE, x)
    return y


# op name -> its implementations, runner, and chooser for a call's arguments (``kernels.choose``)
IMPLS = {"layer_norm": (IN_PLACE,)}
RUNNERS = {"layer_norm": run_layer_norm}
CHOOSERS = {"layer_norm": choose_layer_norm}
