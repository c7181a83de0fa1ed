"""The structural backward cache (lazyarray/backward_cache.py): equal tapes share one compiled
backward program; a tape of any other structure never gets it; version checks still hold."""
from __future__ import annotations

import gc

import numpy as np
import pytest

import lazyarray as la
from lazyarray import backward_cache

RNG = np.random.default_rng(0)


@pytest.fixture(autouse=True)
def _fresh_cache():
    backward_cache.clear()
    yield
    backward_cache.clear()


def _grads(fn, *values, head=None):
    arrays = [la.array(v) for v in values]
    for a in arrays:
        a.attach_grad()
    with la.autograd.record():
        y = fn(*arrays)
    y.backward(None if head is None else la.array(head))
    return [a.grad.asnumpy() for a in arrays]


def _reference(fn, *values, head=None, eps=1e-6):
    """Central finite differences of sum(fn(*values) * head) in float64."""
    out = []
    for k, v in enumerate(values):
        g = np.zeros_like(v)
        for idx in np.ndindex(v.shape):
            plus = [w.copy() for w in values]
            minus = [w.copy() for w in values]
            plus[k][idx] += eps
            minus[k][idx] -= eps
            fp = fn(*[la.array(w) for w in plus]).asnumpy()
            fm = fn(*[la.array(w) for w in minus]).asnumpy()
            h = 1.0 if head is None else head
            g[idx] = np.sum((fp - fm) * h) / (2 * eps)
        out.append(g)
    return out


def _loss(x, w, b):
    return la.sum(la.tanh(la.dot(x, w) + b) * 2.0)


def test_same_structure_is_compiled_once_and_serves_new_values():
    for step in range(4):
        x, w, b = RNG.standard_normal((3, 4)), RNG.standard_normal((4, 2)), RNG.standard_normal(2)
        got = _grads(_loss, x, w, b)
        for g, r in zip(got, _reference(_loss, x, w, b)):
            np.testing.assert_allclose(g, r, rtol=1e-6, atol=1e-8)
        assert backward_cache.size() == 1, step


@pytest.mark.parametrize("change", ["shape", "dtype", "op", "param", "connection", "head"])
def test_a_different_structure_never_gets_the_cached_program(change):
    x, w, b = RNG.standard_normal((3, 4)), RNG.standard_normal((4, 2)), RNG.standard_normal(2)
    _grads(_loss, x, w, b)
    assert backward_cache.size() == 1
    head = None
    if change == "shape":
        x, fn = RNG.standard_normal((5, 4)), _loss
    elif change == "dtype":
        x, w, b = x.astype("float32"), w.astype("float32"), b.astype("float32")
        fn = _loss
    elif change == "op":
        def fn(x, w, b):
            return la.sum(la.sigmoid(la.dot(x, w) + b) * 2.0)
    elif change == "param":
        def fn(x, w, b):
            return la.sum(la.sum(la.tanh(la.dot(x, w) + b) * 2.0, axis=0))
    elif change == "connection":
        def fn(x, w, b):
            return la.sum(la.tanh(la.dot(x, w) + b) * b)
    else:
        def fn(x, w, b):
            return la.tanh(la.dot(x, w) + b) * 2.0
        head = RNG.standard_normal((3, 2))
    got = _grads(fn, x, w, b, head=head)
    assert backward_cache.size() == 2
    ref = _reference(fn, *(v.astype("float64") for v in (x, w, b)), head=head)
    tol = 1e-3 if change == "dtype" else 1e-6
    for g, r in zip(got, ref):
        np.testing.assert_allclose(g, r, rtol=tol, atol=tol)


def test_scalars_and_labels_are_inputs_not_baked_in():
    def fn(x, scale):
        return la.sum(x * scale)

    for s in (2.0, 3.0):
        x = la.array(RNG.standard_normal(4))
        x.attach_grad()
        scale = la.array(np.full(4, s))  # a captured constant whose value changes per step
        with la.autograd.record():
            y = fn(x, scale)
        y.backward()
        np.testing.assert_allclose(x.grad.asnumpy(), np.full(4, s))
    assert backward_cache.size() == 1


def test_a_saved_value_written_in_place_still_raises():
    x = la.array(RNG.standard_normal(3))
    x.attach_grad()
    for _ in range(2):  # the second time the cached program is used
        with la.autograd.record():
            y = la.exp(x)
            z = la.sum(y * y)
        z.backward()
    with la.autograd.record():
        y = la.exp(x)
        z = la.sum(y * y)
    y += 1
    with pytest.raises(la.AutogradError, match="written in place"):
        z.backward()


def test_a_captured_input_written_in_place_still_raises():
    x = la.array(RNG.standard_normal(3))
    x.attach_grad()
    c = la.array(RNG.standard_normal(3))
    for _ in range(2):
        with la.autograd.record():
            z = la.sum(x * c)
        z.backward()
    with la.autograd.record():
        z = la.sum(x * c)
    c += 1
    with pytest.raises(la.AutogradError, match="written in place"):
        z.backward()


def test_training_loop_compiles_one_backward_program():
    from lazyarray import blocks as B

    net = B.HybridSequential()
    net.add(B.Dense(8, activation="relu"), B.Dense(3))
    net.initialize()
    net.hybridize()
    loss_fn = B.SoftmaxCrossEntropyLoss()
    trainer = B.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1})
    x = la.array(RNG.standard_normal((16, 5)).astype("float32"))
    y = la.array(RNG.integers(0, 3, 16))
    losses = []
    for _ in range(5):
        with la.autograd.record():
            loss = loss_fn(net(x), y)
        loss.backward()
        trainer.step(16)
        losses.append(float(loss.mean().asnumpy()))
    assert backward_cache.size() == 1
    assert losses[-1] < losses[0]


def test_the_cache_is_bounded(monkeypatch):
    monkeypatch.setattr(la.config, "cache_size", 3)
    for n in range(2, 8):
        _grads(lambda x: la.sum(la.exp(x)), RNG.standard_normal(n))
    assert backward_cache.size() == 3


def test_hybridized_backward_calls_are_inlined_into_one_program(monkeypatch):
    """The backward of a hybridized block (a ``call`` of its backward graph) runs inlined: the cached
    program has no ``call`` step, and the gradients equal those of the nested call bit for bit."""
    from lazyarray import blocks as B

    xv, yv = RNG.standard_normal((8, 5)).astype("float32"), RNG.integers(0, 3, 8)

    def grads():
        la.random.seed(0)
        net = B.HybridSequential()
        net.add(B.Dense(6, activation="relu", in_units=5), B.Dense(3, in_units=6))
        net.initialize()
        net.hybridize()
        with la.autograd.record():
            loss = B.SoftmaxCrossEntropyLoss()(net(la.array(xv)) * 2.0, la.array(yv))
        loss.backward()
        return [p.grad().asnumpy() for p in net.collect_params().values()]

    inlined = grads()
    (compiled,) = backward_cache._CACHE.values()
    assert all(n.op is None or n.op.name != "call" for n in compiled.program.nodes)
    backward_cache.clear()
    monkeypatch.setattr(backward_cache, "inline_calls", lambda outputs: outputs)
    nested = grads()
    (compiled,) = backward_cache._CACHE.values()
    assert any(n.op is not None and n.op.name == "call" for n in compiled.program.nodes)
    for a, b in zip(inlined, nested):
        np.testing.assert_array_equal(a, b)


def _address(a) -> int:
    return a._value.__array_interface__["data"][0]


def _tanh_step(x, w):
    with la.autograd.record():
        y = la.sum(la.tanh(la.matmul(x, w)))
    y.backward()


def test_a_write_gradient_nobody_holds_is_rewritten_in_place_and_equals_a_fresh_one():
    x = la.array(RNG.standard_normal((5, 4)))
    w = la.array(RNG.standard_normal((4, 3)))
    w.attach_grad()
    _tanh_step(x, w)
    first = _address(w.grad)
    for _ in range(3):
        x = la.array(RNG.standard_normal((5, 4)))
        _tanh_step(x, w)
        assert _address(w.grad) == first  # the last step's buffer, written again
        want = (1 - np.tanh(x.asnumpy() @ w.asnumpy()) ** 2)
        np.testing.assert_allclose(w.grad.asnumpy(), x.asnumpy().T @ want, rtol=1e-12)


def test_a_gradient_the_user_kept_is_never_overwritten():
    x = la.array(RNG.standard_normal((5, 4)))
    w = la.array(RNG.standard_normal((4, 3)))
    w.attach_grad()
    _tanh_step(x, w)
    _tanh_step(x, w)
    kept = w.grad  # held from one step to the next
    kept_np = kept.asnumpy().copy()
    view = kept._value[1:]  # a view of its memory counts too
    _tanh_step(la.array(RNG.standard_normal((5, 4))), w)
    assert w.grad is not kept
    np.testing.assert_array_equal(kept.asnumpy(), kept_np)
    np.testing.assert_array_equal(view, kept_np[1:])
    assert not np.array_equal(w.grad.asnumpy(), kept_np)


def test_add_gradients_accumulate_over_steps():
    x = la.array(RNG.standard_normal((5, 4)))
    w = la.array(RNG.standard_normal((4, 3)))
    w.attach_grad(grad_req="add")
    for _ in range(3):
        _tanh_step(x, w)
    want = x.asnumpy().T @ (1 - np.tanh(x.asnumpy() @ w.asnumpy()) ** 2)
    np.testing.assert_allclose(w.grad.asnumpy(), 3 * want, rtol=1e-12)


def _mlp_training(hybrid: bool, steps: int = 3):
    from lazyarray import blocks as B
    rng = np.random.default_rng(5)
    net = B.HybridSequential()
    net.add(B.Dense(16, activation="relu", in_units=12), B.Dense(16, activation="relu", in_units=16),
            B.Dense(5, in_units=16))
    net.initialize()
    for p in net.collect_params().values():
        p.set_data(la.array(rng.standard_normal(p.shape).astype(np.float32) * 0.3))
    loss_fn = B.SoftmaxCrossEntropyLoss()
    net.hybridize(hybrid)
    loss_fn.hybridize(hybrid)
    trainer = B.Trainer(net.collect_params(), B.SGD(learning_rate=0.1))
    for _ in range(steps):
        x = la.array(rng.standard_normal((8, 12)).astype(np.float32))
        y = la.array(rng.integers(0, 5, 8))
        with la.autograd.record():
            loss = loss_fn(net(x), y)
        loss.backward()
        trainer.step(8)
    return [p.data().asnumpy() for p in net.collect_params().values()]


def test_the_gluon_training_step_equals_the_eager_one_bit_for_bit():
    """Hybridized net, compiled loss (with its forward saves), cached backward (relu_grad, sum_to
    into planned buffers, gradients rewritten in place) and the folded SGD step: the same
    parameters, bit for bit, as every op run eagerly."""
    for a, b in zip(_mlp_training(True), _mlp_training(False)):
        np.testing.assert_array_equal(a, b)


def test_a_tape_with_an_unhashable_param_takes_the_general_path():
    x0 = RNG.standard_normal((3, 4))
    expected = _grads(lambda x: la.sum(la.tanh(x) * 3.0, axis=1).sum(), x0)[0]
    backward_cache.clear()
    for _ in range(2):
        x = la.array(x0)
        x.attach_grad()
        with la.autograd.record():
            s = la.sum(la.tanh(x) * 3.0, axis=1)
            s._ag.node.params = {**s._ag.node.params, "axis": [1]}  # a list: not hashable
            y = s.sum()
        y.backward()
        np.testing.assert_allclose(x.grad.asnumpy(), expected, rtol=1e-12)
        assert backward_cache.size() == 0


def test_the_backward_program_compiles_with_the_cyclic_gc_paused(monkeypatch):
    seen = []
    compile_program = backward_cache.compile_program

    def recorded(*a, **k):
        seen.append(gc.isenabled())
        return compile_program(*a, **k)

    monkeypatch.setattr(backward_cache, "compile_program", recorded)
    x = la.array(RNG.standard_normal((3, 4)).astype(np.float32))
    x.attach_grad()
    with la.autograd.record():
        y = (la.tanh(x) * x).sum()
    assert gc.isenabled()
    y.backward()
    assert seen == [False] and gc.isenabled()  # paused while compiling, on again after
    np.testing.assert_allclose(x.grad.asnumpy(), (lambda v: np.tanh(v) + v * (1 - np.tanh(v) ** 2))(x.asnumpy()),
                               rtol=1e-5)
