"""ONNX transformer building blocks -> registry ops: RotaryEmbedding (opset 23) and SwiGLU.

RotaryEmbedding rotates the first ``rotary_embedding_dim`` features of each head by the angles whose
cosines and sines the caches hold (picked by ``position_ids`` when given, else already
[batch, sequence, dim / 2]): pairs are the two halves of those features, or neighbours
(``interleaved=1``). The input is [batch, heads, sequence, head_size], or [batch, sequence, hidden]
with ``num_heads``. SwiGLU is ``A * sigmoid(alpha * A) * B`` on equal shapes.
"""
from __future__ import annotations

from .. import sym as S
from .import_ops import Converter, OnnxNode


def rotary_embedding(n: OnnxNode) -> list:
    n.arity(3, 4)
    x, cos, sin, pos = n.inputs[0], n.inputs[1], n.inputs[2], n.input(3)
    shape = n.known_shape(0, "RotaryEmbedding")
    if len(shape) == 3:
        heads = int(n.attr("num_heads", 0))
        if heads < 1 or shape[2] % heads:
            n.fail(f"RotaryEmbedding on a 3-D input {shape} needs num_heads dividing {shape[2]}, got {heads}")
        x4 = S.transpose(S.reshape(x, shape=(shape[0], shape[1], heads, shape[2] // heads)), axes=(0, 2, 1, 3))
    elif len(shape) == 4:
        x4 = x
    else:
        n.fail(f"RotaryEmbedding takes a 3-D or 4-D input, got shape {shape}")
    head = shape[2] // int(n.attr("num_heads")) if len(shape) == 3 else shape[3]
    dim = int(n.attr("rotary_embedding_dim", 0)) or head
    if dim % 2 or dim > head:
        n.fail(f"RotaryEmbedding rotary_embedding_dim {dim} must be even and at most the head size {head}")
    if pos is not None:
        cos, sin = S.take(cos, pos, axis=0), S.take(sin, pos, axis=0)  # [batch, sequence, dim / 2]
    cos, sin = S.expand_dims(cos, axis=1), S.expand_dims(sin, axis=1)  # over the heads
    rot = S.getitem(x4, key=(Ellipsis, slice(0, dim)))
    if int(n.attr("interleaved", 0)):
        x1, x2 = S.getitem(rot, key=(Ellipsis, slice(0, None, 2))), S.getitem(rot, key=(Ellipsis, slice(1, None, 2)))
    else:
        x1, x2 = S.getitem(rot, key=(Ellipsis, slice(0, dim // 2))), S.getitem(rot, key=(Ellipsis, slice(dim // 2, dim)))
    re = S.subtract(S.multiply(cos, x1), S.multiply(sin, x2))
    im = S.add(S.multiply(sin, x1), S.multiply(cos, x2))
    if int(n.attr("interleaved", 0)):
        lead = tuple(shape[:3]) if len(shape) == 4 else (shape[0], int(n.attr("num_heads")), shape[1])
        rot = S.reshape(S.stack([re, im], axis=-1), shape=lead + (dim,))
    else:
        rot = S.concatenate([re, im], axis=-1)
    y = rot if dim == head else S.concatenate([rot, S.getitem(x4, key=(Ellipsis, slice(dim, None)))], axis=-1)
    if len(shape) == 3:
        y = S.reshape(S.transpose(y, axes=(0, 2, 1, 3)), shape=shape)
    return [y]


def swiglu(n: OnnxNode) -> list:
    n.arity(2)
    a, b = n.inputs
    if n.shape(0) != n.shape(1):
        n.fail(f"SwiGLU takes A and B of one shape (no broadcasting), got {n.shape(0)} and {n.shape(1)}")
    alpha = float(n.attr("alpha", 1.0))
    gate = S.sigmoid(a if alpha == 1.0 else S.multiply(a, alpha))
    return [S.multiply(S.multiply(a, gate), b)]


TRANSFORMER_CONVERTERS: dict[str, Converter] = {"RotaryEmbedding": rotary_embedding, "SwiGLU": swiglu}
