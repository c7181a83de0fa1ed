"""Sharded checkpoints of ``DataParallel``: each worker writes its shard; loading reassembles them on any N.

A checkpoint is a folder:

* ``shard-<id>-<j>-of-<n>.safetensors``, one per worker ``j`` of ``n``, written by that worker from
  its replica (``save_shard``, a task pinned to it): the parameters of its part (``param/<name>``)
  and their optimizer states (``state/<i>.<k>``: part ``k`` of the state of the trainer's
  parameter ``i``, as ``Trainer.save_states`` keys them), with a record naming the checkpoint
  ``id``, the shard and the trainer's record (optimizer, update count, settings, shapes, the
  kinds of the part's states); with loss scaling (``la.amp``) also the scaler's state (every
  shard) and the float32 master weights of the part's parameters (``amp/<i>``). The model's
  parameters and the loss's own (``loss_fn.<name>``: a ``Block`` loss with parameters) are saved
  alike (``named_params``). The parameters are parted by bytes (``partition``: the largest
  first, each to the lightest shard), so every worker writes about ``1/n`` of the model;
* ``checkpoint.json``, written by the client once every shard is written: the id, the step, and
  per shard its file name, its SHA-256 and its parameters.

Atomic: every file is written to a temporary and renamed (``fileio.write_atomic``), the shards
carry the new id in their names, and the manifest, renamed last, is what switches the folder to
the new checkpoint; only then are the shards of older ones removed. A save that dies half way
leaves the previous checkpoint whole.

Loading (``read``) never reads outside the folder and never runs code: the manifest is JSON
parsed by ``graph.serialize.parse_json`` with every field checked, a shard's name must be the one
its id and index give (no path, no link), its bytes must have the SHA-256 the manifest says, and
``param_file.load_arrays`` checks the safetensors file itself. The states are reassembled into one
``Trainer.save_states`` record and loaded by ``Trainer.load_states`` (which checks them against
the trainer). Any number of workers, or none, can load what any number saved.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile

import numpy as np

from ..amp import LossScaler
from ..blocks.param_file import load_arrays, write_arrays
from ..creation import array
from ..errors import GraphFormatError, ParamError, ParamValueError
from ..fileio import read_regular, write_atomic
from ..graph.serialize import parse_json
from . import replica as R

MANIFEST = "checkpoint.json"
FORMAT = "lazyarray.data-parallel-checkpoint"
_MANIFEST_LIMIT = 64 << 20  # bytes: a manifest lists names and digests only
_ID = re.compile(r"[0-9a-f]{32}")
LOSS_PREFIX = "loss_fn."  # the names of the loss's own parameters (``named_params``)


def shard_name(ckpt: str, j: int, n: int) -> str:
    return f"shard-{ckpt}-{j:05d}-of-{n:05d}.safetensors"


def partition(sizes: dict[str, int], n: int) -> list[list[str]]:
    """The names of ``sizes`` (name -> bytes) parted into ``n`` lists of about equal bytes: the largest
    first, each to the lightest list so far (ties: the first); each list in the order of ``sizes``."""
    load, part = [0] * n, {}
    for name in sorted(sizes, key=lambda k: -sizes[k]):  # (stable: equal sizes keep their order)
        j = load.index(min(load))
        part[name], load[j] = j, load[j] + sizes[name]
    return [[k for k in sizes if part[k] == j] for j in range(n)]


# -- on a worker ---------------------------------------------------------------------------------------
def save_shard(key: str, folder: str, ckpt: str, j: int, n: int, names: list[str]) -> tuple[str, str, int]:
    """Write shard ``j`` of ``n`` of the replica ``key``'s checkpoint ``ckpt`` (parameters ``names`` and
    their optimizer states) into ``folder``; ``(file name, its SHA-256, the replica's step)``."""
    r = R.REPLICAS.get(key)
    return write_shard(folder, ckpt, j, n, names, r.params, r.trained, r.trainer, r.steps)


def write_shard(folder: str, ckpt: str, j: int, n: int, names: list[str], params: dict, trained: list[str],
                trainer, steps: int) -> tuple[str, str, int]:
    """``save_shard`` of ``params`` (structural name -> ``Parameter``) and ``trainer`` (over the
    parameters ``trained``, by name) at ``steps`` steps."""
    states, record = _states_of(trainer)
    mine = {i for i, k in enumerate(trained) if k in set(names)}
    arrays = {f"param/{k}": np.ascontiguousarray(params[k].data().asnumpy()) for k in names}
    arrays.update({f"state/{k}": v for k, v in states.items() if int(k.split(".")[0]) in mine})
    record = dict(record, states={i: v for i, v in record["states"].items() if int(i) in mine})
    meta = {"version": 1, "checkpoint": {"id": ckpt, "shard": j, "shards": n, "step": steps}, "trainer": record}
    if trainer.amp is not None:  # the loss scaler (every shard), the float32 masters of this shard's parameters
        scaler, target, low, masters = trainer.amp.portable(trainer.params)
        arrays.update({f"amp/{i}": np.ascontiguousarray(v, np.float32) for i, v in (masters or {}).items()
                       if i in mine})
        meta["amp"] = {"scaler": scaler, "target": target, "low": low, "masters": masters is not None}
    os.makedirs(folder, exist_ok=True)
    name = shard_name(ckpt, j, n)
    write_arrays(os.path.join(folder, name), arrays, meta)
    data = read_regular(os.path.join(folder, name), "checkpoint shard")
    return name, hashlib.sha256(data).hexdigest(), steps


def _states_of(trainer) -> tuple[dict, dict]:
    """The trainer's ``save_states`` arrays and record."""
    fd, path = tempfile.mkstemp(suffix=".safetensors")
    os.close(fd)
    try:
        trainer.save_states(path)
        arrays, meta = load_arrays(path)
    finally:
        os.unlink(path)
    return arrays, meta["trainer"]


# -- on the client ---------------------------------------------------------------------------------------
def write_manifest(folder: str, ckpt: str, step: int, shards: list[tuple[str, str, list[str]]]) -> None:
    """Switch ``folder`` to the checkpoint ``ckpt`` (its shards written: ``(file, sha256, names)``), then
    remove the shards of any other checkpoint there."""
    manifest = {"format": FORMAT, "version": 1, "id": ckpt, "step": step,
                "shards": [{"file": f, "sha256": h, "params": names} for f, h, names in shards]}
    write_atomic(os.path.join(folder, MANIFEST), json.dumps(manifest, indent=1).encode())
    keep = {f for f, _, _ in shards}
    for f in os.listdir(folder):
        if re.fullmatch(r"shard-[0-9a-f]{32}-\d{5}-of-\d{5}\.safetensors", f) and f not in keep:
            os.unlink(os.path.join(folder, f))


def read(folder: str) -> tuple[int, dict[str, np.ndarray], dict[str, np.ndarray], dict, tuple | None]:
    """``(step, parameters by name, optimizer state arrays, trainer record, loss scaling)`` of the
    checkpoint in ``folder``; the loss scaling is ``TrainerAmp.portable``'s state (None: saved without)."""
    if not isinstance(folder, (str, os.PathLike)):
        raise ParamValueError(f"load_checkpoint: folder must be the path of a checkpoint folder (a str or "
                              f"os.PathLike), got {type(folder).__name__}")
    folder = os.fspath(folder)
    where = f"checkpoint {folder!r}"
    man = _manifest(folder, where)
    params, states, kinds, record, amp, masters = {}, {}, {}, None, None, {}
    for j, entry in enumerate(man["shards"]):
        path = os.path.join(folder, entry["file"])
        if os.path.islink(path):
            raise GraphFormatError(f"{where}: shard {entry['file']!r} is a symbolic link; a checkpoint's shards "
                                   "are files in its folder")
        if hashlib.sha256(read_regular(path, "checkpoint shard")).hexdigest() != entry["sha256"]:
            raise GraphFormatError(f"{where}: shard {entry['file']!r} does not have the SHA-256 the manifest says "
                                   "(changed or damaged since it was written); load another checkpoint")
        arrays, meta = load_arrays(path)
        info, rec = meta.get("checkpoint"), meta.get("trainer")
        want = {"id": man["id"], "shard": j, "shards": len(man["shards"]), "step": man["step"]}
        if info != want or not isinstance(rec, dict) or not isinstance(rec.get("states"), dict):
            raise GraphFormatError(f"{where}: shard {entry['file']!r} says {info!r}, the manifest {want!r}")
        got = sorted(k[6:] for k in arrays if k.startswith("param/"))
        if got != sorted(entry["params"]) or set(params) & set(got):
            raise GraphFormatError(f"{where}: shard {entry['file']!r} holds parameters {got}, the manifest says "
                                   f"{entry['params']} (each parameter in one shard)")
        params.update({k[6:]: v for k, v in arrays.items() if k.startswith("param/")})
        states.update({k[6:]: v for k, v in arrays.items() if k.startswith("state/")})
        masters.update(_masters_of(arrays, where, entry["file"]))
        if j > 0 and meta.get("amp") != amp:
            raise GraphFormatError(f"{where}: shard {entry['file']!r} has another loss scaling record than shard 0")
        amp = meta.get("amp")
        kinds.update(rec["states"])
        rest = {k: v for k, v in rec.items() if k != "states"}
        if record is not None and rest != record:
            raise GraphFormatError(f"{where}: shard {entry['file']!r} has another trainer record than shard 0")
        record = rest
    return man["step"], params, states, dict(record, states=kinds), _amp_state(amp, masters, where)


def _masters_of(arrays: dict, where: str, file: str) -> dict[int, np.ndarray]:
    out = {}
    for k, v in arrays.items():
        if k.startswith("amp/"):
            if not re.fullmatch(r"amp/(0|[1-9]\d{0,8})", k) or v.dtype != np.float32:
                raise GraphFormatError(f"{where}: shard {file!r} holds {k!r} ({v.dtype}); a loss scaling master "
                                       "weight is amp/<index of the trainer's parameter>, float32")
            out[int(k[4:])] = v
    return out


def _amp_state(amp, masters: dict, where: str) -> tuple | None:
    """The loss scaling record of the shards (checked) as ``TrainerAmp.portable``'s state."""
    if amp is None:
        if masters:
            raise GraphFormatError(f"{where}: master weights (amp/...) without a loss scaling record")
        return None
    ok = (isinstance(amp, dict) and set(amp) == {"scaler", "target", "low", "masters"}
          and isinstance(amp["low"], list) and all(isinstance(i, int) and not isinstance(i, bool) and i >= 0
                                                   for i in amp["low"])
          and isinstance(amp["masters"], bool) and (amp["masters"] or not masters))
    if not ok:
        raise GraphFormatError(f"{where}: the loss scaling record must be {{scaler, target, low: indices, masters: "
                               f"a bool}} (and master weights only with masters), got {amp!r}"[:400])
    try:
        LossScaler().load_state_dict(amp["scaler"], f"{where}: loss scaler")
    except (ParamError, ParamValueError) as exc:
        raise GraphFormatError(str(exc)) from None
    return amp["scaler"], amp["target"], amp["low"], masters if amp["masters"] else None


def _manifest(folder: str, where: str) -> dict:
    try:
        data = read_regular(os.path.join(folder, MANIFEST), "checkpoint manifest", _MANIFEST_LIMIT)
    except GraphFormatError as exc:
        raise GraphFormatError(f"{where}: no readable {MANIFEST} ({exc}); save one with "
                               "DataParallel.save_checkpoint") from None
    man = parse_json(data.decode("utf-8", "replace"), f"{where}: {MANIFEST}")
    ok = (isinstance(man, dict) and man.get("format") == FORMAT and man.get("version") == 1
          and isinstance(man.get("id"), str) and _ID.fullmatch(man["id"])
          and isinstance(man.get("step"), int) and not isinstance(man["step"], bool) and man["step"] >= 0
          and isinstance(man.get("shards"), list) and 0 < len(man["shards"]) < 100_000)
    if not ok:
        raise GraphFormatError(f"{where}: {MANIFEST} is not a {FORMAT} manifest of version 1 (fields format, "
                               "version, id: 32 hex digits, step: an int >= 0, shards: a non-empty list)")
    n = len(man["shards"])
    for j, e in enumerate(man["shards"]):
        if not (isinstance(e, dict) and e.get("file") == shard_name(man["id"], j, n)
                and isinstance(e.get("sha256"), str) and re.fullmatch(r"[0-9a-f]{64}", e["sha256"])
                and isinstance(e.get("params"), list) and all(isinstance(k, str) for k in e["params"])):
            raise GraphFormatError(f"{where}: {MANIFEST} shard entry {j} must be {{file: "
                                   f"{shard_name(man['id'], j, n)!r}, sha256: 64 hex digits, params: names}}")
    return man


def named_params(net, loss_fn=None) -> dict:
    """The parameters of ``net`` by structural name and the loss's own (a ``Block`` loss with parameters
    not shared with ``net``) as ``loss_fn.<its structural name>``: the names checkpoints and replicas use."""
    params = dict(net.collect_params())
    if loss_fn is not None and hasattr(loss_fn, "collect_params"):
        for k, p in loss_fn.collect_params().items():
            if all(p is not q for q in params.values()):
                params[f"{LOSS_PREFIX}{k}"] = p
    return params


def load_into(folder: str, net, trainer=None, loss_fn=None) -> int:
    """Load the checkpoint in ``folder`` into ``net`` (its parameters, by structural name), ``loss_fn``
    (a loss with parameters of its own, ``loss_fn.*``; None: those are not loaded) and ``trainer``
    (its optimizer states and its loss scaling, ``la.amp``; None: not loaded); the step it was saved at.
    Checked in full before anything changes."""
    step, params, states, record, amp = read(folder)
    where = f"checkpoint {os.fspath(folder)!r}"
    mine = named_params(net, loss_fn)
    wanted = params if loss_fn is not None else {k: v for k, v in params.items() if not k.startswith(LOSS_PREFIX)}
    missing, extra = sorted(set(mine) - set(wanted)), sorted(set(wanted) - set(mine))
    if missing or extra:
        raise ParamError(f"{where}: its parameters do not match the model's (missing {missing}, not in the model "
                         f"{extra}); load it into the model (and loss_fn=, for its loss's parameters) it was "
                         "saved from")
    for k, v in wanted.items():
        if tuple(v.shape) != tuple(mine[k].shape):
            raise ParamError(f"{where}: parameter {k!r} has shape {v.shape}, the model's {mine[k].shape}")
    if trainer is not None:
        ids = {id(p) for p in mine.values()}
        if any(id(p) not in ids for p in trainer.params):
            raise ParamError(f"{where}: the trainer updates parameters that are not the model's"
                             f"{'' if loss_fn is not None else ' (pass loss_fn= for a loss with parameters)'}")
        _check_amp(where, amp, trainer)
        fd, path = tempfile.mkstemp(suffix=".safetensors")
        os.close(fd)
        try:
            write_arrays(path, states, {"version": 1, "trainer": record})
            trainer.load_states(path)  # (checks the states against the trainer before changing it)
        finally:
            os.unlink(path)
        if amp is not None:
            trainer.amp.restore(amp, trainer.params)
    for k, v in wanted.items():
        mine[k].set_data(array(v))
    return step


def _check_amp(where: str, amp: tuple | None, trainer) -> None:
    """The checkpoint's loss scaling (``read``'s) fits ``trainer``'s: the same dtype, parameters, masters."""
    if amp is None:  # (saved without loss scaling: a trainer with it keeps its scaler as it is)
        return
    if trainer.amp is None:
        raise ParamValueError(f"{where}: saved with loss scaling (la.amp), this trainer has none: call "
                              "la.amp.init_trainer(trainer, ...) as for the saved trainer before loading")
    _, target, low, masters = trainer.amp.portable(trainer.params)
    if (target, low, masters is None) != (amp[1], amp[2], amp[3] is None):
        raise ParamValueError(f"{where}: saved with loss scaling for {amp[1]} (low-precision parameters {amp[2]}, "
                              f"masters {amp[3] is not None}), this trainer's is for {target} ({low}, masters "
                              f"{masters is not None}); set it up as the saved one was")
    for i, v in (amp[3] or {}).items():
        if i not in low or tuple(v.shape) != tuple(trainer.params[i].shape):
            raise ParamError(f"{where}: master weight {i} of shape {v.shape} fits no low-precision parameter of "
                             "the trainer")
