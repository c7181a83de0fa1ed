import numpy as np

import lazyarray as la
from lazyarray import blocks as B
from lazyarray.graph.passes.sink_slices import sink_slices
from lazyarray.graph.symbol import Symbol

FIRST = (slice(None), 0)


def _ops(sym):
    return [n.op.name for n in sym.topo() if n.op is not None]


def _vals(rng, **shapes):
    return {k: rng.standard_normal(s).astype("float32") for k, s in shapes.items()}


def _same(run_symbol, before, after, vals, rtol=1e-6):
    for a, b in zip(run_symbol(before, **vals), run_symbol(after, **vals)):
        assert a.shape == b.shape and a.dtype == b.dtype
        np.testing.assert_allclose(b, a, rtol=rtol, atol=1e-6)


def test_first_token_of_a_feed_forward_block_computes_one_row(run_symbol):
    x = la.sym.var("x", shape=(3, 5, 4))
    w1, b1 = la.sym.var("w1", shape=(8, 4)), la.sym.var("b1", shape=(8,))
    w2 = la.sym.var("w2", shape=(4, 8))
    g, b = la.sym.var("g", shape=(4,)), la.sym.var("b", shape=(4,))
    h = la.sym.nn.layer_norm(x + la.sym.nn.dense(la.sym.nn.gelu(la.sym.nn.dense(x, w1, b1)), w2), g, b)
    y = la.sym.getitem(h, key=FIRST)
    out = sink_slices(y).check()
    # every op now works on (3, 4) / (3, 8): the slice sits on x alone
    for n in out.topo():
        if n.op is not None and n.op.name != "getitem":
            assert n.avals[0].shape[:-1] == (3,), (n.op.name, n.avals[0].shape)
    assert {n.inputs[0].node.name for n in out.topo() if n.op is not None and n.op.name == "getitem"} == {"x"}
    vals = _vals(np.random.default_rng(0), x=(3, 5, 4), w1=(8, 4), b1=(8,), w2=(4, 8), g=(4,), b=(4,))
    _same(run_symbol, y, out, vals)


def test_broadcast_operands_are_indexed_at_zero_or_kept(run_symbol):
    x = la.sym.var("x", shape=(2, 6, 3))
    row = la.sym.var("row", shape=(1, 6, 1))  # broadcasts along axes 0 and 2
    col = la.sym.var("col", shape=(3,))  # only the last axis
    y = la.sym.getitem(la.sym.tanh(x * row + col), key=(slice(0, 1), 2))
    out = sink_slices(y).check()
    assert _ops(out)[-1] == "tanh" and out.outputs[0].aval.shape == (1, 3)
    vals = _vals(np.random.default_rng(1), x=(2, 6, 3), row=(1, 6, 1), col=(3,))
    _same(run_symbol, y, out, vals)


def test_a_producer_read_whole_elsewhere_is_not_moved():
    x = la.sym.var("x", shape=(3, 5, 4))
    t = la.sym.tanh(x)
    y = la.sym.getitem(t, key=FIRST) + la.sym.sum(t, axis=1)  # t is needed whole by the sum
    out = sink_slices(y)
    assert _ops(out) == _ops(y)


def test_keys_and_ops_it_does_not_follow():
    x = la.sym.var("x", shape=(3, 5, 4))
    w = la.sym.var("w", shape=(4, 4))
    cases = [
        la.sym.getitem(la.sym.tanh(x), key=(slice(None), slice(None), 0)),  # the last axis
        la.sym.getitem(la.sym.tanh(x), key=(None, 0)),  # a new axis
        la.sym.getitem(la.sym.softmax(x, axis=1), key=FIRST),  # mixes positions along axis 1
        la.sym.getitem(la.sym.nn.layer_norm(x, la.sym.var("g", shape=(5,)), la.sym.var("b", shape=(5,)), axis=1),
                       key=FIRST),  # normalizes along the sliced axis
        la.sym.getitem(la.sym.reshape(la.sym.nn.dense(x, w), shape=(3, 20)), key=(0,)),  # a reshape
    ]
    for y in cases:
        assert _ops(sink_slices(y)) == _ops(y)


def test_a_graph_output_is_not_moved():
    x = la.sym.var("x", shape=(3, 5, 4))
    t = la.sym.tanh(x)
    both = Symbol(list(t.outputs) + list(la.sym.getitem(t, key=FIRST).outputs))
    assert _ops(sink_slices(both)) == _ops(both)


def test_hybridized_first_token_classifier_computes_one_row_and_matches_eager(train_tiny_transformer):
    rng = np.random.default_rng(0)
    x, y = la.array(rng.integers(0, 50, (4, 12))), la.array(rng.integers(0, 3, 4))
    results = []
    for hybrid in (False, True):
        net, out, grads = train_tiny_transformer(hybrid, x, y)
        results.append((out, grads))
    compiled = net.cached_op.compiled(data=(4, 12))
    ffn = [n for n in compiled.topo() if n.op is not None and n.op.name == "dense" and n.avals[0].shape[-1] == 64]
    assert sorted(n.avals[0].shape for n in ffn) == [(4, 12, 64), (4, 64)]  # the last layer's: one row
    np.testing.assert_allclose(results[1][0], results[0][0], rtol=1e-5, atol=1e-6)
    for k in results[0][1]:
        np.testing.assert_allclose(results[1][1][k], results[0][1][k], rtol=1e-5, atol=1e-6, err_msg=k)


def test_mean_pooling_keeps_every_row():
    la.random.seed(0)
    net = B.models.transformer_encoder(50, classes=3, units=16, num_layers=1, num_heads=2, max_length=16,
                                       pooling="mean")
    net.initialize()
    net.hybridize()
    net(la.array(np.zeros((2, 6), dtype="int64")))
    compiled = net.cached_op.compiled(data=(2, 6))
    assert all(n.avals[0].shape[:2] == (2, 6) for n in compiled.topo()
               if n.op is not None and n.op.name in ("dense", "layer_norm") and n.avals[0].ndim == 3)


def test_a_row_of_a_2d_dense_and_its_gradients_equal_eager():
    x, w, b = la.sym.var("x", shape=(5, 4)), la.sym.var("w", shape=(3, 4)), la.sym.var("b", shape=(3,))
    op = la.CachedOp(la.sym.getitem(la.sym.tanh(la.sym.nn.dense(x, w, b)), key=(2,)))
    assert [n.op.name for n in op.compiled().topo() if n.op is not None] == ["getitem", "dense", "tanh"]
    rng = np.random.default_rng(3)
    arrays = [la.array(rng.standard_normal(s).astype("float32")) for s in ((5, 4), (3, 4), (3,))]
    grads = []
    for fn in (op, lambda xv, wv, bv: la.tanh(la.nn.dense(xv, wv, bv))[2]):
        for a in arrays:
            a.attach_grad()
        with la.autograd.record():
            out = fn(*arrays)
            loss = (out * out).sum()
        loss.backward()
        grads.append([out.asnumpy()] + [a.grad.asnumpy() for a in arrays])
    for got, want in zip(*grads):  # (a product over one row rounds a little differently than over five)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_a_round_keeps_the_nodes_above_the_moved_slice_as_they_are():
    x = la.sym.var("x", shape=(3, 5, 4))
    w = la.sym.var("w", shape=(4, 4))
    stop = la.sym.softmax(la.sym.exp(x), axis=1)  # mixes positions: the slice stops below it
    y = la.sym.getitem(la.sym.tanh(la.sym.nn.dense(stop, w)) * 2.0, key=FIRST)
    out = sink_slices(y)
    old = {n.op.name: n for n in y.topo() if n.op is not None}
    new = {n.op.name: n for n in out.topo() if n.op is not None}
    assert new["exp"] is old["exp"] and new["softmax"] is old["softmax"]  # shared, not copied
    assert new["getitem"].avals[0].shape == (3, 4) and new["multiply"] is not old["multiply"]
