import numpy as np

import lazyarray as la
from lazyarray.graph.passes.dce import dce


def _two_outputs():
    x = la.sym.var("x", shape=(3, 4))
    y = la.sym.var("y", shape=(3, 4))
    a = la.sym.exp(x) * 2
    b = la.sym.sin(y) + la.sym.sum(x)
    return la.Symbol([a.outputs[0], b.outputs[0]])


def test_dce_keeps_only_what_the_kept_outputs_need(run_symbol):
    sym = _two_outputs()
    kept = dce(sym, keep=[0]).check()
    assert [n.op.name for n in kept.topo() if n.op] == ["exp", "multiply"]
    assert kept.list_inputs() == ["x"]
    x = np.random.default_rng(0).standard_normal((3, 4)).astype("float32")
    y = np.ones((3, 4), dtype="float32")
    np.testing.assert_array_equal(run_symbol(kept, x=x)[0], run_symbol(sym, x=x, y=y)[0])


def test_dce_by_name_and_default_keeps_everything(run_symbol):
    sym = _two_outputs()
    by_name = dce(sym, keep=[sym.list_outputs()[1]]).check()
    assert by_name.list_inputs() == ["y", "x"] or set(by_name.list_inputs()) == {"x", "y"}
    full = dce(sym).check()
    assert len(full.topo()) == len(sym.topo())
    x = np.ones((3, 4), dtype="float32")
    for a, b in zip(run_symbol(full, x=x, y=x), run_symbol(sym, x=x, y=x)):
        np.testing.assert_array_equal(a, b)


def test_dce_does_not_touch_the_input_symbol():
    sym = _two_outputs()
    before = str(sym)
    out = dce(sym, keep=[1])
    assert str(sym) == before
    # nodes are never mutated, so the result shares the nodes it keeps (no copy)...
    assert {id(n) for n in out.topo()} < {id(n) for n in sym.topo()}
    assert str(out) == str(la.Symbol([sym.outputs[1]]))
    # ...and with nothing to drop the result is the symbol itself
    assert dce(sym) is sym


def test_dce_drops_declared_inputs_nothing_reads():
    x = la.sym.var("x", shape=(3,))
    unused = la.sym.var("u", shape=(3,))
    sym = la.Symbol([la.sym.exp(x).outputs[0]], unused_inputs=tuple(n for n in unused.topo()))
    assert sym.list_inputs() == ["x", "u"]
    assert dce(sym).list_inputs() == ["x"]


def test_dce_of_a_symbol_made_from_its_outputs_is_that_symbol_unwalked():
    x = la.sym.var("x", shape=(3,))
    sym = la.Symbol([la.sym.exp(x).outputs[0], la.sym.sin(x).outputs[0]])
    assert sym.unused_inputs == ()
    assert dce(sym) is sym
    assert sym._order is None  # (not walked: the pass had nothing to find)
    assert [n.op.name for n in sym.topo() if n.op] == ["exp", "sin"]
