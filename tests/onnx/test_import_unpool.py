"""ONNX MaxUnpool and Col2Im (``onnx/import_unpool.py``) against onnxruntime beyond ONNX's node
cases: MaxUnpool of onnxruntime's own MaxPool indices (1-D to 3-D, strides, pads, a larger output
shape, against onnx.reference, which ONNX's node case follows); Col2Im with overlapping blocks, strides, dilations, pads, 1-D to 3-D images."""
from __future__ import annotations

import numpy as np
import pytest
from node_check import check_node, node_model, run_reference

RNG = np.random.default_rng(20)


@pytest.mark.parametrize("shape,attrs,bigger", [
    ((2, 3, 8, 6), {"kernel_shape": [2, 2], "strides": [2, 2]}, False),
    ((1, 2, 7, 7), {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}, False),
    ((2, 2, 9), {"kernel_shape": [3], "strides": [3]}, True),
    ((1, 2, 4, 4, 4), {"kernel_shape": [2, 2, 2], "strides": [2, 2, 2]}, True),
])
def test_max_unpool_of_max_pool_matches_onnxruntime(shape, attrs, bigger):
    x = RNG.standard_normal(shape).astype(np.float32)
    pooled, idx = run_reference(node_model("MaxPool", {"x": x}, n_outputs=2, opset=12, **attrs), {"x": x})
    ins = {"v": pooled, "i": idx}
    consts = None
    if bigger:
        k, s = attrs["kernel_shape"], attrs["strides"]
        full = [(d - 1) * st + kk for d, st, kk in zip(pooled.shape[2:], s, k)]
        consts = {"shape": np.array(list(shape[:2]) + [f + 2 for f in full], np.int64)}
    # with a larger output_shape, ONNX's node case (and onnx.reference) index the unpooled image and place it
    # at the output's start, while onnxruntime indexes the whole output: follow ONNX's own test data
    check_node(node_model("MaxUnpool", ins, opset=11, consts=consts, **attrs), ins,
               runtime="reference" if bigger else "ort")


@pytest.mark.parametrize("image,block,attrs", [
    ([6, 5], [2, 3], {}),
    ([7, 8], [3, 3], {"strides": [2, 3], "pads": [1, 0, 2, 1]}),
    ([9, 6], [2, 2], {"dilations": [3, 2]}),
    ([10], [4], {"strides": [2]}),
    ([4, 5, 3], [2, 2, 2], {"pads": [1, 0, 0, 0, 1, 1]}),
])
def test_col2im_matches_onnxruntime(image, block, attrs):
    d = len(image)
    pads = attrs.get("pads", [0] * 2 * d)
    strides, dil = attrs.get("strides", [1] * d), attrs.get("dilations", [1] * d)
    blocks = [(image[i] + pads[i] + pads[d + i] - dil[i] * (block[i] - 1) - 1) // strides[i] + 1 for i in range(d)]
    x = RNG.standard_normal((2, 3 * int(np.prod(block)), int(np.prod(blocks)))).astype(np.float32)
    consts = {"image": np.array(image, np.int64), "block": np.array(block, np.int64)}
    runtime = "ort" if d == 2 else "reference"  # onnxruntime's Col2Im takes 2-D images only
    check_node(node_model("Col2Im", {"x": x}, opset=18, consts=consts, **attrs), {"x": x}, runtime=runtime)
