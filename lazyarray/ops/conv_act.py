"""``nn.conv2d_act``: a convolution and the activation that reads nothing else, as one op.

Small CNNs at batch 1 (MobileNetV3, SqueezeNet, ShuffleNet: issue #35) spend more time per step
than per multiply-add: every ``relu`` after a convolution, every hard-swish (ONNX's ``HardSwish``
imported as ``x * max(min(x * alpha + beta, 1), 0)``, one fused group of five ops) and every
hard-sigmoid of a squeeze-excitation gate is a step of its own. The inference pass
``graph/passes/conv_activation.py`` makes ``conv2d -> activation`` one node of this op, whose kernel
runs the convolution (the kernels layer's ``conv2d`` runner, so every conv2d implementation still
applies) and then the activation in place on its output.

``act``: ``relu`` (``maximum(y, 0)``), ``hardsigmoid`` (``maximum(minimum(y * alpha + beta, 1), 0)``)
or ``hardswish`` (``y * hardsigmoid(y)``), each rounded op by op as the recorded ops round it, in the
output's dtype, so the values are the recorded graph's bit for bit. Made by an inference pass: no
gradient.
"""
from __future__ import annotations

from .conv import CONV_PARAMS
from .elementwise import relu_kernel
from .params import FLOAT, Param, choice
from .registry import OpDef, get, register

ACTIVATIONS = ("relu", "hardsigmoid", "hardswish")
CONV = get("conv2d")  # (registered by ops/conv.py, imported above)


def hard_sigmoid_into(xp, y, alpha: float, beta: float, out):
    """``maximum(minimum(y * alpha + beta, 1), 0)`` into ``out`` (may be ``y``), op by op in y's dtype."""
    t = xp.multiply(y, y.dtype.type(alpha), out=out)
    t += y.dtype.type(beta)
    xp.minimum(t, y.dtype.type(1), out=t)
    return xp.maximum(t, y.dtype.type(0), out=t)


def activate(xp, y, act: str, alpha: float, beta: float):
    """``act`` applied to ``y`` in place, as the recorded ops compute it (the reference)."""
    if act == "relu":
        return relu_kernel(xp, y, out=y)
    if act == "hardsigmoid":
        return hard_sigmoid_into(xp, y, alpha, beta, y)
    y *= hard_sigmoid_into(xp, y, alpha, beta, None)
    return y


def _conv2d_act(xp, x, weight, bias=None, stride=(1, 1), padding=(0, 0), dilation=(1, 1), groups=1,
                act="relu", alpha=0.2, beta=0.5, out=None):
    """The reference kernel: conv2d's reference kernel, then ``activate`` in place (the kernels layer's
    ``conv_act.py`` runs the conv2d runner and one compiled pass)."""
    y = CONV.kernel(xp, x, weight, bias, stride=stride, padding=padding, dilation=dilation, groups=groups, out=out)
    return activate(xp, y, act, alpha, beta)


def _shape(shapes, act="relu", alpha=0.2, beta=0.5, **conv):
    return CONV.shape(shapes, **conv)


def _dtype(dtypes, act="relu", alpha=0.2, beta=0.5, **conv):
    return CONV.dtype(dtypes, **conv)


def _workspace(avals, act="relu", alpha=0.2, beta=0.5, **conv):
    return CONV.workspace(avals, **conv)


register(OpDef("conv2d_act", ("x", "weight", "bias?"), _conv2d_act,
               params=CONV_PARAMS + (Param("act", choice(*ACTIVATIONS), "relu",
                                           doc="the activation: relu, hardsigmoid or hardswish"),
                                     Param("alpha", FLOAT, 0.2, doc="hardsigmoid's slope"),
                                     Param("beta", FLOAT, 0.5, doc="hardsigmoid's offset")),
               shape=_shape, dtype=_dtype, namespace="nn", writes_out=True, workspace=_workspace,
               doc="act(conv2d(x, weight, bias)) with act relu, hardsigmoid (max(min(y * alpha + beta, 1), 0)) "
                   "or hardswish (y * hardsigmoid(y)), rounded as those ops round; made by an inference pass, "
                   "no gradient"))
