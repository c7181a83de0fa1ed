"""ONNX FlexAttention (``onnx/import_flex_attention.py``, domain ai.onnx.preview) against
onnx.reference beyond ONNX's node cases: grouped-query heads, a score_mod reading a tensor of the
enclosing graph, a prob_mod, softmax_precision, float64 and float16."""
from __future__ import annotations

import numpy as np
import pytest
from node_check import check_node, run_lazyarray
from onnx import TensorProto, helper, numpy_helper

RNG = np.random.default_rng(26)


def flex_model(q, k, v, score_mod=False, prob_mod=False, bias=None, outer=False, work=np.float32, **attrs):
    """score_mod: soft cap then + ``bias``, held by the score_mod graph or (``outer``) the enclosing one."""
    t = helper.np_dtype_to_tensor_dtype(q.dtype)
    extra = {}
    if score_mod:
        nodes = [helper.make_node("Div", ["s", "cap"], ["d"]), helper.make_node("Tanh", ["d"], ["th"]),
                 helper.make_node("Mul", ["th", "cap"], ["capped"]), helper.make_node("Add", ["capped", "bias"], ["o"])]
        extra["score_mod"] = helper.make_graph(
            nodes, "score_mod", [helper.make_tensor_value_info("s", TensorProto.UNDEFINED, None)],
            [helper.make_tensor_value_info("o", TensorProto.UNDEFINED, None)],
            [numpy_helper.from_array(np.array(5.0, work), "cap")] + ([] if outer else
                                                                   [numpy_helper.from_array(bias, "bias")]))
    if prob_mod:
        extra["prob_mod"] = helper.make_graph(
            [helper.make_node("Mul", ["p", "p"], ["o"])], "prob_mod",
            [helper.make_tensor_value_info("p", TensorProto.UNDEFINED, None)],
            [helper.make_tensor_value_info("o", TensorProto.UNDEFINED, None)])
    node = helper.make_node("FlexAttention", ["q", "k", "v"], ["y0"], domain="ai.onnx.preview", **extra, **attrs)
    inits = [numpy_helper.from_array(bias, "bias")] if outer else []
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info(nm, t, a.shape)
                                            for nm, a in (("q", q), ("k", k), ("v", v))],
                              [helper.make_tensor_value_info("y0", t, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 26),
                                                    helper.make_opsetid("ai.onnx.preview", 1)])
    model.ir_version = 10
    return model


@pytest.mark.parametrize("dtype,precision", [(np.float32, None), (np.float64, None), (np.float16, None),
                                             (np.float32, TensorProto.DOUBLE)])
@pytest.mark.parametrize("mods", [(False, False), (True, True)])
def test_flex_attention_matches_reference(dtype, precision, mods):
    q, k, v = (RNG.standard_normal(s).astype(dtype) for s in ((2, 6, 5, 8), (2, 2, 7, 8), (2, 2, 7, 3)))
    attrs = {} if precision is None else {"softmax_precision": precision}
    work = np.float64 if (dtype == np.float64 or precision == TensorProto.DOUBLE) else np.float32
    bias = RNG.standard_normal((1, 1, 5, 7)).astype(work) if mods[0] else None
    model = flex_model(q, k, v, score_mod=mods[0], prob_mod=mods[1], bias=bias, work=work, scale=0.3, **attrs)
    tol = 2e-3 if dtype == np.float16 else 1e-5
    check_node(model, {"q": q, "k": k, "v": v}, runtime="reference", rtol=tol, atol=tol)


def test_a_score_mod_reading_the_enclosing_graph_equals_one_holding_the_value():
    q, k, v = (RNG.standard_normal(s).astype(np.float32) for s in ((1, 2, 4, 8), (1, 2, 6, 8), (1, 2, 6, 8)))
    ins, bias = {"q": q, "k": k, "v": v}, RNG.standard_normal((1, 2, 4, 6)).astype(np.float32)
    inner = check_node(flex_model(q, k, v, score_mod=True, bias=bias), ins, runtime="reference")[0]
    outer = run_lazyarray(flex_model(q, k, v, score_mod=True, bias=bias, outer=True), ins)[0]
    np.testing.assert_allclose(outer, inner, rtol=1e-6, atol=1e-7)
