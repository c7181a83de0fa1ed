"""The model zoo through ONNX: export -> onnxruntime equals lazyarray; export -> la.onnx import equals too."""
import numpy as np
import pytest

import lazyarray as la

ort = pytest.importorskip("onnxruntime")
M = la.blocks.models
RNG = np.random.default_rng(0)


@pytest.mark.parametrize("make,data,dynamic", [
    (lambda: M.resnet18(classes=10, thumbnail=True, channels=(8, 8, 16, 16, 32)),
     RNG.standard_normal((2, 3, 16, 16)).astype(np.float32), True),
    (lambda: M.transformer_encoder(100, classes=3, units=32, num_layers=1, num_heads=2, max_length=16),
     RNG.integers(0, 100, (2, 16)), True),
    (lambda: M.lstm_lm(50, units=16, num_layers=1), RNG.integers(0, 50, (2, 7)), False),  # Scan <-> foreach
], ids=["resnet18", "transformer", "lstm"])
def test_model_exports_runs_in_onnxruntime_and_reimports(make, data, dynamic, tmp_path):
    net = make()
    net.initialize()
    net.hybridize()
    want = net(la.array(data)).asnumpy()
    path = net.export_onnx(str(tmp_path / "model.onnx"))
    got, = ort.InferenceSession(path).run(None, {"data": data})
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    # the LSTM's zero initial state reads the (dynamic) batch size: it imports with the input's shape
    back = la.blocks.SymbolBlock.imports(path, ["data"], input_shapes=None if dynamic else {"data": data.shape})
    np.testing.assert_allclose(back(la.array(data)).asnumpy(), want, rtol=1e-4, atol=1e-5)


def test_input_shapes_keep_the_dtypes_of_the_last_call(tmp_path):
    net = M.transformer_encoder(100, classes=3, units=16, num_layers=1, num_heads=2, max_length=16)
    net.initialize()
    net.hybridize()
    tokens = RNG.integers(0, 100, (2, 8))
    net(la.array(tokens))
    path = net.export_onnx(str(tmp_path / "m.onnx"), input_shapes=(4, 8))  # a new shape, still int64 ids
    got, = ort.InferenceSession(path).run(None, {"data": np.concatenate([tokens, tokens])})
    np.testing.assert_allclose(got[:2], net(la.array(tokens)).asnumpy(), rtol=1e-4, atol=1e-5)
