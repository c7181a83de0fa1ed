"""CachedOp: calling conventions, the signature cache, autograd, devices, threads, materialization."""
from __future__ import annotations

import threading
import warnings

import numpy as np
import pytest

import lazyarray as la
from lazyarray.executor import recorded

RNG = np.random.default_rng(7)


def _arr(*shape, dtype="float32"):
    return la.array(RNG.standard_normal(shape).astype(dtype))


def _mlp_symbol(batch=8):
    x, w1, b1, w2, b2 = _arr(batch, 6), _arr(5, 6), _arr(5), _arr(3, 5), _arr(3)
    labels = la.array(RNG.integers(0, 3, batch))
    with la.deferred():
        h = la.relu(la.nn.dense(x, w1, b1))
        loss = la.nn.softmax_cross_entropy(la.nn.dense(h, w2, b2), labels)
    sym = la.get_symbol(loss, inputs={"x": x, "w1": w1, "b1": b1, "w2": w2, "b2": b2, "labels": labels})
    return sym, [x, w1, b1, w2, b2, labels]


def _eager_mlp(x, w1, b1, w2, b2, labels):
    return la.nn.softmax_cross_entropy(la.nn.dense(la.relu(la.nn.dense(x, w1, b1)), w2, b2), labels)


def test_positional_and_named_calls_agree():
    sym, args = _mlp_symbol()
    op = la.CachedOp(sym)
    a = op(*args).item()
    b = op(**dict(zip(sym.list_inputs(), args))).item()
    assert a == b == pytest.approx(_eager_mlp(*args).item(), rel=1e-6)


def test_call_errors_name_the_inputs():
    sym, args = _mlp_symbol()
    op = la.CachedOp(sym)
    with pytest.raises(la.LazyArrayError, match="w1"):
        op(*args[:2])
    with pytest.raises(la.LazyArrayError, match="no input named 'bogus'"):
        op(*args, bogus=1)
    with pytest.raises(la.ShapeError, match="features"):
        op(_arr(8, 7), *args[1:])


def test_an_input_given_positionally_and_by_name_is_an_error():
    x = la.ones((2,))
    with la.deferred():
        y = x * 2
    op = la.CachedOp(la.get_symbol(y, inputs={"x": x}))
    with pytest.raises(la.ParamError, match="got multiple values for input 'x'"):
        op(la.ones((2,)), x=la.full((2,), 3.0))
    sym, args = _mlp_symbol()
    with pytest.raises(la.ParamError, match="multiple values for input 'w1'"):
        la.CachedOp(sym)(*args[:2], w1=args[1], b1=args[2], w2=args[3], b2=args[4], labels=args[5])
    assert op(x=la.full((2,), 3.0)).asnumpy().tolist() == [6.0, 6.0]


def test_constants_are_bound_automatically():
    x, c = _arr(3, 4), _arr(3, 4)
    with la.deferred():
        y = la.exp(x) * c + 1
    sym = la.get_symbol(y, inputs={"x": x})
    assert sym.list_inputs() == ["x"]
    np.testing.assert_allclose(la.CachedOp(sym)(x).asnumpy(), (np.exp(x.asnumpy()) * c.asnumpy() + 1), rtol=1e-6)


def test_multiple_outputs_return_a_list():
    x = _arr(2, 3)
    with la.deferred():
        a, b = la.exp(x), la.sum(x, axis=0)
    out = la.CachedOp(la.get_symbol([a, b], inputs={"x": x}))(x)
    assert isinstance(out, list) and len(out) == 2
    np.testing.assert_allclose(out[1].asnumpy(), x.asnumpy().sum(0), rtol=1e-6)


def test_compiles_once_per_signature_and_warns_on_many():
    x = la.sym.var("x")
    op = la.CachedOp(la.sym.tanh(x) * 2)
    for _ in range(3):
        op(la.ones((2, 2)))
    assert op.num_compiles == 1
    op(la.ones((2, 2), dtype="float64"))
    assert op.num_compiles == 2
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for n in range(3, 14):
            op(la.ones((n,)))
    msgs = [str(w.message) for w in caught if issubclass(w.category, la.RecompileWarning)]
    # once per cause (input x's dim 0), naming both signatures
    assert len(msgs) == 1 and "input 'x' dim 0" in msgs[0]
    assert "float32[8]" in msgs[0] and "float32[9]" in msgs[0]


def test_the_signature_cache_is_bounded_and_keeps_the_recently_used():
    x = la.sym.var("x")
    op = la.CachedOp(la.sym.tanh(x) * 2, cache_size=4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", la.RecompileWarning)
        for n in range(1, 30):
            op(la.ones((n,)))
            op(la.ones((1,)))  # used every time: never evicted
    assert len(op._cache) == 4
    compiles = op.num_compiles
    op(la.ones((1,)))
    assert op.num_compiles == compiles  # still cached
    op(la.ones((2,)))
    assert op.num_compiles == compiles + 1  # evicted long ago: compiled again


def test_cache_size_comes_from_the_tuning_table():
    with la.tuning(cache_size=3):  # (LAZYARRAY_CACHE_SIZE at import: tests/test_tuning_table.py)
        assert la.CachedOp(la.sym.var("x") * 2)._signatures.size == 3


def test_outputs_are_not_aliased_by_later_calls():
    x = la.sym.var("x")
    op = la.CachedOp(la.sym.reshape(la.sym.exp(x) + 1, shape=(-1,)))
    first = op(la.zeros((2, 2)))
    snapshot = first.asnumpy()
    second = op(la.ones((2, 2)))
    np.testing.assert_array_equal(first.asnumpy(), snapshot)
    assert not np.shares_memory(np.asarray(first), np.asarray(second))


def test_constant_outputs_are_copies():
    c = _arr(3)
    with la.deferred():
        y = c * 2  # folds into a constant
    op = la.CachedOp(la.get_symbol(y, inputs={}))
    a = op()
    a += 1
    np.testing.assert_allclose(op().asnumpy(), c.asnumpy() * 2)


@pytest.mark.parametrize("scale_outside", [False, True])
def test_gradients_through_cached_op_equal_eager(scale_outside):
    sym, args = _mlp_symbol()
    op = la.CachedOp(sym)
    eager = [la.array(a.asnumpy()) for a in args]
    for p in eager[1:5]:
        p.attach_grad()
    with la.autograd.record():
        le = _eager_mlp(*eager)
        if scale_outside:
            le = le * 3
    le.backward()
    mine = [la.array(a.asnumpy()) for a in args]
    for p in mine[1:5]:
        p.attach_grad()
    with la.autograd.record():
        lc = op(*mine)
        if scale_outside:
            lc = lc * 3
    lc.backward()
    assert lc.item() == pytest.approx(le.item(), rel=1e-6)
    for pe, pm in zip(eager[1:5], mine[1:5]):
        np.testing.assert_allclose(pm.grad.asnumpy(), pe.grad.asnumpy(), rtol=1e-5, atol=1e-6)
    # one recorded node
    assert lc._entry.node.op.name in ("call", "multiply")


def test_gradient_flows_into_eager_ops_before_the_call():
    x = _arr(4, 3)
    with la.deferred():
        y = la.tanh(x) * x
    op = la.CachedOp(la.get_symbol(y, inputs={"x": x}))
    a = la.array(x.asnumpy())
    a.attach_grad()
    with la.autograd.record():
        out = op(la.sin(a)).sum()
    out.backward()
    s = np.sin(a.asnumpy())
    want = (1 - np.tanh(s) ** 2) * s + np.tanh(s)
    np.testing.assert_allclose(a.grad.asnumpy(), want * np.cos(a.asnumpy()), rtol=1e-5)


def test_only_wanted_gradients_are_compiled():
    sym, args = _mlp_symbol()
    op = la.CachedOp(sym)
    args = [la.array(a.asnumpy()) for a in args]
    args[3].attach_grad()  # w2 only
    with la.autograd.record():
        loss = op(*args)
    loss.backward()
    assert args[3].grad is not None and args[1].grad is None


def test_training_memory_plan_keeps_saved_values_until_backward():
    x = la.sym.var("x", shape=(256, 128))
    w = la.sym.var("w", shape=(128, 128))
    h = la.sym.relu(la.sym.matmul(x, w))
    y = la.sym.sum(h * h)
    op = la.CachedOp(y)
    fwd = op.memory_plan(x=(256, 128), w=(128, 128))
    joint = op.memory_plan(wrt=["w"], x=(256, 128), w=(128, 128))
    print(joint)
    assert joint.peak_bytes > fwd.peak_bytes
    # Within 20% of a true lower bound: the gradient handed to the caller gets an exact-size buffer
    # of its own (never a larger reused one it would pin), which the bound does not charge for.
    assert joint.lower_bound_bytes <= joint.peak_bytes <= 1.2 * joint.lower_bound_bytes
    joint.check()


def test_inside_deferred_compute_the_graph_is_inlined():
    x = _arr(3, 3)
    with la.deferred():
        y = la.exp(x) - 1
    op = la.CachedOp(la.get_symbol(y, inputs={"x": x}))
    with la.deferred():
        z = op(x) * 2
    assert z.is_lazy
    np.testing.assert_allclose(z.asnumpy(), (np.exp(x.asnumpy()) - 1) * 2, rtol=1e-6)
    outer = la.get_symbol(z, inputs={"x": x})
    assert [n.op.name for n in outer.topo() if n.op] == ["exp", "subtract", "multiply"]


def test_inlined_graph_keeps_the_list_input_of_a_variadic_op():
    # concatenate/stack take one list input: inlining re-records them from the node's flat inputs
    x, y = _arr(2, 3), _arr(2, 2)
    with la.deferred():
        z = la.concatenate([la.exp(x), y, x], axis=1)
    op = la.CachedOp(la.get_symbol(z, inputs={"x": x, "y": y}))
    with la.deferred():
        w = op(x, y) + 1
    want = np.concatenate([np.exp(x.asnumpy()), y.asnumpy(), x.asnumpy()], axis=1) + 1
    np.testing.assert_allclose(w.asnumpy(), want, rtol=1e-6)


def test_cross_device_graph_has_copy_nodes_and_right_values():
    x = la.array(np.arange(6, dtype="float32").reshape(2, 3), device=la.cpu(0))
    c1 = la.array(np.ones((2, 3), dtype="float32"), device=la.cpu(1))
    with la.deferred():
        y = la.exp(x)
        z = y.to(la.cpu(1)) + c1
        w = la.relu(z).to(la.cpu(0)) * y
    sym = la.get_symbol(w, inputs={"x": x})
    text = str(sym)
    assert text.count("copy_to(") == 2 and "@cpu(1)" in text
    op = la.CachedOp(sym)
    out = op(x)
    ex = np.exp(x.asnumpy())
    np.testing.assert_allclose(out.asnumpy(), np.maximum(ex + 1, 0) * ex, rtol=1e-6)
    assert out.device == la.cpu(0)
    plan = op.memory_plan(x=(2, 3))
    assert {str(d) for d in plan.buffer_device} == {"cpu(0)", "cpu(1)"}
    assert "copy_to" in str(plan)


def test_input_on_another_device_gets_copies_by_placement():
    x = la.array(np.arange(6, dtype="float32").reshape(2, 3))
    c = la.array(np.full((2, 3), 2.0, dtype="float32"))
    with la.deferred():
        y = la.exp(x) * c
    op = la.CachedOp(la.get_symbol(y, inputs={"x": x}))
    x1 = la.array(x.asnumpy(), device=la.cpu(1))
    out = op(x1)
    assert out.device == la.cpu(1)
    np.testing.assert_allclose(out.asnumpy(), np.exp(x.asnumpy()) * 2, rtol=1e-6)


def test_eight_threads_share_one_cached_op():
    x = la.sym.var("x")
    y = la.sym.var("y")
    op = la.CachedOp(la.sym.tanh(x * y) + la.sym.relu(x - y) * 2)
    errors = []

    def work(seed):
        rng = np.random.default_rng(seed)
        try:
            for _ in range(500):
                a = rng.standard_normal((5, 7)).astype("float32")
                b = rng.standard_normal((5, 7)).astype("float32")
                got = op(la.array(a), la.array(b)).asnumpy()
                want = np.tanh(a * b) + np.maximum(a - b, 0) * 2
                if not np.allclose(got, want, rtol=1e-5, atol=1e-6):
                    errors.append(seed)
                    return
        except Exception as exc:  # noqa: BLE001 - a thread must report, not die silently
            errors.append(repr(exc))

    threads = [threading.Thread(target=work, args=(s,)) for s in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert op.num_compiles == 1


def test_materialization_runs_through_the_executor(monkeypatch):
    """A recorded structure runs node by node the first time, is compiled the second time and
    reuses that program afterwards (``executor/recorded.py``)."""
    calls = []
    real = recorded.compile_program

    def spy(*a, **k):
        calls.append(1)
        return real(*a, **k)

    monkeypatch.setattr(recorded, "compile_program", spy)
    recorded.clear()
    for k in range(3):
        x = _arr(4, 4) + k
        with la.deferred():
            y = la.relu(la.exp(x) - 2) * 3
            z = y.sum()
        assert z.item() == pytest.approx(float((np.maximum(np.exp(x.asnumpy()) - 2, 0) * 3).sum()), rel=1e-5)
        assert len(calls) == min(k, 1)
        assert not y.is_lazy  # a live lazy array of the sub-graph keeps its value


def test_compiled_failures_name_the_op_and_the_line():
    x = la.sym.var("x")
    idx = la.sym.var("i", dtype="int64")
    op = la.CachedOp(la.sym.take(x, idx))
    with pytest.raises(Exception, match="take"):
        op(la.ones((3,)), la.array(np.array([5])))


gpu = pytest.mark.skipif(not la.gpu_available(), reason="needs CuPy and a GPU")


@gpu
def test_gpu_graph_matches_cpu():
    x = la.array(RNG.standard_normal((64, 32)).astype("float32"), device=la.gpu(0))
    w = la.array(RNG.standard_normal((16, 32)).astype("float32"), device=la.gpu(0))
    with la.deferred():
        y = la.relu(la.nn.dense(x, w)) * 2 + 1
    op = la.CachedOp(la.get_symbol(y, inputs={"x": x}))
    out = op(x)
    assert out.device == la.gpu(0)
    want = np.maximum(x.asnumpy() @ w.asnumpy().T, 0) * 2 + 1
    np.testing.assert_allclose(out.asnumpy(), want, rtol=1e-4, atol=1e-4)
    assert op.memory_plan(x=(64, 32)).peak_bytes > 0


@gpu
def test_gpu_cpu_copy_nodes():
    x = la.array(np.arange(6, dtype="float32"))
    with la.deferred():
        y = (la.exp(x).to(la.gpu(0)) * 2).to(la.cpu(0)) + 1
    op = la.CachedOp(la.get_symbol(y, inputs={"x": x}))
    np.testing.assert_allclose(op(x).asnumpy(), np.exp(np.arange(6)) * 2 + 1, rtol=1e-5)


def test_outputs_never_alias_inputs_even_for_views():
    x = la.array(np.arange(6.0).reshape(2, 3))
    with la.deferred():
        y = la.transpose(x)
        z = x[0]
    outs = la.CachedOp(la.get_symbol([y, z, x * 1], inputs={"x": x}))(x)
    for o in outs:
        assert not np.shares_memory(o.asnumpy(), x._value) and not np.shares_memory(o._value, x._value)
    x[...] = -1  # writing the input afterwards does not change the outputs
    np.testing.assert_array_equal(outs[0].asnumpy(), np.arange(6.0).reshape(2, 3).T)


def test_gradient_of_a_view_does_not_alias_the_head_gradient():
    x = la.array(np.arange(6.0).reshape(2, 3))
    x.attach_grad()
    with la.deferred():
        y = la.transpose(x)
    op = la.CachedOp(la.get_symbol(y, inputs={"x": x}))
    og = la.array(np.ones((3, 2)))
    with la.autograd.record():
        out = op(x)
    out.backward(og)
    og[...] = 5  # must not change x.grad
    np.testing.assert_array_equal(x.grad.asnumpy(), np.ones((2, 3)))


def test_recorded_call_avals_follow_each_signature():
    """A training call's recorded node takes its avals from the signature's cache: calls of
    another batch size, dtype or input set get their own, equal to the values they made."""
    x = la.sym.var("x")
    w = la.sym.var("w")
    op = la.CachedOp(la.sym.relu(la.sym.dot(x, w)))
    w_arr = _arr(4, 3)
    w_arr.attach_grad()
    for batch, dtype in [(5, "float32"), (2, "float32"), (5, "float32"), (3, "float64"), (2, "float32")]:
        xa = _arr(batch, 4, dtype=dtype)
        wa = w_arr if dtype == "float32" else la.array(w_arr.asnumpy().astype(dtype))
        if dtype != "float32":
            wa.attach_grad()
        with la.autograd.record():
            y = op(xa, wa)
        node = y._entry.node
        assert node.avals[0].shape == (batch, 3) == y.shape
        assert node.avals[0].dtype == np.dtype(dtype) == y.dtype
        saved = y._ag.values
        assert [(a.shape, a.dtype) for a in node.avals] == [(tuple(v.shape), v.dtype) for v in saved]
        y.backward()
        np.testing.assert_allclose(wa.grad.asnumpy(), xa.asnumpy().T @ (xa.asnumpy() @ wa.asnumpy() > 0),
                                   rtol=1e-5)
