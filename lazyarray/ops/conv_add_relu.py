"""``nn.conv2d_add_relu``: a convolution, the residual added to it, and the relu of the sum, as one op.

A ResNet block ends ``conv -> batch norm (folded into the conv) -> add(identity) -> relu``: after
the convolution's step, the add and the relu each took a step of their own over the output (at batch
1 a few microseconds of dispatch each, at batch 8 a pass over the output each). The inference pass
``graph/passes/conv_residual.py`` makes ``relu(add(conv2d(x, w, b), r))`` one node of this op, whose
kernels (``kernels/conv_add_relu.py``) add the residual and take the relu as the convolution writes
its output (``conv2d[blocked]``'s write-out) or in one compiled pass after it.

``residual`` has the convolution's output shape and dtype (no broadcasting). The values are rounded
as the recorded ops round them: the convolution (its bias added last), then ``y + residual`` in y's
dtype, then ``maximum(., 0)``. Made by an inference pass: no gradient.
"""
from __future__ import annotations

from ..errors import ShapeError, fmt_shape
from .conv import CONV_PARAMS
from .elementwise import relu_kernel
from .registry import OpDef, get, register

CONV = get("conv2d")  # (registered by ops/conv.py, imported above)


def _conv2d_add_relu(xp, x, weight, residual, bias=None, stride=(1, 1), padding=(0, 0), dilation=(1, 1), groups=1,
                     out=None):
    """The reference kernel: conv2d's reference kernel, then the residual added and the relu, in place."""
    y = CONV.kernel(xp, x, weight, bias, stride=stride, padding=padding, dilation=dilation, groups=groups, out=out)
    xp.add(y, residual, out=y)
    return relu_kernel(xp, y, out=y)


def _shape(shapes, **conv):
    out = CONV.shape((shapes[0], shapes[1]) + tuple(shapes[3:]), **conv)
    r = tuple(shapes[2])
    if len(r) != len(out) or any(a is not None and b is not None and a != b for a, b in zip(r, out)):
        raise ShapeError(f"conv2d_add_relu: the residual's shape {fmt_shape(r)} is not the convolution's "
                         f"output shape {fmt_shape(out)}")
    return out


def _dtype(dtypes, **conv):
    return CONV.dtype((dtypes[0], dtypes[1]) + tuple(dtypes[3:]), **conv)


def _workspace(avals, **conv):
    return CONV.workspace((avals[0], avals[1]) + tuple(avals[3:]), **conv)


register(OpDef("conv2d_add_relu", ("x", "weight", "residual", "bias?"), _conv2d_add_relu,
               params=CONV_PARAMS, shape=_shape, dtype=_dtype, namespace="nn", writes_out=True,
               workspace=_workspace,
               doc="relu(conv2d(x, weight, bias) + residual), rounded as those ops round (residual of the "
                   "convolution's output shape and dtype); made by an inference pass, no gradient"))
