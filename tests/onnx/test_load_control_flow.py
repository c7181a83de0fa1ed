"""ONNX control flow import: Scan -> foreach, If -> cond, Loop -> while_loop / foreach, against onnxruntime."""
import numpy as np
import pytest

import lazyarray as la
from lazyarray.onnx import import_ops

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper  # noqa: E402

F, I64, B = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL
RNG = np.random.default_rng(0)


def _vi(name, dtype=F, shape=None):
    return helper.make_tensor_value_info(name, dtype, shape)


def _model(nodes, inputs, outputs, inits=()):
    g = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(inits))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def _check(model, feeds, tmp_path, params=False):
    path = str(tmp_path / "m.onnx")
    onnx.save(model, path)
    want = ort.InferenceSession(path).run(None, feeds)
    if params:
        net = la.blocks.SymbolBlock.imports(path, list(feeds))
        got = net(*[la.array(v) for v in feeds.values()])
        got = [got] if not isinstance(got, (list, tuple)) else got
    else:
        sym = la.onnx.load(path)
        got = la.CachedOp(sym)(**{k: la.array(v) for k, v in feeds.items()})
        got = [got] if not isinstance(got, (list, tuple)) else got
    assert len(got) == len(want)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g.asnumpy(), w, rtol=1e-5, atol=1e-6)
        assert g.asnumpy().dtype == w.dtype


def _scan_body(outer_w=True):
    """(h, x_t) -> (h' = tanh(h + x_t * w), y_t = h' * 2): w read from the outer graph by name."""
    nodes = [helper.make_node("Mul", ["x_t", "w" if outer_w else "x_t"], ["xw"]),
             helper.make_node("Add", ["h", "xw"], ["s"]),
             helper.make_node("Tanh", ["s"], ["h_new"]),
             helper.make_node("Add", ["h_new", "h_new"], ["y_t"])]
    return helper.make_graph(nodes, "body", [_vi("h"), _vi("x_t")], [_vi("h_new"), _vi("y_t")])


@pytest.mark.parametrize("params", [False, True])
@pytest.mark.parametrize("axes,dirs", [(None, None), ([1], [1])])
def test_scan_matches_onnxruntime_with_an_outer_value(axes, dirs, params, tmp_path):
    attrs = {"num_scan_inputs": 1}
    if axes is not None:
        attrs.update(scan_input_axes=axes, scan_input_directions=dirs, scan_output_axes=axes,
                     scan_output_directions=dirs)
    node = helper.make_node("Scan", ["h0", "xs"], ["h", "ys"], body=_scan_body(), **attrs)
    xs_shape = [5, 3] if axes is None else [3, 5]
    w = onnx.numpy_helper.from_array(RNG.standard_normal(3).astype(np.float32), "w")
    m = _model([node], [_vi("h0", F, [3]), _vi("xs", F, xs_shape)], [_vi("h"), _vi("ys")], [w])
    feeds = {"h0": RNG.standard_normal(3).astype(np.float32), "xs": RNG.standard_normal(xs_shape).astype(np.float32)}
    _check(m, feeds, tmp_path, params)


def test_scan_refuses_a_bad_direction_naming_the_attribute(tmp_path):
    node = helper.make_node("Scan", ["h0", "xs"], ["h", "ys"], body=_scan_body(False), num_scan_inputs=1,
                            scan_input_directions=[2])
    m = _model([node], [_vi("h0", F, [3]), _vi("xs", F, [5, 3])], [_vi("h"), _vi("ys")])
    m.ir_version = 8
    path = str(tmp_path / "m.onnx")
    onnx.save(m, path)
    with pytest.raises(la.GraphFormatError, match="scan_input_directions"):
        la.onnx.load(path)


def _branch(name, op, operand):
    return helper.make_graph([helper.make_node(op, ["x", operand], [f"{name}_out"])], name, [],
                             [_vi(f"{name}_out", F, [2, 3])])


@pytest.mark.parametrize("flag", [True, False])
def test_if_reads_outer_values_in_each_branch(flag, tmp_path):
    w = onnx.numpy_helper.from_array(RNG.standard_normal((2, 3)).astype(np.float32), "w")
    nodes = [helper.make_node("ReduceSum", ["x"], ["total"], keepdims=0),
             helper.make_node("Greater", ["total", "zero"], ["pos"]),
             helper.make_node("If", ["flag"], ["y"], then_branch=_branch("then", "Add", "w"),
                              else_branch=_branch("else", "Mul", "x"))]
    zero = onnx.numpy_helper.from_array(np.array(0, np.float32), "zero")
    m = _model(nodes, [_vi("flag", B, []), _vi("x", F, [2, 3])], [_vi("y", F, [2, 3]), _vi("pos", B, [])], [w, zero])
    _check(m, {"flag": np.array(flag), "x": RNG.standard_normal((2, 3)).astype(np.float32)}, tmp_path)


def _loop_body(scan_out=False, stop=True):
    """(i, c, acc) -> (c' = acc < 100 (or c), acc' = acc * 2 + i (as float)[, scan: acc'])"""
    nodes = [helper.make_node("Cast", ["i"], ["fi"], to=F),
             helper.make_node("Mul", ["acc", "two"], ["a2"]),
             helper.make_node("Add", ["a2", "fi"], ["acc_new"])]
    if stop:
        nodes += [helper.make_node("ReduceSum", ["acc_new"], ["tot"], keepdims=0),
                  helper.make_node("Less", ["tot", "limit"], ["c_new"])]
    else:
        nodes += [helper.make_node("Identity", ["c"], ["c_new"])]
    outs = [_vi("c_new", B, []), _vi("acc_new")]
    if scan_out:
        nodes.append(helper.make_node("Identity", ["acc_new"], ["scanned"]))
        outs.append(_vi("scanned"))
    return helper.make_graph(nodes, "body", [_vi("i", I64, []), _vi("c", B, []), _vi("acc")], outs)


@pytest.mark.parametrize("trip", ["const", "input", "none"])
def test_loop_with_count_and_condition_matches_onnxruntime(trip, tmp_path):
    inits = [onnx.numpy_helper.from_array(np.array(2, np.float32), "two"),
             onnx.numpy_helper.from_array(np.array(100, np.float32), "limit")]
    inputs = [_vi("acc0", F, [2]), _vi("c0", B, [])]
    feeds = {"acc0": np.array([0.5, 1.0], np.float32), "c0": np.array(True)}
    if trip == "const":
        inits.append(onnx.numpy_helper.from_array(np.array(4, np.int64), "M"))
    elif trip == "input":
        inputs.append(_vi("M", I64, []))
        feeds["M"] = np.array(3, np.int64)
    node = helper.make_node("Loop", ["" if trip == "none" else "M", "c0", "acc0"], ["acc"], body=_loop_body())
    _check(_model([node], inputs, [_vi("acc", F, [2])], inits), feeds, tmp_path)


def test_loop_scan_outputs_with_a_fixed_count(tmp_path):
    inits = [onnx.numpy_helper.from_array(np.array(2, np.float32), "two"),
             onnx.numpy_helper.from_array(np.array(4, np.int64), "M")]
    node = helper.make_node("Loop", ["M", "", "acc0"], ["acc", "all"], body=_loop_body(True, stop=False))
    m = _model([node], [_vi("acc0", F, [2])], [_vi("acc", F, [2]), _vi("all", F, [4, 2])], inits)
    _check(m, {"acc0": np.array([0.5, 1.0], np.float32)}, tmp_path)


@pytest.mark.parametrize("limit,acc0", [(100.0, [0.5, 1.0]), (1e9, [0.5, 1.0]), (1.0, [3.0, 4.0])],
                         ids=["stops-after-3", "runs-all-4", "stops-after-1"])
def test_loop_scan_outputs_with_an_early_stop_keep_the_rows_run(limit, acc0, tmp_path):
    inits = [onnx.numpy_helper.from_array(np.array(2, np.float32), "two"),
             onnx.numpy_helper.from_array(np.array(limit, np.float32), "limit"),
             onnx.numpy_helper.from_array(np.array(4, np.int64), "M")]
    node = helper.make_node("Loop", ["M", "", "acc0"], ["acc", "all"], body=_loop_body(True, stop=True))
    m = _model([node], [_vi("acc0", F, [2])], [_vi("acc", F, [2]), _vi("all", F, [None, 2])], inits)
    _check(m, {"acc0": np.array(acc0, np.float32)}, tmp_path)


def test_loop_scan_outputs_without_a_known_count_are_refused(tmp_path):
    inits = [onnx.numpy_helper.from_array(np.array(2, np.float32), "two"),
             onnx.numpy_helper.from_array(np.array(100, np.float32), "limit")]
    node = helper.make_node("Loop", ["M", "", "acc0"], ["acc", "all"], body=_loop_body(True, stop=True))
    m = _model([node], [_vi("acc0", F, [2]), _vi("M", I64, [])], [_vi("acc", F, [2]), _vi("all", F, [None, 2])],
               inits)
    path = str(tmp_path / "m.onnx")
    onnx.save(m, path)
    with pytest.raises(la.GraphFormatError, match=r"Loop.*scan output.*trip count M is known when loading"):
        la.onnx.load(path)


def _scan_loop(m, stop: bool, tmp_path):
    inits = [onnx.numpy_helper.from_array(np.array(2, np.float32), "two"),
             onnx.numpy_helper.from_array(np.array(100, np.float32), "limit"),
             onnx.numpy_helper.from_array(np.asarray(m), "M")]
    node = helper.make_node("Loop", ["M", "", "acc0"], ["acc", "all"], body=_loop_body(True, stop=stop), name="lp")
    path = str(tmp_path / "m.onnx")
    onnx.save(_model([node], [_vi("acc0", F, [2])], [_vi("acc", F, [2]), _vi("all", F, [None, 2])], inits), path)
    return path


@pytest.mark.parametrize("stop", [False, True], ids=["foreach", "stops-early"])
def test_a_huge_trip_count_is_refused_before_anything_is_allocated(stop, tmp_path, monkeypatch):
    """The converter built np.arange(M) unbounded: 'array is too big' (a bare ValueError) for M = 2**62,
    gigabytes for M near 1e9."""
    monkeypatch.setattr(la.config, "max_alloc_bytes", 2**30)
    with pytest.raises(la.OutOfMemoryError, match=r"lp.*the iteration numbers 0 .. M - 1.*int64\[1000000000\] needs"):
        la.onnx.load(_scan_loop(np.int64(10**9), stop, tmp_path))
    with pytest.raises(la.GraphFormatError, match=r"lp.*shape \[4611686018427387904\] of int64.*more than any array"):
        la.onnx.load(_scan_loop(np.int64(2**62), stop, tmp_path))


@pytest.mark.parametrize("m,match", [(np.float32("nan"), "one finite number"), (np.zeros(0, np.int64), r"int64\[0\]"),
                                     (np.array([1, 2], np.int64), "one finite number")])
def test_a_trip_count_that_is_not_one_number_is_a_format_error(m, match, tmp_path):
    with pytest.raises(la.GraphFormatError, match=rf"lp.*trip count M must be .*{match}"):
        la.onnx.load(_scan_loop(m, False, tmp_path))


def test_a_trip_count_above_the_fold_budget_counts_when_run(tmp_path, monkeypatch):
    monkeypatch.setattr(import_ops, "MAX_FOLD_BYTES", 16)  # 0 .. 3 would take 32 bytes: an iota op
    sym = la.onnx.load(_scan_loop(np.int64(4), False, tmp_path))
    assert "iota" in [n.op.name for n in sym.topo() if n.op is not None]
    acc, rows = la.CachedOp(sym)(acc0=la.array(np.array([0.5, 1.0], np.float32)))
    assert rows.shape == (4, 2) and np.isfinite(acc.asnumpy()).all()


def test_if_whose_branches_give_different_shapes_is_refused_naming_the_node(tmp_path):
    then_b = helper.make_graph([helper.make_node("Identity", ["x"], ["a"])], "then", [], [_vi("a", F, [2, 3])])
    else_b = helper.make_graph([helper.make_node("ReduceSum", ["x"], ["b"], keepdims=0)], "else", [],
                               [_vi("b", F, [])])
    node = helper.make_node("If", ["flag"], ["y"], then_branch=then_b, else_branch=else_b, name="pick")
    m = _model([node], [_vi("flag", B, []), _vi("x", F, [2, 3])], [_vi("y")])
    path = str(tmp_path / "m.onnx")
    onnx.save(m, path)
    with pytest.raises(la.GraphFormatError, match=r"'pick' \(If\).*then_branch gives \(\(2, 3\).*else_branch "
                                                  r"\(\(\).*same shapes"):
        la.onnx.load(path)



@pytest.mark.parametrize("shape", [(2, 3), (2, 2)])
def test_if_with_a_condition_known_at_load_time_inlines_the_branch_it_takes(shape, tmp_path):
    """A condition computed from shapes (as ONNX's function expansions switch on the rank) picks its
    branch when loading, so the branches may give different shapes; the branch's names stay its own."""
    flat = onnx.numpy_helper.from_array(np.array([-1], np.int64), "flat")
    then_b = helper.make_graph([helper.make_node("Reshape", ["x", "flat"], ["t"]),
                                helper.make_node("Neg", ["t"], ["a"])], "then", [], [_vi("a")], initializer=[flat])
    else_b = helper.make_graph([helper.make_node("ReduceSum", ["x"], ["t"], keepdims=0),
                                helper.make_node("Identity", ["t"], ["b"])], "else", [], [_vi("b")])
    six = onnx.numpy_helper.from_array(np.array(6, np.int64), "six")
    nodes = [helper.make_node("Size", ["x"], ["n"]), helper.make_node("Equal", ["n", "six"], ["is6"]),
             helper.make_node("If", ["is6"], ["y"], then_branch=then_b, else_branch=else_b)]
    m = _model(nodes, [_vi("x", F, list(shape))], [_vi("y")], [six])
    _check(m, {"x": RNG.standard_normal(shape).astype(np.float32)}, tmp_path)


class _CondNet(la.blocks.HybridBlock):
    def forward(self, x):
        return la.cond(x.sum() > 0, lambda a: a * 2.0 + 1.0, lambda a: a - x.mean(), x)


class _WhileNet(la.blocks.HybridBlock):
    def forward(self, x):
        def body(i, a):
            return i + 1, a * 1.5 + x

        return la.while_loop(lambda i, a: a.sum() < 50.0, body, [la.zeros((), dtype="int64"), x],
                             max_iterations=20)[1]


@pytest.mark.parametrize("make,sign", [(_CondNet, 1), (_CondNet, -1), (_WhileNet, 1)], ids=["cond+", "cond-", "while"])
def test_control_flow_round_trips_through_export_and_import(make, sign, tmp_path):
    net = make()
    net.hybridize()
    x = (sign * np.abs(RNG.standard_normal((2, 3)))).astype(np.float32)
    want = net(la.array(x)).asnumpy()
    path = net.export_onnx(str(tmp_path / "m.onnx"))
    got, = ort.InferenceSession(path).run(None, {"data": x})
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    back = la.blocks.SymbolBlock.imports(path, ["data"])
    np.testing.assert_allclose(back(la.array(x)).asnumpy(), want, rtol=1e-5, atol=1e-6)
    other = (-x).astype(np.float32)  # the imported graph branches on the data, as the original
    np.testing.assert_allclose(back(la.array(other)).asnumpy(), net(la.array(other)).asnumpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", ["test_if", "test_scan9_sum", "test_scan9_scalar", "test_scan9_multi_state"])
def test_onnx_own_control_flow_cases_of_old_opsets_pass_as_written_and_converted_to_opset_16(name):
    import dataclasses

    from onnx import version_converter

    from lazyarray.onnx.backend import node_cases, run_case
    case, = [c for c in node_cases() if c.name == name]
    assert run_case(case) is None  # as written (opset 9 / 11): brought to 13 by onnx/opset_upgrade.py
    assert run_case(dataclasses.replace(case, model=version_converter.convert_version(case.model, 16))) is None


def test_range_expanded_into_a_loop_with_a_scan_output_matches_range(tmp_path):
    """ONNX's Range function body: a Loop whose count and condition are computed from the inputs."""
    from lazyarray.onnx.backend import node_cases, run_case
    case, = [c for c in node_cases() if c.name == "test_range_float_type_positive_delta_expanded"]
    assert run_case(case) is None
