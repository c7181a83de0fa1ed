"""Batch-last planned buffers (lazyarray/executor/batch_last.py): a compiled CNN over a batch of
small images stores its conv / relu / batch-norm / pooling values (C, H, W, N), with the values
of the plain NCHW computation; what the caller receives stays C-contiguous NCHW."""
from __future__ import annotations

import numpy as np
import pytest

import lazyarray as la
from lazyarray import blocks as B
from lazyarray.executor import batch_last
from lazyarray.executor.program import compile_program
from lazyarray.ops.conv import is_batch_last as _batch_last


def _cnn():
    net = B.HybridSequential()
    net.add(B.Conv2D(8, 3, padding=1, activation="relu"), B.BatchNorm(), B.MaxPool2D(),
            B.Conv2D(6, (3, 2), strides=(1, 1), padding=(1, 0)), B.Activation("relu"),
            B.AvgPool2D(pool_size=2, strides=1), B.Flatten(), B.Dense(5))
    net.initialize()
    return net


def _stats(net, rng):
    """Running statistics that are not the identity, so the batch norm computes something."""
    for name, p in net.collect_params().items():
        if name.endswith(("running_mean", "beta")):
            p.set_data(la.array(rng.standard_normal(p.shape).astype(p.dtype)))
        elif name.endswith(("running_var", "gamma")):
            p.set_data(la.array((np.abs(rng.standard_normal(p.shape)) + 0.5).astype(p.dtype)))


def _program(net):
    op = net.cached_op
    return list(op._cache.values())[-1].program


def _pooled_arrays(prog):
    slots = prog._new_set()
    return [v for v in slots if isinstance(v, np.ndarray) and v.ndim == 4]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("batch", [la.config.batch_last_min_batch, 33])
def test_hybridized_cnn_equals_imperative_and_stores_batch_last(batch, dtype):
    rng = np.random.default_rng(batch)
    net = _cnn()
    net.cast(dtype)
    x = la.array(rng.standard_normal((batch, 2, 10, 9)).astype(dtype))
    net(x)  # the parameters' shapes
    _stats(net, rng)
    expected = net(x).asnumpy()  # imperative: one kernel at a time on C-contiguous arrays
    net.hybridize()
    got = net(x)
    got_np = got.asnumpy()
    assert got_np.dtype == np.dtype(dtype) and got_np.flags.c_contiguous
    tol = 1e-5 if dtype == "float32" else 1e-12
    np.testing.assert_allclose(got_np, expected, rtol=tol, atol=tol)
    stored = _pooled_arrays(_program(net))
    assert stored and all(_batch_last(a) for a in stored)  # every 4-D planned value of this net qualifies
    np.testing.assert_allclose(net(x).asnumpy(), expected, rtol=tol, atol=tol)  # the reused buffers too


@pytest.mark.parametrize("shape,why", [((la.config.batch_last_min_batch - 1, 2, 10, 9), "few images"),
                                       ((16, 2, 17, 16), "large images")])
def test_small_batches_and_large_images_stay_nchw(shape, why):
    rng = np.random.default_rng(0)
    net = _cnn()
    x = la.array(rng.standard_normal(shape).astype("float32"))
    expected = net(x).asnumpy()
    net.hybridize()
    np.testing.assert_allclose(net(x).asnumpy(), expected, rtol=1e-5, atol=1e-5)
    arrays = [a for a in _pooled_arrays(_program(net)) if a.shape[2] * a.shape[3] > la.config.batch_last_max_pixels
              or a.shape[0] < la.config.batch_last_min_batch]
    assert arrays and all(a.flags.c_contiguous for a in arrays), why


def test_values_handed_to_the_caller_stay_c_contiguous():
    """A conv's output that is also a graph output, and a relu's output reaching the caller
    through a reshape (a view), are NCHW buffers of their own; the values between are batch last."""
    rng = np.random.default_rng(1)
    x = la.sym.var("x", shape=(20, 3, 6, 6))
    w = la.sym.var("w", shape=(4, 3, 3, 3))
    c = la.sym.nn.conv2d(x, w, padding=(1, 1))
    r = la.sym.relu(c)
    p = la.sym.nn.max_pool2d(r)
    outs = [c, la.sym.reshape(la.sym.relu(p), shape=(20, -1)), la.sym.nn.max_pool2d(la.sym.relu(r))]
    prog = compile_program([o.outputs[0] for o in outs], [x.outputs[0].node, w.outputs[0].node])
    xv = rng.standard_normal((20, 3, 6, 6)).astype(np.float32)
    wv = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    got = prog.run([xv, wv])
    from lazyarray.ops.conv import _conv2d
    from lazyarray.ops.pool import max_pool2d_kernel
    cv = _conv2d(np, xv, wv, padding=(1, 1))
    rv = np.maximum(cv, 0)
    expected = [cv, np.maximum(max_pool2d_kernel(np, rv), 0).reshape(20, -1), max_pool2d_kernel(np, np.maximum(rv, 0))]
    for g, e in zip(got, expected):
        assert g.flags.c_contiguous
        np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-5)
    assert any(_batch_last(a) for a in _pooled_arrays(prog))  # relu(c), the pools' inputs


def test_gradients_through_a_hybridized_cnn_are_unchanged():
    rng = np.random.default_rng(2)
    x = la.array(rng.standard_normal((24, 2, 8, 8)).astype("float32"))
    grads = []
    for hybrid in (False, True):
        net = _cnn()
        net(x)
        for name, p in sorted(net.collect_params().items()):  # the same weights in both nets
            p.set_data(la.array(np.random.default_rng(len(name)).standard_normal(p.shape).astype(p.dtype) * 0.3))
        if hybrid:
            net.hybridize()
        with la.autograd.record():
            loss = (net(x) ** 2).sum()
        loss.backward()
        grads.append({n: p.grad().asnumpy() for n, p in net.collect_params().items() if p.grad_req != "null"})
    assert grads[0].keys() == grads[1].keys()
    for n in grads[0]:
        np.testing.assert_allclose(grads[1][n], grads[0][n], rtol=1e-4, atol=1e-4, err_msg=n)


def test_values_read_by_other_ops_or_big_convolutions_stay_nchw():
    """A pool whose result feeds an ``add`` (a residual, say) keeps NCHW, so the add does not walk
    it across its memory order; so does a conv whose batch-last columns would not fit scratch."""
    rng = np.random.default_rng(3)
    x = la.sym.var("x", shape=(32, 3, 8, 8))
    w = la.sym.var("w", shape=(4, 3, 3, 3))
    r = la.sym.relu(la.sym.nn.conv2d(x, w, padding=(1, 1)))
    y = la.sym.nn.max_pool2d(r) + 1.0
    big = la.sym.var("big", shape=(16, 60, 16, 16))
    wb = la.sym.var("wb", shape=(8, 60, 3, 3))
    z = la.sym.relu(la.sym.nn.conv2d(big, wb, padding=(1, 1)))
    prog = compile_program([y.outputs[0], z.outputs[0]], [v.outputs[0].node for v in (x, w, big, wb)])
    vals = [rng.standard_normal(s).astype(np.float32) for s in ((32, 3, 8, 8), (4, 3, 3, 3), (16, 60, 16, 16),
                                                                  (8, 60, 3, 3))]
    got = prog.run(vals)
    from lazyarray.ops.conv import _conv2d
    from lazyarray.ops.pool import max_pool2d_kernel
    np.testing.assert_allclose(got[0], max_pool2d_kernel(np, np.maximum(_conv2d(np, vals[0], vals[1], padding=(1, 1)), 0))
                               + 1, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got[1], np.maximum(_conv2d(np, vals[2], vals[3], padding=(1, 1)), 0),
                               rtol=1e-4, atol=1e-4)
    orders = {}  # shape -> the memory orders of the planned views of that shape (pooled or per run)
    for _, _, views in prog._pooled + prog._per_run:
        for _, shape, _, _, order, _ in views:
            orders.setdefault(shape, set()).add(order)
    assert orders[(32, 4, 8, 8)] == {batch_last.BATCH_LAST}  # the conv and relu values: read by relu and the pool
    assert orders[(32, 4, 4, 4)] == {None}  # the pool's: read by the add
    assert orders[(16, 8, 16, 16)] == {None}  # 60 * 9 * 256 * 16 * 4 bytes of columns: too big for scratch
