"""A plain hybridized call reuses the program its block signature ran (blocks/hybrid.py, _Memo)
only while the parameters are the same arrays with the same values and the arguments' values
are of the same class."""
import numpy as np
import pytest

import lazyarray as la
from lazyarray import blocks as B


def _net(dtype="float32"):
    net = B.HybridSequential()
    net.add(B.Dense(16, activation="relu", dtype=dtype), B.Dense(3, dtype=dtype))
    net.initialize()
    net.hybridize()
    return net


def _by_hand(net, x):
    w1, b1, w2, b2 = [p.data().asnumpy() for p in net.collect_params().values()]
    return np.maximum(x @ w1.T + b1, 0) @ w2.T + b2


def _x(rows=4, seed=0, dtype="float32"):
    return np.random.default_rng(seed).standard_normal((rows, 8)).astype(dtype)


def _compiled(net):
    (key, c), = net._by_sig.items()
    return key, c


def test_plain_calls_reuse_the_program_and_see_in_place_writes():
    net = _net()
    x = _x()
    net(la.array(x))
    key, c = _compiled(net)
    assert key in c.memo
    for k in range(3):
        w = net[0].weight.data()
        w[:] = w * 1.5
        net[1].bias.set_data(np.full(3, float(k), "float32"))
        np.testing.assert_allclose(net(la.array(x)).asnumpy(), _by_hand(net, x), rtol=1e-5, atol=1e-5)
    assert len(c.memo) == 1


def test_new_parameter_arrays_are_not_served_by_the_old_program():
    net = _net()
    x = _x()
    net(la.array(x))
    net.initialize(init=la.init.Constant(0.25), force_reinit=True)  # new arrays for every parameter
    np.testing.assert_allclose(net(la.array(x)).asnumpy(), _by_hand(net, x), rtol=1e-5, atol=1e-5)
    for p in net.collect_params().values():  # new arrays of another dtype (the block's own structure
        p.cast("float64")  # is unchanged: the same compiled graph serves the call)
    out = net(la.array(x))
    assert out.dtype == np.float64
    np.testing.assert_allclose(out.asnumpy(), _by_hand(net, x.astype("float64")), rtol=1e-12, atol=1e-12)


def test_recorded_calls_take_the_recording_path():
    net, ref = _net(), _net()
    x = _x()
    net(la.array(x))
    net(la.array(x))  # memo in place
    ref(la.array(x))
    for p, q in zip(net.collect_params().values(), ref.collect_params().values()):
        q.set_data(p.data())
    for n in (net, ref):
        with la.autograd.record():
            y = n(la.array(x)).sum()
        y.backward()
    for p, q in zip(net.collect_params().values(), ref.collect_params().values()):
        np.testing.assert_allclose(p.grad().asnumpy(), q.grad().asnumpy(), rtol=1e-6, atol=1e-6)


def test_a_sparse_argument_is_not_served_by_the_dense_program():
    net = _net()
    x = _x()
    x[x < 0.5] = 0
    net(la.array(x))
    out = net(la.array(x).tostype("csr"))
    np.testing.assert_allclose(out.asnumpy(), _by_hand(net, x), rtol=1e-5, atol=1e-5)


def test_the_memo_is_bounded():
    net = _net()
    for rows in range(1, 12):
        x = _x(rows)
        np.testing.assert_allclose(net(la.array(x)).asnumpy(), _by_hand(net, x), rtol=1e-5, atol=1e-5)
    compiled = {id(c): c for c in net._by_sig.values()}
    assert all(len(c.memo) <= 8 for c in compiled.values())


def test_a_new_array_for_the_last_parameter_alone_is_not_served_by_the_old_program():
    net = _net()
    x = _x()
    net(la.array(x))
    net(la.array(x))  # served by the memo
    net[1].bias.initialize(init=la.init.Constant(7.0), force_reinit=True)  # one new array, the last input
    np.testing.assert_allclose(net(la.array(x)).asnumpy(), _by_hand(net, x), rtol=1e-5, atol=1e-5)
    net[0].weight.initialize(init=la.init.Constant(0.5), force_reinit=True)  # and the first parameter
    np.testing.assert_allclose(net(la.array(x)).asnumpy(), _by_hand(net, x), rtol=1e-5, atol=1e-5)


def test_training_mode_is_part_of_the_memo_key():
    net = B.HybridSequential()
    net.add(B.Dense(64), B.Dropout(0.5))
    net.initialize()
    net.hybridize()
    x = la.array(np.ones((4, 8), "float32"))
    ref = net(x).asnumpy()
    np.testing.assert_array_equal(net(x).asnumpy(), ref)  # inference: served by the memo, no dropout
    with la.autograd.train_mode():
        drop = net(x).asnumpy()  # plain call in training mode: another program, which drops
    assert (drop == 0).sum() > (ref == 0).sum()
    np.testing.assert_array_equal(net(x).asnumpy(), ref)



def test_the_last_memo_is_compared_per_call_and_modes_take_their_paths():
    """The memo of the last plain call is found by comparing keys (no hash): a call of another
    shape, a recorded call and a profiled call between plain ones each take their own path, and
    the plain calls after them still see parameter writes."""
    net = _net()
    x4, x2 = _x(4), _x(2, seed=1)
    for x in (x4, x2, x4):
        np.testing.assert_allclose(net(la.array(x)).asnumpy(), _by_hand(net, x), rtol=1e-5, atol=1e-5)
    (c,) = {id(c): c for c in net._by_sig.values()}.values()
    assert c.last is not None and c.last[0][1][0][0] == (4, 8)  # (training, ((shape, dtype, device),))
    xa = la.array(x4)
    xa.attach_grad()
    with la.autograd.record():
        y = net(xa)
    y.backward()
    w1 = net[0].weight.data().asnumpy()
    assert xa.grad is not None and xa.grad.shape == (4, 8)
    with la.profile() as prof:
        net(la.array(x4))
    assert prof.programs  # (the profiled call ran the cached op's program under the profiler)
    net[0].weight.data()[:] = net[0].weight.data() * -2.0  # an in-place write after the mode calls
    np.testing.assert_allclose(net[0].weight.data().asnumpy(), w1 * -2.0)
    np.testing.assert_allclose(net(la.array(x4)).asnumpy(), _by_hand(net, x4), rtol=1e-5, atol=1e-5)


def test_a_wrong_shape_still_raises_after_memo_hits():
    net = _net()
    x = _x()
    for _ in range(3):
        net(la.array(x))
    with pytest.raises(la.ShapeError, match="5 features"):
        net(la.array(np.ones((4, 5), "float32")))  # Dense(16) was traced for 8 input features
    np.testing.assert_allclose(net(la.array(x)).asnumpy(), _by_hand(net, x), rtol=1e-5, atol=1e-5)
