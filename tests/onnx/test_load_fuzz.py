"""Fuzzers of the ONNX loader (``la.onnx.load``, ``la.onnx.load_arrays``), issue #33.

The contract: a mutated model file loads (and then the symbol prints and its ``CachedOp`` compiles
for the shapes the file declares) or raises a ``la.LazyArrayError`` (a ``GraphFormatError`` naming
the file and the node or field; a ``ShapeError``/``OutOfMemoryError`` for sizes); never a bare
Python or protobuf exception, never a hang, and never a file opened outside the model's folder
(external data with odd locations: an audit hook watches every ``open``).

Valid small models (a dense layer with a symbolic batch, a conv net, shape arithmetic, nested
``If`` branches, a ``Loop`` reading the outer graph, initializers and a ``Constant`` in external
data) are mutated structurally through the protobuf API (dims, element types, attributes, tensor
data types and lengths, external_data entries, nodes, opsets, in the main graph and in nested
bodies) and byte by byte. A few hundred derandomized examples per fuzzer by default (a few
seconds); 20,000 with ``python -m pytest -m slow tests/onnx/test_load_fuzz.py``.
"""
from __future__ import annotations

import functools
import importlib
import math
import os
import sys

import numpy as np
import pytest
from fuzz_support import fuzz_settings, mutated_bytes
from hypothesis import given
from hypothesis import strategies as st

import lazyarray as la

onnx = pytest.importorskip("onnx")
from onnx import AttributeProto, TensorProto, helper, numpy_helper  # noqa: E402

load_module = importlib.import_module("lazyarray.onnx.load")
SLOW = 20_000
COUNTS = [300, pytest.param(SLOW, marks=pytest.mark.slow)]  # default run, and -m slow
F, I64, BOOL = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL
DATA = np.arange(12, dtype=np.float32).reshape(4, 3) / 10  # the external data file's tensor


# -- valid models ------------------------------------------------------------------------------------
def _vi(name, dtype=F, shape=None):
    return helper.make_tensor_value_info(name, dtype, shape)


def _init(name, value):
    return numpy_helper.from_array(np.asarray(value), name)


def _external(name: str, location: str = "w.bin", offset: int = 0, shape=(4, 3)):
    t = numpy_helper.from_array(DATA.reshape(-1)[: int(np.prod(shape))].reshape(shape), name)
    t.ClearField("raw_data")
    t.data_location = TensorProto.EXTERNAL
    for k, v in {"location": location, "offset": str(offset), "length": str(4 * int(np.prod(shape)))}.items():
        e = t.external_data.add()
        e.key, e.value = k, v
    return t


def _model(nodes, inputs, outputs, inits=(), opset=17):
    g = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(inits))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def _dense():
    nodes = [helper.make_node("MatMul", ["x", "W"], ["h"], name="mm"), helper.make_node("Add", ["h", "B"], ["a"]),
             helper.make_node("Relu", ["a"], ["r"]), helper.make_node("Transpose", ["r"], ["t"], perm=[1, 0]),
             helper.make_node("Softmax", ["t"], ["y"], axis=0, name="sm")]
    return _model(nodes, [_vi("x", F, ["N", 4])], [_vi("y", F, [3, "N"])],
                  [_init("W", np.ones((4, 3), np.float32)), _init("B", np.arange(3, dtype=np.float32))])


def _conv():
    nodes = [helper.make_node("Conv", ["x", "W"], ["c"], pads=[1, 1, 1, 1], kernel_shape=[3, 3], strides=[1, 1]),
             helper.make_node("MaxPool", ["c"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("Flatten", ["p"], ["f"], axis=1),
             helper.make_node("Cast", ["f"], ["y"], to=TensorProto.DOUBLE)]
    return _model(nodes, [_vi("x", F, [1, 1, 4, 4])], [_vi("y", TensorProto.DOUBLE, [1, 8])],
                  [_init("W", np.ones((2, 1, 3, 3), np.float32))])


def _shapes():
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Gather", ["s", "zero"], ["n"], axis=0),
             helper.make_node("Unsqueeze", ["n", "zero1"], ["n1"]),
             helper.make_node("Constant", [], ["minus1"], value_ints=[-1]),
             helper.make_node("Concat", ["n1", "minus1"], ["shape"], axis=0),
             helper.make_node("Reshape", ["x", "shape"], ["r"]),
             helper.make_node("Slice", ["r", "starts", "ends", "axes"], ["sl"]),
             helper.make_node("ReduceSum", ["sl", "axes"], ["y"], keepdims=1)]
    return _model(nodes, [_vi("x", F, ["B", 2, 3])], [_vi("y", F, ["B", 1])],
                  [_init("zero", np.array(0, np.int64)), _init("zero1", np.array([0], np.int64)),
                   _init("starts", np.array([1], np.int64)), _init("ends", np.array([5], np.int64)),
                   _init("axes", np.array([1], np.int64))])


def _if():
    """Nested If: the outer then-branch holds an If of its own; branches have initializers and read x."""
    out = [_vi("b", F, [3])]
    inner_then = helper.make_graph([helper.make_node("Add", ["x", "iw"], ["b"])], "inner_then", [], out,
                                   [_init("iw", np.full(3, 2.0, np.float32))])
    inner_else = helper.make_graph([helper.make_node("Neg", ["x"], ["b"])], "inner_else", [], out)
    then = helper.make_graph([helper.make_node("If", ["c2"], ["b"], then_branch=inner_then, else_branch=inner_else,
                                               name="inner")], "then", [], out,
                             [_init("c2", np.array(False))])
    other = helper.make_graph([helper.make_node("Mul", ["x", "x"], ["b"])], "else", [], out)
    nodes = [helper.make_node("Greater", ["x", "zero"], ["gt"]),
             helper.make_node("ReduceMax", ["gt_f"], ["m"], keepdims=0),
             helper.make_node("Cast", ["gt"], ["gt_f"], to=F),
             helper.make_node("Cast", ["m"], ["cond"], to=BOOL),
             helper.make_node("If", ["cond"], ["w"], then_branch=then, else_branch=other, name="outer"),
             helper.make_node("Add", ["x", "w"], ["y"])]
    nodes[1], nodes[2] = nodes[2], nodes[1]
    return _model(nodes, [_vi("x", F, [3])], [_vi("y", F, [3])], [_init("zero", np.zeros(3, np.float32))])


def _loop():
    body = helper.make_graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"]),
         helper.make_node("Add", ["v_in", "x"], ["v_out"]),
         helper.make_node("Mul", ["v_out", "two"], ["scan"])],
        "body", [_vi("i", I64, []), _vi("cond_in", BOOL, []), _vi("v_in", F, [3])],
        [_vi("cond_out", BOOL, []), _vi("v_out", F, [3]), _vi("scan", F, [3])],
        [_init("two", np.array(2.0, np.float32))])
    nodes = [helper.make_node("Loop", ["M", "cond", "v0"], ["v", "ys"], body=body, name="loop")]
    return _model(nodes, [_vi("x", F, [3])], [_vi("v", F, [3]), _vi("ys", F, [3, 3])],
                  [_init("M", np.array(3, np.int64)), _init("cond", np.array(True)),
                   _init("v0", np.zeros(3, np.float32))])


def _external_model():
    const = helper.make_node("Constant", [], ["c"], name="const", value=_external("cv", offset=16, shape=(2,)))
    nodes = [const, helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Add", ["h", "c2"], ["y"]),
             helper.make_node("Slice", ["c", "s0", "s1"], ["c2"])]
    nodes = [nodes[0], nodes[3], nodes[1], nodes[2]]
    return _model(nodes, [_vi("x", F, [2, 4])], [_vi("y", F, [2, 3])],
                  [_external("w"), _init("s0", np.array([0], np.int64)), _init("s1", np.array([1], np.int64))])


@functools.lru_cache(maxsize=1)
def _models() -> tuple[bytes, ...]:
    return tuple(m.SerializeToString() for m in (_dense(), _conv(), _shapes(), _if(), _loop(), _external_model()))


# -- where a model is loaded from, and what may be opened ------------------------------------------
_WATCH: list = []  # [model folder, violations] while a fuzzed load runs
_ALLOWED_ROOTS = tuple({os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix,
                                                         os.path.dirname(os.path.dirname(la.__file__)))})


def _audit(event, args):
    if event != "open" or not _WATCH or not isinstance(args[0], (str, bytes, os.PathLike)):
        return
    path = os.path.realpath(os.fsdecode(args[0]))
    if not path.startswith(_WATCH[0] + os.sep) and not path.startswith(_ALLOWED_ROOTS) and \
            not path.startswith(("/dev/urandom", "/proc/", "/sys/")):  # (libraries read the CPU count)
        _WATCH[1].append(path)


sys.addaudithook(_audit)  # (a hook cannot be removed; it does nothing unless _WATCH is set)


def _folder(tmp_path) -> str:
    """``tmp_path/model`` with the external data file; ``tmp_path/outside`` holds one of the same name."""
    model = tmp_path / "model"
    if not model.exists():
        model.mkdir()
        (tmp_path / "outside").mkdir()
        DATA.tofile(model / "w.bin")
        (-DATA).tofile(tmp_path / "outside" / "w.bin")
    return str(model)


def _usable(sym) -> None:
    """A loaded symbol prints and compiles for the shapes its inputs declare (symbolic dims at 2)."""
    str(sym)
    shapes = {}
    guessed = False
    for node in sym.input_nodes():
        shape = node.avals[0].shape
        if shape is None:
            return  # nothing declared to compile for
        guessed |= not all(isinstance(d, int) for d in shape)
        shapes[node.name] = tuple(d if isinstance(d, int) else 2 for d in shape)
    if math.prod(math.prod(s) for s in shapes.values()) > 10**7:
        return
    try:
        la.CachedOp(sym).compiled(**shapes)
    except la.LazyArrayError:
        if not guessed:
            raise


def _check(raw: bytes, tmp_path) -> None:
    folder = _folder(tmp_path)
    path = os.path.join(folder, "m.onnx")
    with open(path, "wb") as f:
        f.write(raw)
    violations: list[str] = []
    _WATCH[:] = [os.path.realpath(folder), violations]
    try:
        for loader in (la.onnx.load, load_module.load_arrays):
            try:
                got = loader(path)
            except la.LazyArrayError:
                continue
            _usable(got[0] if isinstance(got, tuple) else got)
    finally:
        _WATCH.clear()
    assert not violations, f"opened outside the model's folder: {violations}"


# -- structural mutations ----------------------------------------------------------------------------
def _graphs(g):
    """``g`` and every graph nested in its nodes' attributes."""
    yield g
    for nd in g.node:
        for a in nd.attribute:
            if a.type == AttributeProto.GRAPH:
                yield from _graphs(a.g)
            for sub in a.graphs:
                yield from _graphs(sub)


def _tensors(g):
    """Every TensorProto of a graph (not nested): initializers and attribute tensors."""
    out = list(g.initializer)
    for nd in g.node:
        for a in nd.attribute:
            if a.type == AttributeProto.TENSOR:
                out.append(a.t)
            out.extend(a.tensors)
    return out


_ODD_INTS = [0, 1, -1, 2, 3, 7, -2, 2**31 - 1, -(2**31), 2**40, 2**62, 2**63 - 1, -(2**63)]
_ODD_FLOATS = [0.0, -1.0, 1e30, float("nan"), float("inf"), -float("inf"), 5e-324]
_ODD_TEXT = [b"", b"\xff\xfe", b"\xed\xa0\x80", b"x" * 300, b"NOTSET", b"SAME_UPPER", b"VALID", b"constant",
             b"../w.bin", b"\x00"]
_ATTR_NAMES = ["axis", "perm", "to", "keepdims", "pads", "kernel_shape", "strides", "value", "value_ints",
               "then_branch", "else_branch", "body", "dilations", "group", "auto_pad", "noop_with_empty_axes", "x"]
_OPS = ["Relu", "Add", "Reshape", "If", "Loop", "Gather", "Concat", "Transpose", "Cast", "Slice", "Constant",
        "Identity", "Softmax", "Conv", "MatMul", "Shape", "Expand", "Tile", "Pad", "Squeeze", "ConstantOfShape",
        "Range", "Resize", "TopK", "NoSuchOp", "Scan", "Einsum", "Split"]
_LOCATIONS = ["w.bin", "./w.bin", "sub/../w.bin", "../outside/w.bin", "/etc/passwd", "/dev/zero", "", ".", "..",
              "m.onnx", "missing.bin", "w.bin\x00x", "W.BIN", "w.bin/", "//w.bin", "~/w.bin", "file:w.bin",
              "\\w.bin", "a" * 300]
_NUMBER_TEXT = ["0", "4", "16", "48", "-1", "-16", "1.5", "abc", "", " 4", "4 ", "0x10", "1e3", "9" * 30, "+4",
                "١٢", "4\x00"]


def _set_int_attr(draw, a):
    how = draw(st.sampled_from(["int", "ints", "float", "floats", "text", "type", "tensor"]))
    if how == "int":
        a.i = draw(st.sampled_from(_ODD_INTS) | st.integers(-4, 9))
    elif how == "ints":
        a.ClearField("ints")
        a.ints.extend(draw(st.lists(st.sampled_from(_ODD_INTS) | st.integers(-4, 9), max_size=6)))
    elif how == "float":
        a.f = draw(st.sampled_from(_ODD_FLOATS) | st.floats(-10, 10, width=32))
    elif how == "floats":
        a.ClearField("floats")
        a.floats.extend(draw(st.lists(st.sampled_from(_ODD_FLOATS), max_size=4)))
    elif how == "text":
        a.s = draw(st.sampled_from(_ODD_TEXT))
    elif how == "type":  # the declared type no longer says which field holds the value
        a.type = draw(st.sampled_from([0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 14]))
    else:
        a.t.CopyFrom(numpy_helper.from_array(np.arange(draw(st.integers(0, 5)), dtype=np.int64)))


def _mutate_attr(draw, g) -> None:
    nodes = list(g.node)
    if not nodes:
        return
    nd = draw(st.sampled_from(nodes))
    how = draw(st.sampled_from(["change", "change", "change", "delete", "add", "ref"]))
    attrs = list(nd.attribute)
    if how == "change" and attrs:
        a = draw(st.sampled_from(attrs))
        if a.type in (AttributeProto.GRAPH, AttributeProto.GRAPHS):
            if draw(st.booleans()):
                a.type = draw(st.sampled_from([AttributeProto.INT, AttributeProto.GRAPHS, AttributeProto.TENSOR]))
            else:
                _mutate_graph_io(draw, a.g if a.type == AttributeProto.GRAPH else g)
        elif a.type == AttributeProto.TENSOR:
            _mutate_tensor(draw, a.t)
        else:
            _set_int_attr(draw, a)
    elif how == "delete" and attrs:
        nd.attribute.remove(draw(st.sampled_from(attrs)))
    elif how == "ref" and attrs:
        draw(st.sampled_from(attrs)).ref_attr_name = "outer"
    else:
        a = nd.attribute.add()
        a.name = draw(st.sampled_from(_ATTR_NAMES))
        a.type = AttributeProto.INT
        _set_int_attr(draw, a)


def _mutate_tensor(draw, t) -> None:
    how = draw(st.sampled_from(["dtype", "dtype", "dims", "dims", "raw", "raw", "typed", "name", "external"]))
    if how == "dtype":
        t.data_type = draw(st.sampled_from(list(range(0, 27)) + [99, 2**31 - 1]))
    elif how == "dims":
        dims = list(t.dims)
        choice = draw(st.sampled_from(["set", "add", "drop", "clear"]))
        if choice == "set" and dims:
            dims[draw(st.integers(0, len(dims) - 1))] = draw(st.sampled_from(_ODD_INTS) | st.integers(0, 13))
        elif choice == "add":
            dims.append(draw(st.sampled_from(_ODD_INTS) | st.integers(0, 4)))
        elif choice == "drop":
            dims = dims[1:]
        else:
            dims = []
        del t.dims[:]
        t.dims.extend(dims)
    elif how == "raw":
        raw = t.raw_data
        t.raw_data = draw(st.sampled_from([raw[:-1], raw[:-4], raw + b"\x00", raw + raw, b"", raw[1:], b"\xff" * 3]))
    elif how == "typed":  # values in a typed field besides (or instead of) raw_data
        field = draw(st.sampled_from(["float_data", "int32_data", "int64_data", "double_data", "string_data"]))
        if draw(st.booleans()):
            t.ClearField("raw_data")
        values = {"float_data": [1.0, float("nan")], "int32_data": [1, -(2**31)], "int64_data": [2**62, -1],
                  "double_data": [0.5], "string_data": [b"ab", b"\xff"]}[field]
        getattr(t, field).extend(values[: draw(st.integers(1, 2))])
    elif how == "name":
        t.name = draw(st.sampled_from(["", "x", "W", "y", "M", "two", "shape"]))
    else:
        _mutate_external(draw, t)


def _mutate_external(draw, t) -> None:
    if t.data_location != TensorProto.EXTERNAL or draw(st.integers(0, 3)) == 0:
        t.ClearField("raw_data")
        t.data_location = TensorProto.EXTERNAL
        if not t.external_data:
            for k, v in (("location", "w.bin"), ("offset", "0"), ("length", "4")):
                e = t.external_data.add()
                e.key, e.value = k, v
    entries = list(t.external_data)
    how = draw(st.sampled_from(["location", "offset", "length", "add", "drop", "dup", "internal"]))
    if how in ("location", "offset", "length"):
        e = next((e for e in entries if e.key == how), None) or t.external_data.add()
        e.key = how
        e.value = draw(st.sampled_from(_LOCATIONS if how == "location" else _NUMBER_TEXT))
    elif how == "add":
        e = t.external_data.add()
        e.key = draw(st.sampled_from(["checksum", "basepath", "x", "", "location", "offset"]))
        e.value = draw(st.sampled_from(_NUMBER_TEXT + _LOCATIONS[:6]))
    elif how == "drop" and entries:
        t.external_data.remove(draw(st.sampled_from(entries)))
    elif how == "dup" and entries:
        e = t.external_data.add()
        e.CopyFrom(draw(st.sampled_from(entries)))
    else:  # marked internal but still listing external entries, or the reverse
        t.data_location = TensorProto.DEFAULT


def _mutate_dims(draw, g) -> None:
    vis = [vi for vi in list(g.input) + list(g.output) + list(g.value_info) if vi.type.HasField("tensor_type")]
    if not vis:
        return
    vi = draw(st.sampled_from(vis))
    tt = vi.type.tensor_type
    how = draw(st.sampled_from(["dim", "dim", "dim", "add", "drop", "clear", "elem", "elem", "kind"]))
    dims = list(tt.shape.dim)
    if how == "dim" and dims:
        d = draw(st.sampled_from(dims))
        if draw(st.booleans()):
            d.dim_value = draw(st.sampled_from(_ODD_INTS) | st.integers(0, 9))
        else:
            d.dim_param = draw(st.sampled_from(["N", "B", "", "1", "N+1", "é", "x" * 200, "class", "a b"]))
    elif how == "add":
        tt.shape.dim.add().dim_value = draw(st.sampled_from([0, 1, 2, 2**40, -1]))
    elif how == "drop" and dims:
        del tt.shape.dim[draw(st.integers(0, len(dims) - 1))]
    elif how == "clear":
        tt.ClearField("shape")
    elif how == "elem":
        tt.elem_type = draw(st.sampled_from(list(range(0, 27)) + [99, -1]))
    else:  # a sequence or an optional instead of a tensor
        elem = TensorProto.FLOAT
        vi.type.CopyFrom(helper.make_sequence_type_proto(helper.make_tensor_type_proto(elem, [3])) if draw(
            st.booleans()) else helper.make_optional_type_proto(helper.make_tensor_type_proto(elem, [3])))


def _mutate_node(draw, g) -> None:
    nodes = list(g.node)
    if not nodes:
        return
    k = draw(st.integers(0, len(nodes) - 1))
    nd = g.node[k]
    names = sorted({n for x in nodes for n in list(x.input) + list(x.output)} | {i.name for i in g.input}
                   | {t.name for t in g.initializer} | {"", "missing"})
    how = draw(st.sampled_from(["op", "op", "input", "input", "output", "drop", "dup", "swap", "domain", "extra_in"]))
    if how == "op":
        nd.op_type = draw(st.sampled_from(_OPS))
    elif how == "input" and nd.input:
        nd.input[draw(st.integers(0, len(nd.input) - 1))] = draw(st.sampled_from(names))
    elif how == "output" and nd.output:
        nd.output[draw(st.integers(0, len(nd.output) - 1))] = draw(st.sampled_from(names))
    elif how == "drop":
        del g.node[k]
    elif how == "dup":
        g.node.add().CopyFrom(nd)
    elif how == "swap" and len(nodes) > 1:
        j = draw(st.integers(0, len(nodes) - 1))
        a, b = type(nd)(), type(nd)()
        a.CopyFrom(g.node[k])
        b.CopyFrom(g.node[j])
        g.node[k].CopyFrom(b)
        g.node[j].CopyFrom(a)
    elif how == "domain":
        nd.domain = draw(st.sampled_from(["ai.onnx", "ai.onnx.ml", "com.microsoft", "x", "ai.onnx.preview.training"]))
    else:
        nd.input.append(draw(st.sampled_from(names)))


def _mutate_graph_io(draw, g) -> None:
    how = draw(st.sampled_from(["drop_out", "drop_in", "add_out", "rename_out", "drop_init"]))
    if how == "drop_out" and g.output:
        del g.output[draw(st.integers(0, len(g.output) - 1))]
    elif how == "drop_in" and g.input:
        del g.input[draw(st.integers(0, len(g.input) - 1))]
    elif how == "add_out":
        inner = [n for nd in g.node for n in nd.output] + ["x", "W", "missing"]
        g.output.append(_vi(draw(st.sampled_from(inner)), F, None))
    elif how == "rename_out" and g.output:
        g.output[draw(st.integers(0, len(g.output) - 1))].name = draw(st.sampled_from(["x", "h", "", "cond", "y"]))
    elif how == "drop_init" and g.initializer:
        del g.initializer[draw(st.integers(0, len(g.initializer) - 1))]


@st.composite
def structural_mutation(draw) -> bytes:
    model = onnx.ModelProto()
    model.ParseFromString(draw(st.sampled_from(_models())))
    for _ in range(draw(st.integers(1, 3))):
        graphs = list(_graphs(model.graph))
        g = draw(st.sampled_from(graphs))  # the main graph or a nested If/Loop body
        how = draw(st.sampled_from(["dims", "dims", "attr", "attr", "tensor", "tensor", "external", "node", "node",
                                    "io", "opset", "ir"]))
        tensors = _tensors(g)
        if how == "dims":
            _mutate_dims(draw, g)
        elif how == "attr":
            _mutate_attr(draw, g)
        elif how == "tensor" and tensors:
            _mutate_tensor(draw, draw(st.sampled_from(tensors)))
        elif how == "external" and tensors:
            _mutate_external(draw, draw(st.sampled_from(tensors)))
        elif how == "node":
            _mutate_node(draw, g)
        elif how == "io":
            _mutate_graph_io(draw, g)
        elif how == "opset":
            op = model.opset_import[0] if draw(st.booleans()) else model.opset_import.add()
            op.domain = draw(st.sampled_from(["", "", "ai.onnx", "ai.onnx.ml", "x"]))
            op.version = draw(st.sampled_from([1, 6, 7, 9, 11, 12, 13, 16, 18, 21, 22, 23, 99, 2**40, -1]))
        else:
            model.ir_version = draw(st.sampled_from([0, 1, 3, 4, 6, 7, 8, 9, 10, 11, 12, 99, -1]))
    return model.SerializeToString()


# -- the fuzzers -------------------------------------------------------------------------------------
def test_the_valid_models_load_and_compile(tmp_path):
    for raw in _models():
        folder = _folder(tmp_path)
        with open(os.path.join(folder, "m.onnx"), "wb") as f:
            f.write(raw)
        _usable(la.onnx.load(os.path.join(folder, "m.onnx")))


def test_the_watch_sees_an_open_outside_the_folder(tmp_path):
    folder = _folder(tmp_path)
    violations: list[str] = []
    _WATCH[:] = [os.path.realpath(folder), violations]
    try:
        open(tmp_path / "outside" / "w.bin", "rb").close()
        open(os.path.join(folder, "w.bin"), "rb").close()
    finally:
        _WATCH.clear()
    assert violations == [os.path.realpath(tmp_path / "outside" / "w.bin")]


def test_external_data_entries_that_are_not_utf8_are_format_errors(tmp_path):
    """Found by the byte fuzzer: an external_data offset of invalid UTF-8 (protobuf hands it over as
    bytes) raised TypeError from the range check."""
    raw = _models()[-1]
    good = b"\n\x06offset\x12\x0216"  # the Constant's entry: offset "16"
    assert raw.count(good) == 1
    bad = raw.replace(good, b"\n\x06offset\x12\x02\xff6")
    folder = _folder(tmp_path)
    with open(os.path.join(folder, "m.onnx"), "wb") as f:
        f.write(bad)
    with pytest.raises(la.GraphFormatError, match=r"external_data entry 'offset': b'\\xff6' is not UTF-8 text"):
        la.onnx.load(os.path.join(folder, "m.onnx"))


@pytest.mark.parametrize("examples", COUNTS)
def test_fuzz_structural_mutations(examples, tmp_path):
    @fuzz_settings(examples)
    @given(raw=structural_mutation())
    def run(raw):
        _check(raw, tmp_path)

    run()


@pytest.mark.parametrize("examples", COUNTS)
def test_fuzz_byte_mutations(examples, tmp_path):
    @fuzz_settings(examples)
    @given(raw=st.sampled_from(_models()).flatmap(mutated_bytes))
    def run(raw):
        _check(raw, tmp_path)

    run()
