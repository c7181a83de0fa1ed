"""``la.distributed.DataParallel`` in training mode: dropout masks per piece, batch-norm statistics per piece."""
from __future__ import annotations

import numpy as np
import pytest

import lazyarray as la
from lazyarray import blocks as nn
from lazyarray import rng
from lazyarray.blocks.block import HybridBlock

pytest.importorskip("dask.distributed")
import dask.array as da  # noqa: E402

CPU0 = la.Device("cpu", 0)


@pytest.fixture(scope="module")
def client(threaded_client):  # (conftest.py: workers as threads of this process)
    return threaded_client


class SumLoss(HybridBlock):
    """One value per sample: the sum of its outputs (label unused but for its shape)."""

    def forward(self, out, label):
        return out.reshape((out.shape[0], -1)).sum(axis=1) + label * 0.0


def _dropout_net(seed):
    la.random.seed(seed)
    net = nn.HybridSequential()
    net.add(nn.Dense(16, in_units=8, activation="relu"), nn.Dropout(0.5), nn.Dense(3, in_units=16))
    net.initialize()
    return net


def _params(net):
    return {k: p.data().asnumpy().copy() for k, p in sorted(net.collect_params().items())}


def test_dropout_pieces_draw_their_own_masks_by_a_per_piece_seed(client):
    """Equal to one process that runs each piece with the generator seeded by ``piece_seed``."""
    rng_np = np.random.default_rng(0)
    batches = [(rng_np.standard_normal((24, 8)).astype("float32"), rng_np.integers(0, 3, 24).astype("int32"))
               for _ in range(2)]
    ref, dist = _dropout_net(3), _dropout_net(3)
    loss_fn = nn.SoftmaxCrossEntropyLoss()
    ref_tr = nn.Trainer(ref.collect_params(), "sgd", {"learning_rate": 0.1})
    dp = la.distributed.DataParallel(dist, loss_fn, nn.Trainer(dist.collect_params(), "sgd", {"learning_rate": 0.1}),
                                     client=client, seed=11)
    assert dp.piece_seed(0, 0) != dp.piece_seed(0, 1) != dp.piece_seed(1, 0)
    for step, (x, y) in enumerate(batches):
        with la.autograd.record():
            losses = []
            for i, (xi, yi) in enumerate(zip(np.array_split(x, 2), np.array_split(y, 2))):
                with rng.drawing_from(np.random.default_rng(dp.piece_seed(step, i))):
                    losses.append(loss_fn(ref(la.array(xi)), la.array(yi)).sum())
            total = losses[0] + losses[1]
        total.backward()
        ref_tr.step(24)
        got = dp.step(da.from_array(x, chunks=(12, 8)), da.from_array(y, chunks=12))
        assert got == pytest.approx(float(total.asnumpy()) / 24, rel=1e-5)
    dp.sync_to_client()  # (the replicas live on the workers)
    for (k, want), (_, have) in zip(_params(ref).items(), _params(dist).items()):
        np.testing.assert_allclose(have, want, rtol=1e-5, atol=1e-6, err_msg=k)


def test_dropout_statistics_over_pieces(client):
    """Ones through Dropout(0.5) into a Dense of ones: each sample's loss is 2 x (kept units)."""
    net = nn.HybridSequential()
    net.add(nn.Dropout(0.5), nn.Dense(1, in_units=1000, use_bias=False, weight_initializer=la.init.One()))
    net.initialize()
    dp = la.distributed.DataParallel(net, SumLoss(), nn.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.0}),
                                     client=client, seed=5)
    x, y = np.ones((64, 1000), "float32"), np.zeros(64, "float32")
    loss = dp.step(da.from_array(x, chunks=(32, 1000)), da.from_array(y, chunks=32))
    # mean over 64 samples of 2 * Binomial(1000, 0.5): 1000 with a standard deviation of 2 * sqrt(250 / 64)
    assert abs(loss - 1000.0) < 6 * 2 * np.sqrt(250 / 64)
    again = la.distributed.DataParallel(net, SumLoss(), nn.Trainer(net.collect_params(), "sgd",
                                                                   {"learning_rate": 0.0}), client=client, seed=5)
    assert again.step(da.from_array(x, chunks=(32, 1000)), da.from_array(y, chunks=32)) == loss  # same seed
    other = dp.step(da.from_array(x, chunks=(32, 1000)), da.from_array(y, chunks=32))
    assert other != loss  # the next step draws new masks


def _bn_net(seed):
    la.random.seed(seed)
    net = nn.HybridSequential()
    net.add(nn.BatchNorm(in_channels=4, momentum=0.8), nn.Dense(3, in_units=4))
    net.initialize()
    return net


def test_batch_norm_uses_per_piece_statistics_and_averages_the_running_ones(client):
    rng_np = np.random.default_rng(1)
    x = (rng_np.standard_normal((20, 4)) * [1, 2, 3, 4] + [0, 1, -1, 5]).astype("float32")
    x[:10] += 3.0  # the two pieces differ in mean: per-piece and global variance differ
    y = rng_np.integers(0, 3, 20).astype("int32")
    ref, dist = _bn_net(4), _bn_net(4)
    loss_fn = nn.SoftmaxCrossEntropyLoss()
    ref_tr = nn.Trainer(ref.collect_params(), "sgd", {"learning_rate": 0.1})
    dp = la.distributed.DataParallel(dist, loss_fn, nn.Trainer(dist.collect_params(), "sgd", {"learning_rate": 0.1}),
                                     client=client)
    bn = dist[0]
    mean0, var0 = bn.running_mean.data().asnumpy().copy(), bn.running_var.data().asnumpy().copy()
    # reference: one process, each piece normalized by its own statistics (DDP), gradients summed
    with la.autograd.record():
        total = sum(loss_fn(ref(la.array(xi)), la.array(yi)).sum()
                    for xi, yi in zip(np.array_split(x, 2), np.array_split(y, 2)))
    total.backward()
    ref_tr.step(20)
    got = dp.step(da.from_array(x, chunks=(10, 4)), da.from_array(y, chunks=10))
    assert got == pytest.approx(float(total.asnumpy()) / 20, rel=1e-5)
    dp.sync_to_client()
    trained = [k for k, p in sorted(dist.collect_params().items()) if p.grad_req != "null"]
    for k in trained:
        np.testing.assert_allclose(_params(dist)[k], _params(ref)[k], rtol=1e-5, atol=1e-6, err_msg=k)
    pieces = np.array_split(x.astype("float64"), 2)
    w = [len(p) / 20 for p in pieces]
    np.testing.assert_allclose(bn.running_mean.data().asnumpy(), 0.8 * mean0 + 0.2 * x.mean(axis=0), rtol=1e-5)
    within = sum(wi * p.var(axis=0) for wi, p in zip(w, pieces))
    np.testing.assert_allclose(bn.running_var.data().asnumpy(), 0.8 * var0 + 0.2 * within, rtol=1e-5)
    assert not np.allclose(within, x.var(axis=0), rtol=1e-2)  # (the documented difference is real here)


def test_uneven_pieces_weight_the_running_statistics_by_rows(client):
    x = (np.random.default_rng(2).standard_normal((7, 4)) + np.arange(7)[:, None]).astype("float32")  # the net's dtype
    y = np.zeros(7, "int32")
    net = _bn_net(6)
    dp = la.distributed.DataParallel(net, nn.SoftmaxCrossEntropyLoss(),
                                     nn.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.0}), client=client)
    mean0 = net[0].running_mean.data().asnumpy().copy()
    dp.step(x, y)  # NumPy input: one piece per worker, 4 + 3 rows
    dp.sync_to_client()
    np.testing.assert_allclose(net[0].running_mean.data().asnumpy(), 0.8 * mean0 + 0.2 * x.mean(axis=0), rtol=1e-5)
