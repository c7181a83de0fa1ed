"""Sharded checkpoints of ``DataParallel``: every worker writes its part from its replica, the client the
manifest; loaded back on 1 process (no cluster) and on 4 workers with equal values; atomic; refused when
damaged or pointing outside the folder."""
from __future__ import annotations

import hashlib
import json
import os

import numpy as np
import pytest

import lazyarray as la
from lazyarray import blocks as nn
from lazyarray.blocks.param_file import load_arrays, write_arrays
from lazyarray.blocks.parameter import Parameter
from lazyarray.distributed import checkpoint as C
from lazyarray.distributed import replica as R

pytest.importorskip("dask.distributed")
from dask.distributed import Client, LocalCluster  # noqa: E402


def _net(seed=0):
    la.random.seed(seed)
    net = nn.HybridSequential()
    net.add(nn.Dense(8, in_units=5, activation="tanh"), nn.Dense(6, in_units=8, activation="tanh"),
            nn.Dense(3, in_units=6))
    net.initialize()
    return net


def _batch(seed=0, rows=24):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((rows, 5)).astype("float32"), rng.integers(0, 3, rows).astype("int32")


def _adam(net):
    return nn.Trainer(net.collect_params(), "adam", {"learning_rate": 0.01})


def _replica_values(client, dp) -> list[dict]:
    return [client.run(lambda key: R.state(key)[0], dp._rkey(w), workers=[w])[w] for w in dp._holders]


def _one_step(net, trainer, x, y):
    with la.autograd.record():
        loss = nn.SoftmaxCrossEntropyLoss()(net(la.array(x)), la.array(y))
    loss.backward()
    trainer.step(len(x))


def _trained(client, tmp_path, steps=3):
    """A 2-worker DataParallel after ``steps`` Adam steps, its checkpoint saved; (dp, folder, replica values)."""
    net = _net()
    dp = la.distributed.DataParallel(net, nn.SoftmaxCrossEntropyLoss(), _adam(net), client=client)
    for i in range(steps):
        dp.step(*_batch(i))
    folder = dp.save_checkpoint(tmp_path / "ckpt")
    return dp, folder, _replica_values(client, dp)[0]


def test_each_worker_writes_its_part_and_one_process_loads_the_same_values_and_states(client, tmp_path):
    dp, folder, saved = _trained(client, tmp_path)
    man = json.loads((tmp_path / "ckpt" / C.MANIFEST).read_text())
    assert man["step"] == 3 and len(man["shards"]) == 2
    parts = [set(s["params"]) for s in man["shards"]]
    assert parts[0] and parts[1] and not parts[0] & parts[1] and parts[0] | parts[1] == set(saved)
    sizes = [sum(saved[k].nbytes for k in part) for part in parts]
    assert max(sizes) < 0.75 * sum(sizes)  # (parted by bytes: each worker writes about half)
    # one process, no cluster: the same values bit for bit, and the optimizer states with them
    net = _net(seed=7)
    trainer = _adam(net)
    assert la.distributed.load_checkpoint(folder, net, trainer) == 3
    for k, p in net.collect_params().items():
        assert p.data().asnumpy().tobytes() == saved[k].tobytes(), k
    x, y = _batch(3)
    _one_step(net, trainer, x, y)
    dp.step(x, y)
    after = _replica_values(client, dp)[0]
    for k, p in net.collect_params().items():
        np.testing.assert_allclose(p.data().asnumpy(), after[k], rtol=1e-5, atol=2e-6, err_msg=k)
    dp.close()


def test_a_checkpoint_of_two_workers_loads_on_four(client, tmp_path):
    dp, folder, saved = _trained(client, tmp_path)
    x, y = _batch(3)
    dp.step(x, y)
    want = _replica_values(client, dp)[0]
    dp.close()
    with LocalCluster(n_workers=4, processes=True, threads_per_worker=1, dashboard_address=None) as cl, \
            Client(cl) as c4:
        c4.wait_for_workers(4, timeout=120)
        net = _net(seed=7)
        dp4 = la.distributed.DataParallel(net, nn.SoftmaxCrossEntropyLoss(), _adam(net), client=c4)
        assert dp4.load_checkpoint(folder) == 3 and dp4.steps == 3
        for k, p in net.collect_params().items():
            assert p.data().asnumpy().tobytes() == saved[k].tobytes(), k
        dp4.step(x, y)  # (the loaded values and states broadcast to the 4 workers)
        replicas = _replica_values(c4, dp4)
        assert len(replicas) == 4
        for k in want:
            assert all(r[k].tobytes() == replicas[0][k].tobytes() for r in replicas), k
            np.testing.assert_allclose(replicas[0][k], want[k], rtol=1e-5, atol=2e-6, err_msg=k)
        # saved again on 4 workers: 4 shards, and they load back to the same values
        dp4.save_checkpoint(folder)
        assert len(json.loads((tmp_path / "ckpt" / C.MANIFEST).read_text())["shards"]) == 4
        assert len([f for f in os.listdir(folder) if f.startswith("shard-")]) == 4  # (the 2 old shards removed)
        dp4.close()
    net = _net(seed=9)
    la.distributed.load_checkpoint(folder, net)
    for k, p in net.collect_params().items():
        assert p.data().asnumpy().tobytes() == replicas[0][k].tobytes(), k


def test_a_save_that_dies_before_its_manifest_leaves_the_previous_checkpoint(client, tmp_path, monkeypatch):
    dp, folder, saved = _trained(client, tmp_path)
    dp.step(*_batch(3))

    def dies(*args, **kw):
        raise OSError("disk full")

    monkeypatch.setattr(C, "write_manifest", dies)
    with pytest.raises(OSError, match="disk full"):
        dp.save_checkpoint(folder)
    monkeypatch.undo()
    assert len([f for f in os.listdir(folder) if f.startswith("shard-")]) == 4  # (old and new shards)
    net = _net(seed=7)
    assert la.distributed.load_checkpoint(folder, net) == 3  # the previous checkpoint, whole
    for k, p in net.collect_params().items():
        assert p.data().asnumpy().tobytes() == saved[k].tobytes(), k
    dp.save_checkpoint(folder)
    assert len([f for f in os.listdir(folder) if f.startswith("shard-")]) == 2
    assert la.distributed.load_checkpoint(folder, net) == 4
    dp.close()


def test_before_the_first_step_the_client_values_are_one_shard(client, tmp_path):
    net = _net()
    dp = la.distributed.DataParallel(net, nn.SoftmaxCrossEntropyLoss(), _adam(net), client=client)
    folder = dp.save_checkpoint(tmp_path / "first")
    assert len(json.loads((tmp_path / "first" / C.MANIFEST).read_text())["shards"]) == 1
    fresh = _net(seed=4)
    la.distributed.load_checkpoint(folder, fresh)
    for k, p in fresh.collect_params().items():
        assert p.data().asnumpy().tobytes() == net.collect_params()[k].data().asnumpy().tobytes(), k
    other = nn.Dense(3, in_units=5)
    other.initialize()
    with pytest.raises(la.ParamError, match="do not match the model's"):
        la.distributed.load_checkpoint(folder, other)


def test_damaged_or_escaping_checkpoints_are_refused_before_anything_changes(client, tmp_path):
    dp, folder, _ = _trained(client, tmp_path, steps=1)
    dp.close()
    man_path = os.path.join(folder, C.MANIFEST)
    good = open(man_path).read()
    net = _net(seed=7)
    before = {k: p.data().asnumpy().copy() for k, p in net.collect_params().items()}
    man = json.loads(good)
    shard = os.path.join(folder, man["shards"][1]["file"])
    data = bytearray(open(shard, "rb").read())
    data[-1] ^= 1
    with open(shard, "wb") as f:
        f.write(data)
    with pytest.raises(la.GraphFormatError, match="does not have the SHA-256 the manifest says"):
        la.distributed.load_checkpoint(folder, net)
    outside = tmp_path / "outside.safetensors"
    outside.write_bytes(b"x")
    for bad in ("../outside.safetensors", str(outside)):
        man["shards"][1]["file"] = bad
        with open(man_path, "w") as f:
            json.dump(man, f)
        with pytest.raises(la.GraphFormatError, match="shard entry 1 must be"):
            la.distributed.load_checkpoint(folder, net)
    os.unlink(shard)
    os.symlink(outside, shard)
    with open(man_path, "w") as f:
        f.write(good)
    with pytest.raises(la.GraphFormatError, match="is a symbolic link"):
        la.distributed.load_checkpoint(folder, net)
    os.unlink(man_path)
    with pytest.raises(la.GraphFormatError, match="no readable checkpoint.json"):
        la.distributed.load_checkpoint(folder, net)
    with pytest.raises(la.ParamValueError, match="folder must be the path of a checkpoint folder"):
        la.distributed.load_checkpoint(None, net)
    for k, p in net.collect_params().items():
        np.testing.assert_array_equal(p.data().asnumpy(), before[k])


def test_parts_balance_bytes():
    sizes = {"a": 100, "b": 60, "c": 50, "d": 10, "e": 0}
    parts = C.partition(sizes, 2)
    assert sorted(sum(parts, [])) == sorted(sizes) and [sum(sizes[k] for k in p) for p in parts] == [110, 110]
    assert C.partition(sizes, 1) == [list(sizes)]
    assert C.partition({"a": 4}, 3) == [["a"], [], []]


# -- the loss's own parameters and la.amp's loss scaling -------------------------------------------------
class _TemperedLoss(nn.HybridBlock):
    """Softmax cross-entropy of ``pred * temp``: a loss with a trained parameter of its own."""

    def __init__(self):
        super().__init__()
        self.temp = Parameter("temp", shape=(1,), init=la.init.Constant(0.5))
        self.ce = nn.SoftmaxCrossEntropyLoss()

    def forward(self, pred, label):
        return self.ce(pred * self.temp.data(), label)


def _tempered(seed=0):
    net, loss = _net(seed), _TemperedLoss()
    loss.initialize()
    trainer = nn.Trainer(list(net.collect_params().values()) + list(loss.collect_params().values()), "adam",
                         {"learning_rate": 0.05})
    return net, loss, trainer, None


def _amp(dtype, seed=0):
    la.random.seed(seed)
    net = nn.HybridSequential()
    net.add(nn.Dense(16, activation="relu", in_units=5), nn.Dense(3, in_units=16))
    net.initialize(la.init.Xavier())
    la.amp.convert_block(net, dtype)
    trainer = nn.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.05, "momentum": 0.9, "multi_precision": True})
    scaler = la.amp.init_trainer(trainer, net, target_dtype=dtype,
                                 scaler=la.amp.LossScaler(init_scale=2.0 ** (14 if dtype == "float16" else 122),
                                                          growth_interval=2))
    return net, nn.SoftmaxCrossEntropyLoss(), trainer, scaler


def _loud_batch(i):
    x, y = _batch(i)
    return x * 40, y  # (large enough that the first scales overflow: steps are skipped, the scale moves)


@pytest.mark.parametrize("kind", ["loss_params", "float16", "bfloat16"])
def test_resuming_from_a_checkpoint_equals_uninterrupted_training_bit_for_bit(client, tmp_path, kind):
    """A loss with a trained parameter of its own, and la.amp's loss scaler (with bfloat16's float32 master
    weights): 2 steps, a checkpoint, 2 more steps on a new trainer loaded from it give the parameters, the
    loss's parameter, the optimizer states and the scaler of 4 uninterrupted steps, bit for bit."""
    make = _tempered if kind == "loss_params" else lambda seed=0: _amp(kind, seed)
    batches = [_loud_batch(i) for i in range(4)]

    def states(dp):
        dp.sync_to_client()
        values = {k: p.data().asnumpy().tobytes() for k, p in C.named_params(dp.net, dp.loss_fn).items()}
        scaler = dp.trainer.amp and dp.trainer.amp.portable(dp.trainer.params)
        return values, R.states_bytes(dp.trainer), scaler and (scaler[0], {i: v.tobytes() for i, v in
                                                                             (scaler[3] or {}).items()})

    net, loss, trainer, _ = make()
    whole = la.distributed.DataParallel(net, loss, trainer, client=client, seed=3)
    for x, y in batches:
        whole.step(x, y)
    want = states(whole)
    whole.close()
    net, loss, trainer, _ = make()
    first = la.distributed.DataParallel(net, loss, trainer, client=client, seed=3)
    first.step_many(batches[:2])
    folder = first.save_checkpoint(tmp_path / "ckpt")
    first.close()
    net, loss, trainer, scaler = make(seed=11)  # (other initial values: all of them come from the checkpoint)
    resumed = la.distributed.DataParallel(net, loss, trainer, client=client, seed=3)
    assert resumed.load_checkpoint(folder) == 2
    for x, y in batches[2:]:
        resumed.step(x, y)
    got = states(resumed)
    assert got[0].keys() == want[0].keys() and (kind != "loss_params" or "loss_fn.temp" in got[0])
    assert got == want
    if scaler is not None:
        assert scaler.skipped > 0 and got[2][0]["skipped"] == scaler.skipped  # (the scaler moved, and resumed)
    resumed.close()


def test_loss_scaling_checkpoints_are_refused_by_a_trainer_without_it_and_checked_when_damaged(client, tmp_path):
    net, loss, trainer, _ = _amp("bfloat16")
    dp = la.distributed.DataParallel(net, loss, trainer, client=client)
    dp.step(*_loud_batch(0))
    folder = dp.save_checkpoint(tmp_path / "ckpt")
    dp.close()
    plain_net = nn.HybridSequential()
    plain_net.add(nn.Dense(16, activation="relu", in_units=5), nn.Dense(3, in_units=16))
    plain_net.initialize()
    before = {k: p.data().asnumpy().copy() for k, p in plain_net.collect_params().items()}
    plain_trainer = nn.Trainer(plain_net.collect_params(), "sgd", {"learning_rate": 0.05, "momentum": 0.9,
                                                                  "multi_precision": True})
    with pytest.raises(la.ParamValueError, match="saved with loss scaling .* this trainer has none"):
        la.distributed.load_checkpoint(folder, plain_net, plain_trainer)
    for k, p in plain_net.collect_params().items():  # (refused before anything changed)
        np.testing.assert_array_equal(p.data().asnumpy(), before[k])
    fp16_net, _, fp16_trainer, _ = _amp("float16")
    with pytest.raises(la.ParamValueError, match="saved with loss scaling for bfloat16"):
        la.distributed.load_checkpoint(folder, fp16_net, fp16_trainer)
    # a damaged scaler record (the digests made to match): refused as a format error naming the field
    man_path = tmp_path / "ckpt" / C.MANIFEST
    man = json.loads(man_path.read_text())
    for entry in man["shards"]:
        shard = os.path.join(folder, entry["file"])
        arrays, meta = load_arrays(shard)
        meta["amp"]["scaler"]["scale"] = -1.0
        write_arrays(shard, arrays, meta)
        entry["sha256"] = hashlib.sha256(open(shard, "rb").read()).hexdigest()
    man_path.write_text(json.dumps(man))
    with pytest.raises(la.GraphFormatError, match="loss scaler: init_scale must be"):
        C.read(folder)


def test_loss_scaler_state_dict_round_trips_and_is_checked():
    s = la.amp.LossScaler(init_scale=8.0, growth_interval=3)
    s.update(overflow=True)
    t = la.amp.LossScaler()
    t.load_state_dict(s.state_dict())
    assert vars(t) == vars(s)
    with pytest.raises(la.ParamValueError, match="has the fields"):
        t.load_state_dict({"scale": 1.0})
    with pytest.raises(la.ParamValueError, match="good_steps must be an int >= 0"):
        t.load_state_dict(dict(s.state_dict(), good_steps=-1))
    with pytest.raises(la.ParamValueError, match="backoff_factor"):
        t.load_state_dict(dict(s.state_dict(), backoff_factor=2.0))
    assert vars(t) == vars(s)  # (refused before anything changed)
