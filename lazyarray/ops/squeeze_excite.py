"""``nn.squeeze_excite``: a squeeze-excitation block (MobileNetV3's) as one op.

A squeeze-excitation block scales each channel of ``x`` by a gate computed from the channels'
means: ``x * hardsigmoid(conv1x1(relu(conv1x1(mean(x, (2, 3)), w1, b1)), w2, b2))``. Imported from
ONNX it is ``GlobalAveragePool -> Conv -> Relu -> Conv -> HardSigmoid -> Mul``; after
``graph/passes/conv_activation.py`` still four steps at batch 1 (issue #35: ``mean``, two
``conv2d_act`` on a 1 x 1 image, ``multiply``), each a few NumPy calls on a few dozen values. The
inference pass ``graph/passes/squeeze_excite.py`` makes the four one node of this op.

Inputs: ``x`` (N, C, H, W); ``w1`` (R, C, 1, 1) and ``b1`` (R,), the squeeze; ``w2`` (C, R, 1, 1)
and ``b2`` (C,), the excitation. ``alpha``, ``beta``: the gate's hardsigmoid, ``maximum(minimum(t *
alpha + beta, 1), 0)``. The reference kernel runs the recorded ops' kernels in turn (``np.mean``,
``conv2d_act``'s reference twice, ``multiply``), so its values are the recorded graph's; the kernels
layer's ``squeeze_excite.py`` computes it in one compiled pass (its bound there). Made by an
inference pass: no gradient.
"""
from __future__ import annotations

from ..errors import DTypeError, ShapeError
from .conv_act import CONV, activate
from .params import FLOAT, Param
from .registry import OpDef, register


def squeeze_excite_kernel(xp, x, w1, b1, w2, b2, alpha=0.2, beta=0.5, out=None):
    """The reference kernel: the recorded ops' kernels in turn (the mean, the two 1x1 convolutions with
    their relu and hardsigmoid, the product), the product written into ``out`` (which may be ``x``)."""
    s = xp.mean(x, axis=(2, 3), keepdims=True)
    h = activate(xp, CONV.kernel(xp, s, w1, b1), "relu", 0.2, 0.5)
    g = activate(xp, CONV.kernel(xp, h, w2, b2), "hardsigmoid", alpha, beta)
    return xp.multiply(x, g, out=out)


def squeeze_excite_shape(shapes, alpha=0.2, beta=0.5):
    """x's shape, the weights' and biases' checked against it (unknown and symbolic dims pass)."""
    x, w1, b1, w2, b2 = shapes
    if len(x) != 4 or len(w1) != 4 or len(w2) != 4 or len(b1) != 1 or len(b2) != 1:
        raise ShapeError(f"squeeze_excite: x must be (N, C, H, W), w1 (R, C, 1, 1), b1 (R,), w2 (C, R, 1, 1) "
                         f"and b2 (C,), got {x}, {w1}, {b1}, {w2}, {b2}")
    c, r = x[1], w1[0]
    want = ((w1, (r, c, 1, 1)), (b1, (r,)), (w2, (c, r, 1, 1)), (b2, (c,)))
    for got, need in want:
        if any(isinstance(g, int) and isinstance(n, int) and g != n for g, n in zip(got, need)):
            raise ShapeError(f"squeeze_excite: x {x} and w1 {w1} need w1 (R, C, 1, 1), b1 (R,), w2 (C, R, 1, 1) "
                             f"and b2 (C,) with C = {c}, R = {r}; got {got} where {need} is needed")
    return x


def _dtype(dtypes, alpha=0.2, beta=0.5):
    if len(set(dtypes)) != 1 or dtypes[0].kind != "f":
        raise DTypeError(f"squeeze_excite: x, the weights and the biases must share one float dtype, got "
                         f"{', '.join(str(d) for d in dtypes)}")
    return dtypes[0]


register(OpDef("squeeze_excite", ("x", "w1", "b1", "w2", "b2"), squeeze_excite_kernel,
               params=(Param("alpha", FLOAT, 0.2, doc="the gate's hardsigmoid slope"),
                       Param("beta", FLOAT, 0.5, doc="the gate's hardsigmoid offset")),
               shape=squeeze_excite_shape, dtype=_dtype, namespace="nn", writes_out=True, inplace=((0, 0),),
               doc="x * hardsigmoid(conv1x1(relu(conv1x1(mean(x, (2, 3)), w1, b1)), w2, b2)) per channel: a "
                   "squeeze-excitation block; made by an inference pass, no gradient"))
