"""``graph_key`` / ``same_graph`` (structural graph equality) agree with what the JSON text of the
graphs says wherever the text says "different", and ``SubGraph`` equality (loop bodies, called graphs)
uses them."""
from __future__ import annotations

import json

import numpy as np

import lazyarray as la
from lazyarray.executor.call import SubGraph
from lazyarray.graph.node import const_node
from lazyarray.graph.same_graph import graph_key, same_graph
from lazyarray.graph.serialize import to_dict
from lazyarray.graph.symbol import Symbol


def _text(sym) -> str:  # (what SubGraph equality compared before: the sorted JSON text)
    return json.dumps(to_dict(sym), sort_keys=True)


def _body(scale, weights, name="x", op=la.sym.tanh, source=None):
    x = la.sym.var(name, shape=(2, 3), dtype="float32")
    w = Symbol([la.sym.var("w", shape=(3, 3), dtype="float32").outputs[0]])
    if weights is not None:
        aval = la.Aval((3, 3), np.dtype("float32"), la.cpu())
        w = Symbol([la.graph.node.Entry(const_node(np.asarray(weights, dtype=np.float32), aval))])
    return op(la.sym.dot(x, w) * scale)


def _pairs():
    w = np.arange(9.0).reshape(3, 3)
    w2 = w.copy()
    w2[1, 1] = -w2[1, 1]
    z = np.zeros((3, 3))
    return [
        (_body(2.0, w), _body(2.0, w.copy()), True),  # rebuilt: equal
        (_body(2.0, w), _body(3.0, w), False),  # a parameter
        (_body(0.0, w), _body(-0.0, w), False),  # -0.0 is not 0.0 (their JSON text differs)
        (_body(2.0, w), _body(2.0, w2), False),  # a constant's value
        (_body(2.0, z), _body(2.0, -z), False),  # a constant's zeros' signs (bit for bit)
        (_body(2.0, w), _body(2.0, w, name="y"), False),  # an input's name
        (_body(2.0, w), _body(2.0, w, op=la.sym.sigmoid), False),  # an op
        (_body(2.0, None), _body(2.0, None), True),  # no constants
    ]


def test_graph_key_agrees_with_the_json_text():
    for a, b, same in _pairs():
        assert same_graph(a, b) is same
        assert (graph_key(a) == graph_key(b)) is same
        assert (_text(a) == _text(b)) is same  # (the fixtures differ where the JSON differs)
        assert same_graph(a, a)


def test_wiring_and_output_order_count():
    x = la.sym.var("x", shape=(3,), dtype="float32")
    y = la.sym.var("y", shape=(3,), dtype="float32")
    a, b = la.sym.exp(x), la.sym.exp(y)
    assert not same_graph(Symbol([(a - b).outputs[0]]), Symbol([(b - a).outputs[0]]))
    assert not same_graph(Symbol([a.outputs[0], b.outputs[0]]), Symbol([b.outputs[0], a.outputs[0]]))
    assert same_graph(Symbol([(a - b).outputs[0]]), Symbol([(a - b).outputs[0]]))


def test_subgraph_equality_and_hash():
    w = np.arange(9.0).reshape(3, 3)
    g1, g2 = SubGraph(_body(2.0, w)), SubGraph(_body(2.0, w.copy()))
    g3 = SubGraph(_body(2.0, -w))
    assert g1 == g2 and hash(g1) == hash(g2)
    assert g1 != g3 and g1 != "not a graph"
    assert {g1: 1}.get(g2) == 1 and {g1: 1}.get(g3) is None
    # nested: graphs whose parameter is a sub-graph (a loop body) compare through it
    syms = [_loop(1.0), _loop(1.0), _loop(2.0)]
    assert same_graph(syms[0], syms[1]) and _text(syms[0]) == _text(syms[1])
    assert not same_graph(syms[0], syms[2]) and _text(syms[0]) != _text(syms[2])


def _loop(scale: float):
    xs, h = la.ones((4, 3)), la.zeros((3,))
    with la.deferred():
        outs, final = la.foreach(lambda x, s: (la.tanh(x + s * scale), la.tanh(x + s * scale)), xs, h)
    return la.get_symbol(final, inputs={"xs": xs, "h": h})


def test_a_value_without_a_plain_equality_is_not_the_same():
    class Odd:
        def __eq__(self, other):
            raise TypeError("no")

        __hash__ = object.__hash__

    a, b = Odd(), Odd()
    assert not same_graph(_Fake(a), _Fake(b))


class _Fake:  # a symbol-shaped graph of one node holding an odd value
    def __init__(self, value):
        self.node = la.graph.node.Node(None, (), {}, (), kind="const", value=value)
        self.outputs = (la.graph.node.Entry(self.node, 0),)

    def topo(self):
        return [self.node]

    def names(self):
        return {id(self.node): "c"}


def test_avals_of_plain_shapes_compare_as_their_fields_keys_would():
    from lazyarray.aval import Aval
    from lazyarray.graph.same_graph import _key
    f32, f64 = np.dtype("float32"), np.dtype("float64")
    a = Aval((2, 3), f32, la.cpu())
    assert _key((a,)) == _key((Aval((2, 3), f32, la.cpu()),))
    assert _key(a) != _key(Aval((2, 4), f32, la.cpu()))
    assert _key(a) != _key(Aval((2, 3), f64, la.cpu()))
    assert _key(a) != _key(Aval((2, 3), f32, la.cpu(1)))
    assert _key(Aval(None, None, None)) == _key(Aval(None, None, None))
    assert _key(Aval((None, 3), f32, la.cpu())) != _key(Aval((1, 3), f32, la.cpu()))
    # a NumPy integer among the dims: its class counts, as in the fields' keys
    assert _key(Aval((np.int64(2), 3), f32, la.cpu())) != _key(a)
    b = la.Dim("b")
    assert _key(Aval((b, 3), f32, la.cpu())) == _key(Aval((b, 3), f32, la.cpu()))


def test_avals_of_symbolic_shapes_compare_as_their_fields_keys_would():
    # (keyed as themselves beside their sizes' classes: equal exactly where each size's (class, value) is)
    from lazyarray.aval import Aval
    from lazyarray.dim import DimExpr
    from lazyarray.graph.same_graph import _key
    f32 = np.dtype("float32")
    b, c = la.Dim("b"), la.Dim("c")
    sym = Aval((b, 3), f32, la.cpu())
    assert _key(sym) == _key(Aval((b, 3), f32, la.cpu()))
    assert _key(sym) != _key(Aval((c, 3), f32, la.cpu()))
    assert _key(sym) != _key(Aval((b, 4), f32, la.cpu()))
    assert _key(sym) != _key(Aval((b, np.int64(3)), f32, la.cpu()))
    assert _key(sym) != _key(Aval((b, 3), np.dtype("float64"), la.cpu()))
    assert _key(sym) != _key(Aval((b, 3), f32, la.cpu(1)))
    e = b * 2
    assert isinstance(e, DimExpr) and _key(Aval((e,), f32, la.cpu())) == _key(Aval((b * 2,), f32, la.cpu()))
    assert _key(Aval((e,), f32, la.cpu())) != _key(Aval((b * 3,), f32, la.cpu()))
    # a DimExpr and the Dim of its symbol are equal, their classes differ: not the same key
    one = b * 1
    if one == b and one.__class__ is not b.__class__:
        assert _key(Aval((one, 3), f32, la.cpu())) != _key(sym)
    # the same body twice, with symbolic sizes, is one sub-graph; another size is another
    def body(d):
        x = la.sym.var("x", shape=(d, 3), dtype="float32")
        return Symbol([la.sym.tanh(x).outputs[0]])
    assert graph_key(body(b)) == graph_key(body(b)) and graph_key(body(b)) != graph_key(body(c))
