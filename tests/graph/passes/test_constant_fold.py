import numpy as np
import pytest

import lazyarray as la
from lazyarray.graph.passes.constant_fold import constant_fold


def test_constant_subgraphs_fold(run_symbol):
    c = la.array(np.arange(4, dtype="float32"))
    x = la.ones((4,))
    with la.deferred():
        y = x * la.exp(c * 2) + la.sum(c)
    sym = la.get_symbol(y, inputs={"x": x})
    out = constant_fold(sym).check()
    ops = [n.op.name for n in out.topo() if n.op]
    assert ops == ["multiply", "add"]
    v = np.linspace(0, 1, 4).astype("float32")
    np.testing.assert_allclose(run_symbol(out, x=v)[0], run_symbol(sym, x=v)[0], rtol=1e-6)


def test_random_ops_and_inputs_are_not_folded():
    c = la.ones((8,))
    with la.deferred():
        y = la.nn.dropout(c, p=0.5, training=True)
    sym = la.get_symbol(y, inputs={})
    out = constant_fold(sym).check()
    assert "dropout_mask" in [n.op.name for n in out.topo() if n.op]


def test_fully_constant_output_becomes_a_constant():
    c = la.array([1.0, 2.0])
    with la.deferred():
        y = la.exp(c)
    out = constant_fold(la.get_symbol(y, inputs={})).check()
    (node,) = out.topo()
    assert node.kind == "const"
    np.testing.assert_allclose(node.value, np.exp([1.0, 2.0]).astype("float32"))


def test_a_kernel_that_fails_is_left_to_run_and_raises_a_named_error():
    """Folding ran kernels bare: a constant one_hot index out of range was a bare IndexError at compile."""
    with la.deferred():
        y = la.nn.one_hot(la.array(np.array([5])), depth=3)
    sym = la.get_symbol(y, inputs={})
    assert [n.op.name for n in constant_fold(sym).topo() if n.op is not None] == ["one_hot"]
    with pytest.raises(la.OpIndexError, match=r"one_hot failed in a compiled graph on inputs \[int64\[1\]\]"):
        la.CachedOp(sym)()


def test_small_creations_fold_and_large_or_symbolic_ones_are_made_per_call(run_symbol):
    from lazyarray.graph.passes.constant_fold import MAX_FOLD_CREATION_BYTES
    x = la.sym.var("x", shape=(7,), dtype="int64")
    pos = la.sym.iota(bounds=(0, 7, 1))  # a sequence's positions: no inputs
    big = la.sym.fill(shape=(MAX_FOLD_CREATION_BYTES // 4 + 1,), value=1.0, dtype="float32")
    sym = la.Symbol([(x + la.sym.expand_dims(pos, axis=0)).outputs[0], la.sym.sum(big).outputs[0]])
    out = constant_fold(sym).check()
    ops = sorted(n.op.name for n in out.topo() if n.op)
    assert ops == ["add", "fill", "sum"]  # iota and its expand_dims folded; the large fill stays a step
    xv = np.arange(7)
    for got, want in zip(run_symbol(out, x=xv), run_symbol(sym, x=xv)):
        np.testing.assert_array_equal(got, want)
    n = la.Dim("n")
    sym_n = la.sym.iota(bounds=(0, n, 1)) + la.sym.var("y", shape=(n,), dtype="int64")
    assert "iota" in [node.op.name for node in constant_fold(sym_n).topo() if node.op]
