"""Mixed-device graphs: copy nodes between ``cpu(0)`` and another device, placement, per-device memory
plans, and (on a GPU) the kernels chosen for GPU arrays.

Every test runs against ``cpu(1)`` on any machine (a separate device holding NumPy arrays, so the
copy and placement logic is exercised everywhere) and against ``gpu(0)`` where CuPy and a GPU are
usable (``tools/gpu_check.sh`` runs this file on a GPU machine).
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import lazyarray as la
from lazyarray.kernels import choose

HAS_GPU = la.gpu_available()
OTHERS = ["cpu(1)"] + (["gpu(0)"] if HAS_GPU else [])
needs_gpu = pytest.mark.skipif(not HAS_GPU, reason="needs CuPy and a GPU")


@pytest.fixture(params=OTHERS)
def other(request):
    return la.Device.parse(request.param)


def test_copy_nodes_appear_in_the_graph_and_values_match_numpy(other):
    x_np = np.random.default_rng(0).standard_normal((4, 5)).astype(np.float32)
    x = la.array(x_np, device=la.cpu(0))
    with la.deferred():
        y = ((la.relu(x * 2.0).to(other) + 1.0).exp()).to(la.cpu(0)).sum(axis=1)
    sym = la.get_symbol(y, inputs={"x": x})
    text = str(sym)
    assert f"@{other}" in text and text.count(" = copy_to(") == 2, text
    want = np.exp(np.maximum(x_np * 2, 0) + 1).sum(axis=1)
    np.testing.assert_allclose(y.asnumpy(), want, rtol=1e-5)
    got = la.CachedOp(sym)(x)
    assert y.device == got.device == la.cpu(0)
    np.testing.assert_allclose(got.asnumpy(), want, rtol=1e-5)


def test_a_cached_op_keeps_each_value_on_its_device(other):
    x_np = np.arange(12, dtype=np.float32).reshape(3, 4)
    x = la.array(x_np, device=la.cpu(0))
    with la.deferred():
        mid = (x + 1.0).to(other) * 3.0
        out = mid.to(la.cpu(0)) - 1.0
    got_mid, got_out = la.CachedOp(la.get_symbol([mid, out], inputs={"x": x}))(x)
    assert got_mid.device == other and got_out.device == la.cpu(0)
    np.testing.assert_allclose(got_mid.asnumpy(), (x_np + 1) * 3)
    np.testing.assert_allclose(got_out.asnumpy(), (x_np + 1) * 3 - 1)


def test_the_memory_plan_has_buffers_on_both_devices(other):
    x = la.ones((64, 64), device=la.cpu(0))
    with la.deferred():
        y = ((x * 2.0).to(other).exp() + 1.0).to(la.cpu(0)) * 0.5
    plan = la.CachedOp(la.get_symbol(y, inputs={"x": x})).memory_plan()
    devices = {str(d) for d in plan.buffer_device}
    assert {"cpu(0)", str(other)} <= devices, plan.table()
    on_other = sum(s for s, d in zip(plan.buffer_size, plan.buffer_device) if str(d) == str(other))
    assert on_other >= 64 * 64 * 4, plan.table()  # at least the value that lives there


@needs_gpu
def test_planned_gpu_peak_is_within_ten_percent_of_cupys_pool():
    import cupy
    pool = cupy.get_default_memory_pool()
    arg = la.array(np.ones((1024, 1024), np.float32), device=la.gpu(0))
    with la.deferred():
        y = la.tanh(la.exp(arg * 0.5) + 1.0) * la.sigmoid(arg) - arg
    op = la.CachedOp(la.get_symbol(y, inputs={"x": arg}))
    plan = op.memory_plan()
    planned = sum(s for s, d in zip(plan.buffer_size, plan.buffer_device) if d == la.gpu(0))
    cupy.cuda.Device(0).synchronize()
    pool.free_all_blocks()
    before = pool.total_bytes()
    op(arg)  # the first call allocates the planned buffers (later calls reuse them)
    cupy.cuda.Device(0).synchronize()
    used = pool.total_bytes() - before
    assert abs(used - planned) <= planned * 0.1 + (1 << 20), (used, planned, plan.table())


@needs_gpu
@pytest.mark.parametrize("shape, wshape, params", [
    ((8, 64, 16, 16), (64, 64, 3, 3), {"padding": (1, 1)}),  # winograd on a CPU
    ((2, 32, 16, 16), (32, 1, 3, 3), {"padding": (1, 1), "groups": 32}),  # depthwise
    ((64, 16, 8, 8), (32, 16, 1, 1), {}),  # the batch split on a CPU
])
def test_gpu_arrays_never_take_the_compiled_cpu_kernels_for_conv2d(shape, wshape, params):
    import cupy
    x, w = cupy.ones(shape, cupy.float32), cupy.ones(wshape, cupy.float32)
    choice = choose("conv2d", cupy, x, w, **params)
    assert not choice.impl.threads and choice.impl.name in {"im2col", "depthwise", "grouped"}, choice


@needs_gpu
@pytest.mark.parametrize("shape", [(1, 512), (64, 512), (4, 8, 512)])
def test_gpu_arrays_never_take_the_threaded_cpu_kernels_for_dense(shape):
    import cupy
    x, w = cupy.ones(shape, cupy.float32), cupy.ones((256, 512), cupy.float32)
    out = cupy.empty(shape[:-1] + (256,), cupy.float32)
    choice = choose("dense", cupy, x, w, out=out)
    assert not choice.impl.threads and choice.impl.name not in {"gemv", "region"}, choice


@needs_gpu
def test_a_hybridized_cnn_on_the_gpu_equals_the_cpu():
    def make():
        net = la.blocks.HybridSequential()
        net.add(la.blocks.Conv2D(8, 3, padding=1, in_channels=3), la.blocks.BatchNorm(in_channels=8),
                la.blocks.Activation("relu"), la.blocks.MaxPool2D(2), la.blocks.Flatten(), la.blocks.Dense(10))
        return net
    x = np.random.default_rng(1).standard_normal((4, 3, 16, 16)).astype(np.float32)
    cpu_net, gpu_net = make(), make()
    cpu_net.initialize(device=la.cpu(0))
    gpu_net.initialize(device=la.gpu(0))
    for p, q in zip(cpu_net.collect_params().values(), gpu_net.collect_params().values()):
        q.set_data(p.data().asnumpy())
    gpu_net.hybridize()
    want = cpu_net(la.array(x)).asnumpy()
    got = gpu_net(la.array(x, device=la.gpu(0)))
    assert got.device == la.gpu(0)
    np.testing.assert_allclose(got.asnumpy(), want, rtol=1e-4, atol=1e-5)


def test_the_default_device_is_the_runs_test_device():
    want = {"": "cpu(0)", "cpu1": "cpu(1)", "gpu": "gpu(0)"}[os.environ.get("LAZYARRAY_TEST_DEVICE", "").strip().lower()]
    assert str(la.zeros(2).device) == str(la.current_device()) == want


@pytest.mark.skipif(bool(os.environ.get("LAZYARRAY_TEST_DEVICE")), reason="already a device run")
def test_lazyarray_test_device_switches_the_device_suites_and_refuses_unknown_values():
    here = Path(__file__).resolve()
    test = f"{here.relative_to(here.parents[1])}::test_the_default_device_is_the_runs_test_device"
    run = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "addopts=", test]
    for value, code in (("cpu1", 0), ("tpu", 4)):
        out = subprocess.run(run, capture_output=True, text=True, timeout=300, cwd=here.parents[1],
                             env={**os.environ, "LAZYARRAY_TEST_DEVICE": value})
        assert out.returncode == code, out.stdout[-2000:] + out.stderr[-2000:]
    assert "use one of ['cpu1', 'gpu']" in out.stdout + out.stderr
