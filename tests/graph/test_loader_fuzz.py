"""The symbol loader's error contract: whatever a file holds, ``la.Symbol.from_json``,
``la.load_symbol`` and ``SymbolBlock.imports`` load it or raise ``la.GraphFormatError`` (naming
the node, field or offset) or ``la.DeviceError`` (with the fix); never another exception.

Explicit regression tests for each escape a hostile-input campaign found, then property-based
fuzzers (hypothesis) that mutate valid files, structurally and byte by byte.

The fuzzers run a short, fixed set of examples by default (a few seconds). For a long run, set
the number of (random) examples per fuzzer::

    LAZYARRAY_FUZZ_EXAMPLES=20000 python -m pytest tests/graph/test_loader_fuzz.py

(the same variable drives tests/blocks/test_param_file_errors.py and tests/test_cli_fuzz.py).
"""
from __future__ import annotations

import json

import numpy as np
import pytest
from fuzz_support import call_symbol, dumps, fuzz_settings, mutated_bytes, mutated_json, typed_mutation, valid_symbols
from hypothesis import given
from hypothesis import strategies as st

import lazyarray as la
from lazyarray import blocks as B
from lazyarray.device import gpu_available
from lazyarray.graph import serialize

ALLOWED = (la.GraphFormatError, la.DeviceError)


def _doc(i: int = 0) -> dict:
    return json.loads(valid_symbols()[i])


def _node(doc: dict, name: str) -> dict:
    return next(n for n in doc["nodes"] if n["name"] == name)


def _load(doc_or_text):
    text = doc_or_text if isinstance(doc_or_text, (str, bytes)) else dumps(doc_or_text)
    return la.Symbol.from_json(text)


def _refused(doc_or_text, match: str, error=la.GraphFormatError):
    with pytest.raises(error, match=match) as info:
        _load(doc_or_text)
    assert type(info.value) is error  # exactly the contract's class, not a subclass of something else
    return str(info.value)


def _check_outcome(text) -> None:
    """The contract: a successful load (which then round-trips), or GraphFormatError/DeviceError."""
    try:
        sym = la.Symbol.from_json(text)
    except ALLOWED:
        return
    again = la.Symbol.from_json(sym.to_json())  # whatever loads, saves and loads back the same
    assert again.to_json() == sym.to_json()


# -- regressions: each escape found by the hostile-input campaign -------------------------------
@pytest.mark.parametrize("where", ["attr", "top", "aval", "name"])
def test_deep_nesting_is_refused_before_parsing(where):
    deep = "[" * 100_000 + "]" * 100_000
    doc = _doc()
    if where == "top":
        text = deep
    else:
        marker = "\x00raw:" + deep
        if where == "attr":
            _node(doc, "sum0")["attrs"]["axis"] = marker
        elif where == "aval":
            _node(doc, "x")["avals"][0]["shape"] = marker
        else:
            _node(doc, "x")["name"] = marker
        text = dumps(doc)
    msg = _refused(text, "nested deeper than 64 levels at character offset")
    assert "RecursionError" not in msg


def test_deep_nesting_inside_strings_is_only_text():
    doc = _doc()
    _node(doc, "x")["name"] = "[" * 1000 + "{" * 1000
    assert _load(doc).list_inputs() == ["[" * 1000 + "{" * 1000]


@pytest.mark.parametrize("where", ["version", "id", "dim", "attr"])
def test_integers_with_thousands_of_digits_are_refused(where):
    doc = _doc()
    big = "\x00raw:" + "9" * 5000
    if where == "version":
        doc["version"] = big
    elif where == "id":
        doc["nodes"][0]["id"] = big
    elif where == "dim":
        _node(doc, "x")["avals"][0]["shape"][0] = big
    else:
        _node(doc, "sum0")["attrs"]["axis"] = big
    _refused(doc, r"the number 999999999999\.\.\.9999 \(5000 characters\) at character offset \d+ is out of range")


@pytest.mark.parametrize("value", [2**63, 2**64, -(2**63) - 1, 10**30])
def test_integers_past_64_bits_are_refused(value):
    doc = _doc()
    _node(doc, "x")["avals"][0]["shape"][0] = value  # a dim that would feed the getitem rule
    _refused(doc, f"the number {value} at character offset")
    doc = _doc()
    _node(doc, "getitem0")["attrs"]["key"][0] = value
    _refused(doc, "out of range: integers must fit in 64 bits")


def test_dims_whose_product_overflows_are_refused():
    doc = _doc()
    _node(doc, "x")["avals"][0]["shape"] = [2**62, 2**62, 4]
    _refused(doc, r"node 0 \('x'\): aval 0: the shape .* more than any array can hold")
    doc = _doc()
    _node(doc, "x")["avals"][0]["shape"] = [1] * 65
    _refused(doc, "at most 64 non-negative integers")


@pytest.mark.parametrize("value", [{"slice": [1, 2, 3]}, ["float32"], 5, "V8", "f4,f4", "(2,)f4", "complex256",
                                   "clongdouble", "object", "datetime64", None])
def test_dtypes_come_from_an_allow_list(value):
    doc = _doc()
    _node(doc, "cast0")["attrs"]["dtype"] = value
    _refused(doc, r"node \d+ \('cast0'\): attribute 'dtype': must be one of bool, int8")
    doc = _doc()
    _node(doc, "x")["avals"][0]["dtype"] = value
    _refused(doc, r"node 0 \('x'\): aval 0: dtype must be one of")
    doc = _doc()
    _node(doc, "const0")["value"]["dtype"] = value
    _refused(doc, r"const0'\): bad constant value: dtype must be one of")


@pytest.mark.parametrize("value", ["1e999", "-1e999", "NaN", "Infinity", "-Infinity"])
def test_non_finite_numbers_are_refused(value):
    doc = _doc(2)
    doc["nodes"][0]["avals"][0]["shape"][0] = "\x00raw:" + value
    _refused(doc, "numbers must be finite")


@pytest.mark.parametrize("name", ["\ud800", "a\udfffb", "\udc80"])
def test_lone_surrogates_are_refused(name):
    doc = _doc()
    _node(doc, "x")["name"] = name
    msg = _refused(dumps(doc), r"nodes\[0\]\.name holds a lone surrogate")  # "\ud800" escaped in the JSON
    msg.encode("utf-8")  # the message itself is printable
    _refused(dumps(doc).replace("\\ud800", "\ud800"), "lone surrogate") if name == "\ud800" else None
    raw = json.dumps(doc, ensure_ascii=False).encode("utf-8", "surrogatepass")  # the surrogate UTF-8-encoded
    _refused(raw, "invalid utf-8 text at byte offset")


def test_lone_surrogates_in_keys_and_other_strings_are_refused():
    doc = _doc()
    _node(doc, "sum0")["attrs"]["\ud800"] = 1
    _refused(doc, r"attrs has a key with a lone surrogate")
    doc = _doc()
    doc["comment"] = ["ok", {"x": "\udfff"}]
    _refused(doc, r"comment\[1\]\.x holds a lone surrogate")


def test_surrogate_pairs_are_text():
    doc = _doc()
    _node(doc, "x")["name"] = "\U0001F600 x"
    assert _load(doc).list_inputs() == ["\U0001F600 x"]


@pytest.mark.parametrize("item", [{"slice": 5}, {"slice": [1, 2]}, {"slice": [1.5, None, None]}, {"slice": "1:2"},
                                  {"slice": [None, None, None], "x": 1}, {}, [1], "..x", 1.0, True])
def test_malformed_key_items_are_refused(item):
    doc = _doc()
    _node(doc, "getitem0")["attrs"]["key"][1] = item
    _refused(doc, r"getitem0'\): attribute 'key': must be a list of integers, null, \"\.\.\.\"")


def test_slice_step_zero_is_a_format_error():
    doc = _doc()
    _node(doc, "getitem0")["attrs"]["key"][1] = {"slice": [None, None, 0]}
    _refused(doc, "step cannot be zero")


@pytest.mark.parametrize("node,dtype", [("multiply0", "float32"), ("const0", "float32"), ("x", None)])
def test_null_shapes_only_where_allowed(node, dtype):
    doc = _doc()
    aval = _node(doc, node)["avals"][0]
    aval["shape"] = None
    aval["dtype"] = dtype
    _refused(doc, rf"{node}'\): aval 0: (shape|dtype) must be")


def test_null_shapes_where_allowed_load():
    doc = _doc(4)  # la.sym.var("data") without a shape
    assert doc["nodes"][0]["avals"][0]["shape"] is None
    assert doc["nodes"][-1]["avals"][0] == {"shape": None, "dtype": None, "device": "cpu(0)", "stype": "default"}
    _load(doc)


@pytest.mark.parametrize("field,value", [
    ("shape", 5), ("shape", [-1]), ("shape", [True]), ("shape", [2.0, 3]), ("shape", "2,3"),
    ("device", "cpu(-1)"), ("device", "tpu(0)"), ("device", 0), ("device", "cpu(" + "9" * 5000 + ")"),
    ("device", None), ("stype", ["csr"]), ("stype", "dense"), ("dtype", "BF16"),
])
def test_every_aval_field_is_type_checked(field, value):
    doc = _doc()
    _node(doc, "x")["avals"][0][field] = value
    _refused(doc, r"node 0 \('x'\): aval 0: ")


@pytest.mark.skipif(gpu_available(), reason="a usable GPU loads the constant")
def test_gpu_constant_without_cupy_is_a_device_error_with_the_fix(tmp_path):
    doc = _doc()
    for n in doc["nodes"]:
        for a in n["avals"]:
            a["device"] = "gpu(0)"
    msg = _refused(doc, r"const0'\): this constant is stored on gpu\(0\), which this process cannot use",
                   error=la.DeviceError)
    assert "device_map={'gpu(0)': 'cpu(0)'}" in msg and "pip install 'lazyarray[gpu]'" in msg
    path = tmp_path / "gpu-symbol.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(la.DeviceError, match="gpu-symbol.json"):
        la.load_symbol(str(path))
    with pytest.raises(la.DeviceError, match="device_map"):
        B.SymbolBlock.imports(str(path), ["x"])
    # the fix the message names works
    block = B.SymbolBlock.imports(str(path), ["x"], device_map={"gpu(0)": "cpu(0)"})
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    assert block(la.array(x)).item() == pytest.approx((x[0, 1:3, ::2]).sum())
    sym = la.Symbol(serialize.load(str(path), device_map=la.cpu(0)))
    assert {str(n.avals[0].device) for n in sym.topo()} == {"cpu(0)"}


@pytest.mark.skipif(not gpu_available(), reason="needs a GPU (CuPy)")
def test_gpu_constants_load_onto_their_gpu_and_missing_gpus_are_device_errors():
    import cupy

    doc = _doc()
    for n in doc["nodes"]:
        for a in n["avals"]:
            a["device"] = "gpu(0)"
    sym = _load(doc)
    const = next(n for n in sym.topo() if n.kind == "const")
    assert isinstance(const.value, cupy.ndarray) and const.value.device.id == 0
    x = la.array(np.arange(24, dtype=np.float32).reshape(2, 3, 4), device=la.gpu(0))
    assert la.CachedOp(sym)(x).asnumpy().tolist() == la.CachedOp(_load(_doc()))(x.to(la.cpu(0))).asnumpy().tolist()
    missing = cupy.cuda.runtime.getDeviceCount()
    text = dumps(doc).replace("gpu(0)", f"gpu({missing})")
    msg = _refused(text, rf"stored on gpu\({missing}\), which this process cannot use", error=la.DeviceError)
    assert "device_map=" in msg


def test_device_map_moves_device_attributes_and_checks_its_own_entries():
    sym = la.Symbol(serialize.from_json(valid_symbols()[2], device_map={"cpu(1)": la.cpu(2)}))
    copy = next(n for n in sym.topo() if n.op is not None and n.op.name == "copy_to")
    assert str(copy.params["device"]) == "cpu(2)" and str(copy.avals[0].device) == "cpu(2)"
    sym.check()
    for bad in ({"cpu(0)": "tpu(1)"}, 5, "nowhere"):
        with pytest.raises(la.DeviceError):
            serialize.from_json(valid_symbols()[0], device_map=bad)


def test_device_map_moves_sub_graphs_too():
    sym = la.Symbol(serialize.from_json(call_symbol(), device_map=la.cpu(3))).check()
    call = next(n for n in sym.topo() if n.op is not None and n.op.name == "call")
    inner = [n for g in ("graph", "backward") for n in call.params[g].sym.topo()]
    assert {str(a.device) for n in list(sym.topo()) + inner for a in n.avals} == {"cpu(3)"}


def test_sub_graphs_are_checked_like_graphs():
    doc = json.loads(call_symbol())
    call = next(n for n in doc["nodes"] if n["op"] == "call")
    inner = call["attrs"]["graph"]["graph"]["nodes"]
    inner[-1]["attrs"]["axis"] = "\x00raw:" + "9" * 5000
    _refused(doc, r"the number 999999999999\.\.\.9999 \(5000 characters\)")
    doc = json.loads(call_symbol())
    call = next(n for n in doc["nodes"] if n["op"] == "call")
    call["attrs"]["graph"]["graph"]["nodes"][0]["avals"][0]["dtype"] = {"slice": [1, 2, 3]}
    _refused(doc, r"call0'\): attribute 'graph': call: parameter 'graph': node 0 .*dtype must be one of")


def test_a_null_required_sub_graph_is_a_named_format_error():
    """A required sub-graph given as null made the call op's output count raise AttributeError."""
    doc = json.loads(call_symbol())
    next(n for n in doc["nodes"] if n["op"] == "call")["attrs"]["graph"] = None
    with pytest.raises(la.GraphFormatError, match=r"call0'\): call: parameter 'graph' must be a sub-graph"):
        _load(doc)


def test_op_code_that_fails_on_a_files_value_is_a_named_format_error(monkeypatch):
    """Code an op registers that fails on a file's value (any exception) names the node, chained."""
    from lazyarray.executor.call import CALL

    def broken(params):
        raise AttributeError("an op that did not foresee this value")

    monkeypatch.setattr(CALL, "num_outputs", broken)
    with pytest.raises(la.GraphFormatError, match=r"call0'\): call's output count failed on this value") as info:
        _load(json.loads(call_symbol()))
    assert isinstance(info.value.__cause__, AttributeError)  # the op's own error stays visible


@pytest.mark.parametrize("file", ["/dev/zero", "../../etc/passwd", "a/b.py", "C:\\x.py", "", "x\x00y", "..",
                                  "c:x.py"])
def test_source_must_be_a_base_name(file):
    """Error messages show the source line (linecache): a file must not make the reader open
    another file (``/dev/zero`` would never end)."""
    doc = _doc()
    _node(doc, "sum0")["source"] = [file, 1]
    _refused(doc, r"sum0'\): 'source' file .* must be a file's base name")


@pytest.mark.parametrize("source", [["a.py"], ["a.py", "1"], ["a.py", -1], ["a.py", True], [1, 1], "a.py:1"])
def test_malformed_source_is_refused(source):
    doc = _doc()
    _node(doc, "sum0")["source"] = source
    _refused(doc, r"sum0'\): 'source' must be \[file name, line\]")


@pytest.mark.parametrize("value", [None, 5, 1.5, ["{}"], {"a": 1}])
def test_non_text_is_a_format_error(value):
    with pytest.raises(la.GraphFormatError, match="expected JSON text"):
        la.Symbol.from_json(value)


@pytest.mark.parametrize("path", [None, 5, "no\x00such.json"])
def test_non_paths_are_format_errors(path):
    with pytest.raises(la.GraphFormatError, match="cannot read symbol file"):
        la.load_symbol(path)


def test_invalid_json_names_the_offset():
    _refused('{"format": "lazyarray.symbol",, }', r"not valid JSON: Expecting .* at character offset 30")
    _refused(b'{"format": \xff}', "invalid utf-8 text at byte offset 11")


def test_constant_bytes_are_checked_before_decoding():
    doc = _doc()
    value = _node(doc, "const0")["value"]
    value["base64"] = value["base64"] * 1000
    _refused(doc, r"const0'\): bad constant value: \d+ base64 characters, but float32\[2,2\] takes 16 bytes")
    doc = _doc()
    _node(doc, "const0")["value"]["shape"] = [4]
    _refused(doc, r"bad constant value: float32\[4\] disagrees with the node's aval")
    doc = _doc()
    _node(doc, "const0")["avals"][0]["stype"] = "csr"
    _refused(doc, "a constant is stored dense")


def test_bool_constants_hold_only_true_and_false():
    x = la.array([1.0, 2.0])
    with la.deferred():
        y = la.where(la.array([True, False]), x, x * 2)
    doc = json.loads(la.get_symbol(y, inputs={"x": x}).to_json())
    const = next(n for n in doc["nodes"] if n.get("kind") == "const" and n["value"]["dtype"] == "bool")
    const["value"]["base64"] = "BwA="  # bytes 7, 0
    sym = _load(doc)
    value = next(n.value for n in sym.topo() if n.kind == "const" and n.value.dtype == np.bool_)
    assert value.view(np.uint8).tolist() == [1, 0]
    assert la.CachedOp(sym)(x).asnumpy().tolist() == [1.0, 4.0]


def test_huge_slice_bounds_are_written_as_the_largest_64_bit_ones():
    x = la.array(np.arange(5.0))
    with la.deferred():
        y = x[-(10**30):10**30:10**25]
    sym = la.get_symbol(y, inputs={"x": x})
    back = la.Symbol.from_json(sym.to_json())
    assert back.to_json() == sym.to_json()
    assert la.CachedOp(back)(x).asnumpy().tolist() == [0.0]


def test_attribute_types_are_checked_before_conversion():
    doc = _doc(3)
    pad = next(n for n in doc["nodes"] if n["op"] == "pad")
    for bad in ([], [[]], [[1], 2], "1", [[1.5]]):
        pad["attrs"]["pad_width"] = bad
        _refused(doc, r"pad0'\): attribute 'pad_width'")
    pad["attrs"]["pad_width"] = [[0, 0], [1, 1], [0, 0]]
    pad["attrs"]["constant_values"] = "0"
    _refused(doc, r"attribute 'constant_values': must be a number")


# -- fuzzers -------------------------------------------------------------------------------------
@fuzz_settings(1000)
@given(st.data())
def test_fuzz_structural_mutations_of_valid_symbols(data):
    text = data.draw(st.sampled_from(valid_symbols()).flatmap(mutated_json))
    _check_outcome(text)


@fuzz_settings(1000)
@given(st.data())
def test_fuzz_well_typed_mutations_reach_the_op_rules(data):
    """Odd but well-formed graphs (attributes of the right type, other dims, re-pointed inputs):
    the op rules and the graph check must answer with GraphFormatError too."""
    text = data.draw(st.sampled_from(valid_symbols()).flatmap(typed_mutation))
    _check_outcome(text)


@fuzz_settings(500)
@given(st.data())
def test_fuzz_byte_mutations_of_valid_symbols(data):
    raw = data.draw(st.sampled_from(valid_symbols()).flatmap(lambda t: mutated_bytes(t.encode())))
    _check_outcome(raw)


@fuzz_settings(100)
@given(data=st.data())
def test_fuzz_load_symbol_and_imports_from_files(data, tmp_path):
    """Through the file loaders too (their messages name the file)."""
    text = data.draw(st.sampled_from(valid_symbols()[-1:]).flatmap(mutated_json))
    path = tmp_path / "m-symbol.json"
    path.write_text(text, encoding="utf-8", errors="surrogatepass")
    try:
        la.load_symbol(str(path))
    except ALLOWED:
        pass
    try:
        B.SymbolBlock.imports(str(path), ["data"])
    except ALLOWED:
        pass
    except la.LazyArrayError as exc:  # a loadable graph whose inputs are not what the caller named
        assert "are not inputs of the graph" in str(exc), exc
