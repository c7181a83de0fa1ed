"""``Estimator``: Gluon's ``estimator.Estimator`` / Keras's ``fit``: the training loop of a block.

``fit`` runs, for each batch ``(data, label)`` of ``train_data``: forward and loss under
``autograd.record()``, ``backward``, ``trainer.step(batch_size)`` and the metrics' update; at each
epoch's end the validation (``evaluate``, in predict mode) and the handlers (``handlers.py``,
``checkpoint.py``); and returns the history, Keras's: a list of values per name (``"loss"``, the
metrics' names, ``"val_..."``), one per epoch run.

>>> import numpy as np, lazyarray as la
>>> x = np.random.default_rng(0).standard_normal((64, 4)).astype(np.float32)
>>> y = (x.sum(axis=1, keepdims=True) > 0).astype(np.float32)
>>> loader = la.data.DataLoader(la.data.ArrayDataset(x, y), batch_size=16)
>>> net = la.blocks.Dense(1, in_units=4); net.initialize()
>>> est = la.blocks.Estimator(net, la.blocks.L2Loss())
>>> history = est.fit(loader, epochs=3, progress=False)
>>> sorted(history), len(history["loss"]), history["loss"][-1] < history["loss"][0]
(['loss'], 3, True)
"""
from __future__ import annotations

import copy
import importlib
import itertools
import math
import sys

from .. import autograd
from ..args import callable_arg, int_arg
from ..creation import array
from ..device import Device
from ..errors import ParamError, ParamValueError
from ..metric import Loss
from ..ndarray import NDArray
from .block import Block
from .handlers import EventHandler, MetricHandler, ValidationHandler, is_loss_metric, metric_list
from .trainer import Trainer

__all__ = ["Estimator"]

class Estimator:
    """Trains ``net`` with ``loss`` (a loss block, or any ``loss(pred, label)`` returning per-sample
    losses) by ``trainer`` (default: ``Trainer(net.collect_params(), "sgd", {"learning_rate": 0.01})``,
    Gluon's), reporting ``metrics`` (``la.metric`` objects; the mean loss is always reported as
    ``"loss"``). With ``device``, batches are moved there before the forward pass.

    State the handlers read: ``epoch`` (0-based, the epoch running; after ``fit``, the epochs done),
    ``epochs``, ``batch_index``, ``logs`` (this epoch's values by name), ``history``,
    ``handlers`` (those of the running ``fit``, in the order they run), ``stop_training``.
    """

    def __init__(self, net, loss, trainer=None, metrics=None, device=None):
        if not isinstance(net, Block):
            raise ParamError(f"Estimator: net must be a la.blocks.Block, got {type(net).__name__}")
        callable_arg(loss, "Estimator", "loss", "a loss block (e.g. la.blocks.SoftmaxCrossEntropyLoss()) or a "
                     "function loss(pred, label) -> per-sample losses")
        if trainer is None:
            trainer = Trainer(net.collect_params(), "sgd", {"learning_rate": 0.01})
        elif not isinstance(trainer, Trainer):
            raise ParamError(f"Estimator: trainer must be a la.blocks.Trainer (or None: SGD with learning_rate "
                             f"0.01), got {type(trainer).__name__}")
        if device is not None and not isinstance(device, Device):
            raise ParamError(f"Estimator: device must be a la.Device (e.g. la.cpu(0)) or None, got "
                             f"{type(device).__name__}")
        metrics = [] if metrics is None else metric_list(metrics, "Estimator")
        self.net, self.loss, self.trainer, self.device = net, loss, trainer, device
        self.train_metrics = metrics if any(map(is_loss_metric, metrics)) else [Loss(), *metrics]
        self.val_metrics = copy.deepcopy(self.train_metrics)
        self.epoch = self.epochs = self.batch_index = 0
        self.logs: dict = {}
        self.history: dict[str, list] = {}
        self.handlers: list[EventHandler] = []
        self.stop_training = False

    # -- training ----------------------------------------------------------------------------
    def fit(self, train_data, val_data=None, epochs: int = 1, callbacks=None, batches: int | None = None,
            progress: bool | None = None) -> dict[str, list]:
        """Train until ``epochs`` epochs are done (counting those a resumed checkpoint did) or a
        handler stops it; ``batches`` limits the batches per epoch (an endless iterable needs it).
        ``progress``: a tqdm bar per epoch on stderr (default: when stderr is a terminal).
        Returns the history: a list per name, one value per epoch run (NaN where none)."""
        epochs = int_arg(epochs, "Estimator.fit", "epochs", lo=0)
        batches = None if batches is None else int_arg(batches, "Estimator.fit", "batches", lo=1)
        handlers = self._handlers(train_data, val_data, callbacks, progress, batches)
        self.epochs, self.handlers = epochs, handlers
        self.epoch, self.history, self.stop_training, self.logs = 0, {}, False, {}
        self._fire(handlers, "train_begin")
        while self.epoch < self.epochs and not self.stop_training:
            if self._run_epoch(train_data, handlers, batches):
                self._record_history()
            self.epoch += 1
        self._fire(handlers, "train_end")
        return self.history

    def _handlers(self, train_data, val_data, callbacks, progress, batches) -> list[EventHandler]:
        """The handlers of one ``fit``: the metrics', the validation's, the bar's, then ``callbacks``,
        sorted by priority (a stable sort: equal priorities keep this order)."""
        if not hasattr(train_data, "__iter__"):
            raise ParamError(f"Estimator.fit: train_data must be an iterable of (data, label) batches (e.g. a "
                             f"la.data.DataLoader), got {type(train_data).__name__}")
        if progress is not None and not isinstance(progress, bool):
            raise ParamError(f"Estimator.fit: progress must be True, False or None, got {type(progress).__name__}")
        callbacks = [] if callbacks is None else callbacks if isinstance(callbacks, (list, tuple)) else [callbacks]
        for h in callbacks:
            if not isinstance(h, EventHandler):
                raise ParamError(f"Estimator.fit: callbacks must be la.blocks.EventHandler objects (e.g. "
                                 f"la.blocks.EarlyStoppingHandler('val_loss')), got {type(h).__name__}")
        handlers: list[EventHandler] = [MetricHandler(self.train_metrics)]
        if val_data is not None:
            handlers.append(ValidationHandler(val_data, self.evaluate))
        if progress or (progress is None and sys.stderr.isatty()):
            handlers.append(ProgressBar(train_data, batches))
        return sorted([*handlers, *callbacks], key=lambda h: h.priority)

    def _run_epoch(self, train_data, handlers, batches) -> bool:
        """One epoch; False when a handler stopped the training before it began."""
        self.logs = {}
        self._fire(handlers, "epoch_begin")
        if self.stop_training:
            return False
        seen = 0
        for self.batch_index, batch in enumerate(_limited(train_data, batches)):
            batch = self._as_batch(batch, "train_data")
            self._fire(handlers, "batch_begin", batch)
            pred, loss = self._train_step(*batch)
            self._fire(handlers, "batch_end", batch, pred, loss)
            seen += 1
            if self.stop_training:
                break
        if not seen:
            raise ParamValueError(f"Estimator.fit: train_data gave no batch in epoch {self.epoch + 1} (an "
                                  "iterator used up by an earlier epoch? pass a DataLoader or a list, or a "
                                  "generator with batches=...)")
        self._fire(handlers, "epoch_end")
        return True

    def _train_step(self, data, label):
        with autograd.record():
            pred = self.net(data)
            loss = self.loss(pred, label)
        loss.backward()
        self.trainer.step(data.shape[0] if data.ndim else 1)
        return pred, loss

    def _fire(self, handlers, event: str, *args) -> None:
        """Every handler's ``event`` hook, in order; any True asks to stop (the others still run)."""
        for h in handlers:
            if getattr(h, event)(self, *args):
                self.stop_training = True

    def _record_history(self) -> None:
        done = len(next(iter(self.history.values()), []))
        for name in self.logs:
            self.history.setdefault(name, [math.nan] * done)
        for name, values in self.history.items():
            values.append(float(self.logs.get(name, math.nan)))

    # -- evaluation --------------------------------------------------------------------------
    def evaluate(self, val_data, batches: int | None = None) -> dict[str, float]:
        """The metrics (and mean loss) over ``val_data``, in predict mode (dropout off, nothing
        recorded): a dict by name, e.g. ``{"loss": 0.31, "accuracy": 0.9}``."""
        if not hasattr(val_data, "__iter__"):
            raise ParamError(f"Estimator.evaluate: val_data must be an iterable of (data, label) batches, got "
                             f"{type(val_data).__name__}")
        batches = None if batches is None else int_arg(batches, "Estimator.evaluate", "batches", lo=1)
        for m in self.val_metrics:
            m.reset()
        with autograd.predict_mode():
            for batch in _limited(val_data, batches):
                data, label = self._as_batch(batch, "val_data")
                pred = self.net(data)
                loss = self.loss(pred, label)
                for m in self.val_metrics:
                    m.update(label, loss if is_loss_metric(m) else pred)
        return dict(m.get() for m in self.val_metrics)

    def running_values(self) -> dict[str, float]:
        """The training metrics over this epoch's batches so far."""
        return dict(m.get() for m in self.train_metrics)

    def _as_batch(self, batch, what: str) -> tuple[NDArray, NDArray]:
        if not isinstance(batch, (tuple, list)) or len(batch) != 2:
            raise ParamValueError(f"Estimator: each batch of {what} must be a (data, label) pair, got "
                                  f"{type(batch).__name__}" + (f" of {len(batch)}" if isinstance(batch, (tuple, list))
                                                               else ""))
        return tuple(self._placed(x) for x in batch)

    def _placed(self, x) -> NDArray:
        if not isinstance(x, NDArray):
            return array(x, device=self.device)
        return x if self.device is None else x.to(self.device)


def _limited(data, batches: int | None):
    return iter(data) if batches is None else itertools.islice(data, batches)


class ProgressBar(EventHandler):
    """A tqdm bar per epoch on stderr, showing the running loss and metrics (and, at the epoch's end,
    every value of the epoch). tqdm is imported at the first bar, not with the package."""

    priority = 1500

    def __init__(self, train_data, batches: int | None = None):
        total = len(train_data) if hasattr(train_data, "__len__") else None
        self.total = batches if total is None else total if batches is None else min(total, batches)
        self.bar = None

    def epoch_begin(self, est):
        tqdm = importlib.import_module("tqdm").tqdm  # (import cost: only when a bar is drawn)
        self.bar = tqdm(total=self.total, desc=f"epoch {est.epoch + 1}/{est.epochs}", unit="batch", leave=True,
                        file=sys.stderr, mininterval=0.25)

    def batch_end(self, est, batch, pred, loss):
        self.bar.update(1)
        self.bar.set_postfix(_shown(est.running_values()), refresh=False)

    def epoch_end(self, est):
        self.bar.set_postfix(_shown(est.logs))
        self.bar.close()
        self.bar = None

    def train_end(self, est):
        if self.bar is not None:
            self.bar.close()
            self.bar = None


def _shown(values: dict) -> dict[str, str]:
    return {k: f"{v:.4f}" if isinstance(v, float) else str(v) for k, v in values.items()}
