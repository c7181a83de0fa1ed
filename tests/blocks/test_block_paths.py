"""Nodes remember the block that created them (``Node.block``, set by ``Block.run_forward``)."""
import json
import warnings

import numpy as np
import pytest

import lazyarray as la
from lazyarray import blocks as B
from lazyarray.errors import GraphFormatError
from lazyarray.graph.node import BLOCK_SCOPE
from lazyarray.graph.symbol import Symbol


class Body(B.HybridBlock):
    def __init__(self):
        super().__init__()
        self.conv = B.Dense(4, in_units=4)

    def forward(self, x):
        return la.relu(self.conv(x))


class Res(B.HybridBlock):
    def __init__(self):
        super().__init__()
        self.body = B.HybridSequential()
        self.body.add(B.Dense(4, in_units=4), Body())

    def forward(self, x):
        return self.body(x) + x * 0.5


def model():
    la.random.seed(0)
    net = B.HybridSequential()
    net.add(B.Dense(4, in_units=4), Res())
    net.initialize()
    return net


def op_paths(sym):
    return [(n.op.name, n.block_path) for n in sym.topo() if n.op is not None]


def test_hybridize_records_nested_paths_like_collect_params():
    net = model()
    net.hybridize()
    net(la.ones((2, 4)))
    sym, params = net.export_graph()
    assert op_paths(sym) == [
        ("dense", "0"),
        ("dense", "1.body.0"),
        ("dense", "1.body.1.conv"),
        ("relu", "1.body.1"),
        ("multiply", "1"),
        ("add", "1"),
    ]
    conv = [n for n in sym.topo() if n.block_path == "1.body.1.conv"][0]
    assert conv.block == (("1", "Res"), ("body", "HybridSequential"), ("1", "Body"), ("conv", "Dense"))
    # the paths are the parameter names' prefixes
    assert "1.body.1.conv.weight" in params
    assert all(n.block is None for n in sym.topo() if n.op is None)  # inputs and parameters


def test_deferred_recording_of_a_plain_call_records_paths_too():
    net = model()
    x = la.ones((2, 4))
    with la.deferred():
        y = net(x)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sym = la.get_symbol(y, inputs={"data": x})
    assert [p for _, p in op_paths(sym)] == ["0", "1.body.0", "1.body.1.conv", "1.body.1", "1", "1"]
    np.testing.assert_allclose(y.asnumpy(), net(x).asnumpy(), rtol=1e-6)


def test_no_scope_leaks_after_calls_or_errors():
    net = model()
    net(la.ones((2, 4)))  # eager: nothing recorded, no scope kept
    assert BLOCK_SCOPE.get() is None

    class Bad(B.HybridBlock):
        def forward(self, x):
            raise ValueError("boom")

    bad = B.HybridSequential()
    bad.add(Bad())
    with la.deferred(), pytest.raises(ValueError):
        bad(la.ones(2))
    assert BLOCK_SCOPE.get() is None
    with la.deferred():
        y = la.ones(2) * 3  # recorded outside any block: no path
    assert y._entry.node.block is None


def test_a_separately_traced_child_is_its_own_root():
    net = model()
    net[1].hybridize()  # only the Res block is compiled; the outer Sequential runs eagerly
    net(la.ones((2, 4)))
    sym = net[1]._by_sig[next(iter(net[1]._by_sig))].symbol
    assert [p for _, p in op_paths(sym)] == ["body.0", "body.1.conv", "body.1", "", ""]


def test_unregistered_block_is_named_by_its_type():
    shared = B.Dense(3, in_units=2)  # called by reference from forward: not a child of Holder
    shared.initialize()

    class Holder(B.HybridBlock):
        def forward(self, x):
            return shared(x)

    h = Holder()
    h.hybridize()
    h(la.ones((1, 2)))
    sym = h._by_sig[next(iter(h._by_sig))].symbol
    assert op_paths(sym) == [("dense", "Dense")]


def test_paths_survive_json_networkx_and_export(tmp_path):
    net = model()
    net.hybridize()
    net(la.ones((2, 4)))
    sym, _ = net.export_graph()
    back = Symbol.from_json(sym.to_json())
    assert [n.block for n in back.topo()] == [n.block for n in sym.topo()]
    doc = json.loads(sym.to_json())
    conv = [d for d in doc["nodes"] if d.get("block") and len(d["block"]) == 4][0]
    assert conv["block"] == [["1", "Res"], ["body", "HybridSequential"], ["1", "Body"], ["conv", "Dense"]]
    assert all("block" not in d for d in doc["nodes"] if d["op"] is None)
    assert [n.block for n in Symbol.from_networkx(sym.to_networkx()).topo()] == [n.block for n in sym.topo()]
    sym_file, param_file = net.export(str(tmp_path / "m"))
    again = B.SymbolBlock.imports(sym_file, ["data"], param_file)
    assert op_paths(again.symbol) == op_paths(sym)
    # compiling keeps the paths (passes copy nodes with copy_node)
    compiled = la.CachedOp(sym, fuse=False).compiled(data=(2, 4))
    assert "1.body.1.conv" in str(compiled)


@pytest.mark.parametrize("bad", [
    "0.conv",  # a string, not pairs
    [["0"]],  # a pair needs a name and a type
    [["0", ""]],  # empty type
    [["0", 3]],
    [["x", "Dense"]] * 65,  # deeper than 64
])
def test_malformed_block_field_is_a_format_error(bad):
    x = la.sym.var("x", shape=(2,))
    doc = json.loads(la.sym.relu(x).to_json())
    doc["nodes"][-1]["block"] = bad
    with pytest.raises(GraphFormatError, match="'block' must be a list"):
        Symbol.from_json(json.dumps(doc))
