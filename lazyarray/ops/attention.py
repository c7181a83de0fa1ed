"""``nn.fused_attention``: ``softmax(chain(q @ k)) @ v`` as one op, the scaled dot-product attention of an
imported or traced transformer (``graph/passes/attention.py`` makes it from the ops it replaces).

The op computes exactly what the replaced ops computed, in their order: the elementwise ops applied
to ``q`` and to ``k`` before the product (``q_ops``, ``k_ops``: torch's exporter scales both by
``sqrt(scale)``), the product, the elementwise ops on the scores (``score_ops``: a scale, an
additive mask or position bias, a ``where`` of a boolean mask), softmax along the last axis, the
product with ``v``. Each chain entry is one code, ``10 * op + position``: ``op`` indexes ``OPS``,
``position`` is where the running value sits among that op's inputs (``where(mask, fill, scores)``
is ``10 * 4 + 2``); the op's other inputs are the next ``extras``, in order (``q_ops``'s first,
then ``k_ops``'s, then ``score_ops``'s). An extra broadcasts against the running value without
growing it. ``out_axes`` and ``out_shape`` (both or neither) write the result as
``transpose(y, out_axes).reshape(out_shape)`` (the heads merged back into features: the copy the
graph made after the product becomes the layout the product writes).

The reference kernel here is the replaced ops' kernels called one after the other (``matmul``'s,
the elementwise ufuncs, ``softmax``'s): equal values by construction. ``kernels/attention.py``
runs it with the scores in one buffer, the chain and the softmax in place (the same operations,
so the same values). The op has no gradient: the pass runs on inference graphs only.
"""
from __future__ import annotations

import math

from ..errors import DTypeError, ParamValueError, ShapeError, fmt_shape
from . import nn  # noqa: F401  (matmul and softmax are registered first)
from .params import INTS, Param
from .registry import OpDef, broadcast_shapes, get, register

OPS = ("multiply", "divide", "add", "subtract", "where")
WHERE = OPS.index("where")
# the kernels of the ops this one replaces: the same calls, so the same values
_MATMUL, _SOFTMAX = get("matmul"), get("softmax")


def code(op: str, position: int) -> int:
    """The chain code of ``op`` with the running value at input ``position``."""
    return 10 * OPS.index(op) + position


def decode(c: int) -> tuple[str, int, int]:
    """``(op name, position of the running value, how many extras it reads)`` of chain code ``c``."""
    op, pos = divmod(c, 10)
    return OPS[op], pos, (2 if op == WHERE else 1)


def _check_codes(codes, op):
    for c in codes:
        k, pos = divmod(c, 10)
        if not 0 <= k < len(OPS) or pos >= (3 if k == WHERE else 2) or (k == WHERE and pos == 0):
            raise ParamValueError(f"{op}: chain code {c} names no op and position (10 * op + position, "
                                  f"op one of {OPS}; where's running value at position 1 or 2)")


def chain_extras(codes) -> int:
    """How many extra inputs the chain ``codes`` reads."""
    return sum(decode(c)[2] for c in codes)


def _chain_shape(shape, codes, extras, what):
    for c in codes:
        name, _, n = decode(c)
        others = [next(extras) for _ in range(n)]
        if None in shape or any(s is None or None in s for s in others):
            continue
        if tuple(broadcast_shapes(shape, *others)) != tuple(shape):
            raise ShapeError(f"fused_attention: {name} of {what} {fmt_shape(shape)} with "
                             f"{', '.join(fmt_shape(s) for s in others)} would change its shape")
    return shape


def _laid_out(shape, out_axes, out_shape):
    """The result's shape once transposed by ``out_axes`` and reshaped to ``out_shape`` (when given)."""
    if not out_axes and not out_shape:
        return shape
    if sorted(out_axes) != list(range(len(shape))) or math.prod(out_shape) != math.prod(shape) \
            or any(d < 0 for d in out_shape):
        raise ShapeError(f"fused_attention: out_axes {tuple(out_axes)} and out_shape {tuple(out_shape)} do not "
                         f"lay out a result of shape {fmt_shape(shape)} (a permutation of its axes, then a "
                         "shape of as many values)")
    return tuple(out_shape)


def _shape(shapes, q_ops=(), k_ops=(), score_ops=(), out_axes=(), out_shape=()):
    q, k, v, *rest = shapes
    want = chain_extras(q_ops) + chain_extras(k_ops) + chain_extras(score_ops)
    if len(rest) != want:
        raise ShapeError(f"fused_attention: its chains read {want} extra inputs, got {len(rest)}")
    extras = iter(rest)
    q = _chain_shape(q, q_ops, extras, "q")
    k = _chain_shape(k, k_ops, extras, "k")
    if len(q) < 2 or len(k) < 2 or len(v) < 2:
        raise ShapeError(f"fused_attention: q, k and v must have 2 or more dims, got {fmt_shape(q)}, "
                         f"{fmt_shape(k)}, {fmt_shape(v)}")
    scores = _chain_shape(_MATMUL.shape((q, k)), score_ops, extras, "the scores")
    out = _MATMUL.shape((scores, v))
    if None in out or not all(isinstance(d, int) for d in out):  # (symbolic: out_shape, when given, is the answer)
        return tuple(out_shape) if out_shape else out
    return _laid_out(out, out_axes, out_shape)


def _dtype(dtypes, q_ops=(), k_ops=(), score_ops=(), out_axes=(), out_shape=()):
    q, k, v = dtypes[:3]
    if not (q == k == v) or q.kind != "f":
        raise DTypeError(f"fused_attention: q, k and v must share one floating dtype, got {q}, {k}, {v}")
    return q


def apply_chain(xp, x, codes, extras):
    """The chain's ops on ``x``, each its ufunc as the replaced op called it (a fresh array each);
    ``extras``: an iterator over the extra inputs."""
    for c in codes:
        name, pos, n = decode(c)
        args = [next(extras) for _ in range(n)]
        args.insert(pos, x)
        x = getattr(xp, name)(*args)
    return x


def _attention(xp, q, k, v, *extras, q_ops=(), k_ops=(), score_ops=(), out_axes=(), out_shape=(), out=None):
    it = iter(extras)
    q = apply_chain(xp, q, q_ops, it)
    k = apply_chain(xp, k, k_ops, it)
    p = _SOFTMAX.kernel(xp, apply_chain(xp, _MATMUL.kernel(xp, q, k), score_ops, it))
    if not out_axes:
        return _MATMUL.kernel(xp, p, v, out=out)
    y = xp.reshape(xp.transpose(_MATMUL.kernel(xp, p, v), out_axes), out_shape)
    if out is None:
        return y
    out[...] = y
    return out


_CHAIN_DOC = "codes 10 * op + position (ops/attention.py)"
register(OpDef(
    "fused_attention", ("q", "k", "v", "*extras"), _attention,
    params=(Param("q_ops", INTS, (), check=_check_codes, doc="ops on q, " + _CHAIN_DOC),
            Param("k_ops", INTS, (), check=_check_codes, doc="ops on k (the (..., d, keys) operand), " + _CHAIN_DOC),
            Param("score_ops", INTS, (), check=_check_codes, doc="ops on the scores, " + _CHAIN_DOC),
            Param("out_axes", INTS, (), doc="the result transposed by these axes, then ..."),
            Param("out_shape", INTS, (), doc="... reshaped to this shape (C order)")),
    shape=_shape, dtype=_dtype, namespace="nn", writes_out=True,
    doc="softmax(score_ops(q_ops(q) @ k_ops(k)), axis=-1) @ v: the ops of a scaled dot-product "
        "attention as one op (made by graph/passes/attention.py); no gradient"))
