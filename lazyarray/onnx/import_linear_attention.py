"""ONNX LinearAttention (opset 27) -> registry ops: the recurrent form, unrolled over the (static)
sequence length.

Heads come packed as ``[B, T, H * D]``; the state is ``[B, H_kv, d_k, d_v]`` (``past_state`` or
zeros), in float32. Per step: ``gated`` rules scale the state by ``exp(decay)`` (per head or per key
feature), ``delta`` rules write ``beta * (v - S^T k)`` instead of ``v``, the state gains ``k v^T``, and
the output is ``scale * q^T S`` (grouped-query heads read their KV head's state). ``chunk_size``
is a speed hint with no effect on values.
"""
from __future__ import annotations

import numpy as np

from .. import sym as S
from .import_ops import Converter, OnnxNode, constant, dtype_of

_RULES = ("linear", "gated", "delta", "gated_delta")


def _heads(x, shape, heads: int):
    """[B, T, H * D] -> [B, H, T, D] in float32."""
    b, t, hd = shape
    y = S.transpose(S.reshape(x, shape=(b, t, heads, hd // heads)), axes=(0, 2, 1, 3))
    return S.cast(y, dtype="float32") if dtype_of(x) != np.float32 else y


def linear_attention(n: OnnxNode) -> list:
    n.arity(3, 6)
    q, k, v, past, decay, beta = (n.input(i) for i in range(6))
    rule = n.attr("update_rule", "gated_delta")
    rule = rule.decode() if isinstance(rule, bytes) else str(rule)
    hq, hkv = int(n.attr("q_num_heads", 0)), int(n.attr("kv_num_heads", 0))
    if rule not in _RULES:
        n.fail(f"LinearAttention update_rule {rule!r} is not one of {', '.join(_RULES)}")
    if hq < 1 or hkv < 1 or hq % hkv:
        n.fail(f"LinearAttention q_num_heads ({hq}) must be a positive multiple of kv_num_heads ({hkv})")
    gated, delta = rule in ("gated", "gated_delta"), rule in ("delta", "gated_delta")
    if gated != (decay is not None) or delta != (beta is not None):
        n.fail(f"LinearAttention update_rule {rule!r} takes {'a' if gated else 'no'} decay and "
               f"{'a' if delta else 'no'} beta input")
    qs, ks, vs = (n.known_shape(i, "LinearAttention") for i in range(3))
    if len(qs) != 3 or len(ks) != 3 or len(vs) != 3 or qs[2] % hq or ks[2] % hkv or vs[2] % hkv:
        n.fail(f"LinearAttention takes [B, T, H * D] query, key, value; got {qs}, {ks}, {vs}")
    b, t = qs[0], qs[1]
    dk, dv, group = qs[2] // hq, vs[2] // hkv, hq // hkv
    q4, k4, v4 = _heads(q, qs, hq), _heads(k, ks, hkv), _heads(v, vs, hkv)
    if gated:
        last = n.known_shape(4, "LinearAttention")[-1]
        if last not in (hkv, hkv * dk):
            n.fail(f"LinearAttention decay's last axis must be kv_num_heads ({hkv}) or kv_num_heads * d_k "
                   f"({hkv * dk}), got {last}")
        g4 = _heads(decay, (b, t, last), hkv)  # [B, H_kv, T, 1 or d_k]
    if delta:
        last = n.known_shape(5, "LinearAttention")[-1]
        if last not in (hkv, 1):
            n.fail(f"LinearAttention beta's last axis must be kv_num_heads ({hkv}) or 1, got {last}")
        b4 = _heads(beta, (b, t, last), last)  # [B, H_kv or 1, T, 1]
    if past is None:
        state, state_dtype = constant(np.zeros((b, hkv, dk, dv), np.float32)), dtype_of(q)
    else:
        state, state_dtype = S.cast(past, dtype="float32"), dtype_of(past)
    scale = float(n.attr("scale", 0.0)) or 1.0 / float(np.sqrt(dk))
    outs = []
    for i in range(t):
        k_t, v_t = S.getitem(k4, key=(slice(None), slice(None), i)), S.getitem(v4, key=(slice(None), slice(None), i))
        if gated:
            state = S.multiply(state, S.expand_dims(S.exp(S.getitem(g4, key=(slice(None), slice(None), i))), axis=-1))
        if delta:
            seen = S.squeeze(S.matmul(S.expand_dims(k_t, axis=-2), state), axis=-2)  # S^T k: [B, H_kv, d_v]
            v_t = S.multiply(S.getitem(b4, key=(slice(None), slice(None), i)), S.subtract(v_t, seen))
        state = S.add(state, S.multiply(S.expand_dims(k_t, axis=-1), S.expand_dims(v_t, axis=-2)))
        read = state if group == 1 else S.repeat_elements(state, repeats=group, axis=1)
        q_t = S.expand_dims(S.getitem(q4, key=(slice(None), slice(None), i)), axis=-2)
        outs.append(S.multiply(S.squeeze(S.matmul(q_t, read), axis=-2), scale))  # [B, H_q, d_v]
    y = S.reshape(S.stack(outs, axis=1), shape=(b, t, hq * dv))
    if dtype_of(q) != np.float32:
        y = S.cast(y, dtype=dtype_of(q))
    return [y, S.cast(state, dtype=state_dtype) if state_dtype != np.float32 else state]


LINEAR_ATTENTION_CONVERTERS: dict[str, Converter] = {"LinearAttention": linear_attention}
