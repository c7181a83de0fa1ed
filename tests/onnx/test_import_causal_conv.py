"""ONNX CausalConvWithState (``onnx/import_causal_conv.py``) against onnx.reference (onnxruntime
does not run opset 27 yet) beyond ONNX's node cases: longer kernels, one step of decode after a
prefill (the present state fed back as the past state), float64 and float16, bias and activation."""
from __future__ import annotations

import numpy as np
import pytest
from node_check import check_node, node_model, run_lazyarray

RNG = np.random.default_rng(24)


@pytest.mark.parametrize("k,length,past,bias,act,dtype", [
    (6, 9, True, True, "silu", np.float32), (2, 1, True, False, "none", np.float64),
    (5, 3, False, True, "swish", np.float32), (3, 10, True, True, "silu", np.float16),
])
def test_causal_conv_with_state_matches_reference(k, length, past, bias, act, dtype):
    b, c = 3, 5
    ins = {"x": RNG.standard_normal((b, c, length)).astype(dtype), "w": RNG.standard_normal((c, 1, k)).astype(dtype),
           "b": RNG.standard_normal(c).astype(dtype) if bias else None,
           "past": RNG.standard_normal((b, c, k - 1)).astype(dtype) if past else None}
    tol = 3e-3 if dtype == np.float16 else 1e-5
    check_node(node_model("CausalConvWithState", ins, n_outputs=2, opset=27, activation=act), ins,
               runtime="reference", rtol=tol, atol=tol)


def test_prefill_then_decode_equals_one_long_call():
    b, c, k = 2, 3, 4
    x, w = RNG.standard_normal((b, c, 7)).astype(np.float32), RNG.standard_normal((c, 1, k)).astype(np.float32)
    whole = {"x": x, "w": w}
    y_all, _ = run_lazyarray(node_model("CausalConvWithState", whole, n_outputs=2, opset=27), whole)
    first = {"x": x[:, :, :6], "w": w}
    y0, state = run_lazyarray(node_model("CausalConvWithState", first, n_outputs=2, opset=27), first)
    step = {"x": x[:, :, 6:], "w": w, "b": None, "past": state}
    y1, _ = run_lazyarray(node_model("CausalConvWithState", step, n_outputs=2, opset=27), step)
    np.testing.assert_allclose(np.concatenate([y0, y1], axis=2), y_all, rtol=1e-5, atol=1e-6)
