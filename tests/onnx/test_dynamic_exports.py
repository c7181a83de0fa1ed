"""Models exported by ``torch.onnx.export`` with dynamic axes (tests/data/onnx_dynamic, made by its
make_fixtures.py in a side environment with torch; torch is not needed here): each loads with no
shapes given, runs at every batch size and sequence length torch was run at, equals torch's
outputs, hybridizes, and re-exports to a file onnxruntime runs at every one of those sizes."""
import json
import os

import numpy as np
import pytest

import lazyarray as la

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

HERE = os.path.join(os.path.dirname(os.path.dirname(__file__)), "data", "onnx_dynamic")
MANIFEST = json.load(open(os.path.join(HERE, "manifest.json")))
BY_NAME = {m["name"]: m for m in MANIFEST}
TOL = {"rtol": 1e-3, "atol": 1e-4}


def _cases(m):
    data = np.load(os.path.join(HERE, m["name"] + ".npz"))
    for case in m["cases"]:
        ins = {k: data[f"{case}/in/{k}"] for k in m["inputs"]}
        outs = [data[f"{case}/out/{k}"] for k in range(len(m["outputs"]))]
        yield case, ins, outs


def _list(y):
    return list(y) if isinstance(y, (list, tuple)) else [y]


def test_the_fixture_set_is_what_the_issue_asks_for():
    exporters = {m["exporter"].split()[0] for m in MANIFEST}
    assert len(MANIFEST) >= 15 and exporters >= {"torchscript", "dynamo"}
    assert {m["opset"] for m in MANIFEST} >= {17, 18, 19, 20}
    assert any("seq" in json.dumps(m["dynamic_axes"]) for m in MANIFEST)
    assert any(m["time_major"] for m in MANIFEST)
    size = sum(os.path.getsize(os.path.join(HERE, f)) for f in os.listdir(HERE))
    assert size < 40e6


@pytest.mark.parametrize("name", sorted(BY_NAME))
def test_loads_as_exported_and_equals_torch_at_every_size(name):
    m = BY_NAME[name]
    sym = la.onnx.load(os.path.join(HERE, name + ".onnx"))  # no input_shapes
    for inp in sym.input_nodes():  # every dynamic axis of the file is a symbol of its name
        for axis, dim in m["dynamic_axes"].get(inp.name, {}).items():
            assert str(inp.avals[0].shape[int(axis)]) == dim
    op = la.CachedOp(sym)
    sizes = set()
    for case, ins, want in _cases(m):
        got = _list(op(**{k: la.array(v) for k, v in ins.items() if k in sym.list_inputs()}))
        for g, w in zip(got, want):
            assert g.shape == w.shape, case
            np.testing.assert_allclose(g.asnumpy(), w, **TOL, err_msg=f"{name} {case}")
        sizes.add(tuple(v.shape for v in ins.values()))
    assert op.num_compiles == len(sizes)  # one program per signature, each specialized to it


@pytest.mark.parametrize("name", sorted(BY_NAME))
def test_imported_block_hybridizes_and_reexports_a_file_that_runs_at_every_size(name, tmp_path):
    m = BY_NAME[name]
    net = la.blocks.SymbolBlock.imports(os.path.join(HERE, name + ".onnx"), m["inputs"])
    net.hybridize()
    path = la.onnx.export(net, str(tmp_path / (name + ".onnx")))
    model = onnx.load(path)
    for vi in model.graph.input:  # the re-export declares the file's own axes, by their names
        declared = m["dynamic_axes"].get(vi.name, {})
        dims = vi.type.tensor_type.shape.dim
        for axis, dim in declared.items():
            assert dims[int(axis)].dim_param == dim, (vi.name, axis)
        assert all(d.HasField("dim_value") for i, d in enumerate(dims) if str(i) not in declared)
    sess = ort.InferenceSession(path)
    names = [i.name for i in sess.get_inputs()]
    for case, ins, want in _cases(m):
        got = _list(net(*[la.array(ins[k]) for k in m["inputs"]]))
        rt = sess.run(None, {k: ins[k] for k in names})
        for g, r, w in zip(got, rt, want):
            np.testing.assert_allclose(g.asnumpy(), w, **TOL, err_msg=f"{name} {case} (lazyarray)")
            assert r.shape == w.shape, f"{name} {case}: onnxruntime gave {r.shape}"
            np.testing.assert_allclose(r, w, **TOL, err_msg=f"{name} {case} (onnxruntime, re-exported)")


@pytest.mark.parametrize("name", ["convnext_mini", "swin_vit_mini", "arange_gather"])
def test_a_model_pinned_to_batch_1_refuses_batch_3_instead_of_answering_for_one_image(name, tmp_path):
    """These compute Shape -> Range(0, batch) -> Gather: loaded for batch 1, the range is folded to
    [0]; called with 3 images they used to return the first image's logits only, with no error."""
    m = BY_NAME[name]
    case, ins, _ = next(c for c in _cases(m) if c[0].startswith("b1"))
    shapes = {k: v.shape for k, v in ins.items()}
    net = la.blocks.SymbolBlock.imports(os.path.join(HERE, name + ".onnx"), m["inputs"], input_shapes=shapes)
    net(*[la.array(ins[k]) for k in m["inputs"]])  # the pinned size works
    big = {k: np.concatenate([v] * 3) for k, v in ins.items()}
    with pytest.raises(la.ShapeError, match="has size 3 on axis 0.*built for 1"):
        net(*[la.array(big[k]) for k in m["inputs"]])
    op = la.CachedOp(la.onnx.load(os.path.join(HERE, name + ".onnx"), input_shapes=shapes))
    with pytest.raises(la.LazyArrayError, match="built for 1"):
        op(**{k: la.array(v) for k, v in big.items()})
    path = str(tmp_path / "pinned.onnx")  # and its re-export cannot declare the batch axis dynamic
    with pytest.raises(la.ShapeError, match="pinned"):
        la.onnx.export(net, path, dynamic_axes={m["inputs"][0]: {0: "batch"}})
    assert not os.path.exists(path)
    la.onnx.export(net, path)  # by default it declares what it serves: batch 1
    assert onnx.load(path).graph.input[0].type.tensor_type.shape.dim[0].dim_value == 1


def test_the_time_major_gru_reexport_names_time_and_batch_right(tmp_path):
    m = BY_NAME["gru_time_major"]
    assert m["time_major"]
    net = la.blocks.SymbolBlock.imports(os.path.join(HERE, "gru_time_major.onnx"), m["inputs"])
    path = la.onnx.export(net, str(tmp_path / "gru.onnx"))
    dims = onnx.load(path).graph.input[0].type.tensor_type.shape.dim
    assert [d.dim_param for d in dims[:2]] == ["time", "batch"]
    sess = ort.InferenceSession(path)
    for case, ins, want in _cases(m):  # 9 steps through the graph as well as 5: the steps are not baked
        assert sess.run(None, ins)[0].shape == want[0].shape, case
