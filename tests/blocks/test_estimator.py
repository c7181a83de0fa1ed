"""``la.blocks.Estimator`` and its event handlers (``handlers.py``, ``checkpoint.py``)."""
from __future__ import annotations

import csv
import json
import logging
import math
import os

import numpy as np
import pytest

import lazyarray as la
from lazyarray import blocks as B


def _data(n=64, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, 4)).astype(np.float32)
    y = (x @ np.array([1.0, -2.0, 0.5, 0.0], np.float32) > 0).astype(np.int64)
    return x, y


def _loader(n=64, batch_size=16, seed=0):
    x, y = _data(n, seed)
    return la.data.DataLoader(la.data.ArrayDataset(x, y), batch_size=batch_size)


def _net(seed=0):
    net = B.HybridSequential()
    net.add(B.Dense(8, activation="relu", in_units=4), B.Dense(2, in_units=8))
    net.initialize()
    rng = np.random.default_rng(seed)
    for p in net.collect_params().values():  # the same start for every net of one seed
        p.set_data(la.array(rng.standard_normal(p.shape).astype(np.float32) * 0.3))
    return net


def _estimator(net=None, **kw):
    net = net or _net()
    trainer = B.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1, "momentum": 0.9})
    return B.Estimator(net, B.SoftmaxCrossEntropyLoss(), trainer=trainer, **kw)


class Scripted(la.metric.EvalMetric):
    """A metric whose value in epoch i (its i-th reset) is ``values[i]``."""

    name = "scripted"

    def __init__(self, values):
        self.values, self.resets = list(values), 0
        super().__init__()

    def reset(self):
        self.resets = getattr(self, "resets", 0) + 1
        super().reset()

    def update(self, labels, preds):
        self.num_inst += 1

    def value(self):
        return self.values[self.resets - 2]  # (the constructor's reset is the first)


class Recorder(B.EventHandler):
    def __init__(self, stop_at=None):
        self.events, self.stop_at = [], stop_at

    def _log(self, event, est):
        self.events.append(event)
        return (event, est.epoch, est.batch_index) == self.stop_at

    def train_begin(self, est):
        return self._log("train_begin", est)

    def epoch_begin(self, est):
        return self._log("epoch_begin", est)

    def batch_begin(self, est, batch):
        return self._log("batch_begin", est)

    def batch_end(self, est, batch, pred, loss):
        return self._log("batch_end", est)

    def epoch_end(self, est):
        return self._log("epoch_end", est)

    def train_end(self, est):
        return self._log("train_end", est)


def _params(net):
    return {k: p.data().asnumpy().copy() for k, p in net.collect_params().items()}


# -- training and history -------------------------------------------------------------------------
def test_the_loss_falls_and_the_history_has_a_value_per_epoch_and_name():
    est = _estimator(metrics=la.metric.Accuracy())
    history = est.fit(_loader(), val_data=_loader(32, seed=1), epochs=5, progress=False)
    assert sorted(history) == ["accuracy", "loss", "val_accuracy", "val_loss"]
    assert all(len(v) == 5 for v in history.values())
    assert history["loss"][-1] < history["loss"][0] * 0.7
    assert history["accuracy"][-1] > 0.8
    assert est.epoch == 5
    # the last validation values are the model's after training, in predict mode
    assert est.evaluate(_loader(32, seed=1)) == {"loss": history["val_loss"][-1],
                                                 "accuracy": history["val_accuracy"][-1]}


def test_default_trainer_is_gluons_sgd_and_numpy_batches_are_accepted():
    x, y = _data()
    est = B.Estimator(_net(), B.SoftmaxCrossEntropyLoss())
    assert type(est.trainer.optimizer).__name__ == "SGD" and est.trainer.learning_rate == 0.01
    batches = [(x[i:i + 16], y[i:i + 16]) for i in range(0, 64, 16)]
    history = est.fit(batches, epochs=2, progress=False)
    assert len(history["loss"]) == 2 and history["loss"][1] < history["loss"][0]


def test_batches_limits_an_epoch_and_an_exhausted_iterator_is_an_error():
    x, y = _data()
    counter = Recorder()
    est = _estimator()
    est.fit(_loader(), epochs=2, batches=2, callbacks=[counter], progress=False)
    assert counter.events.count("batch_end") == 4
    gen = ((x[i:i + 16], y[i:i + 16]) for i in range(0, 64, 16))
    with pytest.raises(la.ParamValueError, match="no batch in epoch 2"):
        est.fit(gen, epochs=2, progress=False)


def test_validation_every_other_epoch_leaves_nan_between():
    est = _estimator()
    val = B.ValidationHandler(_loader(32, seed=1), est.evaluate, epoch_period=2)
    history = est.fit(_loader(), epochs=4, callbacks=[val], progress=False)
    assert math.isnan(history["val_loss"][0]) and math.isnan(history["val_loss"][2])
    assert not math.isnan(history["val_loss"][1]) and not math.isnan(history["val_loss"][3])


def test_progress_bar_on_request(capsys):
    _estimator().fit(_loader(), epochs=1, progress=True)
    err = capsys.readouterr().err
    assert "epoch 1/1" in err and "loss=" in err and "4/4" in err


# -- events -----------------------------------------------------------------------------------------
def test_events_come_in_gluons_order():
    rec = Recorder()
    _estimator().fit(_loader(32), epochs=2, callbacks=rec, progress=False)
    epoch = ["epoch_begin", "batch_begin", "batch_end", "batch_begin", "batch_end", "epoch_end"]
    assert rec.events == ["train_begin", *epoch, *epoch, "train_end"]


def test_a_true_from_batch_end_stops_after_that_batch_and_ends_the_epoch():
    rec = Recorder(stop_at=("batch_end", 1, 0))
    history = _estimator().fit(_loader(32), epochs=5, callbacks=[rec], progress=False)
    assert rec.events[-4:] == ["batch_begin", "batch_end", "epoch_end", "train_end"]
    assert len(history["loss"]) == 2


def test_handlers_run_by_priority_so_loggers_see_validation_values(tmp_path):
    seen = {}

    class Peek(B.EventHandler):
        priority = 2000

        def epoch_end(self, est):
            seen.update(est.logs)

    _estimator().fit(_loader(), val_data=_loader(32, seed=1), epochs=1, callbacks=[Peek()], progress=False)
    assert set(seen) == {"loss", "val_loss"}


# -- early stopping ---------------------------------------------------------------------------------
@pytest.mark.parametrize("values, kw, epochs_run", [
    ([5, 4, 4.5, 4.2, 3, 2], {"patience": 2}, 4),          # two epochs without improvement: stop
    ([5, 4, 4.5, 3, 3.5, 2], {"patience": 2}, 6),          # each wait is broken by an improvement
    ([5, 4, 4.5, 3, 2, 1], {"patience": 0}, 3),            # Keras: patience 0 stops at the first miss
    ([5, 4.9, 4.8, 4.7, 1, 0], {"min_delta": 0.5}, 2),     # improvements below min_delta do not count
    ([1, 2, 3, 2, 5, 6], {"mode": "max"}, 4),
    ([5, 3, 4, 4, 1, 0], {"baseline": 3.5, "patience": 2}, 4),  # 5 misses the baseline
])
def test_early_stopping_stops_at_the_right_epoch(values, kw, epochs_run):
    stop = B.EarlyStoppingHandler("scripted", **kw)
    history = _estimator(metrics=Scripted(values)).fit(_loader(32), epochs=6, callbacks=[stop], progress=False)
    assert history["scripted"] == values[:epochs_run]
    assert stop.stopped_epoch == (epochs_run - 1 if epochs_run < 6 else None)


def test_early_stopping_on_a_metric_object_and_on_a_missing_name():
    metric = Scripted([3, 4, 5])
    stop = B.EarlyStoppingHandler(metric)
    assert len(_estimator(metrics=metric).fit(_loader(32), epochs=3, callbacks=[stop], progress=False)["loss"]) == 2
    for val in (None, _loader(16, seed=1)):  # a misspelt name, with and without validation
        with pytest.raises(la.ParamValueError, match=r"EarlyStoppingHandler: monitor 'val_los' is not among"):
            _estimator().fit(_loader(32), val_data=val, epochs=2, callbacks=[B.EarlyStoppingHandler("val_los")],
                             progress=False)


# -- checkpoints ------------------------------------------------------------------------------------
def _files(folder):
    return sorted(os.listdir(folder))


def test_checkpoints_keep_the_newest_k(tmp_path):
    ckpt = B.CheckpointHandler(str(tmp_path), max_checkpoints=2)
    _estimator().fit(_loader(32), epochs=4, callbacks=[ckpt], progress=False)
    assert _files(tmp_path) == ["model-checkpoints.json", "model-epoch0003.params", "model-epoch0003.states",
                                "model-epoch0004.params", "model-epoch0004.states"]


def test_checkpoints_keep_the_best_k_plus_the_newest_and_the_best_file(tmp_path):
    values = [5, 2, 4, 1, 3, 6]
    ckpt = B.CheckpointHandler(str(tmp_path), "net", monitor="scripted", save_best=True, max_checkpoints=2,
                               epoch_period=1)
    net = _net()
    est = _estimator(net, metrics=Scripted(values))
    est.fit(_loader(32), epochs=6, callbacks=[ckpt], progress=False)
    kept = [f for f in _files(tmp_path) if f.endswith(".params")]
    assert kept == ["net-best.params", "net-epoch0002.params", "net-epoch0004.params", "net-epoch0006.params"]
    index = json.loads((tmp_path / "net-checkpoints.json").read_text())
    assert index["best"] == {"epoch": 4, "value": 1.0}
    assert [c["epoch"] for c in index["checkpoints"]] == [2, 4, 6]
    # the newest checkpoint holds the parameters of the end of training
    other = _net(seed=5)
    other.load_parameters(str(tmp_path / "net-epoch0006.params"))
    assert all(np.array_equal(a, b) for a, b in zip(_params(net).values(), _params(other).values()))


def test_resume_gives_the_parameters_of_an_uninterrupted_run_bit_for_bit(tmp_path):
    whole = _estimator(_net())
    whole.fit(_loader(), epochs=4, progress=False)
    first = _estimator(_net())
    first.fit(_loader(), epochs=2, callbacks=[B.CheckpointHandler(str(tmp_path))], progress=False)
    rec = Recorder()
    resumed = _estimator(_net(seed=9))  # other start values: all come from the checkpoint
    history = resumed.fit(_loader(), epochs=4, progress=False,
                          callbacks=[B.CheckpointHandler(str(tmp_path), resume_from_checkpoint=True), rec])
    assert len(history["loss"]) == 2 and rec.events.count("epoch_begin") == 2
    assert resumed.trainer._steps == whole.trainer._steps == 16
    for (k, a), b in zip(_params(whole.net).items(), _params(resumed.net).values()):
        assert np.array_equal(a, b), k
    assert _files(tmp_path)[-2:] == ["model-epoch0004.params", "model-epoch0004.states"]


def test_resume_without_checkpoints_starts_from_scratch(tmp_path):
    history = _estimator().fit(_loader(32), epochs=2, progress=False,
                               callbacks=[B.CheckpointHandler(str(tmp_path / "new"), resume_from_checkpoint=True)])
    assert len(history["loss"]) == 2 and (tmp_path / "new" / "model-epoch0002.params").exists()


# -- logs ---------------------------------------------------------------------------------------------
def test_csv_logger_writes_one_row_per_epoch_and_appends_on_resume(tmp_path):
    path = str(tmp_path / "log.csv")
    _estimator(metrics=la.metric.Accuracy()).fit(_loader(32), val_data=_loader(16, seed=1), epochs=3,
                                                 callbacks=[B.CSVLogger(path)], progress=False)
    rows = list(csv.DictReader(open(path)))
    assert [r["epoch"] for r in rows] == ["1", "2", "3"]
    assert list(rows[0]) == ["epoch", "loss", "accuracy", "val_loss", "val_accuracy"]
    _estimator().fit(_loader(32), epochs=1, callbacks=[B.CSVLogger(path, append=True)], progress=False)
    assert [r["epoch"] for r in csv.DictReader(open(path))] == ["1", "2", "3", "1"]
    _estimator().fit(_loader(32), epochs=1, callbacks=[B.CSVLogger(path)], progress=False)
    assert len(list(csv.DictReader(open(path)))) == 1
    assert [f for f in os.listdir(tmp_path) if f.startswith(".")] == []  # no temporaries left


def test_logging_handler_logs_epochs_and_batches(caplog):
    with caplog.at_level(logging.INFO, logger="lazyarray.estimator"):
        _estimator().fit(_loader(), epochs=2, callbacks=[B.LoggingHandler(log_interval=2)], progress=False)
    lines = [r.getMessage() for r in caplog.records]
    assert sum("batch" in m and m.startswith("epoch") for m in lines) == 4
    assert any(m.startswith("epoch 2/2: loss ") for m in lines)


def test_lr_schedule_handler_sets_the_rate_per_epoch():
    rates = []

    class Rate(B.EventHandler):
        def epoch_end(self, est):
            rates.append(est.trainer.learning_rate)

    sched = la.lr_scheduler.FactorScheduler(step=1, factor=0.5, base_lr=0.4)
    _estimator().fit(_loader(32), epochs=3, callbacks=[B.LRScheduleHandler(sched), Rate()], progress=False)
    assert rates == [0.4, 0.2, 0.1]


# -- errors ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("make, error, match", [
    (lambda: B.Estimator("net", B.L2Loss()), la.ParamError, "Estimator: net must be"),
    (lambda: B.Estimator(_net(), 3), la.ParamError, "Estimator: loss must be"),
    (lambda: B.Estimator(_net(), B.L2Loss(), trainer="sgd"), la.ParamError, "Estimator: trainer must be"),
    (lambda: B.Estimator(_net(), B.L2Loss(), metrics=["acc"]), la.ParamError, "Estimator: metrics must be"),
    (lambda: B.Estimator(_net(), B.L2Loss(), device="cpu"), la.ParamError, "Estimator: device must be"),
    (lambda: B.EarlyStoppingHandler("loss", mode="avg"), la.ParamValueError, "EarlyStoppingHandler: mode must"),
    (lambda: B.EarlyStoppingHandler("loss", patience=-1), la.ParamValueError, "EarlyStoppingHandler: patience"),
    (lambda: B.EarlyStoppingHandler(3), la.ParamError, "EarlyStoppingHandler: monitor must be"),
    (lambda: B.CheckpointHandler("d", save_best=True), la.ParamValueError, "save_best=True needs monitor"),
    (lambda: B.CheckpointHandler("d", max_checkpoints=0), la.ParamValueError, "max_checkpoints must be"),
    (lambda: B.CheckpointHandler("d", model_prefix="a/b"), la.ParamValueError, "model_prefix must be"),
    (lambda: B.CheckpointHandler(None), la.ParamError, "model_dir must be"),
    (lambda: B.LoggingHandler(log_interval="batch"), la.ParamError, "LoggingHandler: log_interval"),
    (lambda: B.ValidationHandler(3, print), la.ParamError, "ValidationHandler: val_data"),
    (lambda: B.ValidationHandler([], 3), la.ParamError, "ValidationHandler: eval_fn"),
    (lambda: B.CSVLogger(3), la.ParamError, "CSVLogger: path"),
    (lambda: B.LRScheduleHandler(0.1), la.ParamError, "LRScheduleHandler: schedule"),
    (lambda: la.metric.Loss(name=3), la.ParamError, "Loss: name"),
])
def test_bad_arguments_are_named_errors(make, error, match):
    with pytest.raises(error, match=match):
        make()


@pytest.mark.parametrize("kw, error, match", [
    ({"epochs": -1}, la.ParamValueError, "Estimator.fit: epochs"),
    ({"epochs": "2"}, la.ParamError, "Estimator.fit: epochs"),
    ({"batches": 0}, la.ParamValueError, "Estimator.fit: batches"),
    ({"callbacks": [print]}, la.ParamError, "Estimator.fit: callbacks must be"),
    ({"progress": "yes"}, la.ParamError, "Estimator.fit: progress"),
    ({"train_data": 3}, la.ParamError, "Estimator.fit: train_data must be"),
    ({"train_data": [(1, 2, 3)]}, la.ParamValueError, r"\(data, label\) pair, got tuple of 3"),
])
def test_bad_fit_arguments_are_named_errors(kw, error, match):
    kw = {"train_data": _loader(32), "progress": False, **kw}
    with pytest.raises(error, match=match):
        _estimator().fit(**kw)


def test_an_epoch_schedule_and_a_per_update_schedule_conflict():
    net = _net()
    sched = la.lr_scheduler.FactorScheduler(step=1)
    trainer = B.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1, "lr_scheduler": sched})
    est = B.Estimator(net, B.SoftmaxCrossEntropyLoss(), trainer=trainer)
    with pytest.raises(la.ParamValueError, match="LRScheduleHandler: the trainer has an lr_scheduler"):
        est.fit(_loader(32), callbacks=[B.LRScheduleHandler(sched)], progress=False)
