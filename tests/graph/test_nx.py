"""The networkx view and back."""
import networkx as nx
import numpy as np
from graph.mlp import traced_mlp

import lazyarray as la


def test_to_networkx_has_one_node_per_graph_node_with_attributes():
    sym, *_ = traced_mlp()
    g = sym.to_networkx()
    assert isinstance(g, nx.DiGraph)
    assert g.number_of_nodes() == len(sym.topo())
    d = g.nodes["softmax0"]
    assert d["op"] == "softmax" and d["name"] == "softmax0" and d["shape"] == (4, 5) and d["dtype"] == "float32"
    assert g.nodes["data"]["op"] is None
    assert nx.is_directed_acyclic_graph(g)
    assert nx.has_path(g, "data", "softmax0")
    assert nx.dag_longest_path_length(g) == 6  # data -> dense -> relu -> dense -> relu -> dense -> softmax


def test_repeated_use_is_one_edge_with_two_uses_and_round_trip():
    x = la.sym.var("x", shape=(3,))
    y = x * x
    g = y.to_networkx()
    assert g.edges["x", "multiply0"]["uses"] == [(0, 0), (0, 1)]
    back = la.Symbol.from_networkx(g)
    assert back.to_json() == y.to_json()


def test_mlp_round_trip_through_networkx():
    sym, *_ = traced_mlp()
    back = la.Symbol.from_networkx(sym.to_networkx())
    assert back.to_json() == sym.to_json()
    np.testing.assert_array_equal(back.infer_shape(data=(9, 8))[1], [(9, 5)])
