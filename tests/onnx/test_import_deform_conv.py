"""ONNX DeformConv (``onnx/import_deform_conv.py``) against onnx.reference beyond ONNX's node cases:
groups and offset groups, strides, dilations, pads, offsets reaching past the border, mask and bias;
with zero offsets and no mask it equals an ordinary Conv run by onnxruntime."""
from __future__ import annotations

import numpy as np
import pytest
from node_check import check_node, node_model, run_lazyarray, run_reference

RNG = np.random.default_rng(27)


def out_size(size, k, s, d, p):
    return (size + p - (k - 1) * d - 1) // s + 1


@pytest.mark.parametrize("c,oc,group,og,attrs,mask,bias", [
    (2, 3, 1, 1, {"strides": [2, 1], "pads": [1, 0, 1, 1]}, True, True),
    (4, 4, 2, 2, {"dilations": [2, 1]}, False, True),
    (4, 2, 1, 4, {"pads": [1, 1, 1, 1]}, True, False),
])
def test_deform_conv_matches_reference(c, oc, group, og, attrs, mask, bias):
    kh, kw, h, w = 3, 2, 6, 5
    st, dl, pd = attrs.get("strides", [1, 1]), attrs.get("dilations", [1, 1]), attrs.get("pads", [0, 0, 0, 0])
    oh, ow = out_size(h, kh, st[0], dl[0], pd[0] + pd[2]), out_size(w, kw, st[1], dl[1], pd[1] + pd[3])
    ins = {"x": RNG.standard_normal((2, c, h, w)).astype(np.float32),
           "w": RNG.standard_normal((oc, c // group, kh, kw)).astype(np.float32),
           "off": (RNG.standard_normal((2, og * kh * kw * 2, oh, ow)) * 1.5).astype(np.float32),
           "b": RNG.standard_normal(oc).astype(np.float32) if bias else None,
           "m": RNG.random((2, og * kh * kw, oh, ow)).astype(np.float32) if mask else None}
    model = node_model("DeformConv", ins, opset=22, group=group, offset_group=og, kernel_shape=[kh, kw], **attrs)
    check_node(model, ins, runtime="reference", rtol=1e-4, atol=1e-5)


def test_zero_offsets_give_an_ordinary_convolution():
    ins = {"x": RNG.standard_normal((1, 4, 7, 7)).astype(np.float32),
           "w": RNG.standard_normal((6, 2, 3, 3)).astype(np.float32)}
    conv = run_reference(node_model("Conv", ins, opset=22, group=2, strides=[2, 2], pads=[1, 1, 1, 1]), ins)[0]
    deform = {**ins, "off": np.zeros((1, 18, 4, 4), np.float32)}
    got = run_lazyarray(node_model("DeformConv", deform, opset=22, group=2, strides=[2, 2], pads=[1, 1, 1, 1]),
                        deform)[0]
    np.testing.assert_allclose(got, conv, rtol=1e-5, atol=1e-5)
