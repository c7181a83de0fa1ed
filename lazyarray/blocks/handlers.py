"""Event handlers of ``Estimator.fit`` (Gluon's ``estimator.event_handler``, Keras's callbacks).

A handler overrides some of the six hooks ``train_begin(est)``, ``epoch_begin(est)``,
``batch_begin(est, batch)``, ``batch_end(est, batch, pred, loss)``, ``epoch_end(est)`` and
``train_end(est)``; a hook that returns True stops the training (after the current batch, or at the
end of the current epoch). ``est`` is the ``Estimator``: ``est.epoch`` (0-based, the epoch running),
``est.logs`` (this epoch's values by name: ``"loss"``, ``"accuracy"``, ``"val_loss"``, ...),
``est.history``, ``est.net``, ``est.trainer``.

Handlers run in the order of their ``priority`` (lowest first; equal priorities keep the order
given): metrics (-2000), validation (-1000), user handlers, early stopping and checkpoints (0),
then the writers of logs (1000), which see every value of the epoch.

``CheckpointHandler`` lives in ``checkpoint.py``.
"""
from __future__ import annotations

import csv
import io
import logging
import math
import os
import time

from ..args import callable_arg, choice_arg, int_arg, number_arg
from ..errors import ParamError, ParamValueError
from ..fileio import write_atomic
from ..metric import EvalMetric, Loss

__all__ = ["CSVLogger", "EarlyStoppingHandler", "EventHandler", "LoggingHandler", "LRScheduleHandler",
           "MetricHandler", "ValidationHandler"]


class EventHandler:
    """Base class of the handlers: every hook does nothing; override the ones you need.

    >>> import lazyarray as la
    >>> class StopAfterTwo(la.blocks.EventHandler):
    ...     def epoch_end(self, est):
    ...         return est.epoch + 1 >= 2
    """

    priority = 0

    def train_begin(self, est) -> bool | None:
        return None

    def epoch_begin(self, est) -> bool | None:
        return None

    def batch_begin(self, est, batch) -> bool | None:
        return None

    def batch_end(self, est, batch, pred, loss) -> bool | None:
        return None

    def epoch_end(self, est) -> bool | None:
        return None

    def train_end(self, est) -> bool | None:
        return None


class MetricHandler(EventHandler):
    """Resets ``metrics`` at each epoch's start, updates them after each batch (``la.metric.Loss``
    objects with the batch's loss, the others with ``(label, pred)``) and writes their values into
    ``est.logs`` at its end. ``Estimator.fit`` adds one for its own metrics."""

    priority = -2000

    def __init__(self, metrics):
        self.metrics = metric_list(metrics, "MetricHandler")

    def epoch_begin(self, est):
        for m in self.metrics:
            m.reset()

    def batch_end(self, est, batch, pred, loss):
        label = batch[1]
        for m in self.metrics:
            m.update(label, loss if is_loss_metric(m) else pred)

    def epoch_end(self, est):
        for m in self.metrics:
            name, value = m.get()
            est.logs[name] = value


class ValidationHandler(EventHandler):
    """Every ``epoch_period`` epochs, ``eval_fn(val_data)`` (a dict of values by name, e.g.
    ``Estimator.evaluate``) into ``est.logs`` as ``"val_<name>"``. ``fit(val_data=...)`` adds one."""

    priority = -1000

    def __init__(self, val_data, eval_fn, epoch_period: int = 1):
        if not hasattr(val_data, "__iter__"):
            raise ParamError(f"ValidationHandler: val_data must be an iterable of (data, label) batches "
                             f"(e.g. a la.data.DataLoader), got {type(val_data).__name__}")
        self.val_data = val_data
        self.eval_fn = callable_arg(eval_fn, "ValidationHandler", "eval_fn", "a function of val_data "
                                    "returning a dict of values (e.g. estimator.evaluate)")
        self.epoch_period = int_arg(epoch_period, "ValidationHandler", "epoch_period", lo=1)

    def epoch_end(self, est):
        if (est.epoch + 1) % self.epoch_period:
            return
        values = self.eval_fn(self.val_data)
        if not isinstance(values, dict):
            raise ParamValueError(f"ValidationHandler: eval_fn must return a dict of values by name, got "
                                  f"{type(values).__name__}")
        for name, value in values.items():
            est.logs[f"val_{name}"] = value


class Monitor:
    """The value a handler watches at the end of each epoch: a name in ``est.logs`` (``"val_loss"``)
    or an ``EvalMetric`` (its ``get()`` value), better when lower (``mode="min"``) or higher."""

    def __init__(self, monitor, mode: str, where: str):
        if not isinstance(monitor, (str, EvalMetric)):
            raise ParamError(f"{where}: monitor must be a name among the epoch's values (e.g. 'val_loss', "
                             f"'accuracy') or a la.metric object, got {type(monitor).__name__}")
        self.monitor = monitor
        self.mode = choice_arg(mode, where, "mode", ("min", "max"))
        self.where = where

    @property
    def name(self) -> str:
        return self.monitor if isinstance(self.monitor, str) else self.monitor.get()[0]

    def value(self, est) -> float | None:
        """This epoch's value; None when it is a validation value and no validation ran this epoch."""
        if isinstance(self.monitor, EvalMetric):
            return float(self.monitor.get()[1])
        if self.monitor in est.logs:
            return float(est.logs[self.monitor])
        validates = any(isinstance(h, ValidationHandler) for h in est.handlers)
        if validates and self.monitor.startswith("val_") and not any(k.startswith("val_") for k in est.logs):
            return None  # (validated every few epochs only)
        raise ParamValueError(f"{self.where}: monitor {self.monitor!r} is not among this epoch's values "
                              f"{sorted(est.logs)}; pass val_data to fit for 'val_...' values, or monitor "
                              "one of these")

    def better(self, value: float, than: float, min_delta: float = 0.0) -> bool:
        if math.isnan(value):
            return False
        return value < than - min_delta if self.mode == "min" else value > than + min_delta

    @property
    def worst(self) -> float:
        return math.inf if self.mode == "min" else -math.inf


class EarlyStoppingHandler(EventHandler):
    """Stops the training when ``monitor`` has not improved by more than ``min_delta`` for
    ``patience`` epochs in a row (Keras's rule: ``patience=0`` or ``1`` stops at the first epoch
    that does not improve). With ``baseline``, an epoch improves only when it also beats it.
    ``stopped_epoch`` is the (0-based) epoch it stopped at, or None."""

    def __init__(self, monitor, min_delta: float = 0, patience: int = 0, mode: str = "min",
                 baseline: float | None = None):
        self._monitor = Monitor(monitor, mode, "EarlyStoppingHandler")
        self.min_delta = number_arg(min_delta, "EarlyStoppingHandler", "min_delta", lo=0)
        self.patience = int_arg(patience, "EarlyStoppingHandler", "patience", lo=0)
        self.baseline = None if baseline is None else number_arg(baseline, "EarlyStoppingHandler", "baseline")
        self.train_begin(None)

    def train_begin(self, est):
        self.best = self._monitor.worst if self.baseline is None else self.baseline
        self.wait = 0
        self.stopped_epoch = None

    def epoch_end(self, est):
        value = self._monitor.value(est)
        if value is None:
            return None
        if self._monitor.better(value, self.best, self.min_delta):
            self.best, self.wait = value, 0
            return None
        self.wait += 1
        if self.wait >= max(self.patience, 1):
            self.stopped_epoch = est.epoch
            return True
        return None


class LRScheduleHandler(EventHandler):
    """Sets the trainer's rate at each epoch's start to ``schedule(epoch)``, epochs counted from 1
    (a ``la.lr_scheduler`` schedule read per epoch rather than per update). A trainer made with its
    own ``lr_scheduler`` sets the rate of every update itself: use one or the other."""

    def __init__(self, schedule):
        self.schedule = callable_arg(schedule, "LRScheduleHandler", "schedule",
                                     "a schedule callable as schedule(epoch) -> rate (a la.lr_scheduler one)")

    def train_begin(self, est):
        if est.trainer.optimizer.lr_scheduler is not None:
            raise ParamValueError("LRScheduleHandler: the trainer has an lr_scheduler of its own, which sets "
                                  "the rate of every update; drop one of the two")

    def epoch_begin(self, est):
        est.trainer.set_learning_rate(float(self.schedule(est.epoch + 1)))


class LoggingHandler(EventHandler):
    """Logs the training through ``logging`` (logger ``lazyarray.estimator`` unless given, level
    INFO): one line per epoch (``log_interval="epoch"``), or also one every ``log_interval``
    batches."""

    priority = 1000

    def __init__(self, log_interval="epoch", logger: logging.Logger | None = None):
        if log_interval != "epoch":
            log_interval = int_arg(log_interval, "LoggingHandler", "log_interval ('epoch' or a number of "
                                   "batches)", lo=1)
        if logger is not None and not isinstance(logger, logging.Logger):
            raise ParamError(f"LoggingHandler: logger must be a logging.Logger, got {type(logger).__name__}")
        self.log_interval = log_interval
        self.logger = logger or logging.getLogger("lazyarray.estimator")

    def train_begin(self, est):
        self._start = time.perf_counter()
        self.logger.info("training %s for %d epoch(s) from epoch %d", type(est.net).__name__, est.epochs,
                         est.epoch + 1)

    def epoch_begin(self, est):
        self._epoch_start = time.perf_counter()

    def batch_end(self, est, batch, pred, loss):
        if self.log_interval != "epoch" and (est.batch_index + 1) % self.log_interval == 0:
            self.logger.info("epoch %d batch %d: %s", est.epoch + 1, est.batch_index + 1,
                             format_values(est.running_values()))

    def epoch_end(self, est):
        self.logger.info("epoch %d/%d: %s (%.2f s)", est.epoch + 1, est.epochs, format_values(est.logs),
                         time.perf_counter() - self._epoch_start)

    def train_end(self, est):
        self.logger.info("training done after epoch %d (%.2f s)", est.epoch, time.perf_counter() - self._start)


class CSVLogger(EventHandler):
    """One row per epoch in the CSV file ``path``: ``epoch`` (from 1), then every value of
    ``est.logs``. The file is rewritten atomically after each epoch (a reader never sees half a
    row); with ``append=True`` the rows already there are kept (a resumed run continues them)."""

    priority = 1000

    def __init__(self, path: str, append: bool = False):
        if not isinstance(path, (str, os.PathLike)):
            raise ParamError(f"CSVLogger: path must be a file name, got {type(path).__name__}")
        if not isinstance(append, bool):
            raise ParamError(f"CSVLogger: append must be True or False, got {type(append).__name__}")
        self.path, self.append = os.fspath(path), append
        self.rows: list[dict] = []

    def train_begin(self, est):
        self.rows = []
        if self.append and os.path.exists(self.path):
            with open(self.path, newline="", encoding="utf-8") as f:
                self.rows = list(csv.DictReader(f))

    def epoch_end(self, est):
        self.rows.append({"epoch": est.epoch + 1, **est.logs})
        fields: dict[str, None] = {}
        for row in self.rows:
            fields.update(dict.fromkeys(row))
        out = io.StringIO()
        writer = csv.DictWriter(out, fieldnames=list(fields), lineterminator="\n")
        writer.writeheader()
        writer.writerows(self.rows)
        write_atomic(self.path, out.getvalue().encode("utf-8"))


def metric_list(metrics, where: str) -> list[EvalMetric]:
    """``metrics`` (one ``la.metric`` object or a list of them) as a list, checked."""
    items = list(metrics) if isinstance(metrics, (list, tuple)) else [metrics]
    for m in items:
        if not isinstance(m, EvalMetric):
            raise ParamError(f"{where}: metrics must be la.metric objects (e.g. la.metric.Accuracy()) or a "
                             f"list of them, got {type(m).__name__}")
    return items


def is_loss_metric(m: EvalMetric) -> bool:
    """Whether ``m`` averages losses (updated with the loss rather than the prediction)."""
    return isinstance(m, Loss)


def format_values(values: dict) -> str:
    return ", ".join(f"{k} {v:.4g}" if isinstance(v, float) else f"{k} {v}" for k, v in values.items())
