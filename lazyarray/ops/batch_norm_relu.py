"""``nn.batch_norm_relu``: an inference batch norm and the relu that alone reads it, as one op.

DenseNet's pre-activation layers (issue #35) start with ``batch_norm -> relu`` on the concatenated
features; following a concatenation, the norm cannot fold into a convolution
(``graph/passes/fold_batch_norm.py``), and at batch 1 each of the two is a step of its own. The
inference pass ``graph/passes/batch_norm_relu.py`` makes the pair one node of this op, whose kernel
computes the same operations in the same order and dtype: per channel ``scale = gamma / sqrt(var +
eps)`` and ``shift = beta - mean * scale`` as ``batch_norm`` computes them, then ``x * scale``,
``+ shift`` and ``maximum(., 0)``, so the values are the recorded graph's bit for bit. The kernels
layer's ``batch_norm_relu.py`` runs them in one compiled pass. Made by an inference pass: no gradient.
"""
from __future__ import annotations

from ..errors import DTypeError
from .elementwise import relu_kernel
from .norm import batch_norm_kernel, batch_norm_shape, check_eps
from .params import FLOAT, INT, Param
from .registry import OpDef, register


def batch_norm_relu_kernel(xp, x, gamma, beta, mean, var, eps=1e-5, axis=1, out=None):
    """The reference kernel: ``batch_norm``'s kernel, then its relu in place (the recorded ops' calls)."""
    y = batch_norm_kernel(xp, x, gamma, beta, mean, var, eps, axis, out=out)
    return relu_kernel(xp, y, out=y)


def _dtype(dtypes, **_):
    if len(set(dtypes)) != 1 or dtypes[0].kind != "f":
        raise DTypeError(f"batch_norm_relu: x and the statistics must share one float dtype, got "
                         f"{', '.join(str(d) for d in dtypes)}")
    return dtypes[0]


register(OpDef("batch_norm_relu", ("x", "gamma", "beta", "mean", "var"), batch_norm_relu_kernel,
               params=(Param("eps", FLOAT, 1e-5, check=check_eps), Param("axis", INT, 1)),
               shape=batch_norm_shape, dtype=_dtype, namespace="nn", writes_out=True,
               doc="relu(batch_norm(x, gamma, beta, mean, var)) per channel along axis, rounded as those two "
                   "ops round; made by an inference pass, no gradient"))
