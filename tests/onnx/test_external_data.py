"""ONNX external data is read only from files inside the model's folder (never the current
directory): relative paths without '..', no symbolic link out of the folder, ranges within the file;
everything else is a GraphFormatError naming the tensor and the location."""
from __future__ import annotations

import importlib
import os

import numpy as np
import pytest

import lazyarray as la

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

load_module = importlib.import_module("lazyarray.onnx.load")
export_module = importlib.import_module("lazyarray.onnx.export")

GOOD = np.array([1.0, 2.0, 3.0, 4.0], np.float32)
SECRET = np.array([-7.0, -7.0, -7.0, -7.0], np.float32)  # what a file of the same name elsewhere holds


def _external(name: str, location: str, offset: int | None = 0, length: int | None = 16):
    t = numpy_helper.from_array(GOOD, name)
    t.ClearField("raw_data")
    t.data_location = TensorProto.EXTERNAL
    entries = {"location": location}
    if offset is not None:
        entries["offset"] = str(offset)
    if length is not None:
        entries["length"] = str(length)
    for k, v in entries.items():
        e = t.external_data.add()
        e.key, e.value = k, v
    return t


def _io():
    return ([helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])])


def _save(graph, path) -> str:
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    path.write_bytes(model.SerializeToString())  # as is: onnx.save would try to move external data
    return str(path)


def _initializer_model(path, location="secret.bin", **kw) -> str:
    ins, outs = _io()
    g = helper.make_graph([helper.make_node("Add", ["x", "w"], ["y"])], "g", ins, outs,
                          [_external("w", location, **kw)])
    return _save(g, path)


def _constant_model(path, location="secret.bin") -> str:
    ins, outs = _io()
    const = helper.make_node("Constant", [], ["w"], name="c", value=_external("cw", location))
    g = helper.make_graph([const, helper.make_node("Add", ["x", "w"], ["y"])], "g", ins, outs)
    return _save(g, path)


def _if_model(path, location="secret.bin") -> str:
    ins, outs = _io()
    out = [helper.make_tensor_value_info("b", TensorProto.FLOAT, [4])]
    then = helper.make_graph([helper.make_node("Identity", ["bw"], ["b"])], "then", [], out,
                             [_external("bw", location)])
    other = helper.make_graph([helper.make_node("Neg", ["x"], ["b"])], "else", [], out)
    cond = numpy_helper.from_array(np.array(True), "cond")
    nodes = [helper.make_node("If", ["cond"], ["w"], name="branch", then_branch=then, else_branch=other),
             helper.make_node("Add", ["x", "w"], ["y"])]
    return _save(helper.make_graph(nodes, "g", ins, outs, [cond]), path)


def _run(path) -> np.ndarray:
    sym = la.onnx.load(path)
    return la.CachedOp(sym)(la.array(np.zeros(4, np.float32))).asnumpy()


@pytest.fixture
def dirs(tmp_path, monkeypatch):
    """``model/`` with ``secret.bin`` (GOOD), ``cwd/`` (the current directory) with a ``secret.bin`` of
    its own (SECRET), and ``outside/secret.bin`` (SECRET)."""
    model, cwd, outside = tmp_path / "model", tmp_path / "cwd", tmp_path / "outside"
    for d in (model, cwd, outside):
        d.mkdir()
    GOOD.tofile(model / "secret.bin")
    SECRET.tofile(cwd / "secret.bin")
    SECRET.tofile(outside / "secret.bin")
    monkeypatch.chdir(cwd)
    return model, cwd, outside


@pytest.mark.parametrize("build", [_initializer_model, _constant_model, _if_model],
                         ids=["initializer", "Constant", "If branch initializer"])
def test_external_data_is_read_from_the_models_folder_not_the_current_directory(dirs, build):
    model, _, _ = dirs
    path = build(model / "m.onnx")
    np.testing.assert_array_equal(_run(path), GOOD)


@pytest.mark.parametrize("build", [_initializer_model, _constant_model, _if_model],
                         ids=["initializer", "Constant", "If branch initializer"])
def test_data_only_in_the_current_directory_is_not_read(dirs, build):
    model, _, _ = dirs
    os.remove(model / "secret.bin")
    path = build(model / "m.onnx")
    with pytest.raises(la.GraphFormatError, match=r"cannot read external data 'secret.bin' from the model's folder"):
        la.onnx.load(path)


def test_loads_from_another_directory_when_no_file_of_that_name_is_there(dirs, monkeypatch, tmp_path):
    model, _, _ = dirs
    path = _initializer_model(model / "m.onnx")
    monkeypatch.chdir(tmp_path)  # no secret.bin here
    np.testing.assert_array_equal(_run(path), GOOD)
    sym, arrays = load_module.load_arrays(path)
    np.testing.assert_array_equal(arrays["w"], GOOD)


def test_an_absolute_path_is_refused(dirs):
    model, _, outside = dirs
    path = _initializer_model(model / "m.onnx", location=str(outside / "secret.bin"))
    with pytest.raises(la.GraphFormatError, match=r"initializer 'w'.*is an absolute path.*inside the model's folder"):
        la.onnx.load(path)


@pytest.mark.parametrize("location", ["../outside/secret.bin", "sub/../../outside/secret.bin"])
def test_dot_dot_is_refused(dirs, location):
    model, _, _ = dirs
    (model / "sub").mkdir()
    path = _constant_model(model / "m.onnx", location=location)
    with pytest.raises(la.GraphFormatError, match=r"node 'c' \(Constant\) attribute 'value'.*climbs out"):
        la.onnx.load(path)


def test_a_symlinked_folder_leading_out_is_refused(dirs):
    model, _, outside = dirs
    os.symlink(outside, model / "link")
    path = _if_model(model / "m.onnx", location="link/secret.bin")
    with pytest.raises(la.GraphFormatError, match=r"body 'then': initializer 'bw'.*outside the model's folder"):
        la.onnx.load(path)


def test_a_symlinked_file_leading_out_is_refused(dirs):
    model, _, outside = dirs
    os.symlink(outside / "secret.bin", model / "alias.bin")
    path = _initializer_model(model / "m.onnx", location="alias.bin")
    with pytest.raises(la.GraphFormatError, match="outside the model's folder"):
        la.onnx.load(path)


def test_a_symlink_inside_the_folder_is_followed(dirs):
    model, _, _ = dirs
    (model / "data").mkdir()
    os.replace(model / "secret.bin", model / "data" / "secret.bin")
    os.symlink(model / "data", model / "link")
    path = _initializer_model(model / "m.onnx", location="link/secret.bin")
    np.testing.assert_array_equal(_run(path), GOOD)


@pytest.mark.parametrize("offset, length, fragment", [
    (8, 16, "ends at byte 24, past the end of the file \\(16 bytes\\)"),
    (0, 32, "gives length 32, but the tensor \\(dims \\[4\\]\\) holds 16 bytes"),
    (10**30, 16, "not a non-negative integer"),
])
def test_ranges_are_checked_before_reading(dirs, offset, length, fragment):
    model, _, _ = dirs
    path = _initializer_model(model / "m.onnx", offset=offset, length=length)
    with pytest.raises(la.GraphFormatError, match=r"initializer 'w': external data 'secret.bin'.*" + fragment):
        la.onnx.load(path)


def test_a_missing_file_is_named(dirs):
    model, _, _ = dirs
    path = _initializer_model(model / "m.onnx", location="nope.bin")
    with pytest.raises(la.GraphFormatError, match=r"ONNX file 'm.onnx': initializer 'w': cannot read external data "
                                                  r"'nope.bin'.*put the data file"):
        la.onnx.load(path)


def test_a_fifo_is_refused_without_blocking(dirs):
    model, _, _ = dirs
    if not hasattr(os, "mkfifo"):
        pytest.skip("no FIFOs here")
    os.mkfifo(model / "pipe.bin")
    path = _initializer_model(model / "m.onnx", location="pipe.bin")
    with pytest.raises(la.GraphFormatError, match="FIFO"):
        la.onnx.load(path)


def test_model_bytes_without_a_folder_refuse_external_tensors(dirs):
    model, _, _ = dirs
    path = _initializer_model(model / "m.onnx")
    data = open(path, "rb").read()
    with pytest.raises(la.GraphFormatError, match="given without its file.*current directory"):
        load_module.parse_model(data)
    with pytest.raises(la.GraphFormatError, match="initializer 'w' keeps its data in the external file 'secret.bin'"):
        load_module.to_symbol(onnx.load_model_from_string(data))


def test_an_export_with_external_data_reloads_from_another_directory(tmp_path, monkeypatch):
    net = la.blocks.Dense(4, in_units=3)
    net.initialize()
    (tmp_path / "out").mkdir()
    (tmp_path / "elsewhere").mkdir()
    path = str(tmp_path / "out" / "big.onnx")
    monkeypatch.chdir(tmp_path / "out")
    monkeypatch.setattr(export_module, "EXTERNAL_DATA_THRESHOLD", 16)
    la.onnx.export(net, "big.onnx", input_shapes=(2, 3))  # a relative path, written from its folder
    assert sorted(os.listdir(tmp_path / "out")) == ["big.onnx", "big.onnx.data"]
    monkeypatch.chdir(tmp_path / "elsewhere")
    x = np.ones((2, 3), np.float32)
    block = la.blocks.SymbolBlock.imports(path, ["data"])
    np.testing.assert_allclose(block(la.array(x)).asnumpy(), net(la.array(x)).asnumpy(), rtol=1e-6)


def test_write_model_with_a_tiny_threshold_reloads_from_another_directory(tmp_path, monkeypatch):
    ins, outs = _io()
    g = helper.make_graph([helper.make_node("Add", ["x", "w"], ["y"])], "g", ins, outs,
                          [numpy_helper.from_array(GOOD, "w")])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    (tmp_path / "m").mkdir()
    export_module.write_model(model, str(tmp_path / "m" / "w.onnx"), external_threshold=1)
    monkeypatch.chdir(tmp_path)
    np.testing.assert_array_equal(_run(str(tmp_path / "m" / "w.onnx")), GOOD)


def _function_model(path, location="secret.bin") -> str:
    """The external tensor in a Constant of a model-local function's body."""
    ins, outs = _io()
    body = [helper.make_node("Constant", [], ["fw"], value=_external("fw", location)),
            helper.make_node("Add", ["a", "fw"], ["b"])]
    fn = helper.make_function("local", "addw", ["a"], ["b"], body, [helper.make_opsetid("", 17)])
    g = helper.make_graph([helper.make_node("addw", ["x"], ["y"], domain="local")], "g", ins, outs)
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("local", 1)],
                              functions=[fn])
    path.write_bytes(model.SerializeToString())
    return str(path)


@pytest.mark.parametrize("build", [_initializer_model, _constant_model, _if_model, _function_model],
                         ids=["initializer", "Constant", "If branch initializer", "function body"])
def test_the_quick_scan_finds_every_external_tensor_the_named_scan_finds(tmp_path, build):
    external_data = importlib.import_module("lazyarray.onnx.external_data")
    model = onnx.load_model_from_string(open(build(tmp_path / "m.onnx"), "rb").read())
    named = [w for w, t in external_data.all_tensors(model) if t.data_location == TensorProto.EXTERNAL]
    assert len(named) == 1 and external_data.has_external(model)
    assert [w for w, _ in external_data.external_tensors(model)] == named
    for _, t in external_data.all_tensors(model):  # the same model with its data inside
        t.data_location = TensorProto.DEFAULT
    assert not external_data.has_external(model) and external_data.external_tensors(model) == []


@pytest.mark.parametrize("kind", ["tensors", "sparse_tensor", "sparse_tensors", "graphs"])
def test_the_quick_scan_reads_every_kind_of_tensor_attribute(kind):
    # (has_external reads the fields an attribute sets in one call: each kind of value it can hold)
    external_data = importlib.import_module("lazyarray.onnx.external_data")
    a = onnx.AttributeProto(name="v")
    ext, plain = _external("e", "secret.bin"), numpy_helper.from_array(GOOD, "p")
    if kind == "tensors":
        a.tensors.extend([plain, ext])
    elif kind in ("sparse_tensor", "sparse_tensors"):
        st = onnx.SparseTensorProto(values=ext, indices=numpy_helper.from_array(np.arange(4, dtype=np.int64), "i"))
        st.dims.extend([4])
        (a.sparse_tensor.CopyFrom(st) if kind == "sparse_tensor" else a.sparse_tensors.extend([st]))
    else:
        ins, outs = _io()
        inner = helper.make_graph([helper.make_node("Add", ["x", "w"], ["y"])], "inner", ins, outs, [ext])
        a.graphs.extend([helper.make_graph([], "empty", [], []), inner])
    node = helper.make_node("Custom", [], ["y"], name="n")
    node.attribute.append(a)
    model = helper.make_model(helper.make_graph([node], "g", [], []))
    named = [w for w, t in external_data.all_tensors(model) if t.data_location == TensorProto.EXTERNAL]
    assert len(named) == 1 and external_data.has_external(model)
    for _, t in external_data.all_tensors(model):
        t.data_location = TensorProto.DEFAULT
    assert not external_data.has_external(model)


def test_loading_a_file_walks_its_tensors_once(tmp_path, monkeypatch):
    # (parse_model's one walk serves the checker and the reader; the conversion of what read_model
    # returns does not look again: its external tensors are read in)
    external_data = importlib.import_module("lazyarray.onnx.external_data")
    ins, outs = _io()
    g = helper.make_graph([helper.make_node("Add", ["x", "w"], ["y"])], "g", ins, outs,
                          [numpy_helper.from_array(GOOD, "w")])
    path = _save(g, tmp_path / "m.onnx")
    walks = []
    real = external_data.has_external
    monkeypatch.setattr(external_data, "has_external", lambda m: walks.append(1) or real(m))
    sym = la.onnx.load(path)
    assert len(walks) == 0  # (its bytes never spell "location": no external tensor to look for)
    np.testing.assert_array_equal(la.CachedOp(sym)(la.array(GOOD)).asnumpy(), GOOD + GOOD)
    walks.clear()
    load_module.to_symbol(onnx.load_model_from_string(open(path, "rb").read()))  # a model given as is: looked at
    assert len(walks) == 1


def test_a_file_naming_a_location_is_walked_once(tmp_path, monkeypatch):
    # (the walk is skipped only where the bytes never spell "location"; a name holding the word, or an
    # external tensor, makes parse_model walk as before)
    external_data = importlib.import_module("lazyarray.onnx.external_data")
    ins, outs = _io()
    g = helper.make_graph([helper.make_node("Add", ["x", "location"], ["y"])], "g", ins, outs,
                          [numpy_helper.from_array(GOOD, "location")])
    path = _save(g, tmp_path / "m.onnx")
    walks = []
    real = external_data.has_external
    monkeypatch.setattr(external_data, "has_external", lambda m: walks.append(1) or real(m))
    sym = la.onnx.load(path)
    assert len(walks) == 1
    np.testing.assert_array_equal(la.CachedOp(sym)(la.array(GOOD)).asnumpy(), GOOD + GOOD)


def test_an_external_tensor_without_a_location_is_refused(tmp_path):
    # (no "location" in the bytes: the walk is skipped, and onnx.checker refuses the tensor instead)
    ins, outs = _io()
    w = numpy_helper.from_array(GOOD, "w")
    w.data_location = TensorProto.EXTERNAL
    w.ClearField("raw_data")
    w.external_data.add(key="offset", value="0")
    g = helper.make_graph([helper.make_node("Add", ["x", "w"], ["y"])], "g", ins, outs, [w])
    path = tmp_path / "m.onnx"
    path.write_bytes(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString())
    assert b"location" not in path.read_bytes()
    with pytest.raises(la.errors.GraphFormatError, match="location"):
        la.onnx.load(str(path))
