"""ONNX MatMulInteger, ConvInteger, QLinearMatMul, QLinearConv and DynamicQuantizeLinear
(``onnx/import_quant.py``) beyond ONNX's node cases: per-axis zero points and scales, int8 and
uint8, strides/pads/groups, biases. The integer ops against onnxruntime (exact); the requantizing
ones against ``onnx.reference`` (exact) and onnxruntime within one quantization step (it rounds
the rescale in float32)."""
from __future__ import annotations

import numpy as np
import pytest
from node_check import check_node, node_model, run_lazyarray, run_reference

RNG = np.random.default_rng(18)


def q(shape, dtype):
    info = np.iinfo(dtype)
    return RNG.integers(info.min, info.max + 1, shape).astype(dtype)


@pytest.mark.parametrize("a_shape,b_shape,per_col", [((4, 3), (3, 5), False), ((2, 4, 3), (3, 6), True),
                                                     ((2, 2, 5), (2, 5, 3), False)])
@pytest.mark.parametrize("dtype", [np.uint8, np.int8])
def test_matmul_integer_matches_onnxruntime(a_shape, b_shape, per_col, dtype):
    ins = {"a": q(a_shape, dtype), "b": q(b_shape, dtype), "az": q((), dtype),
           "bz": q((b_shape[-1],) if per_col else (), dtype)}
    check_node(node_model("MatMulInteger", ins, opset=10), ins, rtol=0, atol=0)


@pytest.mark.parametrize("attrs,wzp_per_channel", [({}, False), ({"pads": [1, 0, 2, 1], "strides": [2, 1]}, True),
                                                   ({"group": 2, "dilations": [2, 1]}, True),
                                                   ({"auto_pad": "SAME_UPPER"}, False)])
def test_conv_integer_matches_onnxruntime(attrs, wzp_per_channel):
    groups = attrs.get("group", 1)
    ins = {"x": q((2, 4, 7, 6), np.uint8), "w": q((6, 4 // groups, 3, 2), np.uint8), "xz": q((), np.uint8),
           "wz": q((6,), np.uint8) if wzp_per_channel else q((), np.uint8)}
    want = run_reference(node_model("ConvInteger", ins, opset=10, **attrs), ins, runtime="reference")[0]
    got = run_lazyarray(node_model("ConvInteger", ins, opset=10, **attrs), ins)[0]
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, want)
    if not wzp_per_channel:  # onnxruntime takes scalar weight zero points only
        check_node(node_model("ConvInteger", ins, opset=10, **attrs), ins, rtol=0, atol=0)


def _qlinear_check(op, ins, **attrs):
    model = node_model(op, ins, opset=21, **attrs)
    got = run_lazyarray(model, ins)[0]
    want = run_reference(model, ins, runtime="reference")[0]
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)
    runtime = run_reference(model, ins)[0]
    assert np.abs(got.astype(np.int32) - runtime.astype(np.int32)).max() <= 1


@pytest.mark.parametrize("dtype", [np.uint8, np.int8])
@pytest.mark.parametrize("a_shape,b_shape", [((3, 8), (8, 4)), ((2, 3, 8), (8, 5))])
def test_qlinear_matmul_matches_reference(dtype, a_shape, b_shape):
    f = np.float32
    ins = {"a": q(a_shape, dtype), "as": np.array(0.02, f), "az": q((), dtype), "b": q(b_shape, dtype),
           "bs": np.array(0.03, f), "bz": q((), dtype), "ys": np.array(0.5, f), "yz": q((), dtype)}
    _qlinear_check("QLinearMatMul", ins)


@pytest.mark.parametrize("dtype", [np.uint8, np.int8])
@pytest.mark.parametrize("per_channel,bias,attrs", [(False, False, {}), (True, True, {"pads": [1, 1, 1, 1]}),
                                                    (True, False, {"strides": [2, 2], "group": 2})])
def test_qlinear_conv_matches_reference(dtype, per_channel, bias, attrs):
    f = np.float32
    groups = attrs.get("group", 1)
    ins = {"x": q((1, 4, 6, 5), dtype), "xs": np.array(0.05, f), "xz": q((), dtype),
           "w": q((4, 4 // groups, 3, 3), dtype),
           "ws": (RNG.random(4) * 0.02 + 0.01).astype(f) if per_channel else np.array(0.02, f),
           "wz": np.zeros(4 if per_channel else (), dtype), "ys": np.array(2.0, f), "yz": q((), dtype),
           "b": RNG.integers(-500, 500, 4).astype(np.int32) if bias else None}
    _qlinear_check("QLinearConv", ins, **attrs)


@pytest.mark.parametrize("x", [RNG.standard_normal((3, 5)) * 4, np.abs(RNG.standard_normal(7)) + 1,
                               -np.abs(RNG.standard_normal((2, 2, 2))), np.zeros(4)], ids=["mixed", "positive",
                                                                                            "negative", "zeros"])
def test_dynamic_quantize_linear_matches_onnxruntime(x):
    ins = {"x": x.astype(np.float32)}
    check_node(node_model("DynamicQuantizeLinear", ins, n_outputs=3, opset=11), ins, rtol=1e-6, atol=0)
