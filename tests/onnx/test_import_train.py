"""Training-mode BatchNormalization and Dropout imported from ONNX (``lazyarray/onnx/import_train.py``),
checked against ``onnx.reference`` (the spec's reference implementation) on shapes beyond ONNX's
node cases."""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")

from onnx import TensorProto, helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

import lazyarray as la  # noqa: E402
from lazyarray.onnx.backend import LazyArrayBackend  # noqa: E402


def one_node_model(node, inputs: dict, n_out: int, opset: int = 15):
    ins = [helper.make_tensor_value_info(k, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape) for k, v in inputs.items()]
    outs = [helper.make_tensor_value_info(o, TensorProto.UNDEFINED, None) for o in node.output[:n_out]]
    return helper.make_model(helper.make_graph([node], "g", ins, outs), opset_imports=[helper.make_opsetid("", opset)])


def ours_and_reference(node, inputs: dict, n_out: int):
    model = one_node_model(node, inputs, n_out)
    ours = LazyArrayBackend.prepare(model).run(list(inputs.values()))
    ref = ReferenceEvaluator(model).run(None, inputs)
    return ours, ref


@pytest.mark.parametrize("shape", [(4, 2), (3, 5, 7), (2, 3, 2, 4, 3)])
@pytest.mark.parametrize("attrs", [{}, {"epsilon": 1e-2, "momentum": 0.7}])
def test_batchnorm_training_mode_matches_the_reference(shape, attrs):
    rng = np.random.default_rng(0)
    c = shape[1]
    inputs = {"x": rng.normal(2.0, 3.0, shape).astype(np.float32),
              "s": rng.uniform(0.5, 1.5, c).astype(np.float32), "b": rng.normal(size=c).astype(np.float32),
              "mean": rng.normal(size=c).astype(np.float32), "var": rng.uniform(0.5, 2, c).astype(np.float32)}
    node = helper.make_node("BatchNormalization", list(inputs), ["y", "rm", "rv"], training_mode=1, **attrs)
    ours, ref = ours_and_reference(node, inputs, 3)
    assert len(ours) == 3
    for o, r in zip(ours, ref):
        assert o.dtype == r.dtype and o.shape == r.shape
        np.testing.assert_allclose(o, r, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("shape,ratio,seed", [((7,), 0.3, 3), ((4, 6, 5), 0.5, 0), ((2, 3, 8, 8), 0.9, 42)])
def test_seeded_training_dropout_reproduces_the_reference_mask(shape, ratio, seed):
    inputs = {"x": np.random.default_rng(1).normal(size=shape).astype(np.float32),
              "r": np.array(ratio, np.float32), "t": np.array(True)}
    node = helper.make_node("Dropout", ["x", "r", "t"], ["y", "mask"], seed=seed)
    ours, ref = ours_and_reference(node, inputs, 2)
    np.testing.assert_allclose(ours[0], ref[0], rtol=1e-6)
    assert ours[1].dtype == np.bool_ and np.array_equal(ours[1], ref[1])
    assert 0 < ours[1].sum() < ours[1].size  # the mask does drop some and keep some


def test_zero_ratio_training_dropout_is_the_identity_with_an_all_true_mask():
    x = np.arange(12, dtype=np.float64).reshape(3, 4)
    inputs = {"x": x, "r": np.array(0.0, np.float32), "t": np.array(True)}
    ours, ref = ours_and_reference(helper.make_node("Dropout", ["x", "r", "t"], ["y", "m"]), inputs, 2)
    assert np.array_equal(ours[0], x) and ours[0].dtype == x.dtype and ours[1].all()
    assert np.array_equal(ours[0], ref[0]) and np.array_equal(ours[1], ref[1])


def test_unseeded_training_dropout_draws_a_new_mask_every_run():
    x = np.ones((64, 64), np.float32)
    inputs = {"x": x, "r": np.array(0.25, np.float32), "t": np.array(True)}
    rep = LazyArrayBackend.prepare(one_node_model(helper.make_node("Dropout", ["x", "r", "t"], ["y", "m"]), inputs, 2))
    (y1, m1), (y2, m2) = rep.run(list(inputs.values())), rep.run(list(inputs.values()))
    assert not np.array_equal(m1, m2)
    for y, m in ((y1, m1), (y2, m2)):
        np.testing.assert_allclose(y, np.where(m, x / 0.75, 0), rtol=1e-6)
        assert abs(m.mean() - 0.75) < 0.05


def test_training_dropout_with_a_ratio_of_one_is_refused():
    inputs = {"x": np.ones(3, np.float32), "r": np.array(1.0, np.float32), "t": np.array(True)}
    model = one_node_model(helper.make_node("Dropout", ["x", "r", "t"], ["y"], seed=0), inputs, 1)
    with pytest.raises(la.GraphFormatError, match=r"Dropout.*ratio=1.0"):
        LazyArrayBackend.prepare(model).run(list(inputs.values()))
