"""Symbol: inputs/outputs, order, check(), text IR, internals, composition with la.sym."""
import pytest
from graph.mlp import traced_mlp

import lazyarray as la
from lazyarray.graph.node import Entry, Node
from lazyarray.ops import registry


def test_topological_order_puts_inputs_first():
    sym, *_ = traced_mlp()
    pos = {id(n): i for i, n in enumerate(sym.topo())}
    for node in sym.topo():
        for e in node.inputs:
            assert pos[id(e.node)] < pos[id(node)]


def test_text_ir_one_line_per_node_with_op_inputs_type_and_device():
    sym, *_ = traced_mlp()
    text = str(sym)
    lines = text.splitlines()
    assert lines[-1].startswith("return %")
    assert "%data = input : float32[4,8] @cpu(0)" in lines
    dense = [ln for ln in lines if "nn.dense(" in ln]
    assert len(dense) == 3
    assert dense[0].startswith("%dense0 = nn.dense(%data, %") and dense[0].endswith(": float32[4,16] @cpu(0)")
    assert any("nn.softmax(%dense2, axis=-1) : float32[4,5] @cpu(0)" in ln for ln in lines)


def test_names_are_unique_and_stable():
    sym, *_ = traced_mlp()
    names = list(sym.names().values())
    assert len(names) == len(set(names))
    assert names == list(traced_mlp()[0].names().values())


def test_get_internals_selects_inner_outputs():
    sym, *_ = traced_mlp()
    internals = sym.get_internals()
    names = internals.list_outputs()
    assert "relu0_output" in names and "softmax0_output" in names
    inner = internals["relu0_output"]
    assert inner.list_inputs() == ["data"]
    assert inner.infer_shape(data=(3, 8))[1] == [(3, 16)]
    with pytest.raises(KeyError):
        internals["nope_output"]


def test_check_catches_broken_graphs():
    sym, *_ = traced_mlp()
    node = next(n for n in sym.topo() if n.op is not None and n.op.name == "relu")
    good = node.avals
    node.avals = (good[0]._replace(shape=(99, 99)),)
    with pytest.raises(la.GraphError, match="relu0.*disagrees"):
        sym.check()
    node.avals = good
    # an entry reading a non-existent output
    bad = Node(registry.get("exp"), (Entry(node, 3),), {}, good)
    with pytest.raises(la.GraphError, match="reads output 3"):
        la.Symbol([Entry(bad)]).check()


def test_check_catches_duplicate_input_names():
    a, b = la.sym.var("x", shape=(2,)), la.sym.var("x", shape=(2,))
    with pytest.raises(la.GraphError, match="two graph inputs are named 'x'"):
        (a + b).check()


def test_sym_api_builds_the_same_graph_as_tracing():
    sym, *_ = traced_mlp()
    data = la.sym.var("data", shape=(4, 8))
    consts = {n.name or sym.name_of(n): n for n in sym.constant_nodes()}
    assert len(consts) == 6
    # la.sym has a function for every registered op, from the registry (la.sym.<ns>.<op> for namespaced
    # ops: la.sym.fft is the namespace, its op is la.sym.fft.fft)
    for op in registry.all_ops():
        assert callable(getattr(getattr(la.sym, op.namespace) if op.namespace else la.sym, op.name)), op.qualname
    y = la.sym.nn.softmax(la.sym.relu(data * 2) - 1, axis=0)
    assert y.infer_shape(data=(3, 8))[1] == [(3, 8)]
    assert "nn.softmax" in str(y) and "multiply(%data, 2.0)" in str(y)


def test_sym_var_without_shape_is_inferred_later():
    x = la.sym.var("x")
    y = la.sym.sum(la.sym.exp(x), axis=1)
    assert y.infer_shape(x=(5, 7))[1] == [(5,)]
    assert "[?]" in str(y)


def test_symbol_operators_and_multi_input():
    a, b = la.sym.var("a", shape=(2, 3)), la.sym.var("b", shape=(3,))
    s = la.sym.concatenate([a * b, 1 - a], axis=0)
    assert s.list_inputs() == ["a", "b"]
    assert s.infer_shape()[1] == [(4, 3)]
    assert (a @ la.sym.transpose(a)).infer_shape()[1] == [(2, 2)]


def test_text_ir_groups_nodes_under_a_header_per_block():
    from lazyarray import blocks as B

    class Res(B.HybridBlock):
        def __init__(self):
            super().__init__()
            self.body = B.HybridSequential()
            self.body.add(B.Dense(4, in_units=4), B.Activation("relu"))

        def forward(self, x):
            return self.body(x) + x

    la.random.seed(0)
    net = B.HybridSequential()
    net.add(B.Dense(4, in_units=4), Res())
    net.initialize()
    net.hybridize()
    net(la.ones((2, 4)))
    sym, _ = net.export_graph()
    lines = str(sym).splitlines()
    headers = [ln for ln in lines if ln.startswith("#")]
    assert headers == ["# 0 · Dense", "# 1.body.0 · Dense  (in 1 · Res › 1.body · HybridSequential)",
                       "# 1.body.1 · Activation  (in 1 · Res › 1.body · HybridSequential)", "# 1 · Res"]
    # each header is followed by that block's nodes; node lines keep their format
    i = lines.index("# 1 · Res")
    assert lines[i + 1].startswith("%add0 = add(%relu0, %dense0) : float32[batch,4]")  # (a symbolic trace)
    assert lines[lines.index("# 0 · Dense") + 1].startswith("%dense0 = nn.dense(%data, %0.weight, %0.bias)")
    # graphs recorded outside blocks print as before: no headers
    assert not [ln for ln in str(la.sym.relu(la.sym.var("x", shape=(2,)))).splitlines() if ln.startswith("#")]
