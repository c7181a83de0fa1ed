"""Values known when loading (lazyarray/onnx/known_values.py): ``Constant`` nodes, concrete sizes and
small integer nodes folded from them are held without graph nodes, and a node is made only where a
converter reads the value as a tensor. The imported graph is the one the eager conversion makes (every
holder made a node before its converter ran, nothing folded), node for node, on every real model of
tests/data/onnx_dynamic and on graphs that read a folded value as a tensor."""
import importlib
import json
import os

import numpy as np
import pytest

import lazyarray as la
from lazyarray.graph.traverse import topo_order
from lazyarray.onnx import known_values

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402

load_mod = importlib.import_module("lazyarray.onnx.load")
HERE = os.path.join(os.path.dirname(os.path.dirname(__file__)), "data", "onnx_dynamic")
NAMES = sorted(m["name"] for m in json.load(open(os.path.join(HERE, "manifest.json"))))


def _eager(monkeypatch):
    """Convert as before holders and folds: every holder made a node when its reader converts."""
    monkeypatch.setattr(load_mod, "_VALUE_INPUTS", {})
    monkeypatch.setattr(load_mod, "FOLD_OPS", frozenset())


def _walk(outputs) -> list:
    """The nodes above ``outputs``, each after its inputs, in the order a depth-first walk meets them
    (not by creation)."""
    order, seen = [], set()

    def visit(node):
        if id(node) not in seen:
            seen.add(id(node))
            for e in node.inputs:
                visit(e.node)
            order.append(node)
    for e in outputs:
        visit(e.node)
    return order


def _structure(sym, arrays, created: bool = True) -> list:
    """The graph node for node (ops, params, avals, inputs by position, constants' values) and the
    parameters bound; ``created``: in the order the graph runs them (creation), else as a walk from
    the outputs meets them."""
    nodes = topo_order(list(sym.outputs)) if created else _walk(sym.outputs)
    at = {id(n): k for k, n in enumerate(nodes)}
    out = []
    for n in nodes:
        v = None
        if n.kind == "const":
            a = np.asarray(n.value)
            v = (str(a.dtype), a.shape, a.tobytes())
        out.append((n.op.name if n.op is not None else n.kind, n.name, [(at[id(e.node)], e.index) for e in n.inputs],
                    sorted((k, repr(p)) for k, p in n.params.items()), [repr(a) for a in n.avals], v))
    out.append([(at[id(e.node)], e.index) for e in sym.outputs])
    out.append(sorted((k, str(v.dtype), v.shape) for k, v in arrays.items()))
    return out


def _convert(model, params=True, created=True):
    return _structure(*load_mod.to_symbol(model, "m", None, params=params), created=created)


@pytest.mark.parametrize("name", NAMES)
def test_real_models_import_the_same_graph(name, monkeypatch):
    model = load_mod.read_model(os.path.join(HERE, name + ".onnx"))
    got = [_convert(model, params) for params in (True, False)]
    _eager(monkeypatch)
    want = [_convert(model, params) for params in (True, False)]
    assert got[0] == want[0] and got[1] == want[1]
    assert len(got[0]) > 3


def test_gpt2_folds_its_shape_chains_without_dead_nodes():
    """The ``Gather -> Squeeze -> Unsqueeze -> Concat`` chains of GPT-2's reshapes are folded: no
    value is computed through the interpreter, and the graph keeps what the eager import kept."""
    model = load_mod.read_model(os.path.join(HERE, "hf_gpt2.onnx"))
    conv = load_mod.Conversion(model, "m", None, params=True)
    folded = [v for v in conv.env.values() if isinstance(v, known_values.Folded)]
    assert len(folded) >= 16
    assert all(v.made is None for v in folded[:16])  # (read only as sizes: no node made for them)


def _model(nodes, inputs, outputs, inits=()):
    g = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(inits))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def test_a_folded_value_read_as_a_tensor_is_converted_as_before(monkeypatch):
    """``Concat`` of two Constants, used as a Reshape's shape and added to a graph input: the tensor
    read makes the Unsqueeze/Concat nodes the eager import made, and the values are the same. (Made
    at that read, they come later in creation order: integer ops of known values, which no order
    changes.)"""
    c = helper.make_tensor("c", TensorProto.INT64, [], [3])
    nodes = [helper.make_node("Constant", [], ["k"], value=c),
             helper.make_node("Constant", [], ["ax"], value=helper.make_tensor("a", TensorProto.INT64, [1], [0])),
             helper.make_node("Unsqueeze", ["k", "ax"], ["k1"]),
             helper.make_node("Concat", ["k1", "k1"], ["shape"], axis=0),
             helper.make_node("Reshape", ["x", "shape"], ["y"]),
             helper.make_node("Add", ["shape", "i"], ["z"])]
    model = _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [9]),
                           helper.make_tensor_value_info("i", TensorProto.INT64, [2])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 3]),
                    helper.make_tensor_value_info("z", TensorProto.INT64, [2])])
    got = _convert(model, created=False)
    ops = [row[0] for row in got[:-2]]
    assert "concatenate" in ops and "expand_dims" in ops
    sym, _ = load_mod.to_symbol(model, "m")
    x, i = np.arange(9, dtype=np.float32), np.array([10, 20], np.int64)
    y, z = la.CachedOp(sym)(la.array(x), la.array(i))
    np.testing.assert_array_equal(y.asnumpy(), x.reshape(3, 3))
    np.testing.assert_array_equal(z.asnumpy(), [13, 23])
    _eager(monkeypatch)
    assert _convert(model, created=False) == got


@pytest.mark.parametrize("op, values, attrs, want", [
    ("Concat", [np.array([1, 2]), np.array([3])], {"axis": 0}, [1, 2, 3]),
    ("Gather", [np.array([4, 5, 6]), np.array(2)], {}, 6),
    ("Unsqueeze", [np.array(7), np.array([0])], {}, [7]),
    ("Squeeze", [np.array([7]), np.array([0])], {}, 7),
    ("Mul", [np.array(6), np.array(7)], {}, 42),
    ("Slice", [np.array([1, 2, 3, 4]), np.array([1]), np.array([3])], {}, [2, 3]),
    ("Where", [np.array([True, False]), np.array([1, 2]), np.array([3, 4])], {}, [1, 4]),
])
def test_fold_computes_small_int64_nodes(op, values, attrs, want):
    values = [v.astype(np.int64) if v.dtype != np.bool_ else v for v in values]
    out = known_values.fold(op, values, attrs, 17)
    assert out.dtype == np.int64
    np.testing.assert_array_equal(out, want)


@pytest.mark.parametrize("op, values", [
    ("Div", [np.array(-7), np.array(2)]),  # (ONNX truncates, the size rules floor)
    ("Add", [np.array(1.5, np.float32), np.array(2.0, np.float32)]),  # floats: computed by the graph
    ("Add", [np.array(1, np.int32), np.array(2, np.int32)]),  # other integer types keep their node
    ("Concat", [np.array([True]), np.array([False])]),  # bools, but for Where's condition
    ("Add", [np.arange(known_values.FOLD_MAX + 1), np.array(1)]),  # data, not sizes
    ("Reshape", [np.arange(6), np.array([0, 3])]),  # 0 copies a dim in ONNX
    ("Cast", [np.array([1, 2])]),  # (keeps the input's dtype)
    ("Relu", [np.array([1, 2])]),  # not a size op
])
def test_fold_leaves_other_nodes_to_their_converter(op, values):
    attrs = {"axis": 0} if op == "Concat" else {"to": 6} if op == "Cast" else {}
    assert known_values.fold(op, [v if v.dtype != np.int_ else v.astype(np.int64) for v in values], attrs, 17) is None


def test_value_inputs_name_the_converters_in_use():
    """Every op whose inputs the loader passes as holders still converts with the converter named
    (a family that claims the op again turns the entry off)."""
    assert set(load_mod._VALUE_INPUTS) == set(known_values.VALUE_INPUTS)
    for op, (fn, _) in known_values.VALUE_INPUTS.items():
        assert load_mod.CONVERTERS[op] is fn


def test_fold_gives_its_own_array():
    """An ``Identity`` or ``Squeeze`` of an initializer is a copy: the loader makes a folded value read-only,
    never the initializer the block binds as a parameter."""
    init = np.array([3, 4], np.int64)
    out = known_values.fold("Identity", [init], {}, 17)
    assert out is not init and not np.shares_memory(out, init) and init.flags.writeable
