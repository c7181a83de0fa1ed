"""``nn.layer_scale_residual``: ConvNeXt's layer-scale multiply, the permute back and the residual add, as one op.

A ConvNeXt block ends ``r + transpose(gamma * y, axes)``: its channels-last branch ``y`` (the second dense
layer's output) scaled by the per-channel ``gamma``, permuted back to NCHW and added to the block's input.
Recorded, that is a multiply step writing a channels-last value and an add step reading it through a
transposed view; ``graph/passes/layer_scale.py`` makes the three nodes one of this op (inference only,
no gradient). The values are the recorded ops' bit for bit: each element is ``r + (gamma * y)`` with the
product rounded to the dtype first, as the two ufuncs round them (the kernels layer's
``kernels/layer_scale.py`` computes the same two roundings per element in one compiled loop).
"""
from __future__ import annotations

import numpy as np

from ..errors import AxisError
from .params import INTS, Param
from .registry import OpDef, broadcast_shapes, register


def layer_scale_residual_kernel(xp, y, gamma, r, axes=(0, 3, 1, 2), out=None):
    """The reference kernel: the recorded ops, ``add(r, transpose(multiply(gamma, y), axes))``."""
    scaled = xp.multiply(gamma, y)
    return xp.add(r, xp.transpose(scaled, tuple(axes)), out=out)


def layer_scale_residual_shape(shapes, axes=(0, 3, 1, 2)):
    """``r``'s shape, which ``gamma * y`` permuted by ``axes`` must broadcast to."""
    scaled = broadcast_shapes(shapes[1], shapes[0])
    if sorted(int(a) % max(len(scaled), 1) for a in axes) != list(range(len(scaled))):
        raise AxisError(f"layer_scale_residual: axes {tuple(axes)} is not a permutation of 0..{len(scaled) - 1}")
    moved = tuple(scaled[int(a) % len(scaled)] for a in axes)
    return broadcast_shapes(shapes[2], moved)


register(OpDef("layer_scale_residual", ("y", "gamma", "r"), layer_scale_residual_kernel,
               params=(Param("axes", INTS, (0, 3, 1, 2), doc="the permutation of gamma * y added to r"),),
               shape=layer_scale_residual_shape,
               dtype=lambda dtypes, axes=(0, 3, 1, 2): np.result_type(*dtypes),
               namespace="nn", writes_out=True,
               doc="r + transpose(gamma * y, axes) (ConvNeXt's layer scale, permute back and residual add), "
                   "rounded as those ops round; made by an inference pass, no gradient"))
