"""ONNX ``LRN`` composed from registry ops (``onnx/import_lrn.py``) against the spec's formula in
NumPy and onnxruntime (which takes odd sizes of 4-D inputs only; ``onnx.reference``'s LRN departs
from the spec's window, so it is not used): odd and even window sizes (the even window reaches one
channel further up), windows wider than the channels, ranks 3 to 5, and the composition
differentiates like any graph."""
from __future__ import annotations

import math

import numpy as np
import pytest

import lazyarray as la
from lazyarray.errors import GraphFormatError

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper  # noqa: E402

RNG = np.random.default_rng(5)


def lrn_model(shape, **attrs):
    g = helper.make_graph([helper.make_node("LRN", ["x"], ["y"], **attrs)], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    return m


def spec_lrn(x, size, alpha=1e-4, beta=0.75, bias=1.0):
    """The ONNX spec's formula, channel by channel, in float64."""
    out = np.empty(x.shape, np.float64)
    for c in range(x.shape[1]):
        lo, hi = max(0, c - (size - 1) // 2), min(x.shape[1] - 1, c + math.ceil((size - 1) / 2))
        square_sum = (x[:, lo:hi + 1].astype(np.float64) ** 2).sum(axis=1)
        out[:, c] = x[:, c] / (bias + alpha / size * square_sum) ** beta
    return out


@pytest.mark.parametrize("shape,attrs", [
    ((2, 7, 5, 4), {"size": 5}),
    ((2, 7, 5, 4), {"size": 4, "alpha": 0.01, "beta": 0.5, "bias": 2.0}),
    ((1, 3, 6), {"size": 1, "alpha": 0.3}),
    ((1, 4, 3, 2, 2), {"size": 3, "beta": 1.0}),
    ((2, 3, 4, 4), {"size": 9, "alpha": 0.5}),  # the window covers every channel
])
def test_lrn_matches_onnxruntime(tmp_path, shape, attrs):
    m = lrn_model(shape, **attrs)
    x = (RNG.standard_normal(shape) * 3).astype(np.float32)
    want = spec_lrn(x, **attrs).astype(np.float32)
    if len(shape) == 4 and attrs["size"] % 2:
        runtime, = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})
        np.testing.assert_allclose(runtime, want, rtol=1e-5, atol=1e-6)
    path = str(tmp_path / "lrn.onnx")
    onnx.save(m, path)
    got = la.CachedOp(la.onnx.load(path))(la.array(x)).asnumpy()
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_lrn_gradient_matches_finite_differences(tmp_path):
    path = str(tmp_path / "lrn.onnx")
    onnx.save(lrn_model((1, 4, 2, 2), size=3, alpha=0.5), path)
    op = la.CachedOp(la.onnx.load(path))
    x64 = RNG.standard_normal((1, 4, 2, 2))
    x = la.array(x64.astype(np.float32))
    x.attach_grad()
    with la.autograd.record():
        y = op(x).sum()
    y.backward()
    eps, num = 1e-3, np.zeros_like(x64)
    for i in np.ndindex(x64.shape):
        d = np.zeros_like(x64)
        d[i] = eps
        num[i] = (op(la.array((x64 + d).astype(np.float32))).asnumpy().sum()
                  - op(la.array((x64 - d).astype(np.float32))).asnumpy().sum()) / (2 * eps)
    np.testing.assert_allclose(x.grad.asnumpy(), num, rtol=2e-2, atol=2e-3)


def test_lrn_without_a_positive_size_is_a_graph_format_error(tmp_path):
    path = str(tmp_path / "lrn.onnx")
    onnx.save(lrn_model((1, 3, 2, 2), size=0), path)
    with pytest.raises(GraphFormatError, match="LRN.*size >= 1, got 0"):
        la.onnx.load(path)
