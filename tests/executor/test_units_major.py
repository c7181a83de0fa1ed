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
from lazyarray.ops.nn import _dense


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
    assert any(_units_major(a) for a in _program(net)._new_set() if isinstance(a, np.ndarray))
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
