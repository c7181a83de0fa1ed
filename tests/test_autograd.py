"""Eager autograd: attach_grad, record, backward(out_grad), accumulation, grad_req,
detach, pause and training mode."""
from __future__ import annotations

import numpy as np
import pytest

import lazyarray as la
from lazyarray import autograd


def _leaf(values, grad_req="write"):
    x = la.array(np.asarray(values, dtype=np.float64))
    x.attach_grad(grad_req)
    return x


def test_attach_grad_allocates_no_gradient_until_backward():
    x = _leaf([1.0, 2.0])
    assert x.grad is None  # (PyTorch's rule: no gradient memory before a backward writes one)
    with la.autograd.record():
        y = (x * x).sum()
    y.backward()
    assert x.grad.dtype == np.float64
    assert x.grad is x.grad  # reading it twice gives the same array


def test_backward_with_out_grad():
    x = _leaf([[1.0, 2.0], [3.0, 4.0]])
    with la.autograd.record():
        y = x * x
    og = np.array([[1.0, 0.5], [2.0, -1.0]])
    y.backward(la.array(og), retain_graph=True)
    np.testing.assert_allclose(x.grad.asnumpy(), 2 * x.asnumpy() * og)
    y.backward(og)  # NumPy out_grad, and write replaces
    np.testing.assert_allclose(x.grad.asnumpy(), 2 * x.asnumpy() * og)


def test_out_grad_of_the_wrong_shape_is_an_error():
    x = _leaf([1.0, 2.0])
    with la.autograd.record():
        y = x * 2
    with pytest.raises(la.ShapeError, match=r"backward: out_grad has shape \[3\] but the output has \[2\]"):
        y.backward(la.array(np.ones(3)))


def test_gradient_accumulates_through_broadcasting_and_multiple_uses():
    x = _leaf([1.0, 2.0, 3.0])             # (3,)
    b = _leaf([[1.0], [2.0]])              # (2, 1)
    with la.autograd.record():
        y = (x * b + x) * x                # x used three times, both broadcast to (2, 3)
        z = y.sum()
    z.backward()
    xv, bv = x.asnumpy(), b.asnumpy()
    # z = sum_ij (x_j b_i + x_j) x_j = sum_ij x_j^2 (b_i + 1)
    np.testing.assert_allclose(x.grad.asnumpy(), 2 * xv * (bv + 1).sum())
    np.testing.assert_allclose(b.grad.asnumpy(), np.full((2, 1), (xv ** 2).sum()))


def test_grad_req_add_accumulates_across_backward_calls():
    x = _leaf([1.0, 2.0], grad_req="add")
    for _ in range(3):
        with la.autograd.record():
            y = (x * x).sum()
        y.backward()
    np.testing.assert_allclose(x.grad.asnumpy(), 3 * 2 * x.asnumpy())
    w = _leaf([1.0, 2.0])
    for _ in range(2):
        with la.autograd.record():
            y = (w * w).sum()
        y.backward()
    np.testing.assert_allclose(w.grad.asnumpy(), 2 * w.asnumpy())


def test_grad_req_null_and_bad_value():
    x = _leaf([1.0], grad_req="null")
    assert x.grad is None
    with pytest.raises(ValueError, match="grad_req must be"):
        la.ones(2).attach_grad("sometimes")


def test_detach_cuts_the_graph():
    x = _leaf([1.0, 2.0])
    with la.autograd.record():
        d = x.detach()
        z = (x * d).sum()
    assert d._ag is None  # autograd does not track it
    z.backward()
    np.testing.assert_allclose(x.grad.asnumpy(), x.asnumpy())


def test_stop_gradient_op_cuts_the_graph():
    x = _leaf([1.0, 2.0])
    with la.autograd.record():
        z = (x * la.stop_gradient(x)).sum()
    z.backward()
    np.testing.assert_allclose(x.grad.asnumpy(), x.asnumpy())


def test_pause_stops_recording():
    x = _leaf([1.0, 2.0])
    with la.autograd.record():
        assert autograd.is_recording()
        y = x * 3
        with autograd.pause():
            assert not autograd.is_recording() and not autograd.is_training()
            c = x * 10  # not recorded: a constant
        z = (y + c).sum()
    assert not autograd.is_recording()
    z.backward()
    np.testing.assert_allclose(x.grad.asnumpy(), [3.0, 3.0])
    with autograd.pause():
        w = x * 2
    with pytest.raises(la.AutogradError, match="backward: this array was not computed"):
        w.backward()


def test_backward_without_attach_grad_is_an_error():
    with la.autograd.record():
        y = la.ones(2) * 2
    with pytest.raises(la.AutogradError, match="attach_grad"):
        y.backward()


def test_training_mode_flags():
    assert not autograd.is_training() and not autograd.is_recording()
    with autograd.record():
        assert autograd.is_training()
        with autograd.predict_mode():
            assert not autograd.is_training() and autograd.is_recording()
    with autograd.record(train_mode=False):
        assert not autograd.is_training() and autograd.is_recording()
    with autograd.train_mode():
        assert autograd.is_training() and not autograd.is_recording()
    assert not autograd.is_training()


def test_dropout_follows_training_mode():
    x = la.ones((50, 40))
    np.testing.assert_array_equal(la.nn.dropout(x, 0.5).asnumpy(), x.asnumpy())  # predict by default
    with autograd.train_mode():
        y = la.nn.dropout(x, 0.5).asnumpy()
    assert set(np.unique(y)) == {0.0, 2.0}
    with autograd.record():
        assert 0 < (la.nn.dropout(x, 0.5).asnumpy() == 0).mean() < 1
        with autograd.predict_mode():
            np.testing.assert_array_equal(la.nn.dropout(x, 0.5).asnumpy(), x.asnumpy())
    with autograd.record(train_mode=False):
        np.testing.assert_array_equal(la.nn.dropout(x, 0.5).asnumpy(), x.asnumpy())
    # an explicit training= wins over the mode
    assert (la.nn.dropout(x, 0.5, training=True).asnumpy() == 0).any()


def test_dropout_statistics_and_scaling():
    la.random.seed(7)
    x = la.ones((400, 250))
    for p in (0.1, 0.5, 0.8):
        with autograd.train_mode():
            y = la.nn.dropout(x, p).asnumpy()
        kept = y != 0
        np.testing.assert_allclose(y[kept], 1 / (1 - p), rtol=1e-6)
        n = y.size
        assert abs(kept.mean() - (1 - p)) < 5 * np.sqrt(p * (1 - p) / n)
        assert abs(y.mean() - 1.0) < 0.05


def test_gradients_inside_deferred_compute_stay_lazy():
    x = _leaf([1.0, 2.0])
    with la.deferred():
        with la.autograd.record():
            y = (x * x).sum()
        y.backward()
        g = x.grad
        assert g.is_lazy
    np.testing.assert_allclose(g.asnumpy(), 2 * x.asnumpy())


def test_inplace_on_a_recorded_array_is_refused():
    x = _leaf([1.0, 2.0])
    with la.autograd.record():
        y = x * 2
        with pytest.raises(la.AutogradError, match="in-place write on an array recorded"):
            y += 1


def test_gradients_of_two_leaves_never_share_memory_or_alias_the_head_gradient():
    a, b = la.array([1.0, 2.0]), la.array([3.0, 4.0])
    a.attach_grad()
    b.attach_grad()
    og = la.array([1.0, 1.0])
    with la.autograd.record():
        y = a + b  # both gradients are the head gradient itself
    y.backward(og)
    ga, gb = a.grad._value, b.grad._value
    assert not np.shares_memory(ga, gb)
    assert not np.shares_memory(ga, og._value) and not np.shares_memory(gb, og._value)
    a.grad[...] = 7
    np.testing.assert_array_equal(b.grad.asnumpy(), [1.0, 1.0])


def test_write_grads_stores_gradients_as_backward_does():
    """``write_grads`` (gradients computed elsewhere, as la.distributed's reduced ones): adopted for
    grad_req='write', added for 'add', fresh for the optimizer; the same values a backward would give."""
    w, v = la.array(np.ones(3, "float32")), la.array(np.ones(2, "float32"))
    w.attach_grad()
    v.attach_grad(grad_req="add")
    g_w, g_v = np.array([1.0, 2.0, 3.0], "float32"), np.array([0.5, 0.5], "float32")
    la.autograd.write_grads([w, v], [g_w.copy(), g_v.copy()])  # (handed over: adopted as they are)
    la.autograd.write_grads([w, v], [g_w * 2, g_v.copy()])
    np.testing.assert_array_equal(w.grad.asnumpy(), g_w * 2)
    np.testing.assert_array_equal(v.grad.asnumpy(), g_v * 2)
    assert w._ag.fresh and v._ag.fresh
    with la.autograd.record():
        y = (w * la.array(g_w)).sum()
    y.backward()
    np.testing.assert_array_equal(w.grad.asnumpy(), g_w)
    with pytest.raises(la.ShapeError, match="shape"):
        la.autograd.write_grads([w], [np.zeros(2, "float32")])
    with pytest.raises(la.AutogradError, match="attach_grad"):
        la.autograd.write_grads([la.array(np.ones(3, "float32"))], [g_w])
    with pytest.raises(la.ParamError, match="1 arrays but 2"):
        la.autograd.write_grads([w], [g_w, g_w])
