"""Deferred compute: the flag, lazy arrays, materialization, in-place errors, autograd inside it."""
import asyncio
import threading

import numpy as np
import pytest

import lazyarray as la


def test_flag_is_off_by_default_and_nests():
    assert not la.is_deferred()
    with la.deferred():
        assert la.is_deferred()
        with la.deferred():
            assert la.is_deferred()
        assert la.is_deferred()
        with la.deferred(False):
            assert not la.is_deferred()
        assert la.is_deferred()
    assert not la.is_deferred()


def test_flag_is_per_thread():
    seen = {}
    started, release = threading.Event(), threading.Event()

    def other():
        started.wait()
        seen["other"] = la.is_deferred()
        with la.deferred():
            seen["other_inside"] = la.is_deferred()
            release.set()

    t = threading.Thread(target=other)
    t.start()
    with la.deferred():
        started.set()
        release.wait(5)
        seen["main"] = la.is_deferred()
    t.join()
    assert seen == {"other": False, "other_inside": True, "main": True}
    assert not la.is_deferred()


def test_flag_is_per_asyncio_task():
    async def recorder(flag_seen):
        with la.deferred():
            await asyncio.sleep(0.01)
            flag_seen.append(("recorder", la.is_deferred()))

    async def bystander(flag_seen):
        await asyncio.sleep(0.005)
        flag_seen.append(("bystander", la.is_deferred()))

    async def main():
        seen = []
        await asyncio.gather(recorder(seen), bystander(seen))
        return dict(seen)

    assert asyncio.run(main()) == {"recorder": True, "bystander": False}


def test_ops_record_lazy_arrays_with_avals_and_source_line():
    x = la.ones((2, 3))
    with la.deferred():
        y = la.relu(x * 2) + 1
        z = y.sum(axis=1)
    assert y.is_lazy and z.is_lazy
    assert y.static_shape == (2, 3) and z.static_shape == (2,)
    assert y.dtype == np.float32 and y.device == la.current_device()
    node = y._entry.node
    assert node.source[0] == __file__
    assert "y = la.relu(x * 2) + 1" in node.source_line()
    np.testing.assert_allclose(z.asnumpy(), [9.0, 9.0])


def test_no_kernel_runs_while_recording(kernel_calls):
    x = la.ones((4, 4))
    kernel_calls.clear()
    with la.deferred():
        y = la.nn.softmax(la.nn.dense(x, x, la.zeros(4)) * 3 - 1)
        z = la.concatenate([y, y], axis=0).mean(axis=0)
        _ = z.static_shape, z.dtype, z.ndim, repr(z)
    assert kernel_calls == []
    z.asnumpy()
    assert kernel_calls  # computed now


def test_materializing_computes_each_node_once_and_fills_live_arrays(kernel_calls):
    x = la.array(np.arange(6.0).reshape(2, 3))
    with la.deferred():
        a = x * 2
        b = a + 1
        c = b.sum()
    kernel_calls.clear()
    assert c.item() == pytest.approx(36.0)
    assert sorted(kernel_calls) == ["add", "multiply", "sum"]
    # a and b are live lazy arrays of that sub-graph: they got their values too.
    assert not a.is_lazy and not b.is_lazy
    kernel_calls.clear()
    np.testing.assert_allclose(b.asnumpy(), np.arange(6.0).reshape(2, 3) * 2 + 1)
    np.testing.assert_allclose(a.asnumpy(), np.arange(6.0).reshape(2, 3) * 2)
    assert kernel_calls == []


def test_materializing_runs_only_the_needed_subgraph(kernel_calls):
    x = la.ones((3,))
    with la.deferred():
        a = x * 2
        b = la.exp(x)  # not needed for a
    kernel_calls.clear()
    a.asnumpy()
    assert kernel_calls == ["multiply"]
    assert b.is_lazy


@pytest.mark.parametrize("trigger", ["asnumpy", "item", "asarray", "bool", "float", "int", "eager_op"])
def test_each_materialization_trigger(trigger):
    x = la.array([3.0])
    with la.deferred():
        y = x * 2
    assert y.is_lazy
    if trigger == "asnumpy":
        assert y.asnumpy().tolist() == [6.0]
    elif trigger == "item":
        assert y.item() == 6.0
    elif trigger == "asarray":
        assert np.asarray(y).tolist() == [6.0]
    elif trigger == "bool":
        assert bool(y) is True
    elif trigger == "float":
        assert float(y) == 6.0
    elif trigger == "int":
        assert int(y) == 6
    elif trigger == "eager_op":
        z = y + 1  # flag off: the lazy input is materialized, the op runs eagerly
        assert not z.is_lazy and z.item() == 7.0
    assert not y.is_lazy


def test_data_dependent_shape_is_unknown_statically_and_computes_on_shape(kernel_calls):
    x = la.array([[1.0, -2.0, 3.0], [-1.0, 5.0, 0.0]])
    with la.deferred():
        pos = x[x > 0]
        idx = la.argwhere(x)
        doubled = pos * 2
    assert pos.static_shape == (None,)
    assert idx.static_shape == (None, 2)
    assert doubled.static_shape == (None,)
    kernel_calls.clear()
    assert doubled.static_shape == (None,) and kernel_calls == []  # static_shape never computes
    assert doubled.is_lazy
    assert doubled.shape == (3,)  # .shape with unknown dims computes
    assert kernel_calls
    np.testing.assert_allclose(doubled.asnumpy(), [2.0, 6.0, 10.0])
    np.testing.assert_array_equal(idx.asnumpy(), np.argwhere(x.asnumpy()))


def test_known_shape_does_not_compute(kernel_calls):
    x = la.ones((2, 5))
    with la.deferred():
        y = x.reshape(5, 2).T
    kernel_calls.clear()
    assert y.shape == (2, 5) and y.size == 10 and len(y) == 2
    assert kernel_calls == [] and y.is_lazy


@pytest.mark.parametrize("write", ["+=", "-=", "*=", "/=", "setitem", "out"])
def test_inplace_writes_on_lazy_arrays_raise(write):
    x = la.ones((2, 2))
    with la.deferred():
        y = x * 2
        with pytest.raises(la.DeferredComputeError) as info:
            if write == "+=":
                y += 1
            elif write == "-=":
                y -= 1
            elif write == "*=":
                y *= 2
            elif write == "/=":
                y /= 2
            elif write == "setitem":
                y[0] = 5
            else:
                la.add(x, x, out=y)
    msg = str(info.value)
    assert isinstance(info.value, la.LazyArrayError)
    assert "instead" in msg  # says what to write
    if write in ("+=", "-=", "*=", "/="):
        assert f"x {write} y" in msg and f"x = x {write[0]} y" in msg
    elif write == "out":
        assert "add" in msg


def test_inplace_write_on_normal_array_inside_deferred_raises():
    x = la.ones((2,))
    with la.deferred():
        with pytest.raises(la.DeferredComputeError):
            x += 1
    x += 1  # fine outside
    assert x.asnumpy().tolist() == [2.0, 2.0]


def test_lazy_input_after_materialization_is_reused_in_new_recording():
    x = la.array([1.0, 2.0])
    with la.deferred():
        y = x * 3
    y.asnumpy()
    with la.deferred():
        z = y + 1
    np.testing.assert_allclose(z.asnumpy(), [4.0, 7.0])


def test_autograd_inside_deferred_gives_lazy_gradients_equal_to_eager():
    rng = np.random.default_rng(0)
    xv, wv = rng.standard_normal((4, 3)), rng.standard_normal((2, 3))

    def loss(x, w):
        return (la.nn.softmax(la.nn.dense(x, w)) * la.tanh(x).sum(axis=1, keepdims=True)).sum()

    w_eager = la.array(wv)
    w_eager.attach_grad()
    with la.autograd.record():
        loss(la.array(xv), w_eager).backward()

    w_lazy = la.array(wv)
    w_lazy.attach_grad()
    with la.deferred():
        with la.autograd.record():
            out = loss(la.array(xv), w_lazy)
        out.backward()
        g = w_lazy.grad
        assert g.is_lazy
    np.testing.assert_allclose(g.asnumpy(), w_eager.grad.asnumpy(), rtol=1e-10)


def test_mixing_devices_inside_deferred_is_an_error_naming_devices():
    a = la.ones((2,), device=la.cpu(0))
    b = la.ones((2,), device=la.cpu(1))
    with la.deferred():
        with pytest.raises(la.DeviceError) as info:
            a + b
        c = a + b.to(la.cpu(0))
    assert "cpu(0)" in str(info.value) and "cpu(1)" in str(info.value) and ".to(" in str(info.value)
    np.testing.assert_allclose(c.asnumpy(), [2.0, 2.0])


def test_repr_of_lazy_array_does_not_compute(kernel_calls):
    x = la.ones((2,))
    with la.deferred():
        y = x[x > 0]
    kernel_calls.clear()
    text = repr(y)
    assert "lazy" in text and "?" in text and kernel_calls == []


def _helper_that_records(x):
    return la.tanh(x)  # (a user's helper: its own line is the source)


def test_every_recording_hot_path_names_the_users_line():
    """Ufunc functions, unary and binary operators, scalars on either side, a sparse operand:
    each node's source is the line of the user's code that made it."""
    x = la.ones((2, 3))
    with la.deferred():
        a = la.tanh(x)
        b = -a
        c = 2.0 * b
        d = la.add(c, 1)
        e = _helper_that_records(d)
    for arr, text in ((a, "a = la.tanh(x)"), (b, "b = -a"), (c, "c = 2.0 * b"), (d, "d = la.add(c, 1)"),
                      (e, "return la.tanh(x)  # (a user's helper")):
        assert arr._entry.node.source[0] == __file__
        assert text in arr._entry.node.source_line()
    np.testing.assert_allclose(e.asnumpy(), np.tanh(2 * -np.tanh(np.ones((2, 3))) + 1), rtol=1e-6)


def test_a_scalar_memo_never_skips_the_integer_range_check():
    x = la.array(np.arange(4, dtype=np.uint8))
    with la.deferred():
        below = x < 300  # exact comparison: the constant is int64 here
        y = x * 3
        z = x * 3  # (memoized)
    np.testing.assert_array_equal(below.asnumpy(), [True] * 4)
    np.testing.assert_array_equal(z.asnumpy(), y.asnumpy())
    assert z.dtype == np.uint8
    with la.deferred():
        with pytest.raises(la.OpOverflowError, match="300"):
            x * 300
    with la.deferred():
        neg = x * -0.0
    assert np.signbit(neg.asnumpy()).tolist() == [True, True, True, True]


def test_the_operator_hot_path_raises_the_rules_error():
    x, y = la.ones((3,)), la.ones((4,))
    with la.deferred():
        with pytest.raises(la.ShapeError) as info:
            x + y
        with pytest.raises(la.ShapeError, match="tanh|add"):
            la.tanh(x) + y
    assert "add" in str(info.value) and "float32[3]" in str(info.value) and "float32[4]" in str(info.value)
