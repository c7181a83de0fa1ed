"""``nn.batch_norm_max_pool2d``: the max pooling of an inference batch norm (of a relu), pooled first.

A layer stack ``conv -> relu -> batch_norm -> max_pool2d`` (the demo CNN's) normalizes and relus
every value and then keeps a quarter of them. A batch norm in inference is, per channel, the
map ``x -> fl(fl(x * scale) + shift)`` with ``scale = gamma / sqrt(var + eps)``; where
``scale >= 0`` it never decreases as ``x`` grows (rounding never reverses an order), nor does
relu, so the largest normalized value of a window is the normalized value of its largest one:
``max_pool2d(batch_norm(relu(x))) == batch_norm(relu(max_pool2d(x)))``, bit for bit, with the
padding of a window (-inf) never its maximum in either form (a window always covers some input)
and a NaN propagating both ways.

The kernel checks the scales of the call at hand (one comparison over the channels) and pools
first when every one is ``>= 0``, else runs the recorded order: the result is the same values
either way, for any parameters. The inference pass ``graph/passes/pool_before_batch_norm.py``
makes this node; training graphs keep the recorded ops (this op has no gradient).
"""
from __future__ import annotations

import numpy as np

from ..errors import DTypeError
from .elementwise import memory_order, relu_kernel
from .norm import batch_norm_kernel, batch_norm_shape, bn_view, check_eps
from .params import BOOL, FLOAT, Param
from .pool import POOL_PARAMS, max_pool2d_kernel, pool_shape, pool_workspace
from .registry import OpDef, register


def _bn_max_pool2d(xp, x, gamma, beta, mean, var, eps=1e-5, relu=False, kernel=(2, 2), stride=(0, 0),
                   padding=(0, 0), ceil_mode=False, out=None):
    """The reference kernel: ``pooled_batch_norm`` with the reference pool and relu (the kernels
    layer's ``pool.py`` runs one compiled pass where numba is installed)."""
    pool = {"kernel": kernel, "stride": stride, "padding": padding, "ceil_mode": ceil_mode}
    return pooled_batch_norm(xp, x, gamma, beta, mean, var, eps, relu, pool, out)


def pooled_batch_norm(xp, x, gamma, beta, mean, var, eps, relu, pool, out, max_pool=max_pool2d_kernel,
                      relu_of=relu_kernel):
    """Pooled first where every scale is >= 0, else the recorded order (see the module), with the
    kernels ``max_pool(xp, x, out=, **pool)`` and ``relu_of(xp, x, out=)``."""
    scale = gamma / xp.sqrt(var + x.dtype.type(eps))  # (as ``batch_norm`` computes them)
    if not bool((scale >= 0).all()):  # (a NaN scale is not >= 0 either): the recorded order
        y = xp.maximum(x, 0) if relu else x
        return max_pool(xp, batch_norm_kernel(xp, y, gamma, beta, mean, var, eps, axis=1), out=out, **pool)
    shift = beta - mean * scale
    y = max_pool(xp, x, out=out, **pool)
    if relu:
        relu_of(xp, y, out=y)
    order = memory_order(y) if xp is np else None  # (walked in memory order: a batch-last buffer's
    m, axis = (y, 1) if order is None else (y.transpose(order), order.index(1))  # channels are long runs)
    m *= bn_view(scale.astype(y.dtype, copy=False), 4, axis)
    m += bn_view(shift.astype(y.dtype, copy=False), 4, axis)
    return y


def _shape(shapes, eps=1e-5, relu=False, **pool):
    return pool_shape("batch_norm_max_pool2d")([batch_norm_shape(shapes, eps, 1)], **pool)


def _dtype(dtypes, **_):
    if len(set(dtypes)) != 1 or dtypes[0].kind != "f":
        raise DTypeError(f"batch_norm_max_pool2d: x and the statistics must share one float dtype, got "
                        f"{', '.join(str(d) for d in dtypes)}")
    return dtypes[0]


register(OpDef("batch_norm_max_pool2d", ("x", "gamma", "beta", "mean", "var"), _bn_max_pool2d,
               params=(Param("eps", FLOAT, 1e-5, check=check_eps),
                       Param("relu", BOOL, False, doc="relu before the batch norm")) + POOL_PARAMS,
               shape=_shape, dtype=_dtype, namespace="nn", writes_out=True,
               workspace=lambda avals, **p: pool_workspace(avals[0], kernel=p.get("kernel", (2, 2)),
                                                            stride=p.get("stride", (0, 0)),
                                                            padding=p.get("padding", (0, 0)),
                                                            ceil_mode=p.get("ceil_mode", False)),
               doc="max_pool2d(batch_norm(relu(x) if relu else x)) over channel axis 1, computed as "
                   "batch_norm(relu(max_pool2d(x))) when every channel's scale is >= 0 (equal values); "
                   "made by an inference pass, no gradient"))
