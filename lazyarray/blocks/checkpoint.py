"""``CheckpointHandler``: parameters and trainer states saved during ``Estimator.fit``, and resumed.

Every ``epoch_period`` epochs it writes ``<prefix>-epoch<NNNN>.params`` (``net.save_parameters``)
and ``<prefix>-epoch<NNNN>.states`` (``trainer.save_states``), ``NNNN`` the number of epochs done,
then the index ``<prefix>-checkpoints.json`` (the checkpoints kept, with their monitored values),
each file atomically: the index names only files already complete, and files are removed only
after the index stopped naming them, so a crash at any point leaves a usable newest checkpoint.

``resume_from_checkpoint=True`` loads the newest checkpoint of the folder at ``train_begin``
(parameters, trainer states, and the epoch: ``fit(epochs=n)`` then runs the epochs left up to
``n``), so a run stopped after epoch k and resumed gives the parameters of a run that never stopped,
bit for bit, when the batches come in the same order (a ``DataLoader`` made again starts its
shuffle sequence again: resume with unshuffled data or a sampler that does not depend on the epoch)
and the model draws no random numbers (dropout).
"""
from __future__ import annotations

import json
import os
import re

from ..args import choice_arg, int_arg
from ..errors import GraphFormatError, ParamError, ParamValueError
from ..fileio import write_atomic
from .handlers import EventHandler, Monitor


class CheckpointHandler(EventHandler):
    """Saves a checkpoint every ``epoch_period`` epochs into ``model_dir`` (made if missing).

    Without ``monitor`` the ``max_checkpoints`` newest are kept; with one, the ``max_checkpoints``
    best by its value (``mode="min"``: lowest), plus the newest (to resume from). ``save_best=True``
    (needs ``monitor``) also writes ``<prefix>-best.params`` / ``.states`` whenever the value improves.

    >>> import tempfile, lazyarray as la
    >>> ckpt = la.blocks.CheckpointHandler(tempfile.mkdtemp(), monitor="loss", max_checkpoints=2)
    """

    def __init__(self, model_dir: str, model_prefix: str = "model", monitor=None, mode: str = "min",
                 save_best: bool = False, max_checkpoints: int = 5, epoch_period: int = 1,
                 resume_from_checkpoint: bool = False):
        where = "CheckpointHandler"
        if not isinstance(model_dir, (str, os.PathLike)):
            raise ParamError(f"{where}: model_dir must be a folder name, got {type(model_dir).__name__}")
        if not isinstance(model_prefix, str) or not re.fullmatch(r"[\w.-]+", model_prefix):
            raise ParamValueError(f"{where}: model_prefix must be a file name prefix of letters, digits, '_', "
                                  f"'.' and '-', got {model_prefix!r}"[:300])
        for name, flag in (("save_best", save_best), ("resume_from_checkpoint", resume_from_checkpoint)):
            if not isinstance(flag, bool):
                raise ParamError(f"{where}: {name} must be True or False, got {type(flag).__name__}")
        choice_arg(mode, where, "mode", ("min", "max"))
        self._monitor = None if monitor is None else Monitor(monitor, mode, where)
        if save_best and monitor is None:
            raise ParamValueError(f"{where}: save_best=True needs monitor (the value that decides which "
                                  "checkpoint is best, e.g. monitor='val_loss')")
        self.model_dir, self.model_prefix = os.fspath(model_dir), model_prefix
        self.save_best, self.resume_from_checkpoint = save_best, resume_from_checkpoint
        self.max_checkpoints = int_arg(max_checkpoints, where, "max_checkpoints", lo=1)
        self.epoch_period = int_arg(epoch_period, where, "epoch_period", lo=1)
        self.kept: list[dict] = []  # {"epoch": n, "value": v or None}, oldest first
        self.best: dict | None = None

    # -- file names --------------------------------------------------------------------------
    def path(self, epoch: int | str, ext: str) -> str:
        """``<model_dir>/<prefix>-epoch<NNNN>.<ext>`` (``epoch="best"``: ``<prefix>-best.<ext>``)."""
        tag = "best" if epoch == "best" else f"epoch{epoch:04d}"
        return os.path.join(self.model_dir, f"{self.model_prefix}-{tag}.{ext}")

    @property
    def index_path(self) -> str:
        return os.path.join(self.model_dir, f"{self.model_prefix}-checkpoints.json")

    # -- events ------------------------------------------------------------------------------
    def train_begin(self, est):
        os.makedirs(self.model_dir, exist_ok=True)
        self.kept, self.best = [], None
        if not self.resume_from_checkpoint:
            return
        self.kept, self.best = self._read_index()
        if self.kept:
            newest = self.kept[-1]["epoch"]
            est.net.load_parameters(self.path(newest, "params"))
            est.trainer.load_states(self.path(newest, "states"))
            est.epoch = newest

    def epoch_end(self, est):
        done = est.epoch + 1
        if done % self.epoch_period:
            return
        value = None if self._monitor is None else self._monitor.value(est)
        self._save(est, done)
        self.kept = [c for c in self.kept if c["epoch"] != done] + [{"epoch": done, "value": value}]
        if self.save_best and value is not None and \
                (self.best is None or self._monitor.better(value, self.best["value"])):
            self._save(est, "best")
            self.best = {"epoch": done, "value": value}
        dropped = self._retain()
        self._write_index()
        for c in dropped:
            for ext in ("params", "states"):
                if os.path.exists(self.path(c["epoch"], ext)):
                    os.remove(self.path(c["epoch"], ext))

    # -- helpers -----------------------------------------------------------------------------
    def _save(self, est, epoch) -> None:
        est.net.save_parameters(self.path(epoch, "params"))
        est.trainer.save_states(self.path(epoch, "states"))

    def _retain(self) -> list[dict]:
        """Drop from ``self.kept`` what is over ``max_checkpoints``; returns the dropped entries."""
        k = self.max_checkpoints
        if self._monitor is None:
            keep = self.kept[-k:]
        else:
            newest = self.kept[-1]
            worst = self._monitor.worst

            def rank(c):  # best first; no value ranks last; among equals the newer first
                v = worst if c["value"] is None else c["value"]
                return (v if self._monitor.mode == "min" else -v, -c["epoch"])

            best = sorted(self.kept, key=rank)[:k]
            keep = [c for c in self.kept if c in best or c is newest]
        dropped = [c for c in self.kept if c not in keep]
        self.kept = keep
        return dropped

    def _write_index(self) -> None:
        record = {"version": 1, "prefix": self.model_prefix, "checkpoints": self.kept, "best": self.best}
        write_atomic(self.index_path, json.dumps(record, indent=1).encode("utf-8"))

    def _read_index(self) -> tuple[list[dict], dict | None]:
        """The kept checkpoints (whose two files exist) and the best, from the index; without one,
        the checkpoint files found in the folder."""
        if os.path.exists(self.index_path):
            with open(self.index_path, encoding="utf-8") as f:
                try:
                    record = json.load(f)
                    kept, best = list(record["checkpoints"]), record.get("best")
                    kept = [{"epoch": int(c["epoch"]), "value": c.get("value")} for c in kept]
                except (ValueError, KeyError, TypeError) as exc:
                    raise GraphFormatError(f"CheckpointHandler: {self.index_path} is not a checkpoint index "
                                           f"({type(exc).__name__}: {exc}); remove it to resume from the "
                                           "checkpoint files alone") from exc
        else:
            pattern = re.compile(re.escape(self.model_prefix) + r"-epoch(\d+)\.params")
            found = sorted(int(m.group(1)) for m in map(pattern.fullmatch, os.listdir(self.model_dir)) if m)
            kept, best = [{"epoch": e, "value": None} for e in found], None
        kept = [c for c in sorted(kept, key=lambda c: c["epoch"])
                if os.path.exists(self.path(c["epoch"], "params")) and os.path.exists(self.path(c["epoch"], "states"))]
        return kept, best
