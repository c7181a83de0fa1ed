"""ONNX LinearAttention (``onnx/import_linear_attention.py``) against onnx.reference (onnxruntime
does not run opset 27 yet) beyond ONNX's node cases: every update rule, per-head and per-feature
decay, grouped-query heads, a past state, float64 in, and the input checks."""
from __future__ import annotations

import numpy as np
import pytest
from node_check import check_node, node_model, run_lazyarray

from lazyarray.errors import GraphFormatError

RNG = np.random.default_rng(25)


def inputs(rule, b=2, t=5, hq=4, hkv=2, dk=3, dv=6, past=True, per_feature=False, dtype=np.float32):
    def r(*s, scale=0.5):
        return (RNG.standard_normal(s) * scale).astype(dtype)
    ins = {"q": r(b, t, hq * dk), "k": r(b, t, hkv * dk), "v": r(b, t, hkv * dv),
           "past": r(b, hkv, dk, dv) if past else None}
    if rule in ("gated", "gated_delta"):
        ins["decay"] = -np.abs(r(b, t, hkv * dk if per_feature else hkv))
    else:
        ins["decay"] = None
    ins["beta"] = (RNG.random((b, t, hkv)).astype(dtype) if rule in ("delta", "gated_delta") else None)
    return ins


@pytest.mark.parametrize("rule", ["linear", "gated", "delta", "gated_delta"])
@pytest.mark.parametrize("past,per_feature,scale", [(True, False, 0.0), (False, True, 0.3)])
def test_linear_attention_matches_reference(rule, past, per_feature, scale):
    ins = inputs(rule, past=past, per_feature=per_feature)
    model = node_model("LinearAttention", ins, n_outputs=2, opset=27, q_num_heads=4, kv_num_heads=2,
                       update_rule=rule, scale=scale)
    check_node(model, ins, runtime="reference", rtol=1e-4, atol=1e-5)


def test_linear_attention_float64_and_multi_query():
    ins = inputs("gated_delta", hq=3, hkv=1, dtype=np.float64)
    model = node_model("LinearAttention", ins, n_outputs=2, opset=27, q_num_heads=3, kv_num_heads=1)
    check_node(model, ins, runtime="reference", rtol=1e-5, atol=1e-6)


def test_a_decay_for_a_rule_without_gating_is_a_graph_format_error():
    ins = inputs("gated")
    model = node_model("LinearAttention", ins, n_outputs=2, opset=27, infer=False, q_num_heads=4, kv_num_heads=2,
                       update_rule="linear")
    with pytest.raises(GraphFormatError, match="takes no decay"):
        run_lazyarray(model, ins)
