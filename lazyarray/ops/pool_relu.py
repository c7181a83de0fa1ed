"""``nn.max_pool2d_relu``: a max pool and the relu that alone reads it, as one op.

SqueezeNet's stem (issue #35) records ``conv -> relu -> max_pool2d``; the inference pass
``relu_after_max_pool`` moves the relu after the pool (a quarter of the values), and
``graph/passes/pool_relu.py`` then makes ``relu(max_pool2d(x))`` one node of this op: one step at
batch 1 instead of two. The relu is ``maximum(y, 0)`` of the pooled values in their dtype, applied in
place on the pool's output, so the values are the two recorded ops' bit for bit (a NaN stays NaN,
``-0.0`` becomes ``0.0`` as ``maximum`` makes it). Made by an inference pass: no gradient.
"""
from __future__ import annotations

from .elementwise import relu_kernel
from .pool import POOL_PARAMS, max_pool2d_kernel, pool_shape, pool_workspace
from .registry import OpDef, register


def _max_pool2d_relu(xp, x, kernel=(2, 2), stride=(0, 0), padding=(0, 0), ceil_mode=False, out=None):
    """The reference kernel: max_pool2d's reference kernel, then relu in place on its output (the
    kernels layer's ``pool.py`` folds the relu into the compiled pools' stores)."""
    y = max_pool2d_kernel(xp, x, kernel, stride, padding, ceil_mode, out=out)
    return relu_kernel(xp, y, out=y)


register(OpDef("max_pool2d_relu", ("x",), _max_pool2d_relu, params=POOL_PARAMS, shape=pool_shape("max_pool2d_relu"),
               writes_out=True, namespace="nn", workspace=lambda avals, **p: pool_workspace(avals[0], **p),
               doc="relu(max_pool2d(x)): maximum over kh x kw windows of NCHW input, then maximum(y, 0), rounded "
                   "as those ops round; made by an inference pass, no gradient"))
