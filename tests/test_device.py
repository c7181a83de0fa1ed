"""Devices: identity and printing, the default-device context, transfers, GPU availability."""
from __future__ import annotations

import asyncio
import threading

import numpy as np
import pytest

import lazyarray as la

needs_gpu = pytest.mark.skipif(not la.gpu_available(), reason="needs CuPy and a GPU")


def test_cpu_devices_are_equal_by_kind_and_id():
    assert la.cpu(1) == la.cpu(1) and la.cpu(1) is la.cpu(1)
    assert la.cpu() == la.cpu(0) != la.cpu(1)
    assert str(la.cpu(1)) == "cpu(1)" and repr(la.cpu(0)) == "cpu(0)"
    assert la.Device.parse("cpu(3)") is la.cpu(3)


@pytest.mark.parametrize("bad", ["cpu", "tpu(0)", "cpu(x)"])
def test_parse_rejects_bad_text(bad):
    with pytest.raises(la.DeviceError, match="cannot parse device"):
        la.Device.parse(bad)


def test_negative_device_id_is_rejected():
    with pytest.raises(la.DeviceError, match="non-negative"):
        la.cpu(-1)


def test_default_device_context_manager_nests():
    assert la.current_device() == la.cpu(0)
    with la.cpu(1):
        assert la.current_device() == la.cpu(1)
        assert la.zeros(2).device == la.cpu(1)
        assert la.array([1.0]).device == la.cpu(1)
        with la.cpu(2):
            assert la.ones(3).device == la.cpu(2)
        assert (la.ones(2) + 1).device == la.cpu(1)
    assert la.current_device() == la.cpu(0)
    assert la.zeros(2).device == la.cpu(0)


def _run_threads(n, target):
    """Run ``target(i, barrier)`` in ``n`` threads; re-raise the first error any of them hit."""
    barrier = threading.Barrier(n, timeout=30)
    errors = []

    def body(i):
        try:
            target(i, barrier)
        except BaseException as exc:  # noqa: BLE001 - reported in the main thread
            errors.append(exc)
            barrier.abort()

    threads = [threading.Thread(target=body, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    real = [e for e in errors if not isinstance(e, threading.BrokenBarrierError)]
    if real or errors:
        raise (real or errors)[0]


def test_default_device_is_per_thread_with_interleaved_exits():
    # Every thread enters the *same* device object, then a nested one of its own; the barriers
    # make all threads be inside both blocks at once, so the exits interleave across threads.
    def target(i, barrier):
        mine = la.cpu(2 + i)
        for step in range(200):
            barrier.wait()
            with la.cpu(1):
                assert la.current_device() is la.cpu(1)
                barrier.wait()
                with mine:
                    barrier.wait()
                    assert la.current_device() is mine
                    if (step + i) % 2:  # half the threads leave the inner block first
                        barrier.wait()
                assert la.current_device() is la.cpu(1)
                if not (step + i) % 2:
                    barrier.wait()
                barrier.wait()
            assert la.current_device() is la.cpu(0)

    _run_threads(8, target)
    assert la.current_device() is la.cpu(0)


def test_a_threads_default_device_does_not_leak_to_other_threads():
    inside, release = threading.Event(), threading.Event()
    seen = {}

    def holder():
        with la.cpu(3):
            inside.set()
            release.wait(30)
            seen["holder"] = la.current_device()

    def other():
        seen["other"] = la.current_device()
        seen["other_array"] = la.zeros(2).device

    t = threading.Thread(target=holder)
    t.start()
    assert inside.wait(30)
    try:
        assert la.current_device() is la.cpu(0)
        o = threading.Thread(target=other)
        o.start()
        o.join()
    finally:
        release.set()
        t.join()
    assert seen == {"holder": la.cpu(3), "other": la.cpu(0), "other_array": la.cpu(0)}
    assert la.current_device() is la.cpu(0)


def test_default_device_is_per_asyncio_task_with_out_of_order_exits():
    async def task(i, n_sleeps):
        outer = la.cpu(1)  # the same device object in every task
        with outer:
            await asyncio.sleep(0)
            assert la.current_device() is outer
            with la.cpu(10 + i):
                for _ in range(n_sleeps):
                    await asyncio.sleep(0)
                    assert la.current_device() is la.cpu(10 + i)
                assert la.zeros(1).device is la.cpu(10 + i)
            for _ in range(n_sleeps % 3):
                await asyncio.sleep(0)
            assert la.current_device() is outer
        assert la.current_device() is la.cpu(0)
        return i

    async def main():
        # Tasks enter in order 0..7 and leave in another order (fewer sleeps leave first).
        sleeps = [5, 1, 7, 3, 0, 6, 2, 4]
        done = await asyncio.gather(*(task(i, n) for i, n in enumerate(sleeps)))
        assert done == list(range(8))
        assert la.current_device() is la.cpu(0)

    for _ in range(20):
        asyncio.run(main())
    assert la.current_device() is la.cpu(0)


def test_child_task_inherits_the_device_but_not_the_other_way_round():
    async def child(started, go):
        assert la.current_device() is la.cpu(1)  # copied from the parent when created
        with la.cpu(2):
            started.set()
            await go.wait()
            assert la.current_device() is la.cpu(2)
        return la.current_device()

    async def main():
        started, go = asyncio.Event(), asyncio.Event()
        with la.cpu(1):
            t = asyncio.ensure_future(child(started, go))
            await started.wait()
            assert la.current_device() is la.cpu(1)  # the child's block does not leak up
        assert la.current_device() is la.cpu(0)  # the parent leaves first
        go.set()
        assert await t is la.cpu(1)

    asyncio.run(main())


def test_default_device_nests_deeply_and_reenters_the_same_device():
    devs = [la.cpu(1), la.cpu(2), la.cpu(1), la.cpu(1), la.cpu(3)]

    def nest(k):
        if k == len(devs):
            return
        with devs[k] as d:
            assert d is devs[k] and la.current_device() is d
            nest(k + 1)
            assert la.current_device() is d

    for _ in range(3):
        nest(0)
        assert la.current_device() is la.cpu(0)


def test_default_device_is_restored_when_the_block_raises():
    with pytest.raises(RuntimeError):
        with la.cpu(1):
            with la.cpu(2):
                raise RuntimeError("boom")
    assert la.current_device() is la.cpu(0)
    with la.cpu(4):
        assert la.current_device() is la.cpu(4)
    assert la.current_device() is la.cpu(0)


def test_devices_keep_no_per_instance_state():
    assert not hasattr(la.cpu(1), "__dict__")
    assert set(la.Device.__slots__) == {"kind", "id", "xp"}


def test_transfer_is_a_real_copy():
    x = la.array(np.arange(4.0, dtype=np.float32))
    y = x.to(la.cpu(1))
    assert y.device == la.cpu(1) and x.device == la.cpu(0)
    assert not np.shares_memory(x._value, y._value)
    np.testing.assert_array_equal(y.asnumpy(), x.asnumpy())
    x += 1  # the source changes, the copy does not
    np.testing.assert_array_equal(y.asnumpy(), np.arange(4.0))
    assert x.to(la.cpu(0)) is x
    z = y * 2  # ops follow their inputs' device
    assert z.device == la.cpu(1)


def test_transfer_inside_deferred_compute_is_a_recorded_copy():
    x = la.ones((2, 3))
    with la.deferred():
        y = x.to(la.cpu(1)) * 2
    assert y.is_lazy and y.device == la.cpu(1)
    np.testing.assert_array_equal(y.asnumpy(), np.full((2, 3), 2.0))


def test_transfer_gradient_comes_back_to_the_source_device():
    x = la.array([1.0, 2.0])
    x.attach_grad()
    with la.autograd.record():
        y = (x.to(la.cpu(1)) * 3).sum()
    y.backward()
    assert x.grad.device == la.cpu(0)
    np.testing.assert_array_equal(x.grad.asnumpy(), [3.0, 3.0])


def test_mixing_devices_in_an_op_is_an_error_with_the_fix():
    with pytest.raises(la.DeviceError, match=r"add: inputs live on different devices.*\.to\(cpu\(0\)\)"):
        la.ones(2) + la.ones(2, device=la.cpu(1))


@pytest.mark.skipif(la.gpu_available(), reason="a GPU is available here")
def test_gpu_without_cupy_or_device_raises_device_error():
    assert not la.gpu_available()
    with pytest.raises(la.DeviceError, match="gpu") as info:
        la.gpu()
    assert "la.cpu()" in str(info.value) and isinstance(info.value, la.LazyArrayError)


@needs_gpu
def test_gpu_round_trip():
    x = la.array(np.arange(6.0).reshape(2, 3))
    g = x.to(la.gpu(0))
    assert g.device == la.gpu(0) and str(g.device) == "gpu(0)"
    np.testing.assert_array_equal((g * 2).asnumpy(), x.asnumpy() * 2)
    np.testing.assert_array_equal(g.to(la.cpu(0)).asnumpy(), x.asnumpy())


@needs_gpu
def test_gpu_ops_match_cpu():
    x = np.random.default_rng(0).standard_normal((4, 5)).astype(np.float32)
    c, g = la.array(x), la.array(x, device=la.gpu(0))
    for f in (lambda a: la.exp(a).sum(axis=1), lambda a: la.nn.softmax(a), lambda a: a @ a.T):
        np.testing.assert_allclose(f(g).asnumpy(), f(c).asnumpy(), rtol=1e-5, atol=1e-6)


def test_arrays_made_from_nothing_take_the_default_device():
    """Parameters and la.sym's creation ops follow ``with la.cpu(1):`` (Gluon's
    ``current_context()``), as la.zeros and la.sym.var do."""
    with la.cpu(1):
        net = la.blocks.Dense(2, in_units=3)
        net.initialize()
        assert net.weight.data().device == la.cpu(1) and net.bias.data().device == la.cpu(1)
        for sym in (la.sym.fill(shape=(2,), value=1.0, dtype="float32"), la.sym.iota(bounds=(0, 3, 1))):
            assert str(sym).splitlines()[-2].endswith("@cpu(1)"), str(sym)
    assert "@cpu(0)" in str(la.sym.iota(bounds=(0, 3, 1)))
    assert la.ops.registry.get("iota").makes_arrays and not la.ops.registry.get("add").makes_arrays
