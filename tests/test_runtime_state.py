"""The review's runtime-state defects (issue: runtime state out of the IR), one test each.

Every test here failed on the design where graph nodes held values, gradients and handles.
"""
import gc
import tracemalloc

import numpy as np
import pytest

import lazyarray as la
from lazyarray import blocks as nn
from lazyarray.buffer import root


def _leaf(values):
    x = la.array(np.asarray(values, dtype=np.float64))
    x.attach_grad()
    return x


# -- 1. in-place writes after recording -----------------------------------------------------------------
def test_writing_a_saved_output_after_recording_is_refused_by_backward():
    x = _leaf([0.5, 1.0])
    with la.autograd.record():
        y = la.exp(x)
        z = y.sum()
    y += 1  # exp's gradient reads y: backward would give exp(x) + 1
    with pytest.raises(la.AutogradError, match=r"exp.*written in place.*y = y \+ 1"):
        z.backward()


def test_writing_the_leaf_after_recording_is_refused_by_backward():
    x = _leaf([1.0, 2.0])
    with la.autograd.record():
        z = (x * x).sum()
    with la.autograd.pause():
        x += 1
    with pytest.raises(la.AutogradError, match="written in place"):
        z.backward()


def test_writing_a_captured_operand_after_recording_is_refused_by_backward():
    x = _leaf([1.0, 2.0])
    w = la.array(np.array([3.0, 4.0]))
    with la.autograd.record():
        z = (x * w).sum()
    w += 1
    with pytest.raises(la.AutogradError, match="written in place"):
        z.backward()


def test_a_write_that_backward_does_not_read_leaves_the_gradient_right():
    x = _leaf([1.0, 2.0])
    with la.autograd.record():
        y = x * 2
    y += 100  # multiplying by a constant does not read y for its gradient
    y.backward(la.array(np.ones(2)))
    np.testing.assert_array_equal(x.grad.asnumpy(), [2.0, 2.0])


def test_writing_a_cached_op_output_keeps_gradients_right():
    x = la.array(np.array([0.5, 1.0], np.float32))
    with la.deferred():
        y = la.exp(x)
    op = la.CachedOp(la.get_symbol(y, inputs={"x": x}))
    x.attach_grad()
    with la.autograd.record():
        out = op(x)
    out += 1  # the values backward reads are the op's own saved copies
    out.backward(la.ones(2))
    np.testing.assert_allclose(x.grad.asnumpy(), np.exp([0.5, 1.0]), rtol=1e-6)


def test_a_lazy_graph_never_reads_an_array_written_after_it_was_recorded():
    a = la.ones(3)
    with la.deferred():
        z = a * 2
    a += 1
    with pytest.raises(la.DeferredComputeError, match="written in place after it was recorded"):
        z.asnumpy()


def test_a_lazy_graph_recorded_after_the_write_reads_the_new_value():
    a = la.ones(3)
    with la.deferred():
        z1 = a * 2
    z1.asnumpy()
    a += 1
    with la.deferred():
        z2 = a * 2
    np.testing.assert_array_equal(z2.asnumpy(), [4.0, 4.0, 4.0])


def test_symbol_constants_are_snapshots():
    c = la.array([1.0, 2.0])
    x = la.array([10.0, 20.0])
    with la.deferred():
        y = x + c
    op = la.CachedOp(la.get_symbol(y, inputs={"x": x}))
    c += 100  # the user's array, not the symbol's constant
    np.testing.assert_array_equal(op(x).asnumpy(), [11.0, 22.0])


# -- 3. outputs are exact-size buffers the caller owns ------------------------------------------------
def _owned(v) -> bool:
    return root(v).nbytes == v.nbytes


def test_a_small_output_never_pins_a_large_reused_buffer():
    x = la.ones((1024, 1024))  # 4 MiB intermediates, freed before a 256 KiB output is written
    with la.deferred():
        c = (la.exp(x) * 2).sum(axis=1, keepdims=True)
        t = la.broadcast_to(c, (1024, 64)) * 3
    op = la.CachedOp(la.get_symbol(t, inputs={"x": x}))
    outs = [op(x) for _ in range(3)]
    for o in outs:
        assert _owned(o._value), "an output is a view into a larger buffer"
    assert len({id(root(o._value)) for o in outs}) == 3  # each call hands out new memory
    plan = op.memory_plan(x=(1024, 1024))
    assert plan.escaping_buffers
    for b in plan.escaping_buffers:  # the plan counts output bytes, exact size
        assert plan.buffer_size[b] == 1024 * 64 * 4


def test_weight_gradients_do_not_pin_activation_buffers():
    net = nn.HybridSequential()
    net.add(nn.Dense(256, activation="relu"), nn.Dense(10))
    net.initialize()
    net.hybridize()
    x = la.array(np.random.default_rng(0).random((128, 64), dtype=np.float32))
    with la.autograd.record():
        loss = net(x).sum()
    loss.backward()
    for name, p in net.collect_params().items():
        g = p.grad()._value
        assert _owned(g), f"{name}'s gradient is a view into a larger buffer"


# -- 4. constants are read-only --------------------------------------------------------------------------
def test_shared_scalar_constants_cannot_be_changed_through_a_result():
    with la.deferred():
        s = la.reshape(2.0, shape=(1,))
    s.asnumpy()
    s += 40  # s owns its buffer: the shared constant 2.0 is not touched
    with la.deferred():
        y = la.ones(3) * 2.0
    np.testing.assert_array_equal(y.asnumpy(), [2.0, 2.0, 2.0])


def test_a_symbols_constant_values_are_read_only():
    with la.deferred():
        y = la.ones(2) + la.array([1.0, 2.0])
    sym = la.get_symbol(y, inputs={})
    for node in sym.topo():
        if node.kind == "const":
            assert not node.value.flags.writeable


# -- 5. computed lazy arrays do not keep their history -----------------------------------------------
def test_a_lazy_loop_runs_in_bounded_memory():
    y = la.zeros((1 << 20,))  # 4 MiB
    gc.collect()
    tracemalloc.start()
    try:
        for i in range(12):
            with la.deferred():
                y = y * 1.0001 + 1
            y.asnumpy()
            if i == 3:
                gc.collect()
                base = tracemalloc.get_traced_memory()[0]
        gc.collect()
        end = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert end - base < 3 * (4 << 20), f"grew by {(end - base) / 2**20:.1f} MiB over 8 iterations"


# -- 6. eager autograd frees what it saved ---------------------------------------------------------------
def test_backward_frees_saved_values_and_a_second_backward_needs_retain_graph():
    x = _leaf(np.ones(1 << 18))  # 2 MiB per intermediate
    with la.autograd.record():
        z = la.exp(la.exp(la.exp(x))).sum()
    gc.collect()
    tracemalloc.start()
    try:
        z.backward()
        gc.collect()
        after = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert after < 3 * (2 << 20)  # the three saved intermediates (6 MiB) are gone; the gradient stays
    with pytest.raises(la.AutogradError, match="retain_graph=True"):
        z.backward()


def test_retain_graph_allows_a_second_backward():
    x = _leaf([1.0, 2.0])
    with la.autograd.record():
        z = (x * x).sum()
    z.backward(retain_graph=True)
    z.backward()
    np.testing.assert_array_equal(x.grad.asnumpy(), [2.0, 4.0])


# -- 8. grad_req="add" with a lazy gradient --------------------------------------------------------------
def test_grad_req_add_accumulates_a_lazy_then_an_eager_gradient():
    x = la.array([1.0, 2.0])
    x.attach_grad(grad_req="add")
    with la.autograd.record():
        y = (x * x).sum()
    with la.deferred():
        y.backward(retain_graph=True)
    assert x.grad.is_lazy
    y.backward()
    np.testing.assert_array_equal(x.grad.asnumpy(), [4.0, 8.0])


# -- 9. Trainer after a lazy backward, and stale gradients -------------------------------------------
def _dense_and_trainer():
    net = nn.Dense(1, in_units=2, use_bias=False)
    net.initialize(la.init.One())
    return net, nn.Trainer(net.collect_params(), "sgd", {"learning_rate": 1.0})


def test_trainer_steps_with_a_gradient_computed_inside_deferred_compute():
    net, trainer = _dense_and_trainer()
    x = la.array([[1.0, 2.0]])
    with la.autograd.record():
        loss = net(x).sum()
    with la.deferred():
        loss.backward()
    trainer.step(1)
    np.testing.assert_allclose(net.weight.data().asnumpy(), [[0.0, -1.0]])


def test_trainer_refuses_a_stale_gradient_unless_told_to_skip_it():
    net, trainer = _dense_and_trainer()
    x = la.array([[1.0, 2.0]])
    with la.autograd.record():
        loss = net(x).sum()
    loss.backward()
    trainer.step(1)
    with pytest.raises(nn.StaleGradientError, match="weight.*ignore_stale_grad=True"):
        trainer.step(1)  # the same gradient again: Gluon refuses too
    trainer.step(1, ignore_stale_grad=True)  # skipped: the weight does not move
    np.testing.assert_allclose(net.weight.data().asnumpy(), [[0.0, -1.0]])


# -- 10. compiled outputs never alias inputs ---------------------------------------------------------------
@pytest.mark.parametrize("make", [
    lambda x: la.sum_to(x, shape=(2, 3)),
    lambda x: x.tostype("default"),
    lambda x: x.reshape(2, 3),
    lambda x: x,
], ids=["sum_to-same-shape", "tostype-same-storage", "reshape-same-shape", "identity"])
def test_cached_op_outputs_never_alias_inputs(make):
    x = la.ones((2, 3))
    with la.deferred():
        y = make(x)
    op = la.CachedOp(la.get_symbol(y, inputs={"x": x}))
    inp = la.ones((2, 3))
    r = op(inp)
    r += 5
    np.testing.assert_array_equal(inp.asnumpy(), np.ones((2, 3)))


# -- 11. NumPy 2 scalar promotion, eager and deferred alike ----------------------------------------------
def test_comparison_with_an_out_of_range_python_int_follows_numpy_2():
    u = la.array(np.array([1, 200], np.uint8))
    eager = (u < 300).asnumpy()
    with la.deferred():
        lazy = u < 300
    np.testing.assert_array_equal(lazy.asnumpy(), eager)
    np.testing.assert_array_equal(eager, np.array([1, 200], np.uint8) < 300)


def test_arithmetic_with_an_out_of_range_python_int_is_refused_alike():
    u = la.array(np.array([1, 2], np.int8))
    with pytest.raises(OverflowError):
        u + 300
    with pytest.raises(la.LazyArrayError, match="out of bounds"), la.deferred():
        u + 300


# -- 12. grad_req changes and repeated .grad reads ------------------------------------------------------
def test_grad_req_null_after_attaching_stops_the_gradient(kernel_calls):
    net = nn.Dense(2, in_units=3)
    net.initialize()
    net.bias.grad_req = "null"
    with la.autograd.record():
        y = net(la.ones((4, 3))).sum()
    y.backward()
    assert net.bias.data().grad is None
    with pytest.raises(la.LazyArrayError, match="grad_req='null'"):
        net.bias.grad()


def test_reading_a_lazy_grad_twice_gives_the_same_array():
    x = la.array([1.0, 2.0])
    x.attach_grad()
    with la.autograd.record():
        y = (x * x).sum()
    with la.deferred():
        y.backward()
    assert x.grad is x.grad


# -- 13. gradients are allocated by the first backward ---------------------------------------------------
def test_initialize_allocates_no_gradients():
    net = nn.HybridSequential()
    net.add(nn.Dense(64, in_units=32), nn.Dense(8, in_units=64))
    net.initialize()
    for p in net.collect_params().values():
        assert p.data().grad is None
    net.hybridize()
    net(la.ones((2, 32)))  # inference: still none
    assert all(p.data().grad is None for p in net.collect_params().values())


# -- 14. la.compute -----------------------------------------------------------------------------------------
def test_compute_runs_shared_work_once(kernel_calls):
    x = la.ones((4,))
    with la.deferred():
        h = la.exp(x)
        a, b = h + 1, h * 2
    la.compute(a, b)
    assert kernel_calls.count("exp") == 1
    assert not a.is_lazy and not b.is_lazy
    np.testing.assert_allclose(b.asnumpy(), 2 * np.e, rtol=1e-6)
    assert kernel_calls.count("exp") == 1


def test_writing_through_out_counts_as_an_in_place_write():
    a = la.ones(3)
    with la.deferred():
        z = a * 2
    la.add(la.ones(3), 5.0, out=a)
    with pytest.raises(la.DeferredComputeError, match="written in place after it was recorded"):
        z.asnumpy()
    x = _leaf([1.0, 2.0])
    w = la.array(np.array([3.0, 4.0]))
    with la.autograd.record():
        y = (x * w).sum()
    la.multiply(w, 2.0, out=w)
    with pytest.raises(la.AutogradError, match="written in place"):
        y.backward()
