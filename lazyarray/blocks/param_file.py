"""Parameter files: safetensors with a JSON record, written atomically, read without executing code.

``save_arrays`` / ``write_arrays`` write them, ``load_arrays`` reads and checks every tensor entry
before NumPy sees it (a malformed or hostile file raises ``GraphFormatError``), ``assign`` puts the
values into parameters, and ``write_export`` / ``check_param_file`` tie a parameter file to the
symbol file it was exported with (the graph's sha256). ``Block.save_parameters``, ``Block.save``,
``HybridBlock.export``, ``SymbolBlock.imports`` and ``Trainer.save_states`` all go through here.
"""
from __future__ import annotations

import importlib
import json
import os
import re
import struct

import numpy as np

from ..aval import check_shape
from ..device import Device, gpu
from ..errors import DeviceError, GraphFormatError, ShapeError
from ..fileio import read_regular, write_atomic
from ..graph.serialize import parse_json  # the bounded JSON parser of symbol files
from .parameter import Parameter

_PARAMS_FORMAT = "lazyarray.params"


def _safetensors():
    """safetensors' NumPy API, imported on first use: only saving and loading parameter files need
    it, and importing it with the package made ``import lazyarray`` heavier for every process."""
    return importlib.import_module("safetensors.numpy")


def _safetensor_error() -> type[Exception]:
    """``safetensors.SafetensorError`` (the parse error of a bad file), imported on first use (see
    ``_safetensors``)."""
    return importlib.import_module("safetensors").SafetensorError


def save_arrays(path: str, params: dict[str, Parameter], graph_sha256: str | None = None) -> None:
    """``name -> Parameter`` values to a safetensors file, written atomically (``graph_sha256``: the
    digest of the graph they belong to, checked when a model is imported)."""
    arrays, frozen = {}, []
    for name, p in params.items():
        d = p.data()
        arrays[name] = np.ascontiguousarray(d.asnumpy())
        if p.grad_req == "null":
            frozen.append(name)
    record = {"version": 1, "grad_null": frozen}
    if graph_sha256 is not None:
        record["graph_sha256"] = graph_sha256
    write_arrays(path, arrays, record)


def write_arrays(path: str, arrays: dict[str, np.ndarray], record: dict) -> None:
    """NumPy arrays and a JSON ``record`` (read back by ``load_arrays``) to a safetensors file,
    atomically."""
    # One metadata key: safetensors writes several in no fixed order, and equal files must be
    # byte-identical.
    meta = {_PARAMS_FORMAT: json.dumps(record)}
    write_atomic(path, _safetensors().save(arrays, metadata=meta))


def load_arrays(path: str) -> tuple[dict[str, np.ndarray], dict]:
    """The arrays and lazyarray metadata of a parameter file (safetensors).

    Raises ``GraphFormatError`` naming the file and the field or byte offset for anything it
    cannot load: a truncated or malformed header, JSON nested too deep or with numbers out of
    range, dtypes lazyarray does not compute with (``BF16``, ``F8_*``, ``C64``: the message lists
    the supported ones), shapes or offsets that do not match the data, a malformed
    ``lazyarray.params`` record. Loading never runs code.
    """
    data = read_regular(path, "parameter file")  # (not a path, a device, a FIFO: refused before opening)
    safetensors, safetensor_error = _safetensors(), _safetensor_error()  # (imported on first use)
    what = f"{path!r} is not a safetensors parameter file"
    if len(data) < 8:
        raise GraphFormatError(f"{what}: {len(data)} bytes, too short for the 8-byte header length")
    (n,) = struct.unpack("<Q", data[:8])
    if n > min(len(data) - 8, _MAX_HEADER):
        raise GraphFormatError(f"{what}: the header length at byte offset 0 is {n} bytes, but "
                               f"{len(data) - 8} bytes follow (and headers are at most {_MAX_HEADER})")
    header = parse_json(data[8:8 + n], f"{what}: header", offset=8)
    if not isinstance(header, dict):
        raise GraphFormatError(f"{what}: the header must be a JSON object, got {type(header).__name__}")
    buffer_size = len(data) - 8 - n
    for name, info in header.items():
        if name != "__metadata__":
            _check_tensor_entry(path, name, info, buffer_size)
    try:
        arrays = safetensors.load(data)
    except (safetensor_error, ValueError, TypeError, KeyError, OverflowError) as exc:
        raise GraphFormatError(f"{what}: {exc}") from exc
    for name, arr in arrays.items():
        if arr.dtype == np.bool_:  # any non-zero byte is True (NumPy would keep other bytes as invalid bools)
            arrays[name] = arr.view(np.uint8) != 0
    raw = header.get("__metadata__") or {}
    record = raw.get(_PARAMS_FORMAT) if isinstance(raw, dict) else None
    if record is None:
        return arrays, {}  # a safetensors file written by another tool
    return arrays, _params_record(path, record)


_MAX_HEADER = 100_000_000  # safetensors' own limit on the JSON header
# safetensors dtype names -> the NumPy dtypes lazyarray computes with (docs/graph-format.md)
_SAFETENSORS_DTYPES = {"BOOL": "bool", "U8": "uint8", "I8": "int8", "U16": "uint16", "I16": "int16",
                       "U32": "uint32", "I32": "int32", "U64": "uint64", "I64": "int64", "F16": "float16",
                       "F32": "float32", "F64": "float64"}


def _check_tensor_entry(path: str, name: str, info, buffer_size: int) -> None:
    """One header entry ``{"dtype", "shape", "data_offsets"}``, checked before safetensors or NumPy
    sees it."""

    where = f"{path!r}: parameter {name!r}"
    if not isinstance(info, dict):
        raise GraphFormatError(f"{where}: the header entry must be an object with 'dtype', 'shape', "
                               "'data_offsets'")
    dtype = info.get("dtype")
    if not isinstance(dtype, str) or dtype not in _SAFETENSORS_DTYPES:
        supported = ", ".join(_SAFETENSORS_DTYPES)
        raise GraphFormatError(
            f"{where} has dtype {dtype!r}, which lazyarray does not load; supported: {supported} "
            f"(convert the tensor, e.g. to F32, before loading)" if isinstance(dtype, str) else
            f"{where}: 'dtype' must be one of {supported}, got {dtype!r}")
    np_dtype = np.dtype(_SAFETENSORS_DTYPES[dtype])
    shape = info.get("shape")
    if not isinstance(shape, list) or len(shape) > 64 or not all(
            isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape):
        raise GraphFormatError(f"{where}: 'shape' must be a list of at most 64 non-negative integers, "
                               f"got {shape!r}"[:300])
    try:
        check_shape(where, shape, np_dtype, "the")
    except ShapeError as exc:
        raise GraphFormatError(str(exc)) from None
    offsets = info.get("data_offsets")
    if not (isinstance(offsets, list) and len(offsets) == 2 and all(
            isinstance(o, int) and not isinstance(o, bool) for o in offsets)):
        raise GraphFormatError(f"{where}: 'data_offsets' must be [begin, end], got {offsets!r}"[:300])
    begin, end = offsets
    nbytes = int(np.prod(shape, dtype=object)) * np_dtype.itemsize
    if not 0 <= begin <= end <= buffer_size or end - begin != nbytes:
        raise GraphFormatError(f"{where}: 'data_offsets' {offsets} do not hold {dtype}{list(shape)} "
                               f"({nbytes} bytes) within the {buffer_size} data bytes")


def _params_record(path: str, record) -> dict:
    """The ``lazyarray.params`` metadata record, every field checked: ``version`` (int),
    ``grad_null`` (names), ``graph_sha256`` (64 hex digits)."""

    where = f"{path!r}: metadata {_PARAMS_FORMAT!r}"
    if not isinstance(record, str):
        raise GraphFormatError(f"{where} must be a JSON string")
    meta = parse_json(record, where)
    if not isinstance(meta, dict):
        raise GraphFormatError(f"{where} must be a JSON object, got {type(meta).__name__}")
    version = meta.get("version", 1)
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise GraphFormatError(f"{where}: 'version' must be a positive integer, got {version!r}"[:300])
    grad_null = meta.get("grad_null", [])
    if not isinstance(grad_null, list) or not all(isinstance(n, str) for n in grad_null):
        raise GraphFormatError(f"{where}: 'grad_null' must be a list of parameter names, got {grad_null!r}"[:300])
    digest = meta.get("graph_sha256")
    if digest is not None and not (isinstance(digest, str) and re.fullmatch(r"[0-9a-f]{64}", digest)):
        raise GraphFormatError(f"{where}: 'graph_sha256' must be 64 hexadecimal digits, got {digest!r}"[:300])
    return meta


def assign(params: dict[str, Parameter], arrays: dict, path: str, device, allow_missing: bool,
           ignore_extra: bool) -> None:
    """Copy ``arrays`` into ``params`` by name, with errors that name every problem."""
    check_device(device, path)
    missing = [n for n in params if n not in arrays]
    extra = [n for n in arrays if n not in params]
    problems = []
    if missing and not allow_missing:
        problems.append(f"missing parameters {missing} (pass allow_missing=True to keep their values)")
    if extra and not ignore_extra:
        problems.append(f"unexpected parameters {extra} (pass ignore_extra=True to skip them)")
    for name, p in params.items():
        if name in arrays and p.shape is not None:
            want, got = p.shape, arrays[name].shape
            if len(want) != len(got) or any(w and w != g for w, g in zip(want, got)):
                problems.append(f"parameter {name!r} has shape {tuple(got)} in the file but {want} in the block")
    if problems:
        raise ShapeError(f"cannot load {os.path.basename(path)!r}: " + "; ".join(problems))
    for name, p in params.items():
        if name in arrays:
            if device is not None and not p.initialized:
                p.device = device
            p.set_data(arrays[name])


def check_device(device, path: str) -> None:
    """``DeviceError`` (with the fix) when parameters of ``path`` are to go to a GPU this process
    cannot use (no CuPy, or no such GPU), instead of failing inside CuPy or NumPy."""

    if device is None:
        return
    if not isinstance(device, Device):
        raise DeviceError(f"cannot load {path!r}: device must be a device such as la.cpu(0), got {device!r}")
    if device.kind == "gpu":
        try:
            gpu(device.id)
        except DeviceError as exc:
            raise DeviceError(f"cannot load {path!r} onto {device}: {exc}") from None


def write_export(prefix: str, epoch: int, symbol_json: str, params: dict[str, Parameter]) -> tuple[str, str]:
    """Write an exported model, atomic as a set: the parameter file first, recording a digest of the
    graph it belongs to, then the symbol file. A kill at any moment leaves the old pair, the new
    pair, or new parameters beside the old graph, which ``SymbolBlock.imports`` refuses by name
    unless the graph is the same (then the pair is the complete new model). Parameter files of
    other epochs keep loading with the same graph."""
    sym_path, param_path = f"{prefix}-symbol.json", f"{prefix}-{epoch:04d}.params"
    save_arrays(param_path, params, graph_digest(symbol_json))
    write_atomic(sym_path, symbol_json.encode())
    return sym_path, param_path


def graph_digest(symbol_json: str | bytes) -> str | None:
    """SHA-256 of a symbol file's content (independent of its formatting); None when it is not JSON."""
    try:
        doc = json.loads(symbol_json)
    except (ValueError, RecursionError):
        return None
    # hashlib loads OpenSSL (3-4 MiB): imported when a model is exported or imported, not with lazyarray
    return importlib.import_module("hashlib").sha256(
        json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def check_param_file(symbol_file: str, meta: dict, param_file: str) -> None:
    """Raise ``GraphFormatError`` when a parameter file records a graph other than ``symbol_file``'s
    (written by an interrupted export, or mixed up); files without a record pass."""
    recorded = meta.get("graph_sha256")
    if not isinstance(recorded, str):
        return
    try:
        actual = graph_digest(read_regular(symbol_file, "symbol file"))
    except GraphFormatError:
        return  # the symbol loader reports unreadable files
    if actual is not None and actual != recorded:
        raise GraphFormatError(
            f"{param_file}: this parameter file was exported with a different graph than {symbol_file} "
            f"(graph sha256 {recorded[:12]}..., the symbol file has {actual[:12]}...): an export was "
            "interrupted or the files were mixed up; export the model again, or pass the symbol file "
            "written together with these parameters")
