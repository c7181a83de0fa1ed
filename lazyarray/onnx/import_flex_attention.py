"""ONNX FlexAttention (domain ``ai.onnx.preview``) -> registry ops: scaled dot-product attention with
the node's ``score_mod`` / ``prob_mod`` graphs run on the scores / probabilities (each as a ``call``
of the converted graph, the values of enclosing graphs it reads passed in).

``scale`` defaults to 1/sqrt(head size) and multiplies Q and K by its square root each (as ONNX's
reference does); the softmax and everything after it run in ``softmax_precision`` (float32 for
half-precision and float32 inputs, float64 for float64), the output has V's type. Grouped-query
heads share K/V head ``h // (q_heads / kv_heads)``.
"""
from __future__ import annotations

import numpy as np

from .. import sym as S
from ..executor.call import SubGraph
from ..graph.symbol import Symbol
from .import_ops import Converter, OnnxNode, dtype_of, np_dtype, shape_of


def _modifier(n: OnnxNode, attr: str, x):
    if n.attr(attr) is None:
        return x
    body = n.subgraph(attr, [(shape_of(x), dtype_of(x))])
    if len(body.names) != 1 or len(body.outs) != 1:
        n.fail(f"FlexAttention {attr} must take one input and give one output, it takes {len(body.names)} and "
               f"gives {len(body.outs)}")
    graph = SubGraph(Symbol([body.outs[0].outputs[0]]), body.names + list(body.captured))
    y = S.call([x, *body.captured.values()], graph=graph)
    if shape_of(y) != shape_of(x):
        n.fail(f"FlexAttention {attr} must keep the shape {shape_of(x)}, it gives {shape_of(y)}")
    return y if dtype_of(y) == dtype_of(x) else S.cast(y, dtype=dtype_of(x))


def flex_attention(n: OnnxNode) -> list:
    n.arity(3)
    q, k, v = n.inputs
    qs, ks, vs = (n.known_shape(i, "FlexAttention") for i in range(3))
    if len(qs) != 4 or len(ks) != 4 or len(vs) != 4 or ks[1] != vs[1] or ks[2] != vs[2] or ks[3] != qs[3] \
            or qs[1] % ks[1]:
        n.fail(f"FlexAttention takes Q [B, Hq, L, E], K [B, Hkv, S, E], V [B, Hkv, S, Ev] with Hkv dividing Hq; "
               f"got {qs}, {ks}, {vs}")
    group = qs[1] // ks[1]
    if group > 1:
        k, v = S.repeat_elements(k, repeats=group, axis=1), S.repeat_elements(v, repeats=group, axis=1)
    scale = n.attr("scale")
    scale = 1.0 / float(np.sqrt(qs[3])) if scale is None else float(scale)
    root = float(np.sqrt(np.float32(scale)))
    scores = S.matmul(S.multiply(q, root), S.transpose(S.multiply(k, root), axes=(0, 1, 3, 2)))
    prec = n.attr("softmax_precision")
    work = np_dtype(int(prec), n.where) if prec is not None else \
        (np.dtype(np.float32) if np.dtype(dtype_of(q)).itemsize < 4 else np.dtype(dtype_of(q)))
    if work.kind != "f":
        n.fail(f"FlexAttention softmax_precision {work} is not a float type")
    if dtype_of(scores) != work:
        scores = S.cast(scores, dtype=work)
    probs = _modifier(n, "prob_mod", S.softmax(_modifier(n, "score_mod", scores), axis=-1))
    y = S.matmul(probs, S.cast(v, dtype=work) if dtype_of(v) != work else v)
    return [S.cast(y, dtype=dtype_of(v)) if dtype_of(y) != dtype_of(v) else y]


# keyed by domain-qualified name, as the loader looks up operators outside the default domain
FLEX_ATTENTION_CONVERTERS: dict[str, Converter] = {"ai.onnx.preview.FlexAttention": flex_attention}
