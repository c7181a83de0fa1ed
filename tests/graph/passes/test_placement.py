import numpy as np

import lazyarray as la
from lazyarray.graph.passes.placement import placement


def _sym():
    x = la.array(np.arange(6, dtype="float32").reshape(2, 3))
    c = la.array(np.full((2, 3), 2.0, dtype="float32"))
    with la.deferred():
        y = la.exp(x) * c
        z = y + la.sum(y, axis=0)
    return la.get_symbol(z, inputs={"x": x}), x


def test_nodes_follow_their_inputs_and_constants_get_copies(run_symbol):
    sym, x = _sym()
    moved = placement(sym, {"x": la.Aval((2, 3), np.dtype("float32"), la.cpu(1))}).check()
    for node in moved.topo():
        if node.op is not None:
            assert node.avals[0].device == la.cpu(1), node
    copies = [n for n in moved.topo() if n.op is not None and n.op.name == "copy_to"]
    assert len(copies) == 1  # the constant, once, even though one node reads it
    assert "copy_to(%const" in str(moved)
    v = x.asnumpy()
    np.testing.assert_allclose(run_symbol(moved, x=v)[0], run_symbol(sym, x=v)[0])


def test_same_device_adds_nothing():
    sym, _ = _sym()
    same = placement(sym).check()
    assert [n.op.name for n in same.topo() if n.op] == [n.op.name for n in sym.topo() if n.op]


def test_pins_move_a_node_and_add_one_copy_per_entry_and_device(run_symbol):
    x = la.sym.var("x", shape=(3,))
    e = la.sym.exp(x)
    s = la.sym.sin(e)
    y = la.sym.add(s, la.sym.cos(e))
    names = y.names()
    sin_name = next(names[id(n)] for n in y.topo() if n.op is not None and n.op.name == "sin")
    cos_name = next(names[id(n)] for n in y.topo() if n.op is not None and n.op.name == "cos")
    moved = placement(y, pins={sin_name: la.cpu(1), cos_name: la.cpu(1)}).check()
    copies = [n for n in moved.topo() if n.op is not None and n.op.name == "copy_to"]
    # exp -> cpu(1) is shared by sin and cos; add runs on cpu(1) (its first input) -> no copy back
    assert len(copies) == 1
    out_dev = moved.outputs[0].aval.device
    assert out_dev == la.cpu(1)
    v = np.linspace(0, 1, 3).astype("float32")
    np.testing.assert_allclose(run_symbol(moved, x=v)[0], run_symbol(y, x=v)[0], rtol=1e-6)


def test_recorded_copy_nodes_are_kept():
    x = la.ones((2,))
    with la.deferred():
        y = (x.to(la.cpu(1)) * 2).to(la.cpu(0))
    sym = la.get_symbol(y, inputs={"x": x})
    moved = placement(sym).check()
    assert str(moved).count("copy_to(") == 2


def test_a_graph_already_at_the_given_signature_comes_back_as_itself():
    sym, x = _sym()
    given = {"x": sym.input_nodes()[0].avals[0]}
    assert placement(sym, given) is sym  # (nothing to move or re-infer: no copy of any node)
    other = placement(sym, {"x": la.Aval((2, 3), np.dtype("float64"), la.cpu(0))}).check()
    assert other is not sym and all(n.avals[0].dtype == np.float64 for n in other.topo() if n.op is not None)


def test_dims_bind_sizes_in_the_same_walk_as_bind_dims_then_placement(run_symbol):
    from lazyarray.graph.passes.bind_dims import bind_dims
    from lazyarray.graph.passes.infer import bind_env
    b = la.Dim("b")
    x = la.sym.var("x", shape=(b, 6))
    w = la.sym.var("w", shape=(b, 2, 3))
    y = la.sym.reshape(la.sym.exp(x), shape=(b, 2, 3)) + w
    z = la.sym.sum(la.sym.reshape(y, shape=(b, 6)), axis=1)
    given = {"x": la.Aval((4, 6), np.dtype("float32"), la.cpu()), "w": la.Aval((4, 2, 3), np.dtype("float32"), la.cpu())}
    one = placement(z, given, dims=bind_env(z.input_nodes(), given, "CachedOp")).check()
    two = placement(bind_dims(z, given, avals=False), given).check()
    assert str(one) == str(two)
    assert [n.params for n in one.topo()] == [n.params for n in two.topo()]
    assert [n.params["shape"] for n in one.topo() if n.op is not None and n.op.name == "reshape"] == [(4, 2, 3), (4, 6)]
    assert all(a.known for n in one.topo() for a in n.avals)
    xv, wv = np.arange(24, dtype="float32").reshape(4, 6) / 10, np.ones((4, 2, 3), "float32")
    np.testing.assert_array_equal(run_symbol(one, x=xv, w=wv)[0], run_symbol(two, x=xv, w=wv)[0])
