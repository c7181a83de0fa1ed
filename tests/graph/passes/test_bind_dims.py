"""bind_dims: a shape-polymorphic graph specialized to one call's sizes (the executor's first step)."""
import numpy as np
import pytest

import lazyarray as la
from lazyarray.graph.passes.bind_dims import bind_dims

F32 = np.dtype("float32")


def _aval(shape):
    return la.Aval(shape, F32, la.cpu())


def test_size_parameters_take_the_call_sizes_and_the_graph_checks():
    b, s = la.Dim("b"), la.Dim("s")
    x = la.sym.var("x", shape=(b, s, 4))
    y = la.sym.reshape(x, shape=(b * s, 4))
    z = la.sym.getitem(y, key=(slice(0, b),))
    bound = bind_dims(z, {"x": _aval((3, 5, 4))})
    params = {n.op.name: n.params for n in bound.topo() if n.op is not None}
    assert params["reshape"]["shape"] == (15, 4) and params["getitem"]["key"] == (slice(0, 3, None),)
    assert bound.check() is not None
    assert bind_dims(la.sym.exp(la.sym.var("v", shape=(2,))), {"v": _aval((2,))}) is not None  # nothing to bind


def test_the_same_graph_serves_every_size_and_equals_numpy():
    b = la.Dim("b")
    x = la.sym.var("x", shape=(b, 6))
    y = la.sym.sum(la.sym.reshape(x, shape=(b, 2, 3)), axis=2)
    op = la.CachedOp(y)
    for n in (1, 2, 7):
        v = np.arange(6 * n, dtype=np.float32).reshape(n, 6)
        np.testing.assert_array_equal(op(la.array(v)).asnumpy(), v.reshape(n, 2, 3).sum(2))
    assert op.num_compiles == 3
    assert y.infer_shape(x=(5, 6))[1] == [(5, 2)]


def test_a_call_that_contradicts_the_declared_sizes_names_the_input_and_axis():
    b = la.Dim("b")
    x, w = la.sym.var("x", shape=(b, 3)), la.sym.var("w", shape=(b,))
    op = la.CachedOp(la.sym.add(la.sym.sum(x, axis=1), w))
    with pytest.raises(la.ShapeError, match="input 'w' has size 4 on axis 0, but the graph declares b there, "
                                            "which is 2"):
        op(la.zeros((2, 3)), la.zeros((4,)))


def test_a_pinned_input_holds_its_sizes_and_survives_json():
    x = la.sym.var("x", shape=(1, 3), pinned=True)
    y = la.sym.reshape(x, shape=(3,))
    again = la.Symbol.from_json(y.to_json())
    assert '"pinned": true' in y.to_json() and '"version": 3' in y.to_json()
    for sym in (y, again):
        op = la.CachedOp(sym)
        assert op(la.zeros((1, 3))).shape == (3,)
        with pytest.raises(la.ShapeError, match="input 'x' has size 2 on axis 0.*built for 1"):
            op(la.zeros((2, 3)))


def test_symbolic_shapes_and_bounds_survive_json():
    n = la.Dim("n", min=2, max=64)
    x = la.sym.var("x", shape=(n, 2 * n))
    y = la.sym.getitem(x, key=(slice(1, n),))
    text = y.to_json()
    again = la.Symbol.from_json(text)
    assert again.to_json() == text
    shape = again.input_nodes()[0].avals[0].shape
    assert shape == (n, 2 * n) and shape[0].bounds() == (2, 64)
    assert la.CachedOp(again)(la.zeros((5, 10))).shape == (4, 10)
    with pytest.raises(la.ShapeError, match="outside its declared range"):
        la.CachedOp(again)(la.zeros((65, 130)))


def test_op_avals_left_to_placement_give_the_same_graph():
    # avals=False (the executor's compile): op nodes are copied only for their size parameters, and
    # placement infers their avals again; the placed graph is the one of the full substitution.
    from lazyarray.graph.passes.placement import placement
    b, s = la.Dim("b"), la.Dim("s")
    x = la.sym.var("x", shape=(b, s, 4))
    y = la.sym.exp(la.sym.reshape(x * 2.0, shape=(b * s, 4)))
    z = la.sym.sum(la.sym.getitem(y, key=(slice(0, b),)), axis=1)
    given = {"x": _aval((3, 5, 4))}
    lean = bind_dims(z, given, avals=False)
    kept = [n for n in lean.topo() if n.op is not None and n.op.name in ("multiply", "exp", "sum")]
    assert kept and all(n.avals[0].shape != (15, 4) for n in kept if n.op.name == "exp")  # (not substituted)
    full, placed = placement(bind_dims(z, given), given), placement(lean, given)
    assert [(n.op.name if n.op else n.kind, n.avals, n.params) for n in full.topo()] == \
        [(n.op.name if n.op else n.kind, n.avals, n.params) for n in placed.topo()]
    assert placed.check() is not None and placed.outputs[0].aval.shape == (3,)
