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


def test_conds_whose_branches_differ_are_not_merged():
    # (their params print alike: the bodies are compared by structure, not by their text)
    x = la.array(np.arange(3, dtype="float32"))

    def three():
        return x * 3.0

    def seven():
        return x * 7.0

    with la.deferred():
        a = la.cond(la.sum(x) > 0, lambda: x * 2.0, lambda: x * 5.0)
        b = la.cond(la.sum(x) > 0, three, seven)
        c = la.cond(la.sum(x) > 0, three, seven)
        y = a + b + c
    sym = la.get_symbol(y, inputs={"x": x})
    merged = cse(sym).check()
    assert [n.op.name for n in merged.topo() if n.op].count("cond") == 2  # b and c are one, a stays
    np.testing.assert_array_equal(la.CachedOp(sym)(x).asnumpy(), x.asnumpy() * 8)


def test_large_array_params_that_differ_where_repr_elides_them_are_not_merged():
    from lazyarray.graph.same_graph import params_key
    u, v = np.zeros(5000, np.float32), np.zeros(5000, np.float32)
    v[2500] = 1
    assert repr(u) == repr(v)
    assert params_key({"w": u}) != params_key({"w": v})
    assert params_key({"w": u, "k": 1}) == params_key({"k": 1, "w": u.copy()})
    assert params_key({"k": 1}) != params_key({"k": 1.0}) != params_key({"k": True})
