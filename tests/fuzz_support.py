"""Shared pieces of the loader fuzzers (tests/graph/test_loader_fuzz.py,
tests/blocks/test_param_file_errors.py, tests/test_cli_fuzz.py): valid files to start from,
structural JSON mutations, byte mutations, and the example counts.

Every fuzzer runs ``fuzz_settings(default)`` examples: a short, derandomized run by default (the
same examples on every CI run), or ``LAZYARRAY_FUZZ_EXAMPLES`` random examples when that is set.
"""
from __future__ import annotations

import copy
import functools
import json
import os
import re
import struct

import numpy as np
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

import lazyarray as la
from lazyarray import blocks as B

EXAMPLES_ENV = "LAZYARRAY_FUZZ_EXAMPLES"


def fuzz_settings(default: int):
    """``default`` derandomized examples, or ``$LAZYARRAY_FUZZ_EXAMPLES`` random ones."""
    env = os.environ.get(EXAMPLES_ENV)
    return settings(max_examples=int(env) if env else default, derandomize=not env, deadline=None,
                    database=None, print_blob=True,
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                           HealthCheck.data_too_large, HealthCheck.filter_too_much])


# -- valid files to mutate -------------------------------------------------------------------------
def _net():
    la.random.seed(0)
    net = B.HybridSequential()
    net.add(B.Conv2D(2, 3, padding=1, activation="relu"), B.BatchNorm(), B.MaxPool2D(), B.Flatten(),
            B.Dropout(0.5), B.Dense(3))
    net.initialize()
    net.hybridize()
    net(la.ones((1, 1, 4, 4)))
    return net


@functools.lru_cache(maxsize=1)
def valid_symbols() -> tuple[str, ...]:
    """Symbol files (JSON text) that load: every attribute type, a constant, a graph input
    without a shape, and a real exported model."""
    x = la.array(np.arange(24, dtype=np.float32).reshape(2, 3, 4))
    with la.deferred():
        y = x[0, 1:3, ::2] * la.array(np.ones((2, 2), np.float32))      # key, a constant
        z = la.sum(y.astype("float64").reshape((4,)), axis=0)           # dtype, ints, axis
        w = la.nn.softmax(la.concatenate([y, y], axis=1), axis=-1)      # int
        v = la.transpose(w, (1, 0)).to(la.cpu(1))                       # ints?, device
        u = la.argmax(la.pad(x, ((0, 0), (1, 1), (0, 0))), axis=1, keepdims=True)  # pad_width, bool
    texts = [la.get_symbol(out, inputs={"x": x}).to_json(indent=1) for out in (z, w, v, u)]
    texts.append(la.sym.relu(la.sym.var("data") * 2.0).to_json())    # unknown shapes
    texts.append(call_symbol())                                        # sub-graphs (a call node)
    with open(exported_model()[0]) as f:
        texts.append(f.read())
    for t in texts:
        la.Symbol.from_json(t)  # every starting point is valid
    return tuple(texts)


def call_symbol() -> str:
    """A graph holding a ``call`` node (a CachedOp run under autograd), whose attributes are
    sub-graphs: the forward graph and its backward."""
    x = la.array(np.arange(6, dtype=np.float32).reshape(2, 3))
    x.attach_grad()
    with la.deferred():
        z = la.nn.softmax(x[:, ::-1] * 2, axis=-1)
    op = la.CachedOp(la.get_symbol(z, inputs={"x": x}))
    with la.autograd.record():
        y = op(x) * 3
    return la.get_symbol(y, inputs={"x": x}).to_json(indent=1)


@functools.lru_cache(maxsize=1)
def _tmpdir() -> str:
    import tempfile
    return tempfile.mkdtemp(prefix="lazyarray-fuzz-")


@functools.lru_cache(maxsize=1)
def exported_model() -> tuple[str, str]:
    """(symbol file, parameter file) of a small exported model (inputs: ``data``)."""
    return _net().export(os.path.join(_tmpdir(), "model"))


def valid_param_file() -> bytes:
    with open(exported_model()[1], "rb") as f:
        return f.read()


def safetensors_file(header: dict, data: bytes, pad: bool = True) -> bytes:
    """A safetensors file from a header dict and the data bytes (header padded to 8 bytes)."""
    h = json.dumps(header, separators=(",", ":")).encode("utf-8", "surrogatepass")
    if pad:
        h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + data


def split_safetensors(raw: bytes) -> tuple[dict, bytes]:
    (n,) = struct.unpack("<Q", raw[:8])
    return json.loads(raw[8:8 + n]), raw[8 + n:]


# -- JSON values and mutations ---------------------------------------------------------------------
_RAW = "\x00raw:"  # a string standing for raw JSON text (numbers json.dumps cannot write, deep nests)
RAW_TEXTS = ["9" * 5000, "-" + "9" * 30, "1e999", "-1e999", "NaN", "Infinity", "-Infinity", "1" + "0" * 19,
             "9223372036854775808", "-9223372036854775809", "18446744073709551616", "1.5e308", "-0", "0.0",
             "[" * 100_000 + "]" * 100_000, "{\"a\":" * 5000 + "1" + "}" * 5000, "[" * 65 + "]" * 65,
             "[" * 63 + "]" * 63, '"\\ud800"', '"\\udc00x"', '"\\ud83d\\ude00"', '"\\u0000"']
WEIRD_STRINGS = ["\ud800", "\udfff", "a\udcffb", "\ud83d\ude00", "\x00", "\n", " ", "", "é" * 300,
                 "a/b", "../x", "/dev/zero", "C:\\x", "<string>", ".", "..",
                 "gpu(0)", "gpu(1)", "gpu(999999)", "gpu(9999999)", "cpu(0)", "cpu(1)", "cpu(-1)", "cpu( 1)",
                 "cpu(1_0)", "tpu(0)", "cpu(" + "9" * 5000 + ")",
                 "float32", "int32", "bool", "float16", "uint64", "complex128", "object", "V8", "f4,f4", "(2,)f4",
                 "O", "U3", "datetime64", "BF16", "F8_E4M3",
                 "...", "default", "csr", "row_sparse", "var", "const", "op", "relu", "dense", "getitem",
                 "nn.dense", "os.system", "split", "lazyarray.symbol", "data", "0.weight"]
GRAPH_KEYS = ["format", "version", "nodes", "outputs", "id", "name", "op", "kind", "inputs", "attrs", "avals",
              "value", "source", "shape", "dtype", "device", "stype", "base64", "slice", "axis", "key"]


scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-3, 70), st.integers(-(2**70), 2**70),
    st.sampled_from([2**31, 2**32, 2**62, 2**63 - 1, -(2**63), 2**63, 2**64, 10**18, 10**19]),
    st.floats(allow_nan=True, allow_infinity=True), st.sampled_from([0.5, -1.0, 1e308, 5e-324]),
    st.text(max_size=8), st.sampled_from(WEIRD_STRINGS),
    st.sampled_from(RAW_TEXTS).map(lambda t: _RAW + t),
)
json_values = st.recursive(
    scalars,
    lambda kids: st.lists(kids, max_size=4) | st.dictionaries(st.sampled_from(GRAPH_KEYS) | st.text(max_size=4),
                                                             kids, max_size=4),
    max_leaves=8,
)


def dumps(doc) -> str:
    """``json.dumps`` that writes ``_RAW`` strings as raw JSON text."""
    text = json.dumps(doc)
    if "\\u0000raw:" not in text:
        return text
    return re.sub(r'"\\u0000raw:((?:[^"\\]|\\.)*)"', lambda m: json.loads(f'"{m.group(1)}"'), text)


def paths(value, prefix=()):
    """Every path (tuple of keys / indices) into a JSON value, deepest first, the root last
    (hypothesis prefers the first items of a list)."""
    out = []
    stack = [(value, prefix)]
    while stack:
        v, p = stack.pop()
        items = v.items() if isinstance(v, dict) else enumerate(v) if isinstance(v, list) else ()
        for k, child in items:
            out.append(p + (k,))
            stack.append((child, p + (k,)))
    out.reverse()
    return out + [prefix]


def _nudge(v):
    return st.sampled_from([v + 1, v - 1, -v, 0, v * 1000, 2**31 - 1, 2**62, 2**63 - 1, 2**63, -(2**63) - 1])


@st.composite
def mutated_json(draw, text: str):
    """``text`` (a JSON document) with 1-3 structural mutations: a value replaced by a random
    JSON value (huge numbers, deep nesting, wrong types, odd strings), an int nudged, a key or
    item deleted, an item inserted, or a value copied from elsewhere in the document."""
    doc = json.loads(text)
    for _ in range(draw(st.integers(1, 3))):
        where = paths(doc)
        path = draw(st.sampled_from(where))
        if not path:
            if draw(st.integers(0, 9)) == 9:
                doc = draw(json_values)
            continue
        parent = doc
        for k in path[:-1]:
            parent = parent[k]
        old = parent[path[-1]]
        how = draw(st.sampled_from(["nudge", "replace", "replace", "delete", "insert", "copy"]))
        if how == "nudge" and isinstance(old, int) and not isinstance(old, bool):
            parent[path[-1]] = draw(_nudge(old))
        elif how == "delete":
            del parent[path[-1]]
        elif how == "insert" and isinstance(parent, list):
            parent.insert(path[-1], draw(json_values))
        elif how == "copy":
            src = doc
            for k in draw(st.sampled_from(where)):
                src = src[k]
            parent[path[-1]] = copy.deepcopy(src)
        else:
            parent[path[-1]] = draw(json_values)
    return dumps(doc)


@st.composite
def mutated_bytes(draw, data: bytes, keep: int = 0):
    """``data`` with 1-6 byte-level edits (set, insert, delete, duplicate a span, truncate), the
    first ``keep`` bytes left alone."""
    b = bytearray(data)
    for _ in range(draw(st.integers(1, 6))):
        how = draw(st.sampled_from(["set", "set", "insert", "delete", "dup", "truncate"]))
        pos = draw(st.integers(keep, max(keep, len(b))))
        if how == "set" and pos < len(b):
            b[pos] = draw(st.sampled_from(b'[]{}",:0123456789-e.\\ \x00\xff\xed\xa0\x80') | st.integers(0, 255))
        elif how == "insert":
            b[pos:pos] = draw(st.binary(min_size=1, max_size=6) | st.sampled_from(
                [b"[", b"]", b"{", b'"', b"\\u", b"\\ud800", b"\xed\xa0\x80", b"9" * 30, b"e999"]))
        elif how == "delete":
            del b[pos:pos + draw(st.integers(1, 16))]
        elif how == "dup":
            b[pos:pos] = b[pos:pos + draw(st.integers(1, 64))]
        elif how == "truncate":
            del b[pos:]
    return bytes(b)


# -- parameter files -------------------------------------------------------------------------------
_FIELDS = st.sampled_from(["dtype", "shape", "data_offsets", "extra"])
_DTYPES = st.sampled_from(["F32", "F64", "F16", "I32", "I64", "U8", "BOOL", "BF16", "F8_E4M3", "C64", "f32", ""])


@st.composite
def mutated_param_file(draw) -> bytes:
    """The exported parameter file with its header mutated: a tensor entry's field, the metadata
    record (as JSON or as raw text), a tensor renamed, or the header length."""
    header, data = split_safetensors(valid_param_file())
    names = sorted(k for k in header if k != "__metadata__")
    for _ in range(draw(st.integers(1, 3))):
        how = draw(st.sampled_from(["entry", "record", "record_text", "rename", "metadata"]))
        name = draw(st.sampled_from(names))
        if how == "entry":
            field = draw(_FIELDS)
            if field == "dtype":
                header[name]["dtype"] = draw(_DTYPES | json_values)
            elif field == "shape" and draw(st.booleans()):
                header[name]["shape"] = draw(st.lists(st.integers(-1, 2**64), max_size=4))
            elif field == "data_offsets" and draw(st.booleans()):
                header[name]["data_offsets"] = draw(st.lists(st.integers(-1, len(data) + 8), max_size=3))
            else:
                header[name][field] = draw(json_values)
        elif how == "record" and _record(header) is not None:
            record = _record(header)
            record[draw(st.sampled_from(["version", "grad_null", "graph_sha256", "x"]))] = draw(
                json_values | st.lists(st.sampled_from(names), max_size=2))
            header["__metadata__"]["lazyarray.params"] = json.dumps(record)
        elif how == "record_text" and isinstance(header.get("__metadata__"), dict):
            header["__metadata__"]["lazyarray.params"] = draw(st.text(max_size=12) | st.sampled_from(
                ["[" * 70 + "]" * 70, "9" * 5000, "\ud800", '{"grad_null": 5}']))
        elif how == "rename" and len(names) > 1:
            header[draw(st.text(max_size=6) | st.sampled_from(["\ud800", "data", "__metadata__"]))] = header.pop(name)
            names = sorted(k for k in header if k != "__metadata__" and isinstance(header[k], dict))
        elif how == "metadata":
            header["__metadata__"] = draw(json_values)
    raw = safetensors_file(header, data, pad=draw(st.booleans()))
    if draw(st.integers(0, 9)) == 9:
        raw = struct.pack("<Q", draw(st.integers(0, 2**64 - 1))) + raw[8:]
    return raw


def _record(header: dict):
    meta = header.get("__metadata__")
    try:
        record = json.loads(meta["lazyarray.params"])
    except (TypeError, KeyError, ValueError):
        return None
    return record if isinstance(record, dict) else None


# -- well-typed mutations (reach the op rules and the graph check) -----------------------------------
_small = st.integers(-3, 9)
_dims = st.lists(st.integers(0, 9) | st.sampled_from([0, 2**31, 2**40, 2**62, 2**63 - 1]), max_size=5)
_slice_part = st.none() | st.integers(-12, 12) | st.sampled_from([2**63 - 1, -(2**63)])
TYPED_VALUES = {
    "float": st.floats(-1e30, 1e30) | _small,
    "int": _small | st.sampled_from([2**31, 2**63 - 1, -(2**63)]),
    "bool": st.booleans(), "bool?": st.none() | st.booleans(),
    "ints": st.lists(_small, max_size=5) | _small | _dims, "ints?": st.none() | st.lists(_small, max_size=5),
    "axis": st.none() | _small | st.lists(_small, max_size=4),
    "dtype": st.sampled_from([str(d) for d in la.aval.SUPPORTED_DTYPES]),
    "device": st.sampled_from(["cpu(0)", "cpu(1)", "cpu(7)", "gpu(0)"]),
    "key": st.lists(st.none() | _small | st.just("...") | st.builds(
        lambda a, b, c: {"slice": [a, b, c]}, _slice_part, _slice_part, _slice_part), max_size=5),
    "pad_width": _small | st.lists(_small, min_size=1, max_size=3) | st.lists(
        st.lists(_small, min_size=1, max_size=2), min_size=1, max_size=4),
    "choice": st.sampled_from(["default", "csr", "row_sparse", "constant", "edge", "reflect", "x"]),
}


@st.composite
def typed_mutation(draw, text: str):
    """``text`` with 1-3 well-typed edits: an op attribute set to another value of its declared
    type, an aval's dims/dtype/device changed, or an input re-pointed at another node, so that
    the op rules and the graph check see odd but well-formed graphs."""
    from lazyarray.ops import registry

    doc = json.loads(text)
    nodes = doc["nodes"]
    for _ in range(draw(st.integers(1, 3))):
        node = draw(st.sampled_from(nodes))
        how = draw(st.sampled_from(["attr", "shape", "dtype", "device", "input"]))
        if how == "attr" and node.get("op"):
            params = registry.get(node["op"]).params
            if params:
                p = draw(st.sampled_from(params))
                node.setdefault("attrs", {})[p.name] = draw(TYPED_VALUES.get(p.type.name, json_values))
        elif how == "shape":
            node["avals"][0]["shape"] = draw(_dims)
            if node.get("kind") == "const":  # keep the value consistent sometimes
                node["value"]["shape"] = node["avals"][0]["shape"]
        elif how == "dtype":
            node["avals"][0]["dtype"] = draw(TYPED_VALUES["dtype"])
        elif how == "device":
            node["avals"][0]["device"] = draw(TYPED_VALUES["device"])
        elif how == "input" and node.get("inputs"):
            i = draw(st.integers(0, len(node["inputs"]) - 1))
            node["inputs"][i] = [draw(st.sampled_from(nodes))["id"], draw(st.integers(0, 2))]
    return json.dumps(doc)
