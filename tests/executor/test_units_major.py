"""Units-major planned buffers (lazyarray/executor/units_major.py): at small batches a compiled
program stores the values of ``dense`` (and of ``relu`` over them) as (units, rows) memory, with
the values of the plain row-major computation; what the caller receives stays C-contiguous."""
from __future__ import annotations

import numpy as np
import pytest

import lazyarray as la
from lazyarray import blocks as B
from lazyarray.executor import units_major
from lazyarray.executor.program import compile_program
from lazyarray.kernels.dense import run_dense as _dense


def _mlp(units=(300, 260, 10)):
    net = B.HybridSequential()
    net.add(B.Dense(units[0], activation="relu"), B.Dense(units[1], activation="relu"), B.Dense(units[2]))
    net.initialize()
    return net


def _orders(prog) -> dict:
    """shape -> the memory orders of the program's planned views of that shape (pooled or per run)."""
    orders: dict = {}
    for _, _, views in prog._pooled + prog._per_run:
        for _, shape, _, _, order, _ in views:
            orders.setdefault(shape, set()).add(order)
    return orders


def _program(net):
    return list(net.cached_op._cache.values())[-1].program


def _units_major(a) -> bool:
    return a.ndim == 2 and not a.flags.c_contiguous and a.T.flags.c_contiguous


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("batch", [units_major.MIN_ROWS, 64, units_major.MAX_ROWS])
def test_hybridized_mlp_equals_imperative_and_stores_units_major(batch, dtype):
    rng = np.random.default_rng(batch)
    net = _mlp()
    net.cast(dtype)
    x = la.array(rng.standard_normal((batch, 200)).astype(dtype))
    expected = net(x).asnumpy()  # imperative: one kernel at a time on C-contiguous arrays
    net.hybridize()
    got = net(x).asnumpy()
    assert got.dtype == np.dtype(dtype) and got.flags.c_contiguous
    tol = 1e-4 if dtype == "float32" else 1e-12
    np.testing.assert_allclose(got, expected, rtol=tol, atol=tol)
    orders = _orders(_program(net))
    assert orders[(batch, 300)] == {units_major.UNITS_MAJOR}  # dense and relu, in place
    assert orders[(batch, 260)] == {units_major.UNITS_MAJOR}
    assert orders[(batch, 10)] == {None}  # narrow, and handed to the caller
    assert len(_program(net).plan.inplace) >= 2  # each relu still writes its dense's buffer
    np.testing.assert_allclose(net(x).asnumpy(), expected, rtol=tol, atol=tol)  # the reused buffers too


@pytest.mark.parametrize("shape,units,why", [((units_major.MAX_ROWS + 1, 200), (300, 300), "many rows"),
                                             ((units_major.MIN_ROWS - 1, 200), (300, 300), "few rows"),
                                             ((64, 200), (units_major.MIN_UNITS - 1,) * 2, "narrow layers"),
                                             ((64, units_major.MIN_IN_UNITS - 1), (300, 20), "few inputs")])
def test_large_batches_and_small_layers_stay_row_major(shape, units, why):
    rng = np.random.default_rng(0)
    net = _mlp(units + (10,))
    x = la.array(rng.standard_normal(shape).astype("float32"))
    expected = net(x).asnumpy()
    net.hybridize()
    np.testing.assert_allclose(net(x).asnumpy(), expected, rtol=1e-4, atol=1e-4)
    assert _orders(_program(net))[(shape[0], units[0])] == {None}, why


def test_values_handed_out_or_read_by_other_ops_stay_row_major():
    """A dense value that is a graph output, one read by an ``add`` (it would walk the value across
    its memory order), and a relu's value reaching the caller through a reshape keep row order;
    the dense value under that relu, read by the relu alone, is units-major."""
    rng = np.random.default_rng(1)
    x = la.sym.var("x", shape=(32, 100))
    w = la.sym.var("w", shape=(300, 100))
    w2 = la.sym.var("w2", shape=(400, 100))
    d = la.sym.nn.dense(x, w)
    added = la.sym.nn.dense(x, w2) + 1.0
    viewed = la.sym.reshape(la.sym.relu(d * 1.0 + d),
                            shape=(-1,))
    inner = la.sym.relu(la.sym.nn.dense(x, w2))
    outs = [d, added, viewed, la.sym.sum(inner, axis=1)]
    prog = compile_program([o.outputs[0] for o in outs], [v.outputs[0].node for v in (x, w, w2)])
    xv, wv, w2v = (rng.standard_normal(s).astype(np.float32) for s in ((32, 100), (300, 100), (400, 100)))
    got = prog.run([xv, wv, w2v])
    dv, d2v = xv @ wv.T, xv @ w2v.T
    expected = [dv, d2v + 1, np.maximum(dv + dv, 0).reshape(-1), np.maximum(d2v, 0).sum(axis=1)]
    for g, e in zip(got, expected):
        assert g.flags.c_contiguous
        np.testing.assert_allclose(g, e, rtol=1e-4, atol=1e-4)
    orders = _orders(prog)
    assert orders[(32, 300)] == {None}  # handed out; read by the multiply and the add
    assert orders[(32, 400)] == {None, units_major.UNITS_MAJOR}  # the add's input stays; the relu's input not


def test_units_major_when_the_relu_is_handed_out():
    """In a training call the relus' values are handed out (saved for the backward): they stay
    row-major, written from the units-major product below them."""
    rng = np.random.default_rng(2)
    x = la.sym.var("x", shape=(64, 100))
    w = la.sym.var("w", shape=(300, 100))
    r = la.sym.relu(la.sym.nn.dense(x, w))
    prog = compile_program([r.outputs[0]], [v.outputs[0].node for v in (x, w)])
    xv, wv = rng.standard_normal((64, 100)).astype(np.float32), rng.standard_normal((300, 100)).astype(np.float32)
    got = prog.run([xv, wv])[0]
    assert got.flags.c_contiguous
    np.testing.assert_allclose(got, np.maximum(xv @ wv.T, 0), rtol=1e-4, atol=1e-4)
    assert _orders(prog)[(64, 300)] == {None, units_major.UNITS_MAJOR}


def test_training_gradients_are_unchanged():
    """A hybridized MLP trained one step (units-major products in its forward) gets the gradients
    of the same net run op by op."""
    rng = np.random.default_rng(3)
    x = la.array(rng.standard_normal((48, 120)).astype("float32"))
    y = la.array(rng.integers(0, 10, 48))
    grads = []
    for hybrid in (False, True):
        net = _mlp()
        net(x)
        for name, p in sorted(net.collect_params().items()):  # the same weights in both nets
            p.set_data(la.array(np.random.default_rng(len(name)).standard_normal(p.shape).astype(p.dtype) * 0.1))
        if hybrid:
            net.hybridize()
        loss_fn = B.SoftmaxCrossEntropyLoss()
        for _ in range(2):  # the second step runs the cached backward on reused buffers
            with la.autograd.record():
                loss = loss_fn(net(x), y)
            loss.backward()
        grads.append({n: p.grad().asnumpy() for n, p in net.collect_params().items()})
    prog = _program(net)  # (the saved relus and the products below them share handed-out buffers)
    assert units_major.UNITS_MAJOR in prog.out_orders
    for n in grads[0]:
        np.testing.assert_allclose(grads[1][n], grads[0][n], rtol=1e-4, atol=1e-5, err_msg=n)


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("x_order", ["C", "F"])
def test_dense_kernel_writes_a_units_major_out(bias, x_order):
    rng = np.random.default_rng(4)
    x = np.asarray(rng.standard_normal((16, 70)), dtype=np.float32, order=x_order)
    w = rng.standard_normal((300, 70)).astype(np.float32)
    b = rng.standard_normal(300).astype(np.float32) if bias else None
    out = np.full((300, 16), np.nan, np.float32).T
    res = _dense(np, x, w, b, out=out)
    assert res is out or np.shares_memory(res, out)
    np.testing.assert_allclose(out, x @ w.T + (b if bias else 0), rtol=1e-4, atol=1e-4)


def _relu_layer(rows=64):
    x = la.sym.var("x", shape=(rows, 100))
    w = la.sym.var("w", shape=(300, 100))
    return x, w, la.sym.relu(la.sym.nn.dense(x, w))


def _layer_values(rng, rows=64):
    return rng.standard_normal((rows, 100)).astype(np.float32), rng.standard_normal((300, 100)).astype(np.float32)


def test_a_free_output_is_stored_units_major_and_says_so():
    """An output only lazyarray reads (a training forward's saved value: ``free_outputs``) keeps
    the units-major order of the product below it; ``out_orders`` reports it, and its values are
    the row-major computation's."""
    rng = np.random.default_rng(5)
    x, w, r = _relu_layer()
    prog = compile_program([r.outputs[0]], [v.outputs[0].node for v in (x, w)], free_outputs=[0])
    assert prog.out_orders == [units_major.UNITS_MAJOR]
    xv, wv = _layer_values(rng)
    got = prog.run([xv, wv])[0]
    assert _units_major(got)
    np.testing.assert_allclose(got, np.maximum(xv @ wv.T, 0), rtol=1e-4, atol=1e-4)
    plain = compile_program([r.outputs[0]], [v.outputs[0].node for v in (x, w)])
    assert plain.out_orders == [None] and plain.run([xv, wv])[0].flags.c_contiguous


def test_a_value_also_handed_to_the_caller_stays_row_major():
    """The same value as a free output and as an output the caller receives: row order."""
    rng = np.random.default_rng(6)
    x, w, r = _relu_layer()
    prog = compile_program([r.outputs[0], r.outputs[0]], [v.outputs[0].node for v in (x, w)], free_outputs=[1])
    a, b = prog.run(list(_layer_values(rng)))
    assert a.flags.c_contiguous
    np.testing.assert_array_equal(a, b)


def _backward_like():
    """relu_grad(y, g @ w2) summed and multiplied, as a dense layer's backward reads it: ``y`` is
    a saved activation (an input), ``g @ w2`` the gradient from the layer above."""
    y, g, w2, x = (la.sym.var(n, shape=s) for n, s in (("y", (64, 300)), ("g", (64, 200)), ("w2", (200, 300)),
                                                       ("x", (64, 100))))
    gy = la.sym.relu_grad(y, la.sym.matmul(g, w2))
    db = la.sym.sum_to(gy, shape=(300,))  # (the gradient pass's bias sum)
    dw = la.sym.matmul(la.sym.transpose(gy), x)
    return [v.outputs[0].node for v in (y, g, w2, x)], [db.outputs[0], dw.outputs[0]], gy


def test_the_backward_writes_its_product_to_match_a_units_major_saved_value():
    """Told that ``y`` arrives units-major (``input_orders``), the program stores ``g @ w2`` and
    the relu gradient units-major too (one flat loop over both operands); told nothing, or given a
    row-major ``y`` anyway, it computes the same values."""
    rng = np.random.default_rng(7)
    ins, outs, gy = _backward_like()
    yv = np.maximum(rng.standard_normal((64, 300)), 0).astype(np.float32)
    gv, w2v, xv = (rng.standard_normal(s).astype(np.float32) for s in ((64, 200), (200, 300), (64, 100)))
    hinted = compile_program(outs, ins, input_orders={0: units_major.UNITS_MAJOR})
    assert _orders(hinted)[(64, 300)] == {units_major.UNITS_MAJOR}
    plain = compile_program(outs, ins)
    assert units_major.UNITS_MAJOR not in _orders(plain).get((64, 300), set())
    want_gy = (gv @ w2v) * (yv > 0)
    y_um = np.ascontiguousarray(yv.T).T
    for prog, y_in in ((hinted, y_um), (hinted, yv), (plain, yv), (plain, y_um)):
        db, dw = prog.run([y_in, gv, w2v, xv])
        np.testing.assert_allclose(db, want_gy.sum(0), rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(dw, want_gy.T @ xv, rtol=1e-4, atol=1e-3)


def test_a_training_step_saves_units_major_activations_and_its_backward_reads_them_in_order():
    """The Gluon-style step: the hybridized forward saves its relus units-major (no transposing
    relu), the cached backward stores the products and relu gradients beside them units-major,
    and the gradients equal the eager net's (``test_training_gradients_are_unchanged``)."""
    from lazyarray import backward_cache
    rng = np.random.default_rng(8)
    net = _mlp()
    net.hybridize()
    x = la.array(rng.standard_normal((64, 120)).astype("float32"))
    y = la.array(rng.integers(0, 10, 64))
    loss_fn = B.SoftmaxCrossEntropyLoss()
    backward_cache._CACHE.clear()
    for _ in range(2):
        with la.autograd.record():
            loss = loss_fn(net(x), y)
        loss.backward()
    fwd = _program(net)
    assert units_major.UNITS_MAJOR in fwd.out_orders  # the saved relus
    assert fwd.out_orders[0] is None  # what the caller receives: row order
    progs = [c.program for c in backward_cache._CACHE.values()]
    assert any(_orders(p).get((64, 260)) == {units_major.UNITS_MAJOR} for p in progs)
