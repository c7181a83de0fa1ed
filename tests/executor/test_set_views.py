"""Views of pooled buffers made once per buffer set (executor/set_views.py): fewer steps per run,
the same values run after run, and explain() lists them."""
import numpy as np
import pytest

import lazyarray as la
from lazyarray.executor.program import compile_program


def _heads(x, w):
    """A transformer's head split: a product, then reshape + transpose views of its buffer."""
    h = la.sym.matmul(x, w)
    q = la.sym.transpose(la.sym.reshape(h, shape=(1, 6, 2, 4)), axes=(0, 2, 1, 3))
    k = la.sym.transpose(la.sym.reshape(h, shape=(1, 6, 2, 4)), axes=(0, 2, 3, 1))
    return la.sym.matmul(q, k) * 0.5


def _heads_np(x, w):
    h = x @ w
    q = h.reshape(1, 6, 2, 4).transpose(0, 2, 1, 3)
    k = h.reshape(1, 6, 2, 4).transpose(0, 2, 3, 1)
    return (q @ k) * np.float32(0.5)


def _program(sym):
    return compile_program(list(sym.outputs), sym.input_nodes())


def test_views_of_pooled_buffers_leave_the_run_loop_and_follow_its_contents():
    x = la.sym.var("x", shape=(1, 6, 8))
    w = la.sym.var("w", shape=(8, 8))
    prog = _program(_heads(x, w))
    assert prog.made_once  # the reshapes and transposes of the product
    assert {sp.node.op.name for sp in prog.made_once.values()} <= {"reshape", "transpose"}
    assert len(prog.steps) + len(prog.made_once) == len(prog.plan.steps)
    rng = np.random.default_rng(0)
    for _ in range(3):  # each run writes new values into the same buffers: the views show them
        xn = rng.standard_normal((1, 6, 8)).astype("float32")
        wn = rng.standard_normal((8, 8)).astype("float32")
        np.testing.assert_allclose(prog.run([xn, wn])[0], _heads_np(xn, wn), rtol=1e-5, atol=1e-6)


def test_each_buffer_set_gets_its_own_views():
    x = la.sym.var("x", shape=(1, 6, 8))
    w = la.sym.var("w", shape=(8, 8))
    prog = _program(_heads(x, w))
    a, b = prog._new_set(), prog._new_set()
    for sp in prog.made_once.values():
        o = sp.outs[0]
        assert a[o] is not b[o] and not np.shares_memory(a[o], b[o])


def test_a_reshape_of_a_transposed_buffer_stays_a_step():
    # (NumPy copies there: a copy made once would not follow the buffer's later contents)
    x = la.sym.var("x", shape=(4, 6))
    t = la.sym.transpose(la.sym.exp(x))
    y = la.sym.reshape(t, shape=(24,)) + 1.0
    prog = _program(y)
    names = [sp.node.op.name for sp in prog.made_once.values()]
    assert "reshape" not in names
    xn = np.random.default_rng(1).standard_normal((4, 6)).astype("float32")
    for k in range(2):
        np.testing.assert_allclose(prog.run([xn + k])[0], np.exp(xn + k).T.reshape(24) + 1, rtol=1e-6)


def test_deciding_a_large_transposed_buffers_reshape_reads_no_memory():
    """The layouts are worked out on stand-ins that own one element: a reshape NumPy cannot make a view
    of must be refused without a copy (the shape setter copied the 64 MiB its strides claimed, then
    refused: a segmentation fault while compiling ``tests/onnx/test_light_models.py``'s models)."""
    x = la.sym.var("x", shape=(4096, 4096))
    y = la.sym.reshape(la.sym.transpose(la.sym.exp(x)), shape=(4096 * 4096,)) + 1.0
    prog = _program(y)  # (compiling is the test: it read 64 MiB past a one-element buffer)
    assert "reshape" not in [sp.node.op.name for sp in prog.made_once.values()]
    assert "transpose" in [sp.node.op.name for sp in prog.made_once.values()]


def test_a_view_handed_to_the_caller_is_not_made_once():
    x = la.sym.var("x", shape=(2, 3))
    y = la.sym.reshape(la.sym.exp(x), shape=(3, 2))
    prog = _program(y)
    assert not prog.made_once
    xn = np.ones((2, 3), np.float32)
    first = prog.run([xn])[0]
    second = prog.run([xn * 2])[0]
    np.testing.assert_allclose(first, np.exp(xn).reshape(3, 2))  # (the first result is not overwritten)
    np.testing.assert_allclose(second, np.exp(xn * 2).reshape(3, 2))


def test_a_view_of_a_graph_input_stays_a_step():
    x = la.sym.var("x", shape=(2, 3))
    y = la.sym.exp(la.sym.transpose(x)) * 2.0
    prog = _program(y)
    assert not prog.made_once
    xn = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_allclose(prog.run([xn])[0], np.exp(xn.T) * 2, rtol=1e-6)


def test_explain_lists_the_views_made_once():
    x = la.sym.var("x", shape=(1, 6, 8))
    w = la.sym.var("w", shape=(8, 8))
    op = la.CachedOp(_heads(x, w))
    xa, wa = la.ones((1, 6, 8)), la.ones((8, 8))
    ex = op.explain(xa, wa)
    once = [r for r in ex.steps if r["step"] == "-"]
    assert once and all(r["op[implementation]"].endswith("[view made once]") for r in once)
    assert "views made once" in ex.text()
    np.testing.assert_allclose(op(xa, wa).asnumpy(), _heads_np(np.ones((1, 6, 8), np.float32),
                                                               np.ones((8, 8), np.float32)))


@pytest.mark.parametrize("threads", [2])
def test_concurrent_runs_use_separate_views(threads):
    import concurrent.futures as cf
    x = la.sym.var("x", shape=(1, 6, 8))
    w = la.sym.var("w", shape=(8, 8))
    prog = _program(_heads(x, w))
    rng = np.random.default_rng(2)
    cases = [(rng.standard_normal((1, 6, 8)).astype("float32"), rng.standard_normal((8, 8)).astype("float32"))
             for _ in range(16)]
    with cf.ThreadPoolExecutor(threads) as pool:
        got = list(pool.map(lambda c: prog.run(list(c))[0], cases))
    for (xn, wn), y in zip(cases, got):
        np.testing.assert_allclose(y, _heads_np(xn, wn), rtol=1e-5, atol=1e-6)


def test_a_packed_qkv_split_by_getitem_is_made_once_through_its_strides():
    """A packed q/k/v (torch's MultiheadAttention as exported): reshape, transpose, then ``getitem``
    of each part and the head split of each: every view follows the strides of the transposed
    buffer, so all of them are made once; the values follow the buffer run after run."""
    x = la.sym.var("x", shape=(7, 1, 8))
    w = la.sym.var("w", shape=(8, 24))
    qkv = la.sym.transpose(la.sym.reshape(la.sym.matmul(x, w), shape=(7, 1, 3, 8)), axes=(2, 0, 1, 3))
    q = la.sym.reshape(la.sym.getitem(qkv, key=(0,)), shape=(7, 2, 4))
    k = la.sym.reshape(la.sym.getitem(qkv, key=(1,)), shape=(7, 2, 4))
    y = la.sym.matmul(la.sym.transpose(q, axes=(1, 0, 2)), la.sym.transpose(k, axes=(1, 2, 0))) * 0.5
    prog = _program(y)
    names = sorted(sp.node.op.name for sp in prog.made_once.values())
    assert names == ["getitem"] * 2 + ["reshape"] * 3 + ["transpose"] * 3
    rng = np.random.default_rng(2)
    for _ in range(3):
        xn = rng.standard_normal((7, 1, 8)).astype("float32")
        wn = rng.standard_normal((8, 24)).astype("float32")
        t = (xn @ wn).reshape(7, 1, 3, 8).transpose(2, 0, 1, 3)
        qn, kn = t[0].reshape(7, 2, 4), t[1].reshape(7, 2, 4)
        want = (qn.transpose(1, 0, 2) @ kn.transpose(1, 2, 0)) * np.float32(0.5)
        np.testing.assert_allclose(prog.run([xn, wn])[0], want, rtol=1e-5, atol=1e-5)


def test_a_getitem_that_is_not_a_view_or_a_reshape_that_would_copy_stays_a_step():
    x = la.sym.var("x", shape=(4, 6))
    e = la.sym.exp(x)
    last = la.sym.getitem(e, key=(1, 2)) + 1.0  # (a 0-d index: NumPy returns a scalar)
    cols = la.sym.reshape(la.sym.getitem(e, key=(slice(None), slice(0, 4))), shape=(16,)) + 1.0  # (a copy)
    rows = la.sym.getitem(e, key=(slice(1, 3),)) * 2.0  # (a view: made once)
    prog = _program(la.Symbol([last.outputs[0], cols.outputs[0], rows.outputs[0]]))
    once = {sp.node.op.name: sp for sp in prog.made_once.values()}
    assert list(once) == ["getitem"] and once["getitem"].node.params["key"] == (slice(1, 3),)
    xn = np.random.default_rng(3).standard_normal((4, 6)).astype("float32")
    for k in range(2):
        a, b, c = prog.run([xn + k])
        ex = np.exp(xn + k)
        np.testing.assert_allclose(a, ex[1, 2] + 1, rtol=1e-6)
        np.testing.assert_allclose(b, ex[:, :4].reshape(16) + 1, rtol=1e-6)
        np.testing.assert_allclose(c, ex[1:3] * 2, rtol=1e-6)
