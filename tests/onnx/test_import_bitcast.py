"""ONNX BitCast (``onnx/import_bitcast.py``) against onnx.reference (onnxruntime does not run
opset 26 yet) on types and layouts beyond ONNX's node cases, and the width check."""
from __future__ import annotations

import numpy as np
import pytest
from node_check import check_node, node_model, run_lazyarray
from onnx import helper

from lazyarray.errors import GraphFormatError

RNG = np.random.default_rng(23)


@pytest.mark.parametrize("src,dst", [(np.float16, np.int16), (np.uint64, np.float64), (np.int32, np.uint32),
                                     (np.uint8, np.bool_), (np.float32, np.uint32)])
def test_bitcast_matches_reference(src, dst):
    x = (RNG.integers(0, 2, (2, 3, 4)) if dst is np.bool_ else RNG.standard_normal((2, 3, 4)) * 50).astype(src)
    ins = {"x": x}
    model = node_model("BitCast", ins, opset=26, to=helper.np_dtype_to_tensor_dtype(np.dtype(dst)))
    got = check_node(model, ins, runtime="reference", rtol=0, atol=0)[0]
    np.testing.assert_array_equal(got.view(np.uint8), x.view(np.uint8))  # the very same bytes


def test_bitcast_between_widths_is_a_graph_format_error():
    ins = {"x": np.zeros(3, np.float32)}
    with pytest.raises(GraphFormatError, match="widths differ"):
        run_lazyarray(node_model("BitCast", ins, opset=26, infer=False, to=11), ins)
