"""The parameter-file loader's error contract (``load_arrays``, ``Block.load_parameters``,
``SymbolBlock.imports``): a safetensors file loads, or ``la.GraphFormatError`` names the file and
the field or byte offset; an unusable device is a ``la.DeviceError`` with the fix; parameters that
are well-formed but do not fit the graph or block are a ``la.ShapeError`` naming each one.

Regression tests for each escape found by the hostile-input campaign, then fuzzers that mutate a
valid exported parameter file (header fields, metadata, bytes). Default runs are short; for a long
run: ``LAZYARRAY_FUZZ_EXAMPLES=20000 python -m pytest tests/blocks/test_param_file_errors.py``.
"""
from __future__ import annotations

import json
import struct

import numpy as np
import pytest
from fuzz_support import (
    exported_model,
    fuzz_settings,
    mutated_bytes,
    mutated_param_file,
    safetensors_file,
    split_safetensors,
)
from hypothesis import given
from hypothesis import strategies as st
from safetensors.numpy import save

import lazyarray as la
from lazyarray import blocks as B
from lazyarray.blocks.param_file import load_arrays
from lazyarray.device import Device, gpu_available


def _write(tmp_path, raw: bytes, name: str = "p.params") -> str:
    path = tmp_path / name
    path.write_bytes(raw)
    return str(path)


def _valid() -> bytes:
    with open(exported_model()[1], "rb") as f:
        return f.read()


def _with_record(tmp_path, record) -> str:
    """The exported parameter file with its ``lazyarray.params`` metadata replaced."""
    header, data = split_safetensors(_valid())
    header["__metadata__"]["lazyarray.params"] = record if isinstance(record, str) else json.dumps(record)
    return _write(tmp_path, safetensors_file(header, data))


def _refused(path: str, match: str, error=la.GraphFormatError):
    with pytest.raises(error, match=match) as info:
        load_arrays(path)
    assert type(info.value) is error
    return str(info.value)


# -- regressions ---------------------------------------------------------------------------------
def test_deeply_nested_metadata_record_is_refused(tmp_path):
    path = _with_record(tmp_path, "[" * 5000 + "]" * 5000)
    _refused(path, r"metadata 'lazyarray.params': JSON nested deeper than 64 levels at character offset 64")
    path = _with_record(tmp_path, '{"grad_null": ' + "[" * 100_000 + "]" * 100_000 + "}")
    _refused(path, "nested deeper than 64 levels")
    sym_file, _ = exported_model()
    with pytest.raises(la.GraphFormatError, match="nested deeper"):
        B.SymbolBlock.imports(sym_file, ["data"], path)


@pytest.mark.parametrize("record,field", [
    ({"grad_null": 5}, "grad_null"), ({"grad_null": [1]}, "grad_null"), ({"grad_null": "0.weight"}, "grad_null"),
    ({"version": "1"}, "version"), ({"version": 0}, "version"),
    ({"graph_sha256": 5}, "graph_sha256"), ({"graph_sha256": "zz"}, "graph_sha256"),
])
def test_every_metadata_field_is_type_checked(tmp_path, record, field):
    path = _with_record(tmp_path, record)
    _refused(path, rf"metadata 'lazyarray.params': '{field}' must be")
    sym_file, _ = exported_model()
    with pytest.raises(la.GraphFormatError, match=field):
        B.SymbolBlock.imports(sym_file, ["data"], path)


@pytest.mark.parametrize("record", ["not json", "[1, 2]", '"text"', "9" * 5000, '{"version": 1e999}', "\ud800"])
def test_malformed_metadata_records_are_refused(tmp_path, record):
    path = _with_record(tmp_path, record)
    _refused(path, r"lazyarray.params")


@pytest.mark.parametrize("dtype", ["BF16", "F8_E4M3", "F8_E5M2", "C64", "F128", "I4"])
def test_dtypes_lazyarray_does_not_compute_with_are_named(tmp_path, dtype):
    header = {"w": {"dtype": dtype, "shape": [2], "data_offsets": [0, 4]}}
    msg = _refused(_write(tmp_path, safetensors_file(header, b"\x00" * 4)),
                   rf"parameter 'w' has dtype '{dtype}', which lazyarray does not load; supported: BOOL, U8")
    assert "F32" in msg and "F64" in msg


def test_valid_bf16_file_from_another_tool_is_a_format_error(tmp_path):
    """A real BF16 file (written by safetensors' own writer from raw bytes)."""
    raw = save({"w": np.zeros(4, np.float32)})
    header, data = split_safetensors(raw)
    header["w"]["dtype"], header["w"]["data_offsets"] = "BF16", [0, 8]
    path = _write(tmp_path, safetensors_file(header, data[:8]))
    _refused(path, "has dtype 'BF16'")
    net = B.Dense(4, in_units=1)
    with pytest.raises(la.GraphFormatError, match="BF16"):
        net.load_parameters(path)


@pytest.mark.parametrize("raw,match", [
    (b"", "0 bytes, too short"),
    (b"\x01\x00", "2 bytes, too short"),
    (struct.pack("<Q", 2**63) + b"{}", "header length at byte offset 0 is 9223372036854775808 bytes"),
    (struct.pack("<Q", 100) + b"{}", "header length at byte offset 0 is 100 bytes, but 2 bytes follow"),
    (struct.pack("<Q", 2) + b"[]", "the header must be a JSON object"),
    (struct.pack("<Q", 3) + b"{,}", r"header: not valid JSON: .* at byte offset 9"),
    (struct.pack("<Q", 2) + b"\xff}", "header: not valid JSON: invalid utf-8 text at byte offset 8"),
])
def test_malformed_headers_name_the_offset(tmp_path, raw, match):
    _refused(_write(tmp_path, raw), match)


@pytest.mark.parametrize("entry,match", [
    ({"dtype": "F32", "shape": [2], "data_offsets": [0, 4]}, r"'data_offsets' \[0, 4\] do not hold F32\[2\]"),
    ({"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}, "do not hold"),
    ({"dtype": "F32", "shape": [2**62, 2**62], "data_offsets": [0, 8]}, "more than any array can hold"),
    ({"dtype": "F32", "shape": [-1], "data_offsets": [0, 8]}, "'shape' must be a list of at most 64"),
    ({"dtype": "F32", "shape": None, "data_offsets": [0, 8]}, "'shape' must be"),
    ({"dtype": "F32", "shape": [2], "data_offsets": [0]}, "'data_offsets' must be"),
    ({"dtype": None, "shape": [2], "data_offsets": [0, 8]}, "'dtype' must be one of"),
    ([1, 2], "the header entry must be an object"),
])
def test_header_entries_are_checked(tmp_path, entry, match):
    raw = safetensors_file({"w": entry}, b"\x00" * 8)
    _refused(_write(tmp_path, raw), rf"parameter 'w'.*{match}" if not match.startswith("the") else match)


def test_huge_integers_in_the_header_are_refused(tmp_path):
    raw = b'{"w": {"dtype": "F32", "shape": [' + b"9" * 5000 + b'], "data_offsets": [0, 8]}}'
    _refused(_write(tmp_path, struct.pack("<Q", len(raw)) + raw + b"\x00" * 8),
             r"header: the number 999999999999\.\.\.9999 \(5000 characters\) at byte offset 41 is out of range")


@pytest.mark.parametrize("path", [None, 3, "no\x00such"])
def test_non_paths_are_format_errors_and_never_open_a_descriptor(path):
    with pytest.raises(la.GraphFormatError, match="cannot read parameter file"):
        load_arrays(path)


def test_int32_parameters_for_a_float32_graph_are_refused_by_imports(tmp_path):
    sym_file, param_file = exported_model()
    arrays, _ = load_arrays(param_file)
    bad = _write(tmp_path, save({k: v.astype(np.int32) for k, v in arrays.items()}))
    with pytest.raises(la.ShapeError, match=r"mis-shaped parameters '0.weight': file dtype int32, graph float32"):
        B.SymbolBlock.imports(sym_file, ["data"], bad)


@pytest.mark.skipif(gpu_available(), reason="a usable GPU takes the parameters")
def test_loading_onto_an_unusable_gpu_is_a_device_error(tmp_path):
    sym_file, param_file = exported_model()
    with pytest.raises(la.DeviceError, match=r"cannot load .* onto gpu\(0\): .*CuPy.*pip install"):
        B.SymbolBlock.imports(sym_file, ["data"], param_file, device=Device("gpu", 0))
    net = B.Dense(2, in_units=3)
    net.initialize()
    path = str(tmp_path / "dense.params")
    net.save_parameters(path)
    with pytest.raises(la.DeviceError, match="onto gpu"):
        B.Dense(2, in_units=3).load_parameters(path, device=Device("gpu", 0))


def test_bool_tensors_hold_only_true_and_false(tmp_path):
    header = {"b": {"dtype": "BOOL", "shape": [3], "data_offsets": [0, 3]}}
    arrays, meta = load_arrays(_write(tmp_path, safetensors_file(header, b"\x00\x07\x01", pad=False)))
    assert arrays["b"].view(np.uint8).tolist() == [0, 1, 1] and meta == {}


@pytest.mark.parametrize("device", ["cpu(0)", 0])
def test_a_device_that_is_not_a_device_is_a_device_error(tmp_path, device):
    net = B.Dense(2, in_units=3)
    net.initialize()
    path = str(tmp_path / "dense.params")
    net.save_parameters(path)
    with pytest.raises(la.DeviceError, match="device must be a device such as la.cpu"):
        B.Dense(2, in_units=3).load_parameters(path, device=device)


def test_the_valid_file_still_loads(tmp_path):
    sym_file, param_file = exported_model()
    arrays, meta = load_arrays(param_file)
    assert set(meta) == {"version", "grad_null", "graph_sha256"} and arrays
    block = B.SymbolBlock.imports(sym_file, ["data"], param_file)
    assert block(la.ones((1, 1, 4, 4))).shape == (1, 3)
    plain = _write(tmp_path, save({k: np.asarray(v) for k, v in arrays.items()}))  # no lazyarray record
    assert load_arrays(plain)[1] == {}


# -- fuzzers -------------------------------------------------------------------------------------
def _check_outcome(path: str) -> None:
    """load_arrays and SymbolBlock.imports: success, or the contract's errors (ShapeError only
    for a well-formed file whose parameters do not fit the graph)."""
    try:
        load_arrays(path)
    except (la.GraphFormatError, la.DeviceError):
        pass
    sym_file, _ = exported_model()
    try:
        B.SymbolBlock.imports(sym_file, ["data"], path)
    except (la.GraphFormatError, la.DeviceError):
        pass
    except la.ShapeError as exc:
        assert "does not match the graph" in str(exc), exc


@fuzz_settings(400)
@given(raw=mutated_param_file())
def test_fuzz_header_mutations_of_a_valid_parameter_file(raw, tmp_path):
    _check_outcome(_write(tmp_path, raw))


@fuzz_settings(400)
@given(raw=st.builds(_valid).flatmap(mutated_bytes))
def test_fuzz_byte_mutations_of_a_valid_parameter_file(raw, tmp_path):
    _check_outcome(_write(tmp_path, raw))


@fuzz_settings(150)
@given(raw=mutated_param_file())
def test_fuzz_load_parameters_into_a_block(raw, tmp_path):
    path = _write(tmp_path, raw)
    net = B.HybridSequential()
    net.add(B.Dense(3, in_units=4))
    net.initialize()
    try:
        net.load_parameters(path, ignore_extra=True, allow_missing=True)
    except (la.GraphFormatError, la.DeviceError):
        pass
    except la.ShapeError as exc:
        assert "cannot load" in str(exc), exc
