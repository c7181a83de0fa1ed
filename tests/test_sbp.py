"""SBP values, rules against the physical computation, inference and boxing choices.

The rule checks are generated from the op case table: for every op with an SBP rule and every
sample, each input signature the rule accepts is run the way a cluster runs it (inputs split
with NumPy, the op's graph localized and run per piece), the output pieces are combined as the
output SBP says, and the result must equal the logical result.
"""
from __future__ import annotations

import itertools
import json
import warnings

import numpy as np
import pytest
from ops.cases import CASES

import lazyarray as la
from lazyarray.distributed import pieces as P
from lazyarray.graph.build import apply_node
from lazyarray.graph.node import Entry, var_node
from lazyarray.graph.passes.gradient import gradient
from lazyarray.graph.symbol import Symbol
from lazyarray.ops import registry
from lazyarray.ops.sbp_rules import RULES, SBPFallbackWarning, rule_for

S, B, PSUM = la.sbp.split, la.sbp.broadcast(), la.sbp.partial_sum()
N = 2


def test_values_and_text():
    assert str(S(1)) == "S(1)" and str(B) == "B" and str(PSUM) == "P(sum)"
    assert la.sbp.parse("P(max)") == la.sbp.partial_max()
    assert la.sbp.parse("P(min)") == la.sbp.partial_min()
    with pytest.raises(la.sbp.SBPError, match="not an SBP"):
        la.sbp.parse("X(1)")
    with pytest.raises(la.sbp.SBPError):
        S(-1)
    assert la.sbp.split_sizes(5, 2) == [3, 2]


def test_boxing_kinds_and_costs():
    kinds = {(str(a), str(b)): la.sbp.boxing_kind(a, b)
             for a in (S(0), S(1), B, PSUM) for b in (S(0), S(1), B, PSUM) if a != b}
    assert kinds[("S(0)", "B")] == "all_gather" and kinds[("P(sum)", "B")] == "all_reduce"
    assert kinds[("P(sum)", "S(0)")] == "reduce_scatter" and kinds[("B", "S(1)")] == "local_slice"
    assert kinds[("S(0)", "S(1)")] == "all_to_all" and kinds[("S(0)", "P(sum)")] is None
    assert la.sbp.boxing_bytes(B, S(0), 100, 4) == 0
    assert la.sbp.boxing_bytes(S(0), B, 100, 4) == 300
    assert la.sbp.boxing_bytes(PSUM, B, 100, 4) == 600
    assert la.sbp.boxing_bytes(S(0), S(1), 100, 4) == 75


@pytest.mark.parametrize("src", [S(0), S(1), B, PSUM, la.sbp.partial_max()], ids=str)
@pytest.mark.parametrize("dst", [S(0), S(1), B, PSUM], ids=str)
def test_box_reference(src, dst):
    """pieces.box turns pieces of src into pieces of dst of the same logical array."""
    x = np.arange(35.0).reshape(5, 7)
    pieces = P.split_value(x, src, 3)
    if src.is_partial and src.reduce == "max":
        pieces = [x - 1.0, x, x - 2.0]
    if la.sbp.boxing_kind(src, dst) is None and src != dst and not src.is_partial:
        out = P.box(P.box(pieces, src, B), B, dst)  # S -> P: inference goes through B
    else:
        out = P.box(pieces, src, dst)
    assert len(out) == 3
    np.testing.assert_array_equal(P.combine(out, dst), x)


# -- rules against the physical computation -------------------------------------------------------------
def _ops_with_rules():
    return sorted(op.name for op in registry.all_ops() if rule_for(op) is not None and op.name in CASES
                  and op.compose is None and CASES[op.name].kind == "plain")


def _candidates(arr):
    if arr is None:
        return [None]
    return [B, PSUM] + [S(k) for k in range(np.ndim(arr))]


def _one_node(op, args, params):
    """The one-node graph of ``op`` on variables ``a0..`` shaped like ``args``, and the flat args."""
    flat, entries = [], []
    for a in args:
        if a is None:
            continue
        if isinstance(a, list):
            seq = []
            for x in map(np.asarray, a):
                seq.append(Entry(var_node(f"a{len(flat)}", la.Aval(x.shape, x.dtype, la.cpu(0))), 0))
                flat.append(x)
            entries.append(seq)
        else:
            a = np.asarray(a)
            entries.append(Entry(var_node(f"a{len(flat)}", la.Aval(a.shape, a.dtype, la.cpu(0))), 0))
            flat.append(a)
    out = apply_node(op, *entries, **params)
    return Symbol([out] if isinstance(out, Entry) else list(out)), flat


def _split_random(x, s, rng):
    if s.is_partial:  # random pieces that add up to x
        noise = rng.standard_normal(x.shape).astype(x.dtype)
        return [x - noise, noise]
    return P.split_value(x, s, N)


def _check_signature(sym, flat, sbps, rng):
    ann = sym.infer_sbp(pieces=N, **{f"a{i}": s for i, s in enumerate(sbps)})
    if any(n.op is not None and n.op.name == "boxing" for n in ann.topo()):
        return None  # the rule refused these inputs (the pass boxed them): nothing physical to check
    pieces = [_split_random(x, s, rng) for x, s in zip(flat, sbps)]
    outs = []
    for i in range(N):
        shapes = {f"a{j}": p[i].shape for j, p in enumerate(pieces)}
        local = P.localize(ann, shapes)
        res = la.CachedOp(local)(**{f"a{j}": p[i] for j, p in enumerate(pieces)})
        outs.append([r.asnumpy() for r in (res if isinstance(res, list) else [res])])
    want = la.CachedOp(sym)(**{f"a{j}": x for j, x in enumerate(flat)})
    want = [w.asnumpy() for w in (want if isinstance(want, list) else [want])]
    out_sbps = [e.node.sbp[e.index] for e in ann.outputs]
    for k, (w, s) in enumerate(zip(want, out_sbps)):
        got = P.combine([o[k] for o in outs], s)
        np.testing.assert_allclose(got, w, rtol=1e-6, atol=1e-9, err_msg=f"signature {sbps} -> {s}")
    return out_sbps


# Signatures the combinations above miss (too many inputs to try all): conv2d_add_relu's batch split of x and
# the residual together, the weight and bias whole.
_EXTRA = {"conv2d_add_relu": lambda n: [(S(0), B, S(0)) + (B,) * (n - 3)]}

# Ops whose samples in the case table only reduce/cover whole arrays, so only B is accepted there.
_ONLY_BROADCAST_SAMPLES = {"argmin", "argmax", "prod"}


@pytest.mark.parametrize("name", _ops_with_rules())
def test_rule_matches_physical_computation(name):
    op, case = registry.get(name), CASES[name]
    dtype = "float64" if "float64" in case.dtypes else case.dtypes[0]
    rng = np.random.default_rng(17)
    nontrivial = 0
    for sample in case.samples(rng, dtype, False)[:8]:
        args = list(sample.args)
        if any(isinstance(a, list) for a in args):
            args_flat = [x for a in args for x in (a if isinstance(a, list) else [a]) if x is not None]
        else:
            args_flat = [a for a in args if a is not None]
        if any(np.asarray(a).dtype.kind not in "fiub" for a in args_flat):
            continue
        sym, flat = _one_node(op, args, sample.params)
        options = [_candidates(x) for x in flat]
        if np.prod([len(o) for o in options]) > 200:
            # too many: uniform signatures, and the first input's options with the rest whole (weights)
            combos = [tuple([o] * len(flat)) for o in _candidates(flat[0])]
            combos += [(o,) + (B,) * (len(flat) - 1) for o in _candidates(flat[0])]
        else:
            combos = itertools.product(*options)
        combos = list(combos) + _EXTRA.get(name, lambda n: [])(len(flat))
        for sbps in combos:
            if any(s.is_partial and x.dtype.kind != "f" for s, x in zip(sbps, flat)):
                continue
            if any(s.is_split and (s.axis >= x.ndim or x.shape[s.axis] < N) for s, x in zip(sbps, flat)):
                continue
            out = _check_signature(sym, flat, list(sbps), rng)
            if out is not None and not all(s.is_broadcast for s in sbps):
                nontrivial += 1
    if name not in _ONLY_BROADCAST_SAMPLES:
        assert nontrivial > 0, f"{name}: no sample exercised a split or partial signature"


def test_every_table_rule_names_an_op():
    for name in RULES:
        registry.get(name)


# -- the rules the issue names ---------------------------------------------------------------------------
def _annotate(sym, **sbps):
    ann = sym.infer_sbp(**sbps)
    ann.check()
    return ann, {ann.name_of(n): n for n in ann.topo()}


def _boxes(ann):
    return [(str(n.params["src"]), str(n.params["dst"])) for n in ann.topo()
            if n.op is not None and n.op.name == "boxing"]


def test_dense_signatures():
    x, w, b = la.sym.var("x", shape=(8, 4)), la.sym.var("w", shape=(3, 4)), la.sym.var("b", shape=(3,))
    y = la.sym.dense(x, w, b)
    ann, nodes = _annotate(y, x=S(0))
    assert nodes["dense0"].sbp == (S(0),) and _boxes(ann) == []
    ann, nodes = _annotate(y, w=S(0), b=S(0))
    assert nodes["dense0"].sbp == (S(1),) and _boxes(ann) == []
    ann, nodes = _annotate(y, x=S(1), w=S(1))  # contraction split: partial sums, bias kept on one piece
    assert nodes["dense0"].sbp == (PSUM,) and _boxes(ann) == [("B", "P(sum)")]


def test_matmul_signatures():
    a, b = la.sym.var("a", shape=(6, 4)), la.sym.var("b", shape=(4, 5))
    y = a @ b
    for sa, sb, out in [(S(0), B, S(0)), (B, S(1), S(1)), (S(1), S(0), PSUM), (PSUM, B, PSUM)]:
        ann, nodes = _annotate(y, a=sa, b=sb)
        assert nodes["matmul0"].sbp == (out,) and _boxes(ann) == []


def test_elementwise_split_and_broadcast():
    x, v = la.sym.var("x", shape=(6, 4)), la.sym.var("v", shape=(4,))
    ann, nodes = _annotate(la.sym.relu(x + v), x=S(0))
    assert nodes["add0"].sbp == (S(0),) and nodes["relu0"].sbp == (S(0),) and _boxes(ann) == []
    # split along the broadcast axis: the vector is sliced locally (no bytes moved)
    ann, nodes = _annotate(x + v, x=S(1))
    assert nodes["add0"].sbp == (S(1),) and _boxes(ann) == [("B", "S(0)")]


def test_reductions_give_partial_and_mean_uses_global_count():
    x = la.sym.var("x", shape=(5, 3))
    ann, nodes = _annotate(la.sym.mean(x, axis=0), x=S(0))
    assert nodes["mean0"].sbp == (PSUM,)
    ann, nodes = _annotate(la.sym.max(x, axis=0), x=S(0))
    assert nodes["max0"].sbp == (la.sbp.partial_max(),)
    ann, nodes = _annotate(la.sym.sum(x, axis=1), x=S(0))
    assert nodes["sum0"].sbp == (S(0),)
    # 5 rows over 2 pieces (3 + 2): each piece's mean is scaled by its share of the global count
    data = np.arange(15.0).reshape(5, 3)
    ann, _ = _annotate(la.sym.mean(x, axis=0), x=S(0))
    parts = np.array_split(data, 2)
    got = sum(la.CachedOp(P.localize(ann, {"x": p.shape}))(x=p).asnumpy() for p in parts)
    np.testing.assert_allclose(got, data.mean(axis=0))
    # more pieces than rows: the empty pieces add nothing (not 0/0)
    parts = np.array_split(data, 7)
    assert parts[-1].shape == (0, 3)
    got = sum(la.CachedOp(P.localize(ann, {"x": p.shape}))(x=p).asnumpy() for p in parts)
    np.testing.assert_allclose(got, data.mean(axis=0))


def test_softmax_along_split_axis_is_boxed_first():
    x = la.sym.var("x", shape=(6, 4))
    ann, nodes = _annotate(la.sym.softmax(x, axis=1), x=S(0))
    assert _boxes(ann) == [] and nodes["softmax0"].sbp == (S(0),)
    ann, nodes = _annotate(la.sym.softmax(x, axis=0), x=S(0))
    assert _boxes(ann) == [("S(0)", "S(1)")]  # the cheapest: all-to-all, not all-gather


def test_partial_then_nonlinear_is_boxed():
    x = la.sym.var("x", shape=(6, 4))
    # exp takes split pieces: reduce-scatter ((n-1) x bytes) is cheaper than all-reduce (twice that)
    ann, nodes = _annotate(la.sym.exp(la.sym.sum(x, axis=0)), x=S(0))
    assert _boxes(ann) == [("P(sum)", "S(0)")] and nodes["exp0"].sbp == (S(0),)
    # a softmax over the only axis needs the whole vector: all-reduce
    ann, nodes = _annotate(la.sym.softmax(la.sym.sum(x, axis=0), axis=0), x=S(0))
    assert _boxes(ann) == [("P(sum)", "B")]
    assert "all_reduce" in nodes and nodes["softmax0"].sbp == (B,)


def test_oneflow_expand_example():
    """(4, 1, 6) split along its last axis over 2 pieces, expanded to (4, 3, 6): local (4, 3, 3)."""
    x = la.sym.var("x", shape=(4, 1, 6))
    ann, nodes = _annotate(la.sym.expand(x, sizes=(4, 3, 6)), x=S(2))
    assert nodes["expand0"].sbp == (S(2),)
    data = np.random.default_rng(0).standard_normal((4, 1, 6))
    pieces = np.array_split(data, 2, axis=2)
    local = P.localize(ann, {"x": pieces[0].shape})
    node = [n for n in local.topo() if n.op is not None][0]
    assert node.params["sizes"] == (4, 3, 3) and node.avals[0].shape == (4, 3, 3)
    outs = [la.CachedOp(P.localize(ann, {"x": p.shape}))(x=p).asnumpy() for p in pieces]
    np.testing.assert_array_equal(np.concatenate(outs, axis=2), np.broadcast_to(data, (4, 3, 6)))
    # new leading dims shift the split axis; a split on a stretched dim is not a signature of expand
    ann, nodes = _annotate(la.sym.expand(la.sym.var("y", shape=(4, 1, 6)), sizes=(3, 4, 5, 6)), y=S(0))
    assert nodes["expand0"].sbp == (S(1),) and _boxes(ann) == []
    rule = RULES["expand"].infer
    assert rule([S(1)], [(4, 2, 6)], [(4, 2, 6)], {"sizes": (4, 2, 6)}) == [S(1)]
    assert rule([S(1)], [(4, 1, 6)], [(4, 3, 6)], {"sizes": (4, 3, 6)}) is None


def test_fallback_warns_once_per_op():
    x = la.sym.var("x", shape=(6, 4))
    y = la.sym.diagonal(x)
    from lazyarray.ops import sbp_rules
    sbp_rules.SBP_FALLBACK_WARNED.discard("diagonal")
    with pytest.warns(SBPFallbackWarning, match="diagonal: no SBP rule"):
        ann, nodes = _annotate(y, x=S(0))
    assert _boxes(ann) == [("S(0)", "B")] and nodes["diagonal0"].sbp == (B,)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        y.infer_sbp(x=S(0))


def test_text_json_and_drawing():
    x, w = la.sym.var("x", shape=(8, 4)), la.sym.var("w", shape=(3, 4))
    ann = la.sym.softmax(la.sym.dense(x, w), axis=0).infer_sbp(x=S(0))
    text = str(ann)
    assert "sbp=S(0)" in text and "boxing(%dense0, src=S(0), dst=S(1))" in text
    doc = json.loads(ann.to_json())
    assert [d.get("sbp") for d in doc["nodes"]][:2] == [["S(0)"], ["B"]]
    back = la.Symbol.from_json(ann.to_json())
    assert str(back) == text
    g = ann.to_networkx()
    assert g.nodes["all_to_all"]["sbp"] == (S(1),) and g.nodes["all_to_all"]["op"] == "boxing"
    assert str(la.Symbol.from_networkx(g)) == text
    svg = ann._repr_svg_()
    assert "S(0)→S(1)" in svg and "boxing" in svg
    # the memory plan: the boxing node holds a buffer of its own, like a copy between devices
    plan = la.CachedOp(ann).memory_plan(x=(8, 4), w=(3, 4))
    assert "all_to_all[" in str(plan)
    # the annotation is optional in the JSON, and a plain graph has none
    assert "sbp" not in json.loads(la.sym.exp(x).to_json())["nodes"][0]
    bad = dict(doc)
    bad["nodes"] = [dict(d, sbp=["Q"]) if d["name"] == "x" else d for d in doc["nodes"]]
    with pytest.raises(la.GraphFormatError, match="not an SBP"):
        la.Symbol.from_json(json.dumps(bad))


def test_annotated_graph_runs_unchanged_on_one_process():
    x, w = la.sym.var("x", shape=(8, 4)), la.sym.var("w", shape=(3, 4))
    y = la.sym.softmax(la.sym.dense(x, w), axis=0)
    xv, wv = np.random.default_rng(1).standard_normal((8, 4)), np.random.default_rng(2).standard_normal((3, 4))
    np.testing.assert_allclose(la.CachedOp(y.infer_sbp(x=S(0)))(xv, wv).asnumpy(), la.CachedOp(y)(xv, wv).asnumpy())


def test_regions_cut_at_boxing_nodes():
    x, w = la.sym.var("x", shape=(8, 4)), la.sym.var("w", shape=(3, 4))
    h = la.sym.relu(la.sym.dense(x, w))
    ann = la.sym.exp(la.sym.softmax(h, axis=0)).infer_sbp(x=S(0))
    steps = P.regions(ann)
    assert [k for k, _ in steps] == ["region", "boxing", "region"]
    first, second = steps[0][1], steps[2][1]
    assert [n.op.name for n in first.symbol.topo() if n.op is not None] == ["dense", "relu"]
    assert [n.op.name for n in second.symbol.topo() if n.op is not None] == ["softmax", "exp"]


def test_bad_inputs():
    x = la.sym.var("x", shape=(8,))
    with pytest.raises(la.sbp.SBPError, match="cannot split axis 1"):
        la.sym.exp(x).infer_sbp(x=S(1))
    with pytest.raises(la.GraphError, match="no graph input named 'y'"):
        la.sym.exp(x).infer_sbp(y=S(0))
    with pytest.raises(la.sbp.SBPError, match=r"shapes of inputs \['z'\] are not known"):
        la.sym.exp(la.sym.var("z")).infer_sbp(z=S(0))


def test_run_without_dask_names_the_extra(monkeypatch):
    import builtins

    real = builtins.__import__

    def no_dask(name, *args, **kwargs):
        if name.split(".")[0] in ("dask", "distributed"):
            raise ImportError(f"No module named {name!r}")
        return real(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_dask)
    x = la.sym.var("x", shape=(4,))
    with pytest.raises(ImportError, match=r"pip install 'lazyarray\[distributed\]'"):
        la.distributed.run(la.sym.exp(x), x=np.ones(4, "float32"))


# -- rules for indexing, reshaping, joining and lookups ------------------------------------------------------
def _run_pieces(ann, values, n=N):
    """Run the annotated one-region graph ``ann`` piece by piece (inputs split as annotated) and
    combine its outputs as their SBPs say."""
    sbps = {node.name: node.sbp[0] for node in ann.input_nodes()}
    parts = {k: P.split_value(v, sbps[k], n) for k, v in values.items()}
    outs = []
    for i in range(n):
        local = P.localize(ann, {k: p[i].shape for k, p in parts.items()})
        res = la.CachedOp(local)(**{k: p[i] for k, p in parts.items()})
        outs.append([r.asnumpy() for r in (res if isinstance(res, list) else [res])])
    return [P.combine([o[j] for o in outs], e.node.sbp[e.index]) for j, e in enumerate(ann.outputs)]


def test_getitem_passes_a_split_axis_it_keeps_whole():
    x = la.sym.var("x", shape=(6, 4, 5))
    data = np.random.default_rng(3).standard_normal((6, 4, 5))
    for key, split_in, split_out in [((slice(None), 1), 0, 0), ((None, Ellipsis, slice(1, 3)), 0, 1),
                                     ((2, slice(None)), 1, 0), ((Ellipsis, 0), 1, 1)]:
        y = la.sym.getitem(x, key=key)
        ann, nodes = _annotate(y, x=S(split_in))
        assert _boxes(ann) == [] and nodes["getitem0"].sbp == (S(split_out),), key
        np.testing.assert_array_equal(_run_pieces(ann, {"x": data})[0], data[key])
    # a slice of the split axis needs the pieces' global offsets: boxed first
    ann, _ = _annotate(la.sym.getitem(x, key=(slice(1, 5),)), x=S(0))
    assert _boxes(ann) != []


def test_reshape_keeps_a_split_axis_that_survives():
    x = la.sym.var("x", shape=(2, 3, 4))
    data = np.arange(24.0).reshape(2, 3, 4)
    for shape, k_in, k_out in [((6, 4), 2, 1), ((2, 12), 0, 0), ((1, 2, 3, 4), 1, 2), ((2, 3, 2, 2), 1, 1)]:
        ann, nodes = _annotate(la.sym.reshape(x, shape=shape), x=S(k_in))
        assert _boxes(ann) == [] and nodes["reshape0"].sbp == (S(k_out),), shape
        np.testing.assert_array_equal(_run_pieces(ann, {"x": data})[0], data.reshape(shape))
    ann, _ = _annotate(la.sym.reshape(x, shape=(6, 4)), x=S(1))  # the split axis is merged: boxed
    assert _boxes(ann) != []


def test_transpose_stack_and_concatenate_move_the_split_axis():
    x, y = la.sym.var("x", shape=(4, 6)), la.sym.var("y", shape=(4, 6))
    ann, nodes = _annotate(la.sym.transpose(x), x=S(0))
    assert nodes["transpose0"].sbp == (S(1),) and _boxes(ann) == []
    ann, nodes = _annotate(la.sym.stack([x, y], axis=1), x=S(1), y=S(1))
    assert nodes["stack0"].sbp == (S(2),) and _boxes(ann) == []
    data = {"x": np.arange(24.0).reshape(4, 6), "y": -np.arange(24.0).reshape(4, 6)}
    np.testing.assert_array_equal(_run_pieces(ann, data)[0], np.stack([data["x"], data["y"]], axis=1))
    ann, nodes = _annotate(la.sym.concatenate([x, y], axis=1), x=S(0), y=S(0))
    assert nodes["concatenate0"].sbp == (S(0),) and _boxes(ann) == []


def test_take_and_embedding_split_the_batch_of_indices():
    table, idx = la.sym.var("w", shape=(10, 3)), la.sym.var("i", shape=(6, 2), dtype="int64")
    ann, nodes = _annotate(la.sym.take(table, idx, axis=0), i=S(0))
    assert nodes["take0"].sbp == (S(0),) and _boxes(ann) == []
    wv, iv = np.random.default_rng(4).standard_normal((10, 3)), np.random.default_rng(5).integers(0, 10, (6, 2))
    np.testing.assert_array_equal(_run_pieces(ann, {"w": wv, "i": iv})[0], wv[iv])
    ann, nodes = _annotate(la.sym.take(table, idx, axis=0), w=S(1))  # a column-split table
    assert nodes["take0"].sbp == (S(2),) and _boxes(ann) == []
    np.testing.assert_array_equal(_run_pieces(ann, {"w": wv, "i": iv})[0], wv[iv])
    net = la.blocks.Embedding(10, 3)
    net.initialize()
    net.hybridize()
    net(la.array(iv))
    sym, params = net.export_graph()
    ann, nodes = _annotate(sym, data=S(0))
    assert _boxes(ann) == [] and all(e.node.sbp == (S(0),) for e in ann.outputs)


def test_where_clip_and_cast_pass_splits():
    x, c = la.sym.var("x", shape=(6, 4)), la.sym.var("c", shape=(6, 4), dtype="bool")
    y = la.sym.where(c, la.sym.clip(x, -0.5, 0.5), la.sym.cast(x, dtype="float32"))
    ann, _ = _annotate(y, x=S(0), c=S(0))
    assert _boxes(ann) == [] and ann.outputs[0].node.sbp == (S(0),)
    rng = np.random.default_rng(6)
    data = {"x": rng.standard_normal((6, 4)), "c": rng.random((6, 4)) < 0.5}
    want = np.where(data["c"], np.clip(data["x"], -0.5, 0.5), data["x"].astype("float32"))
    np.testing.assert_allclose(_run_pieces(ann, data)[0], want, rtol=1e-6)


def test_control_flow_takes_the_broadcast_fallback():
    """cond / foreach / while_loop bodies are sub-graphs of logical shapes: they run on whole inputs."""
    from lazyarray.executor.call import SubGraph
    from lazyarray.ops import sbp_rules

    v = la.sym.var("v", shape=(4, 3))
    x, p = la.sym.var("x", shape=(4, 3)), la.sym.var("p", shape=(), dtype="bool")
    y = la.sym.cond(p, [x], then_graph=SubGraph(la.sym.exp(v) * 2), else_graph=SubGraph(v - 1))
    sbp_rules.SBP_FALLBACK_WARNED.discard("cond")
    with pytest.warns(SBPFallbackWarning, match="cond: no SBP rule"):
        ann, nodes = _annotate(y, x=S(0))
    assert _boxes(ann) == [("S(0)", "B")] and nodes["cond0"].sbp == (B,)
    # (tests/distributed/test_run.py runs it on Dask)


# -- every op without a rule, and why -----------------------------------------------------------------------
_SEVERAL = "several outputs of sizes the rule would have to split too (views along an axis): not written yet"
_DATA_SIZED = "its output's size depends on the values (which elements, how many): pieces cannot agree on it"
_SUBGRAPH = "runs a subgraph (control flow, a fused or called graph): the broadcast fallback runs it whole"
_MADE = "no input: a split would need the op to know its piece (an SBP parameter); made whole on every piece"
_COMPLEX = "complex inputs: the physical rule check above cannot run them, so no rule is claimed"
_NO_RULE = {
    "advanced_index": _DATA_SIZED + " (a split index array could be, not written yet)",
    "advanced_index_grad": "the gradient of advanced_index: as advanced_index",
    "index_grad": "getitem's gradient: a split passes only where the key keeps the axis whole; not written yet",
    "array_split": _SEVERAL, "split": _SEVERAL,
    "bitcast": "a split of the last axis changes size with the item size; other axes could pass (not written yet)",
    "boolean_mask": _DATA_SIZED, "boolean_mask_grad": _DATA_SIZED, "nonzero": _DATA_SIZED,
    "unique_all": _DATA_SIZED, "unique_values": _DATA_SIZED, "non_max_suppression": _DATA_SIZED,
    "boxing": "the boxing op itself: inserted by the pass with its own SBPs",
    "call": _SUBGRAPH, "cond": _SUBGRAPH, "foreach": _SUBGRAPH, "fused": _SUBGRAPH, "while_loop": _SUBGRAPH,
    "cast_storage": "changes the storage type (sparse layouts are whole arrays of rows and indices)",
    "class_labels": "decodes whole label sets (strings) on the client's side",
    "image_decode": "decodes bytes: its input is not an array of elements",
    "ctc_loss": "the alignment runs along time over the whole label sequence; a batch split needs its mean's "
                "global count (not written yet)",
    "ctc_loss_grad": "ctc_loss's gradient: as ctc_loss",
    "dim_values": _MADE, "fill": _MADE, "iota": _MADE, "random_normal": _MADE + " (and one stream)",
    "random_uniform": _MADE + " (and one stream)",
    "fftn": _COMPLEX, "ifftn": _COMPLEX, "rfftn": _COMPLEX, "irfftn": _COMPLEX, "hfft": _COMPLEX, "irfft": _COMPLEX,
    "one_hot_like": "only like's shape is read, over whole classes; a batch split could pass (not written yet)",
    "reshape_codes": "MXNet's reshape codes name logical sizes per axis; the local rewrite is not written",
    "reshape_like": "like reshape, but the target comes from like's physical piece: not written yet",
    "slice_like": "slices to like's logical sizes; a split axis would slice each piece wrongly",
    "size": "its value is the logical size: each piece would count its own",
    "solve": "x2 may be a vector or a stack: the batch axes of the two inputs align differently",
    "diagonal": "kept without a rule as the example of the broadcast fallback (its batch axes could pass)",
    "trace": "as diagonal (its batch axes could pass; not written yet)",
    "batch_norm_max_pool2d": "an inference fusion, not a gradient kernel: batch_norm's rule would do, not written yet",
    "fused_attention": "an inference fusion (graph/passes/attention.py): a batch split would pass, not written yet",
    "rms_norm": "an inference fusion (graph/passes/layer_norm.py): layer_norm's rule would do, not written yet",
}


def test_every_op_without_an_sbp_rule_is_listed_with_its_reason():
    without = {op.name for op in registry.all_ops() if rule_for(op) is None}
    assert without - set(_NO_RULE) == set(), "ops without an SBP rule and no reason listed here"
    assert set(_NO_RULE) - without == set(), "listed here but they have a rule now: drop them from _NO_RULE"


def test_a_batch_split_backward_runs_split_and_ends_in_partial_sums():
    """A dense layer's gradients with the batch split: every gradient kernel on the way keeps the split
    (broadcast_like, sum_to, dot with transpose_a), no piece is gathered whole, and the gradients come
    out P(sum), the form DataParallel reduces among its workers."""
    x, w, b = la.sym.var("x", shape=(8, 4)), la.sym.var("w", shape=(3, 4)), la.sym.var("b", shape=(3,))
    y = la.sym.sum(la.sym.tanh(la.sym.dot(x, la.sym.transpose(w)) + b) ** 2.0)
    nodes = {n.name: n for n in y.input_nodes()}
    grads = Symbol(gradient([y.outputs[0]], [None], [Entry(nodes["w"], 0), Entry(nodes["b"], 0)]))
    ann, _ = _annotate(grads, x=S(0), w=B, b=B)
    assert _boxes(ann) == []
    assert [str(e.node.sbp[e.index]) for e in ann.outputs] == ["P(sum)", "P(sum)"]
    ops = {n.op.name for n in ann.topo() if n.op is not None}
    assert {"broadcast_like", "sum_to", "dot"} <= ops
