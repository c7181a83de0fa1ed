"""Fuzzers of the safetensors parameter loader (``lazyarray.blocks.param_file.load_arrays``), issue #33.

The contract: a mutated file loads (and then every value is a NumPy array of a dtype lazyarray
computes with, of the shape its header declares) or raises a ``la.LazyArrayError`` (a
``GraphFormatError`` naming the file and the field or byte offset); never a bare Python
exception, never a hang. tests/blocks/test_param_file_errors.py mutates the exported file's
entries at random; this file aims at the header's structure: dtype strings, shapes (negative,
huge, not integers), data offsets (out of range, reversed, overlapping another tensor's, gaps),
extra keys, metadata, the header length and padding, and byte edits and truncations of the header
and the data, over files with every dtype, scalars and empty tensors.

Each fuzzer runs a few hundred derandomized examples by default (a few seconds), and 20,000 with
``python -m pytest -m slow tests/blocks/test_param_file_fuzz.py`` (or ``LAZYARRAY_FUZZ_EXAMPLES``
random ones, as the other fuzzers).
"""
from __future__ import annotations

import functools
import json
import struct

import numpy as np
import pytest
from fuzz_support import (
    fuzz_settings,
    json_values,
    mutated_bytes,
    safetensors_file,
    split_safetensors,
    valid_param_file,
)
from hypothesis import given
from hypothesis import strategies as st
from safetensors.numpy import save

import lazyarray as la
from lazyarray.blocks.param_file import load_arrays

SLOW = 20_000
COUNTS = [300, pytest.param(SLOW, marks=pytest.mark.slow)]  # default run, and -m slow


@functools.lru_cache(maxsize=1)
def _files() -> tuple[bytes, ...]:
    """Valid files to mutate: the exported model's, and one with every dtype, a scalar and empty tensors."""
    rng = np.random.default_rng(0)
    arrays = {
        "w": rng.standard_normal((2, 3)).astype(np.float32), "d": np.arange(3, dtype=np.float64),
        "h": np.ones((2, 2), np.float16), "i": np.array(7, np.int64), "j": np.arange(4, dtype=np.int32),
        "b": np.array([True, False, True]), "u": np.zeros((0, 4), np.uint8), "s": np.arange(2, dtype=np.int8),
        "q": np.arange(2, dtype=np.uint64), "k": np.arange(3, dtype=np.int16),
    }
    mixed = save(arrays, metadata={"lazyarray.params": json.dumps({"version": 1, "grad_null": ["w"]})})
    files = (valid_param_file(), mixed, save({"only": np.ones(3, np.float32)}))
    for raw in files:
        load_arrays_bytes(raw)
    return files


def load_arrays_bytes(raw: bytes, tmp_path=None):
    import os
    import tempfile

    folder = str(tmp_path) if tmp_path is not None else tempfile.mkdtemp(prefix="lazyarray-fuzz-")
    path = os.path.join(folder, "p.params")
    with open(path, "wb") as f:
        f.write(raw)
    return load_arrays(path)


def _check(raw: bytes, tmp_path) -> None:
    """Loads (and then holds usable arrays of the declared shapes), or raises a LazyArrayError."""
    try:
        arrays, meta = load_arrays_bytes(raw, tmp_path)
    except la.LazyArrayError:
        return
    header, _ = split_safetensors(raw)
    assert isinstance(meta, dict)
    for name, arr in arrays.items():
        assert isinstance(arr, np.ndarray), (name, type(arr))
        assert list(arr.shape) == header[name]["shape"], name
        assert arr.dtype.kind in "biuf", (name, arr.dtype)
        la.array(arr)  # usable as a lazyarray value


# -- header mutations --------------------------------------------------------------------------------
_DTYPE_TEXT = ["F32", "F64", "F16", "I8", "I16", "I32", "I64", "U8", "U16", "U32", "U64", "BOOL", "BF16",
               "F8_E4M3", "F8_E5M2", "C64", "C128", "f32", "float32", "", " F32", "F32\x00", "\ud800", "O",
               "V8", "<f4", "F" + "3" * 5000]
_ODD_DIMS = [-1, -(2**63), 2**31, 2**32, 2**62, 2**63 - 1, 2**63, 2**64, 1.5, 2.0, "2", True, None, [2], {}]
_ODD_SHAPES = [None, 5, "2,3", {}, [], [0], [1] * 65, [2**62, 2**62], [2**40, 2**40, 2**40], [[2, 3]]]


def _shape(draw, old: list):
    how = draw(st.sampled_from(["dim", "dim", "list", "extend", "drop", "json"]))
    if how == "dim" and old:
        new = list(old)
        new[draw(st.integers(0, len(old) - 1))] = draw(st.sampled_from(_ODD_DIMS) | st.integers(-3, 9))
        return new
    if how == "extend":
        return old + draw(st.lists(st.integers(0, 4) | st.sampled_from(_ODD_DIMS), min_size=1, max_size=3))
    if how == "drop":
        return old[1:]
    if how == "json":
        return draw(json_values)
    return draw(st.sampled_from(_ODD_SHAPES))


def _offsets(draw, old: list, others: list[list], size: int):
    how = draw(st.sampled_from(["other", "other", "shift", "swap", "edge", "odd", "json"]))
    if how == "other" and others:  # overlapping (or equal to) another tensor's range
        return list(draw(st.sampled_from(others)))
    if how == "shift":
        d = draw(st.sampled_from([1, -1, 2, -2, 8, -8, size, -size]))
        return [old[0] + d, old[1] + d] if draw(st.booleans()) else [old[0], old[1] + d]
    if how == "swap":
        return [old[1], old[0]]
    if how == "edge":
        e = draw(st.sampled_from([0, size, size + 1, -1, 2**63 - 1, 2**63, 2**64, -(2**63)]))
        return draw(st.sampled_from([[e, e], [0, e], [e, size], [e, old[1]], [old[0], e]]))
    if how == "odd":
        return draw(st.sampled_from([None, [], [0], [0, 1, 2], [0.0, 4.0], ["0", "4"], [True, 4], [[0], [4]],
                                     {"begin": 0, "end": 4}, "0,4", 0]))
    return draw(json_values)


@st.composite
def header_mutation(draw) -> bytes:
    """A valid file with 1-3 structural edits of its header (JSON), re-serialized with a correct
    length, sometimes without padding or with a wrong length."""
    raw = draw(st.sampled_from(_files()))
    header, data = split_safetensors(raw)
    for _ in range(draw(st.integers(1, 3))):
        names = [k for k, v in header.items() if k != "__metadata__" and isinstance(v, dict)]
        how = draw(st.sampled_from(["dtype", "shape", "shape", "offsets", "offsets", "extra_field", "drop_field",
                                    "entry", "extra_tensor", "rename", "metadata", "record", "drop_tensor"]))
        if not names and how not in ("metadata", "extra_tensor"):
            how = "extra_tensor"
        name = draw(st.sampled_from(names)) if names else None
        entry = header.get(name)
        if how == "dtype":
            entry["dtype"] = draw(st.sampled_from(_DTYPE_TEXT) | json_values)
        elif how == "shape":
            entry["shape"] = _shape(draw, list(entry.get("shape") or []) if isinstance(entry.get("shape"), list)
                                    else [])
        elif how == "offsets":
            others = [v.get("data_offsets") for k, v in header.items() if k != name and isinstance(v, dict)
                      and isinstance(v.get("data_offsets"), list) and len(v["data_offsets"]) == 2]
            old = entry.get("data_offsets")
            old = old if isinstance(old, list) and len(old) == 2 and all(isinstance(o, int) for o in old) else [0, 0]
            entry["data_offsets"] = _offsets(draw, old, others, len(data))
        elif how == "extra_field":
            entry[draw(st.sampled_from(["extra", "offset", "dtype2", "__metadata__", "\ud800", ""]))] = draw(json_values)
        elif how == "drop_field":
            entry.pop(draw(st.sampled_from(["dtype", "shape", "data_offsets"])), None)
        elif how == "entry":
            header[name] = draw(json_values)
        elif how == "extra_tensor":
            header[draw(st.sampled_from(["new", "", "\ud800", "a" * 300, "__metadata__ ", "0.weight"]))] = {
                "dtype": draw(st.sampled_from(["F32", "U8", "BOOL", "BF16"])),
                "shape": draw(st.lists(st.integers(0, 3), max_size=3)),
                "data_offsets": draw(st.sampled_from([[0, 0], [0, 4], [0, len(data)], [len(data), len(data)]]))}
        elif how == "rename":
            header[draw(st.sampled_from(["__metadata__", "", "\x00", "\ud800", "é" * 50, "w"]))] = header.pop(name)
        elif how == "drop_tensor":
            del header[name]
        elif how == "metadata":
            header["__metadata__"] = draw(json_values | st.dictionaries(st.text(max_size=4), json_values, max_size=3))
        else:  # the lazyarray.params record
            meta = header.setdefault("__metadata__", {})
            if isinstance(meta, dict):
                meta["lazyarray.params"] = draw(st.sampled_from([
                    "", "{}", "[]", "null", '{"version": 0}', '{"version": 1, "grad_null": [1]}',
                    '{"version": 1, "graph_sha256": "xy"}', '{"version": 1e999}', "[" * 70 + "]" * 70, "\ud800",
                    '{"version": 1, "grad_null": ["nope"]}']) | st.builds(json.dumps, json_values) | json_values)
    out = safetensors_file(header, data, pad=draw(st.booleans()))
    (n,) = struct.unpack("<Q", out[:8])
    how = draw(st.sampled_from(["keep"] * 8 + ["length", "pad", "append", "cut"]))
    if how == "length":
        n2 = draw(st.sampled_from([0, 1, 2, n - 1, n + 1, n + 7, len(out) - 8, len(out), 2**63, 2**64 - 1]))
        out = struct.pack("<Q", max(0, n2)) + out[8:]
    elif how == "pad":  # other bytes after the JSON object, inside the header
        tail = draw(st.sampled_from([b"\x00", b"\t\n", b"x", b"{}", b",", b"\xff"]))
        out = struct.pack("<Q", n + len(tail)) + out[8:8 + n] + tail + out[8 + n:]
    elif how == "append":
        out += draw(st.binary(min_size=1, max_size=9))
    elif how == "cut":
        out = out[:draw(st.integers(0, len(out)))]
    return out


@st.composite
def byte_mutation(draw) -> bytes:
    """Byte edits (set, insert, delete, duplicate, truncate) anywhere, or only in the header JSON."""
    raw = draw(st.sampled_from(_files()))
    (n,) = struct.unpack("<Q", raw[:8])
    if draw(st.booleans()):  # the header alone, the length fixed up so that the JSON parser sees the edits
        head = draw(mutated_bytes(raw[8:8 + n]))
        return struct.pack("<Q", len(head)) + head + raw[8 + n:]
    return draw(mutated_bytes(raw))


# -- regressions and the fuzzers ---------------------------------------------------------------------
def test_the_valid_files_load_with_their_shapes(tmp_path):
    for raw in _files():
        _check(raw, tmp_path)
        arrays, _ = load_arrays_bytes(raw, tmp_path)
        assert arrays


def test_overlapping_ranges_of_the_same_size_are_refused_or_load_copies(tmp_path):
    """Two tensors over the same bytes: safetensors refuses it; never a bare exception."""
    header, data = split_safetensors(_files()[1])
    header["d"]["data_offsets"] = list(header["w"]["data_offsets"])[:1] + [header["w"]["data_offsets"][0] + 24]
    _check(safetensors_file(header, data), tmp_path)


@pytest.mark.parametrize("examples", COUNTS)
def test_fuzz_header_structure(examples, tmp_path):
    @fuzz_settings(examples)
    @given(raw=header_mutation())
    def run(raw):
        _check(raw, tmp_path)

    run()


@pytest.mark.parametrize("examples", COUNTS)
def test_fuzz_bytes_and_truncations(examples, tmp_path):
    @fuzz_settings(examples)
    @given(raw=byte_mutation())
    def run(raw):
        _check(raw, tmp_path)

    run()


def test_every_truncation_of_the_mixed_file(tmp_path):
    raw = _files()[1]
    for cut in range(len(raw)):
        _check(raw[:cut], tmp_path)
