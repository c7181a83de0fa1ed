"""kernels/dense_regions.py: a one-row dense layer split over threads by output units gives the serial
product's values (to rounding) for any unit count, covers the layers it promises, and declines the
rest (which the serial product then computes)."""
from __future__ import annotations

import numpy as np
import pytest

import lazyarray as la
from lazyarray import blocks as B
from lazyarray import threads
from lazyarray.caches import NamedCache
from lazyarray.kernels import blas_threads, dense_regions
from lazyarray.kernels.dense import run_dense as _dense

pytest.importorskip("numba")
pytest.importorskip("threadpoolctl")


@pytest.fixture(autouse=True)
def _restore():
    yield
    la.set_num_threads(threads.default_threads())


@pytest.fixture
def spy(monkeypatch):
    calls = []
    real = dense_regions.dense_row
    monkeypatch.setattr(dense_regions, "dense_row", lambda *a: calls.append(a[1].shape) or real(*a))
    return calls


def _layer(units, k, seed=0):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((1, k)).astype(np.float32), rng.standard_normal((units, k)).astype(np.float32),
            rng.standard_normal(units).astype(np.float32))


@pytest.mark.parametrize("units,k", [(512, 784), (512, 512), (601, 700), (2048, 1024), (4096, 300)])
@pytest.mark.parametrize("threads_", [2, 3])
def test_region_equals_the_serial_product(spy, monkeypatch, units, k, threads_):
    la.set_num_threads(threads_)
    x, w, b = _layer(units, k)
    out = np.full((1, units), np.nan, np.float32)
    got = _dense(np, x, w, b, out=out)
    assert got is out and spy == [w.shape]
    monkeypatch.setattr(la.config, "dense_region", False)
    want = _dense(np, x, w, b, out=np.empty((1, units), np.float32))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(got, x.astype(np.float64) @ w.T.astype(np.float64) + b, rtol=1e-5, atol=1e-4)
    blocks = blas_threads.region_blocks(k, units, threads_)
    assert blocks % threads_ == 0 and k * -(-units // blocks) <= blas_threads.SMALL_PRODUCT


def test_non_finite_inputs_propagate(spy):
    la.set_num_threads(2)
    x, w, b = _layer(512, 784, seed=1)
    x[0, 3], w[7, 5] = np.nan, np.inf
    got = _dense(np, x, w, b, out=np.empty((1, 512), np.float32))
    want = x.dot(w.T) + b
    assert spy and np.array_equal(np.isnan(got), np.isnan(want))


@pytest.mark.parametrize("case", ["one thread", "small weight", "float64", "strided weight", "pool thread",
                                  "big blocks", "probe says no", "switched off"])
def test_declines_what_it_does_not_cover(monkeypatch, case):
    la.set_num_threads(1 if case == "one thread" else 2)
    units, k = (256, 512) if case == "small weight" else (512, 784)
    x, w, b = _layer(units, k, seed=2)
    if case == "float64":
        x, w, b = x.astype(np.float64), w.astype(np.float64), b.astype(np.float64)
    if case == "strided weight":
        w = np.ascontiguousarray(np.concatenate([w, w], axis=1))[:, :k]
    if case == "pool thread":
        monkeypatch.setattr(threads, "in_pool", lambda: True)
    if case == "big blocks":
        monkeypatch.setattr(dense_regions, "SMALL_PRODUCT", k // 2)  # (no block of one unit is small)
    if case == "probe says no":
        monkeypatch.setattr(dense_regions, "row_calls_serial", lambda: False)
    if case == "switched off":
        monkeypatch.setattr(la.config, "dense_region", False)
    monkeypatch.setattr(dense_regions, "PLANS", NamedCache("test plans", 8))
    out = np.empty((1, units), x.dtype)
    if case != "small weight":
        assert not dense_regions.dense_row(x, w, out)
    calls = []
    real = dense_regions.dense_row
    monkeypatch.setattr(dense_regions, "dense_row", lambda *a: calls.append(real(*a)) or calls[-1])
    got = _dense(np, x, w, b, out=out)
    # (a small weight: the caller does not even ask; the others: asked, and declined)
    assert calls == ([] if case == "small weight" else [False])
    np.testing.assert_allclose(got, x.astype(np.float64) @ w.T.astype(np.float64) + b, rtol=1e-5, atol=1e-4)


def test_hybridized_mlp_at_batch_1_takes_it_and_equals_the_serial_product(spy, monkeypatch):
    la.set_num_threads(2)
    net = B.HybridSequential()
    net.add(B.Dense(512, activation="relu"), B.Dense(512, activation="relu"), B.Dense(10))
    net.initialize()
    net.hybridize()
    x = la.array(np.random.default_rng(3).standard_normal((1, 784)).astype("float32"))
    got = net(x).asnumpy()
    assert spy == [(512, 784), (512, 512)]  # (the (10, 512) output layer is under the size)
    monkeypatch.setattr(la.config, "dense_region", False)
    np.testing.assert_allclose(got, net(x).asnumpy(), rtol=1e-5, atol=1e-5)
