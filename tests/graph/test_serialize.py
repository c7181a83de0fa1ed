"""JSON: lossless round trips (for every registered op), files, and malformed input."""
import json

import numpy as np
import pytest

import lazyarray as la
from graph.mlp import traced_mlp
from lazyarray.graph.serialize import VERSION
from lazyarray.ops import registry


def _run(sym, **inputs):
    """Evaluate a symbol through deferred materialization (executor-independent)."""
    from lazyarray.executor.interpret import evaluate
    from lazyarray.graph.node import Entry, Node

    subst = {}
    for node in sym.topo():
        if node.op is None:
            subst[id(node)] = node if node.kind == "const" else Node(None, (), {}, node.avals, kind="const",
                                                                      values=[inputs[node.name]])
        else:
            subst[id(node)] = Node(node.op, tuple(Entry(subst[id(e.node)], e.index) for e in node.inputs),
                                   node.params, node.avals)
    return evaluate([Entry(subst[id(e.node)], e.index) for e in sym.outputs])


def test_mlp_round_trip_is_lossless_and_gives_equal_outputs(tmp_path):
    sym, x, p, eager, _ = traced_mlp()
    text = sym.to_json()
    back = la.Symbol.from_json(text)
    assert back.to_json() == text
    np.testing.assert_allclose(_run(back, data=x.asnumpy())[0], eager, rtol=1e-6)
    path = tmp_path / "mlp-symbol.json"
    sym.save(str(path))
    loaded = la.load_symbol(str(path))
    assert loaded.to_json() == text
    assert not [f for f in tmp_path.iterdir() if f.name.startswith(".tmp")]  # atomic write left no temp file


def test_schema_is_versioned_and_typed():
    sym, *_ = traced_mlp()
    doc = json.loads(sym.to_json())
    assert doc["format"] == "lazyarray.symbol" and doc["version"] == VERSION
    softmax = next(n for n in doc["nodes"] if n["op"] == "softmax")
    assert softmax["attrs"] == {"axis": -1}
    assert softmax["avals"] == [{"shape": [4, 5], "dtype": "float32", "device": "cpu(0)", "stype": "default"}]
    data = next(n for n in doc["nodes"] if n["name"] == "data")
    assert data["op"] is None and data["kind"] == "var"


# One small recorded use of every registered (non-composite) op, with its params.
def _cases():
    f = np.float32
    x = la.array(np.linspace(-2, 2, 12, dtype=f).reshape(3, 4))
    m = la.array(np.array([[1, -1, 2, 0], [0, 3, 0, 1], [2, 2, -2, 1]], dtype=f))
    lab = la.array(np.array([0, 3, 1]))
    return {
        "binary": lambda op: getattr(la, op)(x, m + 3),
        "unary": lambda op: getattr(la, op)(x + 3 if op in ("log", "sqrt") else x),
        "sum": lambda op: la.sum(x, axis=(0, 1), keepdims=True), "mean": lambda op: la.mean(x, axis=1),
        "max": lambda op: la.max(x, axis=0), "min": lambda op: la.min(x), "argmax": lambda op: la.argmax(x, axis=1),
        "where": lambda op: la.where(x > 0, x, m), "smooth_l1": lambda op: la.smooth_l1(x, scalar=2.0),
        "quadratic": lambda op: la.quadratic(x, a=1.0, b=-2.0, c=0.5),
        "reshape": lambda op: la.reshape(x, (2, -1)), "reshape_like": lambda op: la.reshape_like(x, la.ones((6, 2))),
        "transpose": lambda op: la.transpose(x, axes=(1, 0)), "broadcast_to": lambda op: la.broadcast_to(x, (2, 3, 4)),
        "broadcast_like": lambda op: la.broadcast_like(x[0], x), "expand": lambda op: la.expand(x[:1], 2, 3, -1),
        "repeat": lambda op: la.repeat(x, 2, 1, 2), "concatenate": lambda op: la.concatenate([x, m], axis=1),
        "stack": lambda op: la.stack([x, m], axis=2), "squeeze": lambda op: la.squeeze(x[None], axis=0),
        "expand_dims": lambda op: la.expand_dims(x, axis=(0, 2)),
        "getitem": lambda op: x[1:, None, ::2], "index_grad": lambda op: la.index_grad(x[1], x, key=(1,)),
        "boolean_mask": lambda op: x[x > 0], "boolean_mask_grad": lambda op: la.boolean_mask_grad(x[x > 0], x, x > 0),
        "take": lambda op: la.take(x, lab, axis=1), "take_grad": lambda op: la.take_grad(la.take(x, lab, axis=1), x, lab, axis=1),
        "nonzero": lambda op: la.nonzero(m), "sum_to": lambda op: la.sum_to(x, shape=(1, 4)),
        "sum_like": lambda op: la.sum_like(x, la.ones((4,))),
        "dot": lambda op: la.dot(x, la.transpose(m)), "matmul": lambda op: la.matmul(x, la.transpose(m)),
        "dense": lambda op: la.nn.dense(x, m, la.ones((3,))), "softmax": lambda op: la.nn.softmax(x, axis=0),
        "log_softmax": lambda op: la.nn.log_softmax(x), "softmax_cross_entropy": lambda op: la.nn.softmax_cross_entropy(x, lab),
        "one_hot": lambda op: la.nn.one_hot(lab, depth=5, dtype="float64"),
        "dropout_mask": lambda op: la.nn.dropout_mask(x, p=0.25),
        "cast": lambda op: la.cast(x, dtype="float16"), "copy_to": lambda op: la.copy_to(x, device=la.cpu(1)),
        "cast_storage": lambda op: la.cast_storage(x, stype="default"),
    }


_BINARY = {"add", "subtract", "multiply", "divide", "power", "maximum", "minimum", "heaviside", "equal",
           "not_equal", "less", "less_equal", "greater", "greater_equal"}
_UNARY = {"negative", "abs", "sign", "exp", "log", "sqrt", "square", "sin", "cos", "tanh", "sigmoid", "relu",
          "zeros_like", "ones_like", "copy", "stop_gradient"}


@pytest.mark.parametrize("op", [o for o in registry.all_ops() if o.compose is None], ids=lambda o: o.name)
def test_every_registered_op_round_trips(op):
    cases = _cases()
    key = "binary" if op.name in _BINARY else "unary" if op.name in _UNARY else op.name
    assert key in cases, f"add a JSON round-trip case for new op {op.name!r}"
    with la.deferred():
        y = cases[key](op.name)
    sym = la.get_symbol(y)
    assert any(n.op is op for n in sym.topo())
    text = sym.to_json()
    back = la.Symbol.from_json(text)
    assert back.to_json() == text
    if not op.random:
        want = y.asnumpy()
        got = _run(back)[0]
        np.testing.assert_array_equal(np.asarray(got), want)


def _doc():
    sym, *_ = traced_mlp()
    return json.loads(sym.to_json())


def _load(doc):
    return la.Symbol.from_json(json.dumps(doc))


def test_bad_json():
    with pytest.raises(la.GraphFormatError, match="not valid JSON"):
        la.Symbol.from_json("{nope")


def test_not_a_symbol_and_future_version():
    with pytest.raises(la.GraphFormatError, match="format"):
        la.Symbol.from_json('{"nodes": []}')
    doc = _doc()
    doc["version"] = VERSION + 1
    with pytest.raises(la.GraphFormatError, match="newer than this lazyarray reads"):
        _load(doc)


def test_unknown_op_names_the_node():
    doc = _doc()
    node = next(n for n in doc["nodes"] if n["op"] == "relu")
    node["op"] = "os.system"
    with pytest.raises(la.GraphFormatError, match=r"node \d+ \('relu0'\).*unknown op 'os.system'"):
        _load(doc)


def test_dangling_input_reference():
    doc = _doc()
    node = next(n for n in doc["nodes"] if n["op"] == "relu")
    node["inputs"] = [[9999, 0]]
    with pytest.raises(la.GraphFormatError, match="relu0.*dangling input reference to node id 9999"):
        _load(doc)


def test_cycle_is_detected():
    doc = _doc()
    relu = next(n for n in doc["nodes"] if n["name"] == "relu0")
    dense = next(n for n in doc["nodes"] if n["name"] == "dense0")
    dense["inputs"][0] = [relu["id"], 0]
    with pytest.raises(la.GraphFormatError, match="cycle"):
        _load(doc)


def test_wrong_attribute_type_and_unknown_attribute():
    doc = _doc()
    node = next(n for n in doc["nodes"] if n["op"] == "softmax")
    node["attrs"]["axis"] = "last"
    with pytest.raises(la.GraphFormatError, match="softmax0.*'axis'.*must be an int"):
        _load(doc)
    node["attrs"] = {"axes": 1}
    with pytest.raises(la.GraphFormatError, match="softmax0.*no attribute 'axes'"):
        _load(doc)


def test_inconsistent_avals_and_bad_constants():
    doc = _doc()
    node = next(n for n in doc["nodes"] if n["op"] == "relu")
    node["avals"][0]["shape"] = [1, 2]
    with pytest.raises(la.GraphFormatError, match="relu0.*disagrees"):
        _load(doc)
    doc = _doc()
    const = next(n for n in doc["nodes"] if n.get("kind") == "const")
    const["value"]["base64"] = "!!!"
    with pytest.raises(la.GraphFormatError, match="bad constant value"):
        _load(doc)
    doc = _doc()
    doc["nodes"][0]["avals"][0]["dtype"] = "complex128"
    with pytest.raises(la.GraphFormatError, match="complex128"):
        _load(doc)


def test_missing_file_is_a_format_error(tmp_path):
    with pytest.raises(la.GraphFormatError, match="cannot read"):
        la.load_symbol(str(tmp_path / "nope.json"))
