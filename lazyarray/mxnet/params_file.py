"""MXNet 1.x ``.params`` files: a list of dense NDArrays with names, read and written.

The byte layout (little-endian; MXNet's ``src/ndarray/ndarray.cc``, ``NDArray::Save`` / ``Load``
and ``MXNDArraySave``, checked against files written by ``mx.nd.save`` of MXNet 1.9.1):

=========  =======  ===========================================================
offset     type     field
=========  =======  ===========================================================
0          uint64   list magic ``0x112`` (``kMXAPINDArrayListMagic``)
8          uint64   reserved, 0
16         uint64   number of arrays *n*
...        n times  one NDArray (below)
...        uint64   number of keys *k* (0, or *n*)
...        k times  uint64 length + UTF-8 bytes: ``arg:<name>`` or ``aux:<name>``
=========  =======  ===========================================================

One NDArray (``NDArray::Save``, format V2; V3 is the same with NumPy shape semantics):

=========  ===========================================================================
uint32     magic ``0xF993FAC9`` (V2) or ``0xF993FACA`` (V3)
int32      storage type: 0 dense (``kDefaultStorage``); 1 row_sparse and 2 csr are refused
uint32     ndim (V3: int32, -1 = unknown shape), then ndim x int64 dims
           (an array with ndim 0 ends here in V2: an empty NDArray)
int32 x2   context: dev_type (1 cpu, 2 gpu, 3 cpu_pinned), dev_id: ignored, arrays load on the CPU
int32      dtype flag: 0 float32, 1 float64, 2 float16, 3 uint8, 4 int32, 5 int8, 6 int64, 7 bool
           (``mshadow::TypeFlag``; 12 bfloat16 is refused)
bytes      prod(dims) x itemsize bytes of C-ordered data
=========  ===========================================================================

Reading checks every length against the bytes left *before* allocating, so a header that
claims 10**12 elements raises ``GraphFormatError`` (with the byte offset) instead of allocating.
Nothing is unpickled or evaluated.
"""
from __future__ import annotations

import math
import os
import struct

import numpy as np

from .. import fileio
from ..args import type_arg
from ..aval import check_shape
from ..errors import GraphFormatError, LazyArrayError, ParamError

LIST_MAGIC = 0x112
NDARRAY_V2_MAGIC = 0xF993FAC9
NDARRAY_V3_MAGIC = 0xF993FACA
NDARRAY_V1_MAGIC = 0xF993FAC8
DTYPES = {0: np.float32, 1: np.float64, 2: np.float16, 3: np.uint8, 4: np.int32, 5: np.int8, 6: np.int64,
          7: np.bool_}
FLAGS = {np.dtype(v): k for k, v in DTYPES.items()}
STYPE_NAMES = {1: "row_sparse", 2: "csr"}
MAX_NDIM = 64
MAX_KEY = 1 << 16


class _Reader:
    """Bounds-checked little-endian reads from ``data``; errors name the byte offset."""

    def __init__(self, data: bytes, what: str):
        self.data, self.pos, self.what = data, 0, what

    def fail(self, msg: str, at: int | None = None):
        raise GraphFormatError(f"{self.what}: {msg} at byte offset {self.pos if at is None else at}")

    def take(self, n: int, field: str) -> memoryview:
        if n > len(self.data) - self.pos:
            self.fail(f"truncated: {field} needs {n} bytes, {len(self.data) - self.pos} left")
        view = memoryview(self.data)[self.pos:self.pos + n]
        self.pos += n
        return view

    def unpack(self, fmt: str, field: str):
        return struct.unpack("<" + fmt, self.take(struct.calcsize("<" + fmt), field))[0]


def read_params(data: bytes, what: str = "MXNet params") -> list[tuple[str | None, np.ndarray]]:
    """The ``(key, array)`` pairs of a ``.params`` file's bytes (keys keep their ``arg:``/``aux:``
    prefix; ``None`` when the file has no names). ``GraphFormatError`` naming the byte offset."""
    type_arg(data, "la.mxnet.read_params", "data", (bytes, bytearray, memoryview),
             "the file's bytes (read it with open(path, 'rb').read(), or use la.mxnet.load_params(path))")
    type_arg(what, "la.mxnet.read_params", "what", str, "a str naming the file in messages")
    r = _Reader(bytes(data), what)
    magic = r.unpack("Q", "the list magic number")
    if magic != LIST_MAGIC:
        r.fail(f"not an MXNet NDArray list file (magic {magic:#x}, expected {LIST_MAGIC:#x})", 0)
    r.unpack("Q", "the reserved field")
    count_at = r.pos
    count = r.unpack("Q", "the array count")
    if count > (len(r.data) - r.pos) // 12:  # every array takes at least 12 bytes: refuse before looping
        r.fail(f"the file claims {count} arrays, more than its {len(r.data)} bytes can hold", count_at)
    arrays = [_read_array(r, i) for i in range(count)]
    nkeys_at = r.pos
    nkeys = r.unpack("Q", "the key count")
    if nkeys not in (0, count):
        r.fail(f"{nkeys} keys for {count} arrays", nkeys_at)
    keys: list[str | None] = []
    for i in range(nkeys):
        at = r.pos
        n = r.unpack("Q", f"the length of key {i}")
        if n > MAX_KEY:
            r.fail(f"key {i} claims {n} bytes (at most {MAX_KEY})", at)
        raw = bytes(r.take(n, f"key {i}"))
        try:
            keys.append(raw.decode("utf-8"))
        except UnicodeDecodeError:
            r.fail(f"key {i} is not UTF-8 text", at + 8)
    if r.pos != len(r.data):
        r.fail(f"{len(r.data) - r.pos} unexpected bytes after the keys")
    if not keys:
        keys = [None] * count
    return list(zip(keys, arrays))


def _read_array(r: _Reader, i: int) -> np.ndarray:
    start = r.pos
    magic = r.unpack("I", f"array {i}'s magic number")
    if magic not in (NDARRAY_V2_MAGIC, NDARRAY_V3_MAGIC):
        hint = " (the legacy V1 format of MXNet < 0.9; re-save it with MXNet 1.x)" if magic == NDARRAY_V1_MAGIC \
            else ""
        r.fail(f"array {i}: unknown NDArray magic {magic:#x}{hint}", start)
    stype_at = r.pos
    stype = r.unpack("i", f"array {i}'s storage type")
    if stype != 0:
        name = STYPE_NAMES.get(stype, f"storage type {stype}")
        r.fail(f"array {i} is a sparse {name} array; only dense arrays are supported "
               "(convert it with tostype('default') in MXNet before saving)", stype_at)
    ndim_at = r.pos
    ndim = r.unpack("i", f"array {i}'s ndim")
    if magic == NDARRAY_V2_MAGIC and ndim == 0:
        return np.zeros((0,), np.float32)  # an empty (none) NDArray: nothing follows
    if not 0 <= ndim <= MAX_NDIM:
        r.fail(f"array {i}: ndim {ndim} is not in 0..{MAX_NDIM}", ndim_at)
    dims_at = r.pos
    shape = tuple(r.unpack("q", f"array {i}'s dim {k}") for k in range(ndim))
    if any(d < 0 for d in shape):
        r.fail(f"array {i}: negative dim in shape {shape}", dims_at)
    r.unpack("i", f"array {i}'s device type")
    r.unpack("i", f"array {i}'s device id")
    flag_at = r.pos
    flag = r.unpack("i", f"array {i}'s dtype flag")
    dtype = DTYPES.get(flag)
    if dtype is None:
        r.fail(f"array {i}: unsupported dtype flag {flag} (supported: "
               + ", ".join(f"{k} {np.dtype(v)}" for k, v in DTYPES.items()) + ")", flag_at)
    dtype = np.dtype(dtype)
    try:  # NumPy's own rule, even for an empty array: the non-zero dims' product must fit the address space
        check_shape(f"array {i}", shape, dtype, "the")
    except LazyArrayError as exc:
        r.fail(f"{exc}; the header is corrupt", dims_at)
    nbytes = math.prod(shape) * dtype.itemsize  # exact Python ints: no overflow
    if nbytes > len(r.data) - r.pos:  # checked before allocating anything
        r.fail(f"truncated: array {i} {dtype}{list(shape)} needs {nbytes} bytes of data, "
               f"{len(r.data) - r.pos} left")
    raw = r.take(nbytes, f"array {i}'s data")
    if dtype == np.bool_:
        return (np.frombuffer(raw, np.uint8) != 0).reshape(shape)
    return np.frombuffer(raw, dtype.newbyteorder("<")).astype(dtype).reshape(shape)


def load_params(path: str) -> tuple[dict[str, np.ndarray], set[str]]:
    """``(arrays, aux_names)`` of an MXNet ``.params`` file: names without their ``arg:``/``aux:``
    prefix, and the set of names that had ``aux:`` (auxiliary states: BatchNorm's running stats)."""
    data = fileio.read_regular(path, "MXNet params file")  # (a device or a FIFO refused before opening)
    what = f"MXNet params file {os.path.basename(str(path))!r}"
    arrays: dict[str, np.ndarray] = {}
    aux: set[str] = set()
    for i, (key, arr) in enumerate(read_params(data, what)):
        if key is None:
            raise GraphFormatError(f"{what}: the arrays have no names (saved as a list); a model's "
                                   "parameters are saved as a dict")
        kind, sep, name = key.partition(":")
        if not sep or kind not in ("arg", "aux"):  # Gluon's save_parameters writes bare names
            name, kind = key, "arg"
        if not name or name in arrays:
            raise GraphFormatError(f"{what}: key {i} {key!r} is empty or repeated")
        arrays[name] = arr
        if kind == "aux":
            aux.add(name)
    return arrays, aux


def _check_arrays(where: str, arrays, aux) -> None:
    """``arrays``: a dict of str name -> array; ``aux``: a set (or list) of some of those names."""
    type_arg(arrays, where, "arrays", dict, "a dict of parameter name -> array, e.g. {'fc_weight': w}")
    bad = next((k for k in arrays if not isinstance(k, str)), None)
    if bad is not None:
        raise ParamError(f"{where}: arrays' keys must be parameter names (str), got {type(bad).__name__} {bad!r}"[:200])
    type_arg(aux, where, "aux", (set, frozenset, list, tuple), "a set of the auxiliary parameters' names")


def params_bytes(arrays: dict[str, np.ndarray], aux: set[str] = frozenset()) -> bytes:
    """The bytes of a ``.params`` file holding ``arrays`` (names prefixed ``aux:`` when in ``aux``,
    else ``arg:``), in the V2 format MXNet 1.x reads."""
    _check_arrays("la.mxnet.params_bytes", arrays, aux)
    out = [struct.pack("<QQQ", LIST_MAGIC, 0, len(arrays))]
    for name, value in arrays.items():
        arr = np.ascontiguousarray(value)
        flag = FLAGS.get(arr.dtype)
        if flag is None:
            raise GraphFormatError(f"cannot write {name!r} to an MXNet params file: dtype {arr.dtype} has no "
                                   f"MXNet type flag (supported: {', '.join(str(d) for d in FLAGS)})")
        if arr.ndim == 0:
            arr = arr.reshape(1)  # V2 reads ndim 0 as an empty array: a scalar is written as shape (1,)
        out.append(struct.pack("<Iii", NDARRAY_V2_MAGIC, 0, arr.ndim))
        out.append(struct.pack(f"<{arr.ndim}q", *arr.shape))
        out.append(struct.pack("<iii", 1, 0, flag))
        out.append(arr.astype(arr.dtype.newbyteorder("<"), copy=False).tobytes())
    out.append(struct.pack("<Q", len(arrays)))
    for name in arrays:
        key = (("aux:" if name in aux else "arg:") + name).encode("utf-8")
        out.append(struct.pack("<Q", len(key)) + key)
    return b"".join(out)


def save_params(path: str, arrays: dict[str, np.ndarray], aux: set[str] = frozenset()) -> None:
    """Write ``arrays`` as an MXNet ``.params`` file, atomically."""
    type_arg(path, "la.mxnet.save_params", "path", (str, os.PathLike), "a file path (str or os.PathLike)")
    _check_arrays("la.mxnet.save_params", arrays, aux)
    fileio.write_atomic(path, params_bytes(arrays, aux))
