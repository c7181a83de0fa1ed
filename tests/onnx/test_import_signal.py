"""ONNX DFT, STFT, the window functions and MelWeightMatrix (``onnx/import_signal.py``) against
onnxruntime on lengths, axes and attributes beyond ONNX's node cases."""
from __future__ import annotations

import numpy as np
import pytest
from node_check import check_node, node_model, run_lazyarray

from lazyarray.errors import GraphFormatError

RNG = np.random.default_rng(16)


@pytest.mark.parametrize("op", ["BlackmanWindow", "HammingWindow", "HannWindow"])
@pytest.mark.parametrize("size,periodic", [(1, 1), (7, 0), (16, 1), (33, 0)])
@pytest.mark.parametrize("out", [1, 11])
def test_windows_match_onnxruntime(op, size, periodic, out):
    consts = {"size": np.array(size, np.int64)}
    check_node(node_model(op, {}, opset=17, consts=consts, periodic=periodic, output_datatype=out), {},
               rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("shape,axis,length,inverse,onesided", [
    ((2, 9, 1), 1, None, 0, 0),
    ((2, 9, 1), 1, 12, 0, 1),
    ((3, 8, 5, 2), 2, 6, 0, 0),
    ((3, 8, 5, 2), 1, None, 1, 0),
    ((2, 7, 2), -2, 10, 1, 0),
    ((1, 4, 6, 1), 2, 5, 0, 1),
])
def test_dft_matches_onnxruntime(shape, axis, length, inverse, onesided):
    x = RNG.standard_normal(shape).astype(np.float32)
    consts = {"length": None if length is None else np.array(length, np.int64), "axis": np.array(axis, np.int64)}
    model = node_model("DFT", {"x": x}, opset=20, consts=consts, inverse=inverse, onesided=onesided)
    check_node(model, {"x": x}, rtol=1e-4, atol=1e-4)


def test_dft_opset17_axis_attribute_and_float64():
    x = RNG.standard_normal((2, 3, 10, 2))
    check_node(node_model("DFT", {"x": x}, opset=17, axis=2), {"x": x}, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("length,step,flen,window,onesided,last", [
    (64, 8, 16, True, 1, 1),
    (50, 7, 12, False, 0, 1),
    (40, 5, None, True, 0, 2),
    (33, 33, 33, False, 1, 1),
])
def test_stft_matches_onnxruntime(length, step, flen, window, onesided, last):
    x = RNG.standard_normal((2, length, last)).astype(np.float32)
    size = flen or 10
    consts = {"step": np.array(step, np.int64), "window": np.hanning(size).astype(np.float32) if window else None,
              "flen": np.array(flen, np.int64) if flen else None}
    model = node_model("STFT", {"x": x}, opset=17, consts=consts, onesided=onesided)
    check_node(model, {"x": x}, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("bins,length,rate,lo,hi", [(8, 64, 8000, 0.0, 4000.0), (20, 512, 16000, 100.0, 7000.0),
                                                    (3, 16, 100, 5.0, 40.0)])
def test_mel_weight_matrix_matches_onnxruntime(bins, length, rate, lo, hi):
    consts = {"bins": np.array(bins, np.int64), "length": np.array(length, np.int64),
              "rate": np.array(rate, np.int64), "lo": np.array(lo, np.float32), "hi": np.array(hi, np.float32)}
    check_node(node_model("MelWeightMatrix", {}, opset=17, consts=consts), {})


def test_dft_on_the_last_axis_is_a_graph_format_error():
    x = np.zeros((2, 4, 1), np.float32)
    with pytest.raises(GraphFormatError, match="DFT axis must not be the last axis"):
        run_lazyarray(node_model("DFT", {"x": x}, opset=17, infer=False, axis=2), {"x": x})
