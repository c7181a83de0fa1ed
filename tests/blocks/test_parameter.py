"""Parameters: lazy shapes, initializers, data / grad / set_data / zero_grad, and the errors."""
from __future__ import annotations

import numpy as np
import pytest

import lazyarray as la
from lazyarray.blocks import DeferredInitializationError, Parameter


def test_known_shape_initializes_at_once():
    p = Parameter("w", shape=(2, 3), init=la.init.Constant(0.5))
    p.initialize()
    np.testing.assert_array_equal(p.data().asnumpy(), np.full((2, 3), 0.5, np.float32))
    assert p.data().dtype == np.float32 and p.data().device == la.cpu(0)


def test_unknown_dims_wait_for_the_shape():
    p = Parameter("weight", shape=(4, 0))
    p.initialize(init=la.init.One())
    assert not p.initialized
    with pytest.raises(DeferredInitializationError) as info:
        p.data()
    assert "'weight'" in str(info.value) and "(4, 0)" in str(info.value) and "first forward" in str(info.value)
    p.shape = (4, 7)
    assert p.initialized and p.data().shape == (4, 7)
    np.testing.assert_array_equal(p.data().asnumpy(), np.ones((4, 7)))


def test_shape_can_only_fill_unknown_dims():
    p = Parameter("w", shape=(4, 0))
    p.shape = (0, 3)
    assert p.shape == (4, 3)
    with pytest.raises(la.ShapeError, match="cannot change shape"):
        p.shape = (5, 3)


def test_uninitialized_parameter_says_to_call_initialize():
    with pytest.raises(DeferredInitializationError, match=r"net.initialize\(\)"):
        Parameter("w", shape=(2,)).data()


@pytest.mark.parametrize("init,check", [
    (la.init.Zero(), lambda v: (v == 0).all()),
    (la.init.One(), lambda v: (v == 1).all()),
    (la.init.Constant(-2.0), lambda v: (v == -2).all()),
    (la.init.Uniform(0.1), lambda v: (np.abs(v) <= 0.1).all() and v.std() > 0.04),
    (la.init.Normal(0.5), lambda v: abs(v.std() - 0.5) < 0.05),
    (la.init.Xavier(), lambda v: (np.abs(v) <= np.sqrt(3 / ((200 + 100) / 2))).all() and v.std() > 0.05),
    (la.init.Xavier("gaussian", "in", 2.0), lambda v: abs(v.std() - np.sqrt(2 / 200)) < 0.01),
], ids=["zero", "one", "constant", "uniform", "normal", "xavier", "xavier-gaussian-in"])
def test_initializers(init, check):
    p = Parameter("w", shape=(100, 200), init=init)
    p.initialize()
    assert check(p.data().asnumpy())


def test_xavier_uses_the_receptive_field_of_conv_weights():
    v = la.init.Xavier(factor_type="in", rnd_type="gaussian", magnitude=1.0)((64, 8, 5, 5))
    assert abs(v.std() - np.sqrt(1 / (8 * 25))) < 0.01


def test_seed_makes_initialization_reproducible():
    vals = []
    for _ in range(2):
        la.random.seed(3)
        p = Parameter("w", shape=(3, 4), init=la.init.Normal(1.0))
        p.initialize()
        vals.append(p.data().asnumpy())
    np.testing.assert_array_equal(*vals)


def test_unknown_initializer_lists_the_choices():
    with pytest.raises(la.ParamValueError, match="Xavier"):
        Parameter("w", shape=(2,), init="bogus")


def test_set_data_keeps_identity_and_checks_shape():
    p = Parameter("w", shape=(2, 2), init=la.init.Zero())
    p.initialize()
    before = p.data()
    p.set_data(np.ones((2, 2)))
    assert p.data() is before
    np.testing.assert_array_equal(p.data().asnumpy(), np.ones((2, 2)))
    with pytest.raises(la.ShapeError, match=r"\(3,\)"):
        p.set_data(np.ones(3))


def test_set_data_before_initialize_creates_the_value():
    p = Parameter("w", shape=(0, 2))
    p.set_data(la.array(np.arange(6.0).reshape(3, 2)))
    assert p.shape == (3, 2) and p.data().dtype == np.float32


def test_grad_and_zero_grad():
    p = Parameter("w", shape=(3,), init=la.init.One(), grad_req="add")
    p.initialize()
    np.testing.assert_array_equal(p.grad().asnumpy(), np.zeros(3))
    for _ in range(2):
        with la.autograd.record():
            y = (p.data() * p.data()).sum()
        y.backward()
    np.testing.assert_array_equal(p.grad().asnumpy(), np.full(3, 4.0))  # "add" accumulates
    p.zero_grad()
    np.testing.assert_array_equal(p.grad().asnumpy(), np.zeros(3))


def test_grad_req_null_has_no_gradient():
    p = Parameter("running_mean", shape=(3,), init=la.init.Zero(), grad_req="null")
    p.initialize()
    with pytest.raises(la.LazyArrayError, match="grad_req='null'"):
        p.grad()
    with pytest.raises(ValueError, match="grad_req"):
        Parameter("w", grad_req="sometimes")


def test_update_writes_at_once_outside_a_trace():
    p = Parameter("running_mean", shape=(2,), init=la.init.Zero(), grad_req="null")
    p.initialize()
    p.update(la.array([1.0, 2.0]))
    np.testing.assert_array_equal(p.data().asnumpy(), [1.0, 2.0])


def test_device_is_honoured():
    p = Parameter("w", shape=(2,), init=la.init.One())
    p.initialize(device=la.cpu(1))
    assert p.data().device == la.cpu(1)
    assert p.data(la.cpu(0)).device == la.cpu(0)


class _NoInfer(la.blocks.HybridBlock):
    def __init__(self):
        super().__init__()
        self.w = Parameter("w", shape=(5, 0))

    def forward(self, x):
        return la.nn.dense(x, self.w.data())


class _WithInfer(_NoInfer):
    def infer_shape(self, x):
        self.w.shape = (5, x.shape[1])


def test_block_without_infer_shape_says_what_to_implement():
    net = _NoInfer()
    net.initialize()
    with pytest.raises(DeferredInitializationError) as info:
        net(la.ones((2, 3)))
    msg = str(info.value)
    assert "_NoInfer" in msg and "def infer_shape(self" in msg and "w (5, 0)" in msg


@pytest.mark.parametrize("hybridize", [False, True])
def test_block_with_infer_shape_learns_the_shape(hybridize):
    net = _WithInfer()
    net.initialize(init=la.init.One())
    if hybridize:
        net.hybridize()
    assert net(la.ones((2, 3))).asnumpy().tolist() == [[3.0] * 5] * 2
    assert net.w.shape == (5, 3)


@pytest.mark.parametrize("hybridize", [False, True], ids=["imperative", "hybridized"])
def test_first_calls_from_eight_threads_initialize_once(hybridize):
    import sys
    import threading

    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # interleave the threads as much as possible
    failures = []
    try:
        for _ in range(20):
            net = la.blocks.Dense(4)  # in_units unknown: created at the first call
            net.initialize()
            if hybridize:
                net.hybridize()
            x = la.ones((2, 3))
            barrier = threading.Barrier(8)
            results = []

            def call(net=net, x=x, barrier=barrier, results=results):
                barrier.wait()
                try:
                    results.append(net(x).asnumpy())
                except Exception as exc:  # noqa: BLE001 - every failure is counted
                    failures.append(repr(exc))

            threads = [threading.Thread(target=call) for _ in range(8)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            assert len(results) + len(failures) == 8
            for r in results[1:]:
                np.testing.assert_array_equal(r, results[0])  # one weight, created once
    finally:
        sys.setswitchinterval(old)
    assert failures == []
