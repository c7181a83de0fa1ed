import numpy as np

import lazyarray as la
from lazyarray.graph.passes.cse import cse


def test_cse_merges_equal_subexpressions(run_symbol):
    x = la.sym.var("x", shape=(4,))
    y = (la.sym.exp(x) * 2) + (la.sym.exp(x) * 2) + la.sym.sum(la.sym.exp(x), axis=0)
    out = cse(y).check()
    ops = [n.op.name for n in out.topo() if n.op]
    assert ops.count("exp") == 1 and ops.count("multiply") == 1
    v = np.linspace(-1, 1, 4).astype("float32")
    np.testing.assert_allclose(run_symbol(out, x=v)[0], run_symbol(y, x=v)[0], rtol=1e-6)


def test_cse_respects_params_and_scalars(run_symbol):
    x = la.sym.var("x", shape=(2, 3))
    y = la.sym.sum(x, axis=0) * 2 + la.sym.sum(x, axis=0) * 3 + la.sym.sum(x, axis=None)
    out = cse(y).check()
    ops = [n.op.name for n in out.topo() if n.op]
    assert ops.count("sum") == 2 and ops.count("multiply") == 2  # axis=0 merges; *2 and *3 differ
    v = np.arange(6, dtype="float32").reshape(2, 3)
    np.testing.assert_allclose(run_symbol(out, x=v)[0], run_symbol(y, x=v)[0])


def test_cse_never_merges_random_ops():
    x = la.sym.var("x", shape=(8,))
    y = la.sym.nn.dropout_mask(x, p=0.5) + la.sym.nn.dropout_mask(x, p=0.5)
    out = cse(y).check()
    assert [n.op.name for n in out.topo() if n.op].count("dropout_mask") == 2
