"""Sharded checkpoints of ``DataParallel``: each worker writes its shard; loading reassembles them on any N.

A checkpoint is a folder:

* ``shard-<id>-<j>-of-<n>.safetensors``, one per worker ``j`` of ``n``, written by that worker from
  its replica (``save_shard``, a task pinned to it): the parameters of its part (``param/<name>``)
  and their optimizer states (``state/<i>.<k>``: part ``k`` of the state of the trainer's
  parameter ``i``, as ``Trainer.save_states`` keys them), with a record naming the checkpoint
  ``id``, the shard and the trainer's record (optimizer, update count, settings, shapes, the
  kinds of the part's states). The parameters are parted by bytes (``partition``: the largest
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
    os.makedirs(folder, exist_ok=True)
    name = shard_name(ckpt, j, n)
    write_arrays(os.path.join(folder, name), arrays,
                 {"version": 1, "checkpoint": {"id": ckpt, "shard": j, "shards": n, "step": steps},
                  "trainer": record})
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


def read(folder: str) -> tuple[int, dict[str, np.ndarray], dict[str, np.ndarray], dict]:
    """``(step, parameters by name, optimizer state arrays, trainer record)`` of the checkpoint in ``folder``."""
    if not isinstance(folder, (str, os.PathLike)):
        raise ParamValueError(f"load_checkpoint: folder must be the path of a checkpoint folder (a str or "
                              f"os.PathLike), got {type(folder).__name__}")
    folder = os.fspath(folder)
    where = f"checkpoint {folder!r}"
    man = _manifest(folder, where)
    params, states, kinds, record = {}, {}, {}, None
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
        kinds.update(rec["states"])
        rest = {k: v for k, v in rec.items() if k != "states"}
        if record is not None and rest != record:
            raise GraphFormatError(f"{where}: shard {entry['file']!r} has another trainer record than shard 0")
        record = rest
    return man["step"], params, states, dict(record, states=kinds)


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


def load_into(folder: str, net, trainer=None) -> int:
    """Load the checkpoint in ``folder`` into ``net`` (its parameters, by structural name) and ``trainer``
    (its optimizer states; None: not loaded); the step it was saved at. Checked before anything changes."""
    step, params, states, record = read(folder)
    mine = dict(net.collect_params())
    wanted = {k: v for k, v in params.items() if not k.startswith("loss_fn.")}  # (a loss's own: not the net's)
    missing, extra = sorted(set(mine) - set(wanted)), sorted(set(wanted) - set(mine))
    if missing or extra:
        raise ParamError(f"checkpoint {os.fspath(folder)!r}: its parameters do not match the model's (missing "
                         f"{missing}, not in the model {extra}); load it into the model it was saved from")
    for k, v in wanted.items():
        if tuple(v.shape) != tuple(mine[k].shape):
            raise ParamError(f"checkpoint {os.fspath(folder)!r}: parameter {k!r} has shape {v.shape}, the model's "
                             f"{mine[k].shape}")
    if trainer is not None:
        fd, path = tempfile.mkstemp(suffix=".safetensors")
        os.close(fd)
        try:
            write_arrays(path, states, {"version": 1, "trainer": record})
            trainer.load_states(path)  # (checks the states against the trainer before changing it)
        finally:
            os.unlink(path)
    for k, v in wanted.items():
        mine[k].set_data(array(v))
    return step
