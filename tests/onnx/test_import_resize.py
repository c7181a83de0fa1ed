"""ONNX Resize with ``antialias=1`` and ``coordinate_transformation_mode='tf_crop_and_resize'``
imported (``lazyarray/onnx/import_resize.py``), checked against ``onnx.reference`` (the spec's
reference implementation) and onnxruntime on shapes and scales beyond ONNX's node cases."""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

import lazyarray as la  # noqa: E402
from lazyarray.onnx.backend import LazyArrayBackend  # noqa: E402


def resize_model(shape, *, roi=None, scales=None, sizes=None, axes=None, **attrs):
    inits = [numpy_helper.from_array(np.asarray([] if roi is None else roi, np.float32), "roi")]
    names = ["x", "roi"]
    if scales is not None:
        inits.append(numpy_helper.from_array(np.asarray(scales, np.float32), "scales"))
        names.append("scales")
    else:
        inits.append(numpy_helper.from_array(np.asarray(sizes, np.int64), "sizes"))
        names += ["", "sizes"]
    if axes is not None:
        attrs["axes"] = axes
    node = helper.make_node("Resize", names, ["y"], **attrs)
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], initializer=inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 19)])


def check(model, shape, rtol=1e-5, atol=1e-5, with_ort=True):
    x = np.random.default_rng(sum(shape)).normal(size=shape).astype(np.float32)
    ours = LazyArrayBackend.prepare(model).run([x])[0]
    ref = ReferenceEvaluator(model).run(None, {"x": x})[0]
    assert ours.shape == ref.shape and ours.dtype == ref.dtype
    np.testing.assert_allclose(ours, ref, rtol=rtol, atol=atol)
    if with_ort:
        theirs = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(
            None, {"x": x})[0]
        np.testing.assert_allclose(ours, theirs, rtol=1e-4, atol=1e-4)
    return ours


@pytest.mark.parametrize("mode", ["linear", "cubic"])
@pytest.mark.parametrize("shape,kw", [
    ((1, 2, 12, 10), {"scales": [1, 1, 0.5, 0.3]}),
    ((2, 1, 9, 17), {"sizes": [2, 1, 4, 5]}),
    ((1, 1, 20), {"scales": [1, 1, 0.25]}),
    ((1, 3, 8, 8), {"sizes": [3, 5], "axes": [2, 3]}),
    ((1, 1, 6, 6), {"scales": [1, 1, 0.6, 1.5]}),  # one axis down (filtered), one up (plain)
])
def test_antialias_matches_the_reference_and_onnxruntime(mode, shape, kw):
    check(resize_model(shape, mode=mode, antialias=1, **kw), shape, with_ort=ort_runs(mode, shape))


def ort_runs(mode, shape):
    """onnxruntime's cubic Resize takes 2-D and 4-D inputs only."""
    return mode != "cubic" or len(shape) in (2, 4)


def test_antialias_with_exclude_outside_matches_the_reference():
    shape = (1, 1, 11, 7)
    check(resize_model(shape, mode="cubic", antialias=1, exclude_outside=1, scales=[1, 1, 0.4, 0.7]), shape,
          with_ort=False)


def test_antialias_smooths_where_plain_downsampling_aliases():
    x_shape = (1, 1, 1, 16)
    stripes = np.tile(np.array([1.0, -1.0], np.float32), 8).reshape(x_shape)
    kw = {"mode": "linear", "coordinate_transformation_mode": "asymmetric", "scales": [1, 1, 1, 0.25]}
    plain = LazyArrayBackend.prepare(resize_model(x_shape, **kw)).run([stripes])[0]
    smooth = LazyArrayBackend.prepare(resize_model(x_shape, antialias=1, **kw)).run([stripes])[0]
    np.testing.assert_array_equal(plain, 1.0)  # every sample lands on a +1 stripe
    assert np.abs(smooth[..., 1:]).max() < 0.2  # the filter averages the stripes away (past the clamped edge)


@pytest.mark.parametrize("mode", ["nearest", "linear", "cubic"])
@pytest.mark.parametrize("shape,kw", [
    ((1, 1, 7, 9), {"roi": [0, 0, 0.2, 0.1, 1, 1, 0.9, 0.7], "sizes": [1, 1, 5, 4]}),
    ((2, 3, 6, 5), {"roi": [0.31, -0.2, 1.2, 0.8], "scales": [1.5, 0.8], "axes": [2, 3],
                    "extrapolation_value": 7.5}),
    ((1, 2, 8), {"roi": [0.25, 0.75], "sizes": [1], "axes": [2]}),  # one output: the box's center
    ((4, 6), {"roi": [0.5, -0.5, 0.5, 1.5], "sizes": [3, 9], "extrapolation_value": -1.0}),
])
def test_tf_crop_and_resize_matches_the_reference_and_onnxruntime(mode, shape, kw):
    model = resize_model(shape, mode=mode, coordinate_transformation_mode="tf_crop_and_resize", **kw)
    y = check(model, shape, with_ort=ort_runs(mode, shape))
    if "extrapolation_value" in kw and min(kw["roi"]) < 0:
        assert (y == kw["extrapolation_value"]).any()


def test_tf_crop_and_resize_without_a_roi_is_refused_by_name():
    model = resize_model((1, 1, 4, 4), mode="linear", coordinate_transformation_mode="tf_crop_and_resize",
                         sizes=[1, 1, 2, 2])
    with pytest.raises(la.GraphFormatError, match=r"Resize.*tf_crop_and_resize.*roi"):
        LazyArrayBackend.prepare(model).run([np.zeros((1, 1, 4, 4), np.float32)])


def test_antialias_with_nearest_is_refused_by_name():
    model = resize_model((1, 1, 4, 4), mode="nearest", antialias=1, sizes=[1, 1, 2, 2])
    with pytest.raises(la.GraphFormatError, match=r"Resize.*antialias=1.*nearest"):
        LazyArrayBackend.prepare(model).run([np.zeros((1, 1, 4, 4), np.float32)])
