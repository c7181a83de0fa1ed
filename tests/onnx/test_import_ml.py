"""ONNX's ``ai.onnx.ml`` operators on numeric tensors (``onnx/import_ml.py``) beyond ONNX's node cases:
Binarizer, ArrayFeatureExtractor and random TreeEnsembles (every branch mode, NaN features, every
aggregate) against onnxruntime."""
from __future__ import annotations

import numpy as np
import pytest
from node_check import check_node

import lazyarray as la

onnx = pytest.importorskip("onnx")
from onnx import helper, numpy_helper  # noqa: E402

RNG = np.random.default_rng(15)


def ml_model(op: str, inputs: dict, **attrs):
    """A one-node ``ai.onnx.ml`` model (ml opset 5, no default-domain import) over graph inputs."""
    node = helper.make_node(op, list(inputs), ["y"], domain="ai.onnx.ml", **attrs)
    ins = [helper.make_tensor_value_info(k, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape) for k, v in inputs.items()]
    graph = helper.make_graph([node], "g", ins, [onnx.ValueInfoProto(name="y")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("ai.onnx.ml", 5)], ir_version=10)
    return onnx.shape_inference.infer_shapes(model, strict_mode=True)


@pytest.mark.parametrize("dtype,runtime", [(np.float32, "ort"), (np.float64, "reference")])
def test_binarizer_matches_onnxruntime(dtype, runtime):
    # (onnxruntime implements float32 only)
    x = (RNG.standard_normal((3, 7)) * 3).astype(dtype)
    x[0, 0] = 0.5  # the threshold itself is not above it
    ins = {"x": x}
    check_node(ml_model("Binarizer", ins, threshold=0.5), ins, runtime=runtime)


def test_binarizer_of_nan_is_zero_as_in_onnx_reference():
    # (onnxruntime refuses NaN inputs)
    ins = {"x": np.array([[np.nan, 1.0, -1.0]], np.float32)}
    got = check_node(ml_model("Binarizer", ins, threshold=0.0), ins, runtime="reference")[0]
    np.testing.assert_array_equal(got, [[0.0, 1.0, 0.0]])


@pytest.mark.parametrize("xshape,ishape", [((3, 5), (2,)), ((2, 3, 6), (1, 4)), ((6,), (3,)), ((4, 5), (2, 2))])
def test_array_feature_extractor_matches_onnxruntime(xshape, ishape):
    ins = {"x": RNG.standard_normal(xshape).astype(np.float32),
           "i": RNG.integers(0, xshape[-1], ishape).astype(np.int64)}
    check_node(ml_model("ArrayFeatureExtractor", ins), ins)


def test_an_ml_only_model_loads_without_a_default_opset(tmp_path):
    ins = {"x": RNG.standard_normal((2, 3)).astype(np.float32)}
    path = str(tmp_path / "m.onnx")
    onnx.save(ml_model("Binarizer", ins, threshold=0.1), path)
    got = la.CachedOp(la.onnx.load(path))(la.array(ins["x"])).asnumpy()
    np.testing.assert_array_equal(got, (ins["x"] > 0.1).astype(np.float32))


# -- TreeEnsemble -----------------------------------------------------------------------------------
def random_ensemble(n_trees: int, n_features: int, n_targets: int, modes, max_depth: int = 4, missing=False):
    """TreeEnsemble attributes of ``n_trees`` random trees (every tree a root node; leaves shared by
    index), with branch modes drawn from ``modes`` (6: BRANCH_MEMBER, with random sets)."""
    nodes = {k: [] for k in ("splits", "feats", "modes", "true", "false", "tleaf", "fleaf", "miss")}
    leaves_w, leaves_t, members, roots = [], [], [], []

    def leaf():
        leaves_w.append(float(RNG.standard_normal() * 10))
        leaves_t.append(int(RNG.integers(n_targets)))
        return len(leaves_w) - 1, 1

    def grow(depth):
        if depth == max_depth or (depth > 0 and RNG.random() < 0.3):
            return leaf()
        k = len(nodes["splits"])
        mode = int(RNG.choice(modes))
        for key, v in (("splits", float(RNG.integers(-2, 3)) if mode in (4, 5) else float(RNG.standard_normal())),
                       ("feats", int(RNG.integers(n_features))), ("modes", mode), ("true", 0), ("false", 0),
                       ("tleaf", 0), ("fleaf", 0), ("miss", int(missing and RNG.random() < 0.5))):
            nodes[key].append(v)
        if mode == 6:
            members.extend([float(v) for v in RNG.choice(np.arange(-3, 4), size=int(RNG.integers(1, 4)), replace=False)]
                           + [np.nan])
        for side, leafside in (("true", "tleaf"), ("false", "fleaf")):
            idx, is_leaf = grow(depth + 1)
            nodes[side][k], nodes[leafside][k] = idx, is_leaf
        return k, 0

    for _ in range(n_trees):
        idx, is_leaf = grow(0)
        assert not is_leaf
        roots.append(idx)
    attrs = dict(nodes_splits=numpy_helper.from_array(np.array(nodes["splits"], np.float32)),
                 nodes_featureids=nodes["feats"], nodes_modes=numpy_helper.from_array(np.array(nodes["modes"], np.uint8)),
                 nodes_truenodeids=nodes["true"], nodes_falsenodeids=nodes["false"], nodes_trueleafs=nodes["tleaf"],
                 nodes_falseleafs=nodes["fleaf"], leaf_targetids=leaves_t,
                 leaf_weights=numpy_helper.from_array(np.array(leaves_w, np.float32)), tree_roots=roots,
                 n_targets=n_targets)
    if members:
        attrs["membership_values"] = numpy_helper.from_array(np.array(members, np.float32))
    if missing:
        attrs["nodes_missing_value_tracks_true"] = nodes["miss"]
    return attrs


def features(n: int, f: int, nan: bool = False, integral: bool = False) -> np.ndarray:
    x = RNG.integers(-3, 4, (n, f)).astype(np.float32) if integral else RNG.standard_normal((n, f)).astype(np.float32)
    if nan:
        x[RNG.random((n, f)) < 0.2] = np.nan
    return x


@pytest.mark.parametrize("aggregate", [0, 1, 2, 3])
@pytest.mark.parametrize("modes", [[0], [0, 1, 2, 3]], ids=["leq", "ordered"])
def test_tree_ensemble_matches_onnxruntime(aggregate, modes):
    attrs = random_ensemble(6, 4, 3, modes)
    ins = {"x": features(40, 4)}
    check_node(ml_model("TreeEnsemble", ins, aggregate_function=aggregate, **attrs), ins)


def test_tree_ensemble_with_equality_and_missing_values_matches_onnxruntime():
    attrs = random_ensemble(5, 3, 2, [0, 3, 4, 5], missing=True)
    ins = {"x": features(50, 3, nan=True, integral=True)}
    check_node(ml_model("TreeEnsemble", ins, **attrs), ins)


def test_tree_ensemble_set_membership_matches_onnxruntime():
    attrs = random_ensemble(4, 3, 2, [0, 6, 6])
    ins = {"x": features(50, 3, integral=True)}
    check_node(ml_model("TreeEnsemble", ins, **attrs), ins)


def test_tree_ensemble_a_one_leaf_tree_gives_its_leaf():
    attrs = dict(nodes_splits=numpy_helper.from_array(np.array([0.0, 0.5], np.float32)), nodes_featureids=[0, 1],
                 nodes_modes=numpy_helper.from_array(np.array([0, 0], np.uint8)), nodes_truenodeids=[0, 1],
                 nodes_falsenodeids=[0, 2], nodes_trueleafs=[1, 1], nodes_falseleafs=[1, 1], leaf_targetids=[1, 0, 1],
                 leaf_weights=numpy_helper.from_array(np.array([3.0, 5.0, 7.0], np.float32)), tree_roots=[0, 1],
                 n_targets=2)
    ins = {"x": features(6, 2)}
    got = check_node(ml_model("TreeEnsemble", ins, **attrs), ins)[0]
    np.testing.assert_array_equal(got[:, 1], 3.0 + np.where(ins["x"][:, 1] <= 0.5, 0.0, 7.0))


def test_tree_ensemble_refuses_a_post_transform_naming_it():
    ins = {"x": features(3, 4)}
    model = ml_model("TreeEnsemble", ins, post_transform=1, **random_ensemble(2, 4, 2, [0]))
    with pytest.raises(la.GraphFormatError, match=r"TreeEnsemble post_transform 1 is not supported"):
        from lazyarray.onnx.backend import LazyArrayBackend
        LazyArrayBackend.prepare(model).run([ins["x"]])


def test_tree_ensemble_refuses_a_cycle():
    attrs = dict(nodes_splits=numpy_helper.from_array(np.array([0.0, 0.0], np.float32)), nodes_featureids=[0, 0],
                 nodes_modes=numpy_helper.from_array(np.array([0, 0], np.uint8)), nodes_truenodeids=[1, 0],
                 nodes_falsenodeids=[0, 0], nodes_trueleafs=[0, 0], nodes_falseleafs=[1, 1], leaf_targetids=[0],
                 leaf_weights=numpy_helper.from_array(np.array([1.0], np.float32)), tree_roots=[0], n_targets=1)
    ins = {"x": features(2, 1)}
    from lazyarray.onnx.backend import LazyArrayBackend
    with pytest.raises(la.GraphFormatError, match=r"do not form trees"):
        LazyArrayBackend.prepare(ml_model("TreeEnsemble", ins, **attrs)).run([ins["x"]])


def test_array_feature_extractor_negative_indices_count_from_the_end_as_in_onnx_reference():
    # (onnxruntime refuses them)
    ins = {"x": RNG.standard_normal((2, 5)).astype(np.float32), "i": np.array([-1, 0, -5], np.int64)}
    got = check_node(ml_model("ArrayFeatureExtractor", ins), ins, runtime="reference")[0]
    np.testing.assert_array_equal(got, ins["x"][:, [4, 0, 0]])
