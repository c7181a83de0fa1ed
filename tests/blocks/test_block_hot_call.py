"""A hybridized block's hot call (blocks/block.py ``HybridBlock.__call__``): the last plain call's key
and Compiled (``_hot``) serve an equal key by one compare, until a signature is compiled or the cache
is cleared; every other call takes the dict (and the guards behind it) as before."""
import numpy as np
import pytest

import lazyarray as la
from lazyarray import blocks as B


def _net(cache_size=None):
    net = B.HybridSequential()
    net.add(B.Dense(6, activation="relu"), B.Dense(3))
    net.initialize()
    net.hybridize(cache_size=cache_size)
    return net


def _by_hand(net, x):
    w1, b1, w2, b2 = [p.data().asnumpy() for p in list(net.collect_params().values())[:4]]
    return np.maximum(x @ w1.T + b1, 0) @ w2.T + b2


def _x(rows=4, seed=0, dtype="float32"):
    return np.random.default_rng(seed).standard_normal((rows, 5)).astype(dtype)


def _close(net, x, out):
    tol = 1e-5 if x.dtype == np.float32 else 1e-12
    np.testing.assert_allclose(out.asnumpy(), _by_hand(net, x), rtol=tol, atol=tol)


def test_a_plain_call_is_served_by_the_hot_entry_and_sees_parameter_writes():
    net = _net()
    x = _x()
    _close(net, x, net(la.array(x)))
    key, compiled, epoch = net._hot
    assert net._by_sig[key] is compiled and epoch == net._traces.epoch
    for k in range(3):  # hot calls: the same entry; in-place writes and set_data still seen
        w = net[0].weight.data()
        w[:] = w * -1.5
        net[1].bias.set_data(np.full(3, float(k), "float32"))
        _close(net, x, net(la.array(x)))
        assert net._hot[1] is compiled and net._hot[0] is key
    net.initialize(init=la.init.Constant(0.25), force_reinit=True)  # new parameter arrays
    _close(net, x, net(la.array(x)))


def test_another_shape_or_dtype_replaces_the_hot_entry_and_returns_to_the_first():
    net = _net()
    x4, x2, x64 = _x(4), _x(2, seed=1), _x(4, seed=2, dtype="float64")
    for x in (x4, x2, x4, x2):
        _close(net, x, net(la.array(x)))
        assert net._hot[0][1][0][0] == x.shape
    with pytest.raises(la.DTypeError):  # same shape, another dtype: another key, checked by the trace
        net(la.array(x64))
    net.cast("float64")
    _close(net, x64, net(la.array(x64)))
    assert net._hot[0][1][0][1] == np.float64
    net.cast("float32")
    _close(net, x4, net(la.array(x4)))
    assert net._hot[0][1][0][1] == np.float32


def test_a_compile_since_retires_the_hot_entry_and_eviction_is_honoured():
    net = _net(cache_size=1)
    x4, x2 = _x(4), _x(2, seed=1)
    _close(net, x4, net(la.array(x4)))
    first = net._hot
    _close(net, x2, net(la.array(x2)))  # compiles (evicting x4's entry: one signature kept)
    assert net._hot[2] == net._traces.epoch > first[2]
    assert len(net._by_sig) == 1 and first[0] not in net._by_sig
    _close(net, x4, net(la.array(x4)))  # not served by the retired entry: compiled again, in the dict
    assert net._by_sig[net._hot[0]] is net._hot[1]


def test_wrong_shapes_and_arguments_still_raise_after_hot_calls():
    net = _net()
    x = _x()
    for _ in range(3):
        net(la.array(x))
    with pytest.raises(la.ShapeError):
        net(la.array(np.ones((4, 7), "float32")))  # Dense(6) was traced for 5 input features
    with pytest.raises(la.ParamError, match="takes arrays"):
        net(x)  # a NumPy array, not an NDArray
    _close(net, x, net(la.array(x)))


def test_recorded_and_training_calls_do_not_take_the_inference_entry():
    net = B.HybridSequential()
    net.add(B.Dense(64), B.Dropout(0.5))
    net.initialize()
    net.hybridize()
    x = la.array(np.ones((4, 8), "float32"))
    ref = net(x).asnumpy()
    hot = net._hot
    with la.autograd.train_mode():
        drop = net(x).asnumpy()  # another key (training): dropped
    assert (drop == 0).sum() > (ref == 0).sum()
    xa = la.array(np.ones((4, 8), "float32"))
    xa.attach_grad()
    with la.autograd.record():
        y = net(xa).sum()
    y.backward()
    assert xa.grad is not None and float(np.abs(xa.grad.asnumpy()).sum()) > 0
    assert net._hot[0] == hot[0] or net._hot[0][0] is True  # (only plain calls set it)
    np.testing.assert_array_equal(net(x).asnumpy(), ref)


def test_a_structure_change_clears_the_hot_entry():
    net = _net()
    x = _x()
    net(la.array(x))
    net.add(B.Dense(2))  # a new child: the traces (and the hot entry) are forgotten
    net[2].initialize()
    out = net(la.array(x))
    assert out.shape == (4, 2)
    w3, b3 = [p.data().asnumpy() for p in net[2].collect_params().values()]
    np.testing.assert_allclose(out.asnumpy(), _by_hand(net, x) @ w3.T + b3, rtol=1e-5, atol=1e-5)


def test_hooks_run_once_per_call_and_an_error_names_the_block_once():
    net = _net()
    x = _x()
    seen = []
    net(la.array(x))  # hot entry in place
    with net.register_forward_pre_hook(lambda b, args: (args[0] * 2,)), \
            net.register_forward_hook(lambda b, args, out: seen.append(out.shape)):
        _close(net, 2 * x, net(la.array(x)))
        _close(net, 2 * x, net(la.array(x)))
    assert seen == [(4, 3), (4, 3)]
    _close(net, x, net(la.array(x)))
    with pytest.raises(la.ShapeError) as plain:
        net(la.array(np.ones((4, 7), "float32")))
    with net.register_forward_hook(lambda b, args, out: out), pytest.raises(la.ShapeError) as hooked:
        net(la.array(np.ones((4, 7), "float32")))
    assert str(hooked.value) == str(plain.value)
    assert hooked.value.__notes__[0] == plain.value.__notes__[0]  # (the block named once, as without hooks)


class _Outs(B.HybridBlock):
    def __init__(self, kind):
        super().__init__()
        self.kind = kind

    def forward(self, x):
        a, b, c = la.relu(x), x * 2.0, x - 1.0
        if self.kind == "tuple":
            return a, b, c
        if self.kind == "list":
            return [a, b, c]
        if self.kind == "same twice":
            return a, a
        return (a, [b, c]), {"c": c}


@pytest.mark.parametrize("kind", ["tuple", "list", "same twice", "nested"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_several_outputs_regroup_as_eager_on_hot_calls(kind, dtype):
    x = la.array(np.arange(-6, 6, dtype=dtype).reshape(3, 4)[:, ::2])  # a view
    eager = _Outs(kind)(x)
    net = _Outs(kind)
    net.hybridize()
    for _ in range(3):
        out = net(x)
        assert type(out) is type(eager)
        flat_eager, flat_out = la.blocks.output_structure.flatten(eager, "t")[0], \
            la.blocks.output_structure.flatten(out, "t")[0]
        assert len(flat_out) == len(flat_eager)
        for a, b in zip(flat_out, flat_eager):
            assert a.dtype == b.dtype
            np.testing.assert_array_equal(a.asnumpy(), b.asnumpy())
    assert isinstance(net(la.array(np.zeros((2, 0), dtype))), type(eager))  # an empty dim
