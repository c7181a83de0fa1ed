"""``nn.rms_norm``: ``gamma * (x * (1 / sqrt(mean(x * x, axis=-1) + eps)))``, T5's layer norm (no
centering, no bias) as one op.

The operations are those T5's exported graph writes (``Pow(x, 2)`` -> ``x * x``, ``ReduceMean``,
``Add``, ``Sqrt``, ``Div(1, .)``, ``Mul``, ``Mul`` by the weight), in that order, the squares
C-ordered as a compiled program's buffer holds them (NumPy sums such rows pairwise):
``graph/passes/layer_norm.py`` makes the op from them, and it gives their values bit for bit
(``kernels/layer_norm.py`` runs it as one compiled call). The op has no gradient: the pass runs on
inference graphs only.
"""
from __future__ import annotations

from ..errors import DTypeError, ShapeError, fmt_shape
from .norm import check_eps
from .params import FLOAT, Param
from .registry import OpDef, register


def _shape(shapes, eps=1e-6):
    x, gamma = shapes
    if not x:
        raise ShapeError("needs an input with at least one dim (the normalized axis)")
    if len(gamma) != 1 or (None not in (x[-1], gamma[0]) and gamma[0] != x[-1]):
        raise ShapeError(f"gamma {fmt_shape(gamma)} must be ({x[-1]},): one value per element of input "
                         f"{fmt_shape(x)} along its last axis")
    return x


def _dtype(dtypes, eps=1e-6):
    x, gamma = dtypes
    if x != gamma or x.kind != "f":
        raise DTypeError(f"needs x and gamma of one floating dtype, got {x}, {gamma}; cast with .astype")
    return x


def _rms_norm(xp, x, gamma, eps=1e-6, out=None):
    sq = xp.multiply(x, x, out=xp.empty(x.shape, x.dtype))
    inv = xp.mean(sq, axis=-1, keepdims=True)
    xp.add(inv, x.dtype.type(eps), out=inv)
    xp.sqrt(inv, out=inv)
    xp.divide(x.dtype.type(1), inv, out=inv)
    y = xp.multiply(x, inv, out=out)
    return xp.multiply(gamma, y, out=y)


register(OpDef("rms_norm", ("x", "gamma"), _rms_norm,
               params=(Param("eps", FLOAT, 1e-6, check=check_eps, doc="added to the mean square"),),
               shape=_shape, dtype=_dtype, namespace="nn", writes_out=True,
               doc="gamma * (x / sqrt(mean(x * x) + eps)) along the last axis (T5's layer norm, made by "
                   "graph/passes/layer_norm.py); no gradient"))
