"""ONNX sequence and optional values (``onnx/import_sequence.py``) beyond ONNX's node cases, against
onnxruntime: sequences built, edited and mapped, optionals empty and full, Loops unrolled (carrying a
sequence, or slicing by the iteration number), and the refusals that name what cannot be imported."""
from __future__ import annotations

import numpy as np
import pytest

import lazyarray as la

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from lazyarray.onnx.backend import LazyArrayBackend  # noqa: E402

F, I64, B = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL
RNG = np.random.default_rng(17)


def tensor(name, dtype=F, shape=None):
    return helper.make_tensor_value_info(name, dtype, shape)


def seq(name, dtype=F):
    return helper.make_tensor_sequence_value_info(name, dtype, None)


def model(nodes, inputs, outputs, inits=(), opset=18):
    g = helper.make_graph(nodes, "g", inputs, outputs, initializer=[numpy_helper.from_array(v, k) for k, v in inits])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], ir_version=9)


def check(m, feeds: dict):
    """lazyarray's outputs (lists for sequences) equal onnxruntime's; returns lazyarray's."""
    want = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
    got = LazyArrayBackend.prepare(m).run(feeds)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        if w is None:  # an empty optional
            assert g is None
            continue
        if isinstance(w, list):
            assert isinstance(g, list) and len(g) == len(w)
        for gi, wi in zip(g if isinstance(w, list) else [g], w if isinstance(w, list) else [w]):
            assert gi.dtype == wi.dtype and gi.shape == wi.shape
            np.testing.assert_allclose(gi, wi, rtol=1e-6, atol=1e-6)
    return got


def test_split_map_concat_matches_onnxruntime():
    """Uneven pieces, a SequenceMap body reading an outer tensor and giving two sequences, then both
    concatenated (one along a new axis)."""
    body = helper.make_graph([helper.make_node("Mul", ["piece", "w"], ["scaled"]),
                              helper.make_node("ReduceSum", ["scaled"], ["total"], keepdims=1)],
                             "body", [tensor("piece"), tensor("w")], [tensor("scaled"), tensor("total")])
    nodes = [helper.make_node("SplitToSequence", ["x", "split"], ["pieces"], axis=1),
             helper.make_node("SequenceMap", ["pieces", "w"], ["scaled", "totals"], body=body),
             helper.make_node("ConcatFromSequence", ["scaled"], ["back"], axis=1),
             helper.make_node("ConcatFromSequence", ["totals"], ["stacked"], axis=0, new_axis=1)]
    m = model(nodes, [tensor("x", F, [3, 7]), tensor("w", F, [1])], [tensor("back"), tensor("stacked")],
              [("split", np.array([2, 4, 1], np.int64))])
    check(m, {"x": RNG.standard_normal((3, 7)).astype(np.float32), "w": np.array([1.5], np.float32)})


@pytest.mark.parametrize("pos", [0, 2, -1, -3])
def test_insert_erase_at_and_length_with_negative_positions_match_onnxruntime(pos):
    nodes = [helper.make_node("SequenceInsert", ["s", "t", "p"], ["s2"]),
             helper.make_node("SequenceErase", ["s2", "q"], ["s3"]),
             helper.make_node("SequenceAt", ["s3", "p"], ["at"]),
             helper.make_node("SequenceLength", ["s3"], ["n"])]
    m = model(nodes, [seq("s"), tensor("t", F, [2, 2])], [seq("s3"), tensor("at"), tensor("n", I64, [])],
              [("p", np.array(pos, np.int64)), ("q", np.array(-2, np.int64))])
    items = [RNG.standard_normal((2, 2)).astype(np.float32) for _ in range(3)]
    check(m, {"s": items, "t": np.full((2, 2), 9.0, np.float32)})


def test_split_to_sequence_by_a_scalar_size_leaves_a_smaller_last_piece():
    nodes = [helper.make_node("SplitToSequence", ["x", "k"], ["s"], axis=0)]
    m = model(nodes, [tensor("x", F, [5, 2])], [seq("s")], [("k", np.array(2, np.int64))])
    got = check(m, {"x": RNG.standard_normal((5, 2)).astype(np.float32)})[0]
    assert [p.shape for p in got] == [(2, 2), (2, 2), (1, 2)]


@pytest.mark.parametrize("empty", [False, True])
def test_optionals_full_and_empty_match_onnxruntime(empty):
    opt_type = helper.make_optional_type_proto(helper.make_tensor_type_proto(F, [3]))
    then_b = helper.make_graph([helper.make_node("Optional", [], ["none"], type=opt_type.optional_type.elem_type)],
                               "then", [],
                               [helper.make_value_info("none", opt_type)])
    else_b = helper.make_graph([helper.make_node("Optional", ["x"], ["some"])], "else", [],
                               [helper.make_value_info("some", opt_type)])
    nodes = [helper.make_node("If", ["flag"], ["o"], then_branch=then_b, else_branch=else_b),
             helper.make_node("OptionalHasElement", ["o"], ["has"]),
             helper.make_node("Identity", ["o"], ["o2"])]
    m = model(nodes, [tensor("flag", B, []), tensor("x", F, [3])],
              [tensor("has", B, []), helper.make_value_info("o2", opt_type)])
    got = check(m, {"flag": np.array(empty), "x": RNG.standard_normal(3).astype(np.float32)})
    assert bool(got[0]) is not empty and (got[1] is None) is empty


def _accumulating_loop_body():
    """(i, c, s) -> (c, s + [x[: i + 1] summed]): a slice bound from the iteration number, a sequence carried."""
    nodes = [helper.make_node("Add", ["i", "one"], ["end"]),
             helper.make_node("Unsqueeze", ["end", "zero"], ["end1"]),
             helper.make_node("Slice", ["x", "zero", "end1"], ["head"]),
             helper.make_node("ReduceSum", ["head"], ["total"], keepdims=0),
             helper.make_node("SequenceInsert", ["s", "total"], ["s_new"]),
             helper.make_node("Identity", ["c"], ["c_new"]),
             helper.make_node("Identity", ["total"], ["row"])]
    return helper.make_graph(nodes, "body", [tensor("i", I64, []), tensor("c", B, []), seq("s")],
                             [tensor("c_new", B, []), seq("s_new"), tensor("row", F, [])])


def test_a_loop_carrying_a_sequence_and_slicing_by_the_iteration_number_unrolls_like_onnxruntime():
    nodes = [helper.make_node("SequenceEmpty", [], ["s0"], dtype=F),
             helper.make_node("Loop", ["m", "", "s0"], ["s", "rows"], body=_accumulating_loop_body())]
    m = model(nodes, [tensor("x", F, [5])], [seq("s"), tensor("rows")],
              [("m", np.array(4, np.int64)), ("one", np.array(1, np.int64)), ("zero", np.array([0], np.int64))])
    x = RNG.standard_normal(5).astype(np.float32)
    got = check(m, {"x": x})
    np.testing.assert_allclose(got[1], np.cumsum(x)[:4], rtol=1e-6)  # every iteration saw its own bound


def test_a_sequence_input_loads_as_one_graph_input_per_tensor(tmp_path):
    nodes = [helper.make_node("ConcatFromSequence", ["s"], ["y"], axis=0)]
    path = str(tmp_path / "m.onnx")
    onnx.save(model(nodes, [seq("s")], [tensor("y")]), path)
    sym = la.onnx.load(path, input_shapes={"s": [(2, 3), (1, 3)]})
    assert sym.list_inputs() == ["s.0", "s.1"]
    a, b = RNG.standard_normal((2, 3)).astype(np.float32), RNG.standard_normal((1, 3)).astype(np.float32)
    got = la.CachedOp(sym)(**{"s.0": la.array(a), "s.1": la.array(b)}).asnumpy()
    np.testing.assert_array_equal(got, np.concatenate([a, b]))
    with pytest.raises(la.GraphFormatError, match=r"graph input 's'.*input_shapes=\{name: \[shape, \.\.\.\]\}"):
        la.onnx.load(path)


def test_a_tensor_operator_reading_a_sequence_is_refused_naming_it(tmp_path):
    nodes = [helper.make_node("SequenceConstruct", ["x", "x"], ["s"]), helper.make_node("Relu", ["s"], ["y"], name="r")]
    path = str(tmp_path / "m.onnx")
    onnx.save(model(nodes, [tensor("x", F, [2])], [tensor("y")]), path)
    with pytest.raises(la.GraphFormatError, match=r"'r' \(Relu\): reads 's', a sequence or optional value"):
        la.onnx.load(path)


def test_an_if_giving_sequences_on_a_condition_known_only_when_running_is_refused(tmp_path):
    def branch(name):
        return helper.make_graph([helper.make_node("SequenceConstruct", ["x"], [name])], name, [], [seq(name)])
    nodes = [helper.make_node("If", ["flag"], ["s"], then_branch=branch("a"), else_branch=branch("b"), name="pick")]
    path = str(tmp_path / "m.onnx")
    onnx.save(model(nodes, [tensor("flag", B, []), tensor("x", F, [2])], [seq("s")]), path)
    with pytest.raises(la.GraphFormatError, match=r"'pick' \(If\): output 0 is a sequence or optional value"):
        la.onnx.load(path)


def test_a_sequence_input_of_integers_loads_with_its_element_type(tmp_path):
    nodes = [helper.make_node("SequenceAt", ["s", "k"], ["y"])]
    path = str(tmp_path / "m.onnx")
    onnx.save(model(nodes, [seq("s", I64)], [tensor("y", I64)], [("k", np.array(-1, np.int64))]), path)
    sym = la.onnx.load(path, input_shapes={"s": [(2,), (3,)]})
    assert sym.list_inputs() == ["s.1"]  # (the tensors the graph reads)
    b = np.array([4, 5, 6], np.int64)
    got = la.CachedOp(sym)(**{"s.1": la.array(b)}).asnumpy()
    assert got.dtype == np.int64
    np.testing.assert_array_equal(got, b)
