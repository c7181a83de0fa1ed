"""ONNX CausalConvWithState (opset 27) -> registry ops: a causal depthwise 1-D convolution that
carries its last ``k - 1`` input positions between calls.

The input ``[B, C, L]`` is prefixed with ``past_state`` (zeros when omitted) and each output position
is the sum over the ``k`` taps of the channel's weight times the prefixed input (``k`` strided
slices, no im2col), plus the bias; ``activation`` silu/swish multiplies by the sigmoid. Half
precision computes in float32. ``present_state`` is the last ``k - 1`` prefixed positions.
"""
from __future__ import annotations

import numpy as np

from .. import sym as S
from .import_ops import Converter, OnnxNode, constant, dtype_of


def causal_conv_with_state(n: OnnxNode) -> list:
    n.arity(2, 4)
    x, w, bias, past = n.inputs[0], n.inputs[1], n.input(2), n.input(3)
    xs, ws = n.known_shape(0, "CausalConvWithState"), n.known_shape(1, "CausalConvWithState")
    act = n.attr("activation", "none")
    act = act.decode() if isinstance(act, bytes) else str(act)
    if act not in ("none", "silu", "swish"):
        n.fail(f"CausalConvWithState activation {act!r} is not supported; supported: none, silu, swish")
    if len(xs) != 3 or len(ws) != 3 or ws[0] != xs[1] or ws[1] != 1:
        n.fail(f"CausalConvWithState takes input [B, C, L] and a depthwise weight [C, 1, k], got {xs} and {ws}")
    (b, c, length), k = xs, ws[2]
    dt = dtype_of(x)
    if past is None:
        past = constant(np.zeros((b, c, k - 1), dt))
    padded = S.concatenate([past, x], axis=2) if k > 1 else x
    work = np.float32 if np.dtype(dt) == np.float16 else dt
    p32 = S.cast(padded, dtype=work) if work != dt else padded
    w32 = S.cast(w, dtype=work) if work != dt else w
    y = None
    for tap in range(k):
        term = S.multiply(S.getitem(p32, key=(slice(None), slice(None), slice(tap, tap + length))),
                          S.getitem(w32, key=(slice(None), slice(0, 1), tap)))  # [C, 1] per channel
        y = term if y is None else S.add(y, term)
    if bias is not None:
        y = S.add(y, S.reshape(S.cast(bias, dtype=work) if work != dt else bias, shape=(c, 1)))
    if act != "none":
        y = S.multiply(y, S.sigmoid(y))
    present = S.getitem(padded, key=(slice(None), slice(None), slice(length, length + k - 1)))
    return [S.cast(y, dtype=dt) if work != dt else y, present]


CAUSAL_CONV_CONVERTERS: dict[str, Converter] = {"CausalConvWithState": causal_conv_with_state}
