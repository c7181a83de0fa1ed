"""``nn.channel_shuffle``: ShuffleNet's channel shuffle of a concatenation, as one op.

ShuffleNet's units (issue #35) end with ``torch.cat((x1, x2), 1)`` and the channel shuffle
``x.view(b, g, c // g, h, w).transpose(1, 2).reshape(b, -1, h, w)``: after import and simplification
``concatenate -> reshape -> transpose -> reshape``, where the last reshape copies (its input's strides
cannot be merged) and the concatenation copies too unless its parts are written in place. The inference
pass ``graph/passes/channel_shuffle.py`` makes the chain one node of this op: each input copied once,
straight to where the shuffle puts its channels.

``channel_shuffle(*xs, groups)``: the concatenation of ``xs`` along axis 1 (N, C, ...), its channels
``i * C / groups + j`` moved to ``j * groups + i``. Pure data movement: the values are the recorded
ops' bit for bit, in any dtype. Made by an inference pass: no gradient.
"""
from __future__ import annotations

import numpy as np

from ..errors import ShapeError
from .params import INT, Param
from .registry import OpDef, get, register


def grouped(y, groups: int):
    """``y`` (N, C, ...) as the view (N, groups, C / groups, prod(...)) of the channels in their
    order before the shuffle: ``grouped(y)[:, i, j]`` is channel ``j * groups + i`` of ``y``."""
    n, c = y.shape[:2]
    return y.reshape(n, c // groups, groups, -1).transpose(0, 2, 1, 3)


def channel_shuffle_kernel(xp, *xs, groups=2, out=None):
    """The reference kernel: the recorded ops (concatenate, reshape, transpose, reshape), into ``out``."""
    x = xp.concatenate(xs, axis=1) if len(xs) > 1 else xs[0]
    n, c = x.shape[:2]
    y = x.reshape((n, groups, c // groups) + x.shape[2:]).transpose((0, 2, 1) + tuple(range(3, x.ndim + 1)))
    y = y.reshape(x.shape)
    if out is None:
        return y if y is not x else y.copy()
    out[...] = y
    return out


def channel_shuffle_shape(shapes, groups=2):
    """The concatenation's shape, its channels checked to split into ``groups`` equal groups."""
    shape = get("concatenate").shape(shapes, axis=1)
    if len(shape) < 2 or groups < 1 or (isinstance(shape[1], int) and shape[1] % groups):
        raise ShapeError(f"channel_shuffle: the concatenation {shape} of the inputs needs (N, C, ...) with C a "
                         f"multiple of groups = {groups}")
    return shape


register(OpDef("channel_shuffle", ("*seq",), channel_shuffle_kernel,
               params=(Param("groups", INT, 2, doc="the shuffle's groups: channel i * C / groups + j goes to "
                                                  "j * groups + i"),),
               shape=channel_shuffle_shape, dtype=lambda dtypes, groups=2: np.result_type(*dtypes),
               namespace="nn", writes_out=True,
               doc="the channel shuffle of the concatenation of the inputs along axis 1 (ShuffleNet's reshape, "
                   "transpose, reshape), one copy of each input; made by an inference pass, no gradient"))
