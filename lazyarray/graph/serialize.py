"""Symbol <-> JSON: a versioned, typed, lossless format that loads without running code.

The schema is written down in ``docs/graph-format.md``. Loading uses ``json.loads`` and
the op registry only (no pickle, no eval): untrusted files cannot run code, and every
problem (bad JSON, unknown op, dangling input, cycle, wrong attribute type, future
version) raises ``GraphFormatError`` naming the node.
"""
from __future__ import annotations

import base64
import contextlib
import contextvars
import functools
import json
import math
import os
import re
import reprlib

import numpy as np

from .. import fileio
from ..aval import STYPES, SUPPORTED_DTYPES, Aval, check_shape
from ..device import Device, cpu, gpu, to_device
from ..dim import DimExpr, has_symbols
from ..errors import DeviceError, GraphFormatError, LazyArrayError, fmt_shape
from ..ops import registry
from ..ops.params import dim_from_json, dim_to_json
from ..sbp import parse as sbp_parse
from .node import PINNED, Entry, Node, const_node
from .rewrite import gc_paused

FORMAT = "lazyarray.symbol"
VERSION = 3  # 2: op attributes may hold sub-graphs (call, cond, while_loop, foreach, fused); 3: symbolic dims
_NESTED_GRAPHS = 2  # the first version whose files may nest graphs in attributes
_SYMBOLIC_DIMS = 3  # the first version whose shapes and size attributes may be la.Dim expressions


# -- writing -----------------------------------------------------------------------------
_ENCODE = {True: json.JSONEncoder(allow_nan=True).encode, False: json.JSONEncoder(allow_nan=False).encode}
# A string as JSON text, as ``JSONEncoder().encode`` writes it (ensure_ascii), without its per-call checks.
_string = json.encoder.encode_basestring_ascii


def to_dict(sym) -> dict:
    """The JSON-ready dict of ``sym`` (see docs/graph-format.md): its JSON text read back."""
    with gc_paused():
        return json.loads(_graph_text(sym, allow_nan=True))


def to_json(sym, indent: int | None = None) -> str:
    """``sym`` as JSON text (keys in a fixed order, so equal graphs give equal text), written in one
    pass over the nodes (``_graph_text``); ``indent`` re-formats it."""
    with gc_paused():
        text = _graph_text(sym, allow_nan=False)
        return text if indent is None else json.dumps(json.loads(text), indent=indent)


def _graph_text(sym, allow_nan: bool) -> str:
    """The graph's JSON text, as ``json.dumps`` of its dict writes it (default separators), node by
    node: what many nodes share (their avals, op names, source files) is encoded once."""
    enc = _ENCODE[allow_nan]
    order = sym.topo()
    refs = {id(n): f"[{i}, " for i, n in enumerate(order)}  # the start of a reference to node i
    names = sym.names()
    memo: dict = {}
    needs = 1
    parts = []
    for i, node in enumerate(order):
        text, need = _node_text(node, i, refs, names[id(node)], memo, enc)
        parts.append(text)
        if need > needs:
            needs = need
    outs = ", ".join([f"{refs[id(e.node)]}{e.index}]" for e in sym.outputs])
    # (``needs``: the oldest version that describes this graph: older readers still load it)
    return f'{{"format": {enc(FORMAT)}, "version": {needs}, "nodes": [{", ".join(parts)}], "outputs": [{outs}]}}'


def _node_text(node, i: int, refs: dict, name: str, memo: dict, enc) -> tuple[str, int]:
    """One node's JSON object, and the format version it needs."""
    needs = 1
    params = node.params
    if node.op is None:
        head = f'"op": null, "kind": {_string(node.kind)}' + (f", {_string(PINNED)}: true" if params.get(PINNED) else "")
    else:
        op = memo.get(node.op)
        if op is None:  # the op's name, encoded once
            op = memo[node.op] = f'"op": {_string(node.op.name)}, "inputs": ['
        ins = ", ".join([f"{refs[id(e.node)]}{e.index}]" for e in node.inputs])
        head = f'{op}{ins}], "attrs": {_attrs_text(node, enc) if params else "{}"}'
        if params and any(node.op._param_map[k].type.name == "graph" for k in params):
            needs = _NESTED_GRAPHS
    avals = _avals_text(node.avals, memo, enc)
    f = [f'{{"id": {i}, "name": {_string(name)}, {head}, "avals": {avals[0]}']
    if needs < _SYMBOLIC_DIMS and (params.get(PINNED) if node.op is None else
                                   avals[1] or (params and has_symbols(tuple(params.values())))):
        needs = _SYMBOLIC_DIMS
    if node.op is None and node.kind == "const":
        f.append('"value": ' + enc(_value_to_json(node.value)))
    if node.source:
        src = memo.get(node.source[0])
        if src is None:
            src = memo[node.source[0]] = _string(os.path.basename(node.source[0]))
        f.append(f'"source": [{src}, {node.source[1]}]')
    if node.sbp is not None:  # optional: only graphs annotated by ``infer_sbp`` carry it
        f.append('"sbp": ' + enc([str(s) for s in node.sbp]))
    if node.block:  # optional: nodes recorded inside a block's forward
        f.append('"block": ' + enc([[nm, kind] for nm, kind in node.block]))
    return ", ".join(f) + "}", needs


def _attrs_text(node, enc) -> str:
    pm = node.op._param_map
    return enc({k: _attr_to_json(pm[k].type, v) for k, v in node.params.items()})


def _avals_text(avals: tuple, memo: dict, enc) -> tuple[str, bool]:
    """A node's avals as JSON text, and whether a shape is symbolic (encoded once per distinct avals)."""
    try:
        got = memo.get(avals)
    except TypeError:  # (an aval holding something unhashable: encoded for this node alone)
        got = None
    if got is None:
        got = (enc([_aval_to_json(a) for a in avals]), any(has_symbols(a.shape) for a in avals))
        with contextlib.suppress(TypeError):
            memo[avals] = got
    return got


def save(sym, path: str) -> None:
    """Write ``sym`` to ``path`` atomically (a crash never leaves a half-written file)."""
    write_atomic(path, to_json(sym, indent=1).encode())


write_atomic = fileio.write_atomic  # (the one atomic-write helper lives in lazyarray/fileio.py)


def _aval_to_json(a: Aval) -> dict:
    return {
        "shape": None if a.shape is None else [dim_to_json(d) for d in a.shape],
        "dtype": None if a.dtype is None else str(a.dtype),
        "device": None if a.device is None else str(a.device),
        "stype": a.stype,
    }


def _attr_to_json(ptype, value):
    out = ptype.to_json(value)
    if ptype.name == "key":  # slice bounds past 64 bits mean the same as the largest 64-bit ones
        out = [{"slice": [b if b is None or isinstance(b, dict) else max(INT_MIN, min(INT_MAX, b)) for b in k["slice"]]}
               if isinstance(k, dict) else k for k in out]
    return out


def _value_to_json(v) -> dict:
    arr = np.array(v if not hasattr(v, "get") else v.get(), order="C", copy=True)
    data = arr.astype(arr.dtype.newbyteorder("<"), copy=False).tobytes()
    return {"dtype": str(arr.dtype), "shape": list(arr.shape), "base64": base64.b64encode(data).decode("ascii")}


# -- reading -----------------------------------------------------------------------------
# Limits that hold for every file this library writes, checked before anything deeper is
# parsed or built, so that no file can make the reader recurse, convert a huge number, or
# hand an op rule a value of the wrong type (docs/graph-format.md, "Limits").
MAX_DEPTH = 64  # nesting of JSON arrays/objects: the format nests 7 deep, plus 5 per sub-graph in a
# ``call`` node's attributes (a sub-graph of a sub-graph of ...: eleven levels fit)
INT_MIN, INT_MAX = -(2**63), 2**63 - 1  # every integer in a file is a 64-bit integer
MAX_NDIM = 64  # NumPy's own limit on the number of dims
MAX_FILE_NAME = 255  # a node's source file: a base name only
_DTYPE_NAMES = tuple(str(d) for d in SUPPORTED_DTYPES)
_DEVICE = re.compile(r"(cpu|gpu)\(([0-9]{1,6})\)")
# A JSON string (unrolled: no alternation per character), for stripping strings out of the text
# before brackets are counted.
_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
_SHORT = reprlib.Repr()
_SHORT.maxstring, _SHORT.maxother, _SHORT.maxlong = 60, 60, 40
_SHORT.maxlist = _SHORT.maxdict = _SHORT.maxtuple = 6
_SHORT.maxlevel = 3


def _short(value) -> str:
    """``repr(value)``, cut short: a file's values appear in messages, whatever their size."""
    return _SHORT.repr(value)


class _BadNumber(Exception):
    """Raised from the JSON parser's number hooks (caught in ``parse_json``)."""


def _bounded_int(text: str) -> int:
    # The digits are counted before converting: Python's int() of a very long digit string is
    # slow, and refused outright past sys.get_int_max_str_digits().
    if len(text) > 20:
        raise _BadNumber(text)
    value = int(text)
    if not INT_MIN <= value <= INT_MAX:
        raise _BadNumber(text)
    return value


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _BadNumber(text)
    return value


def _no_constant(text: str):
    raise _BadNumber(text)  # NaN, Infinity, -Infinity: not JSON, and never written


def parse_json(data, what: str, max_depth: int = MAX_DEPTH, offset: int = 0):
    """The JSON value in ``data`` (``str`` or UTF-8/16/32 ``bytes``), parsed within the limits
    above; ``GraphFormatError`` naming ``what`` and the offset of the problem otherwise.

    Checked before parsing: the text is valid Unicode and nests at most ``max_depth`` deep.
    While parsing: every integer fits 64 bits, every number is finite. After: no string holds
    a lone surrogate (``"\\ud800"``). ``offset`` is added to reported offsets (the position of
    ``data`` in a larger file).
    """
    if isinstance(data, (bytes, bytearray, memoryview)):
        data = bytes(data)
        encoding = json.detect_encoding(data)
        try:
            text = data.decode(encoding)  # strict: encoded lone surrogates are refused too
        except UnicodeDecodeError as exc:
            raise GraphFormatError(f"{what}: not valid JSON: invalid {exc.encoding} text at byte offset "
                                   f"{offset + exc.start} ({exc.reason})") from None
        # Offsets below count characters of the decoded text: bytes, for ASCII in UTF-8.
        unit = "byte" if encoding == "utf-8" and text.isascii() else "character"
    elif isinstance(data, str):
        text, unit = data, "character"
        if not text.isascii():
            try:
                text.encode("utf-8")
            except UnicodeEncodeError as exc:
                raise GraphFormatError(f"{what}: not valid JSON: lone surrogate {text[exc.start]!r} at "
                                       f"character offset {offset + exc.start} is not Unicode text") from None
    else:
        raise GraphFormatError(f"{what}: expected JSON text (str or bytes), got {type(data).__name__}")
    _check_depth(text, what, max_depth, offset, unit)
    try:
        doc = json.loads(text, parse_int=_bounded_int, parse_float=_finite_float, parse_constant=_no_constant)
    except json.JSONDecodeError as exc:
        raise GraphFormatError(f"{what}: not valid JSON: {exc.msg} at {unit} offset {offset + exc.pos} "
                               f"(line {exc.lineno}, column {exc.colno})") from None
    except _BadNumber as exc:
        literal = exc.args[0]
        at = text.find(literal)
        where = f" at {unit} offset {offset + at}" if at >= 0 else ""
        shown = literal if len(literal) <= 40 else f"{literal[:12]}...{literal[-4:]} ({len(literal)} characters)"
        raise GraphFormatError(f"{what}: the number {shown}{where} is out of range: integers must fit "
                               "in 64 bits and numbers must be finite") from None
    if "\\u" in text and _SURROGATE_ESCAPE.search(text):
        _check_strings(doc, what)
    return doc


def _check_depth(text: str, what: str, max_depth: int, offset: int, unit: str) -> None:
    """``GraphFormatError`` when JSON arrays/objects in ``text`` nest deeper than ``max_depth``
    (strings stripped first: brackets in names do not count). Linear, and fast: NumPy counts."""
    if text.count("[") + text.count("{") <= max_depth:
        return
    stripped = "".join(text.split('"')[::2]) if "\\" not in text else _STRING.sub("", text)
    raw = np.frombuffer(stripped.encode("utf-8", "surrogatepass"), dtype=np.uint8)
    opens = (raw == ord("[")) | (raw == ord("{"))
    marks = np.flatnonzero(opens | (raw == ord("]")) | (raw == ord("}")))
    if not len(marks):
        return
    depth = np.cumsum(np.where(opens[marks], 1, -1), dtype=np.int64)
    if int(depth.max()) <= max_depth:
        return
    # Too deep: find where, in the original text (only on this error path, so a Python loop).
    level = 0
    for m in re.finditer(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]', text, re.DOTALL):
        c = m.group()
        if c in "[{":
            level += 1
            if level > max_depth:
                raise GraphFormatError(f"{what}: JSON nested deeper than {max_depth} levels at {unit} offset "
                                       f"{offset + m.start()}; no valid file nests this deep")
        elif c in "]}":
            level -= 1
    raise GraphFormatError(f"{what}: JSON nested deeper than {max_depth} levels; no valid file nests this deep")


def _check_strings(doc, what: str) -> None:
    """``GraphFormatError`` naming the first string (or key) that holds a lone surrogate."""
    try:
        json.dumps(doc, ensure_ascii=False).encode("utf-8")
        return
    except UnicodeEncodeError:
        pass
    stack = [(doc, "")]
    while stack:  # iterative (depth is already bounded, but no recursion is needed either)
        value, path = stack.pop()
        if isinstance(value, str):
            if not _is_text(value):
                raise GraphFormatError(f"{what}: {path or 'the document'} holds a lone surrogate "
                                       f"({_short(value)}), which is not Unicode text")
        elif isinstance(value, dict):
            for k, v in value.items():
                if not _is_text(k):
                    raise GraphFormatError(f"{what}: {path or 'the document'} has a key with a lone "
                                           f"surrogate ({_short(k)}), which is not Unicode text")
                stack.append((v, f"{path}.{k}" if path else k))
        elif isinstance(value, list):
            stack.extend((v, f"{path}[{i}]") for i, v in enumerate(value))
    raise GraphFormatError(f"{what}: a string holds a lone surrogate, which is not Unicode text")


def _is_text(s: str) -> bool:
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def from_json(text: str | bytes, device_map=None) -> list[Entry]:
    """The output entries of the graph in JSON ``text``; ``GraphFormatError`` on anything malformed.

    ``device_map`` (optional) moves the graph while loading: a ``Device`` (every device becomes
    it) or a dict from devices (``la.gpu(0)`` or ``"gpu(0)"``) to devices; unlisted ones stay.
    """
    return _load_text(text, "symbol JSON", device_map)


def load(path: str, device_map=None) -> list[Entry]:
    """The output entries of the graph saved at ``path`` (see ``from_json``)."""
    if not isinstance(path, (str, bytes, os.PathLike)):  # open(3) would read (and close) file descriptor 3
        raise GraphFormatError(f"cannot read symbol file {_short(path)}: a path must be a str or os.PathLike, "
                               f"got {type(path).__name__}")
    text = fileio.read_regular(path, "symbol file")  # (a device or a FIFO refused before opening)
    return _load_text(text, f"symbol file {path!r}", device_map)


# The device map of the load in progress: sub-graphs (a ``call`` node's attributes) are loaded by
# their parameter type, which calls ``from_dict`` without one; they move with the graph.
_REMAP: contextvars.ContextVar = contextvars.ContextVar("lazyarray_load_remap", default=None)


def _load_text(text, what: str, device_map) -> list[Entry]:
    remap = _device_mapper(device_map)
    with gc_paused():
        doc = parse_json(text, what)
        token = _REMAP.set(remap)
        try:
            return from_dict(doc, remap)
        except GraphFormatError as exc:
            if what == "symbol JSON":
                raise
            raise GraphFormatError(f"{what}: {exc}") from None
        except DeviceError as exc:
            if what == "symbol JSON":
                raise
            raise DeviceError(f"{what}: {exc}") from None
        finally:
            _REMAP.reset(token)


def _device_mapper(device_map):
    """``device_map`` as a function ``Device -> Device`` (``DeviceError`` for a malformed map)."""
    if device_map is None:
        return None
    if isinstance(device_map, (Device, str)):
        target = Device.parse(device_map)
        return lambda dev: target
    if not isinstance(device_map, dict):
        raise DeviceError(f"device_map must be a device or a dict of devices, got {_short(device_map)}")
    table = {Device.parse(k): Device.parse(v) for k, v in device_map.items()}
    return lambda dev: table.get(dev, dev)


def from_dict(doc, remap=None) -> list[Entry]:
    """The output entries of a graph in dict form, validating everything but graph invariants
    (``Symbol.from_json`` runs ``check()`` on the result). ``remap``: a ``Device -> Device``
    function applied to every device in the graph (see ``from_json``; by default, the map of the
    load in progress)."""
    if remap is None:
        remap = _REMAP.get()
    if not isinstance(doc, dict):
        raise GraphFormatError(f"expected a JSON object at the top level, got {type(doc).__name__}")
    if doc.get("format") != FORMAT:
        raise GraphFormatError(f"not a lazyarray symbol: 'format' is {_short(doc.get('format'))}, "
                               f"expected {FORMAT!r}")
    version = doc.get("version")
    if not isinstance(version, int) or isinstance(version, bool):
        raise GraphFormatError(f"'version' must be an integer, got {_short(version)}")
    if version > VERSION:
        raise GraphFormatError(f"schema version {version} is newer than this lazyarray reads (up to "
                               f"{VERSION}); upgrade lazyarray to load it")
    if version < 1:
        raise GraphFormatError(f"unknown schema version {version}")
    raw_nodes = doc.get("nodes")
    if not isinstance(raw_nodes, list):
        raise GraphFormatError("'nodes' must be a list")
    raw: dict[int, dict] = {}
    for i, d in enumerate(raw_nodes):
        if not isinstance(d, dict):
            raise GraphFormatError(f"node #{i} must be an object, got {type(d).__name__}")
        nid = d.get("id")
        if not isinstance(nid, int) or isinstance(nid, bool):
            raise GraphFormatError(f"node #{i} ({_short(d.get('name'))}): 'id' must be an integer, got {_short(nid)}")
        if nid in raw:
            raise GraphFormatError(f"node #{i} ({_short(d.get('name'))}): duplicate id {nid}")
        raw[nid] = d
    order = _ordered_ids(raw)
    built: dict[int, Node] = {}
    for nid in order:
        d = raw[nid]
        try:
            built[nid] = _node_from_json(d, built, raw, remap)
        except (ValueError, TypeError, OverflowError, IndexError, KeyError) as exc:
            if isinstance(exc, LazyArrayError):
                raise
            # Everything a node holds is type-checked above; this names the node if a check is missing.
            raise GraphFormatError(f"{_label(d)}: cannot load this node ({type(exc).__name__}: "
                                   f"{_short(str(exc))})") from exc
    outputs = _refs(doc.get("outputs"), built, "outputs", raw)
    if not outputs:
        raise GraphFormatError("'outputs' must list at least one [node id, output index] pair")
    return outputs


def _label(d: dict) -> str:
    return f"node {d.get('id')} ({_short(d.get('name'))})"


def _is_ref(ref) -> bool:
    """A ``[node id, output index]`` pair of ints (JSON booleans are not ints here)."""
    return isinstance(ref, list) and len(ref) == 2 and all(
        isinstance(r, int) and not isinstance(r, bool) for r in ref)


def _ordered_ids(raw: dict[int, dict]) -> list[int]:
    """Node ids in dependency order; dangling references and cycles are errors."""
    deps: dict[int, list[int]] = {}
    for nid, d in raw.items():
        ins = d.get("inputs", [])
        if not isinstance(ins, list):
            raise GraphFormatError(f"{_label(d)}: 'inputs' must be a list of [node id, index] pairs")
        ids = []
        for ref in ins:
            if not _is_ref(ref):
                raise GraphFormatError(f"{_label(d)}: input {_short(ref)} is not a [node id, output index] pair")
            if ref[0] not in raw:
                raise GraphFormatError(f"{_label(d)}: dangling input reference to node id {ref[0]}, "
                                       "which does not exist")
            ids.append(ref[0])
        deps[nid] = ids
    state: dict[int, int] = {}  # 1 = on the stack, 2 = done
    order: list[int] = []
    for root in raw:
        if state.get(root):
            continue
        stack = [(root, iter(deps[root]))]
        state[root] = 1
        while stack:
            nid, it = stack[-1]
            for dep in it:
                s = state.get(dep)
                if s == 1:
                    raise GraphFormatError(f"{_label(raw[dep])}: the graph has a cycle through this node "
                                           f"(reached again from {_label(raw[nid])})")
                if s is None:
                    state[dep] = 1
                    stack.append((dep, iter(deps[dep])))
                    break
            else:
                stack.pop()
                state[nid] = 2
                order.append(nid)
    return order


def _refs(refs, built: dict[int, Node], where: str, raw) -> list[Entry]:
    if not isinstance(refs, list):
        raise GraphFormatError(f"{where}: must be a list of [node id, output index] pairs")
    out = []
    for ref in refs:
        if not _is_ref(ref):
            raise GraphFormatError(f"{where}: {_short(ref)} is not a [node id, output index] pair")
        nid, idx = ref
        if nid not in built:
            raise GraphFormatError(f"{where}: dangling reference to node id {nid}")
        node = built[nid]
        n_out = len(node.avals) or 1
        if not 0 <= idx < n_out:
            raise GraphFormatError(f"{where}: reads output {idx} of {_label(raw[nid])}, which has {n_out}")
        out.append(Entry(node, idx))
    return out


def _node_from_json(d: dict, built: dict[int, Node], raw, remap=None) -> Node:
    node = _plain_node_from_json(d, built, raw, remap)
    if d.get("sbp") is not None:
        node.sbp = _sbp_from_json(d["sbp"], _label(d), len(node.avals))
    if d.get("block") is not None:
        node.block = _block_from_json(d["block"], _label(d))
    return node


MAX_BLOCK_DEPTH = 64
MAX_BLOCK_NAME = 200


def _block_from_json(v, label: str) -> tuple | None:
    """``[[child name, block type], ...]`` (the block path that created the node) as ``Node.block``."""
    if not (isinstance(v, list) and len(v) <= MAX_BLOCK_DEPTH and all(
            isinstance(p, list) and len(p) == 2 and all(
                isinstance(s, str) and 0 < len(s) <= MAX_BLOCK_NAME for s in p) for p in v)):
        raise GraphFormatError(f"{label}: 'block' must be a list of at most {MAX_BLOCK_DEPTH} [child name, "
                               f"block type] pairs of non-empty strings, got {_short(v)}")
    return tuple((name, kind) for name, kind in v) or None


def _sbp_from_json(v, label: str, n: int) -> tuple:
    if not isinstance(v, list) or len(v) != n or not all(isinstance(s, str) for s in v):
        raise GraphFormatError(f"{label}: 'sbp' must be a list of {n} SBP strings such as 'S(0)', 'B', 'P(sum)'")
    try:
        return tuple(sbp_parse(s) for s in v)
    except LazyArrayError as exc:
        raise GraphFormatError(f"{label}: {exc}") from None


def _plain_node_from_json(d: dict, built: dict[int, Node], raw, remap=None) -> Node:
    label = _label(d)
    name = d.get("name")
    if not isinstance(name, str) or not name:
        raise GraphFormatError(f"{label}: 'name' must be a non-empty string")
    opname = d.get("op", "missing")
    kind = "op" if opname is not None else d.get("kind")
    avals_raw = d.get("avals")
    if not isinstance(avals_raw, list) or not avals_raw:
        raise GraphFormatError(f"{label}: 'avals' must be a non-empty list")
    if kind in ("var", "const") and len(avals_raw) != 1:
        raise GraphFormatError(f"{label}: a variable has one aval, got {len(avals_raw)}")
    avals = tuple(_aval_from_json(a, f"{label}: aval {i}", kind, remap) for i, a in enumerate(avals_raw))
    source = _source_from_json(d.get("source"), label)
    if opname is None:
        if kind not in ("var", "const"):
            raise GraphFormatError(f"{label}: a variable's 'kind' must be 'var' or 'const', got {_short(kind)}")
        if d.get("inputs"):
            raise GraphFormatError(f"{label}: a variable cannot have inputs")
        if kind == "const":
            return const_node(_value_from_json(d.get("value"), label, avals[0]), avals[0], name=name, source=source)
        pinned = d.get(PINNED, False)
        if not isinstance(pinned, bool):
            raise GraphFormatError(f"{label}: 'pinned' must be true or false, got {_short(pinned)}")
        return Node(None, (), {PINNED: True} if pinned else {}, avals, name=name, kind=kind, source=source)
    if not isinstance(opname, str):
        raise GraphFormatError(f"{label}: 'op' must be a string or null, got {_short(opname)}")
    try:
        op = registry.get(opname)
    except KeyError as exc:
        raise GraphFormatError(f"{label}: unknown op {_short(opname)} ({_short(str(exc.args[0]))})") from None
    if op.compose is not None:
        raise GraphFormatError(f"{label}: {opname!r} is a composite op and cannot appear as a node")
    attrs = d.get("attrs", {})
    if not isinstance(attrs, dict):
        raise GraphFormatError(f"{label}: 'attrs' must be an object")
    params = {}
    for k, v in attrs.items():
        p = op._param_map.get(k)
        if p is None:
            raise GraphFormatError(f"{label}: op {opname!r} has no attribute {_short(k)}; known: "
                                   f"{', '.join(op._param_map) or 'none'}")
        where = f"{label}: attribute {k!r}"
        _check_attr(p.type.name, v, where)
        params[k] = _op_code(where, f"{opname}'s {p.type.name} attribute type", p.type.from_json, v, opname, k)
        if p.type.name == "device" and remap is not None:
            params[k] = remap(params[k])
    params = _op_code(label, f"{opname}'s parameter checks", op.make_params, params)
    inputs = _refs(d.get("inputs", []), built, label, raw)
    n_out = _op_code(label, f"{opname}'s output count", op.outputs_for, params)
    if len(avals) != n_out:
        raise GraphFormatError(f"{label}: {len(avals)} avals for an op with {n_out} output(s)")
    fixed = sum(1 for n in op.inputs if not n.startswith("*") and not n.endswith("?"))
    variadic = any(n.startswith("*") for n in op.inputs)
    if len(inputs) < fixed or (not variadic and len(inputs) > len(op.inputs)):
        raise GraphFormatError(f"{label}: op {opname!r} takes inputs ({', '.join(op.inputs)}), got {len(inputs)}")
    return Node(op, tuple(inputs), params, avals, name=name, source=source)


def _op_code(where: str, what: str, fn, *args):
    """``fn(*args)``: code an op registers (attribute types, parameter checks, output counts),
    run on a file's values. Its ``LazyArrayError`` becomes a ``GraphFormatError`` naming the node
    and attribute; so does any other exception (an op that did not foresee such a value), chained
    (``from``) so the op's bug stays visible."""
    try:
        return fn(*args)
    except LazyArrayError as exc:
        raise GraphFormatError(f"{where}: {exc}") from None
    except Exception as exc:  # (named, chained, and only around op-registered code)
        raise GraphFormatError(f"{where}: {what} failed on this value ({type(exc).__name__}: "
                               f"{_short(str(exc))})") from exc


def _source_from_json(source, label: str):
    """``[file base name, line]`` or None. Error messages show the line from that file (via
    ``linecache``), so a path is refused: a file must not make the reader open other files."""
    if source is None:
        return None
    if not (isinstance(source, list) and len(source) == 2 and isinstance(source[0], str)
            and _is_int(source[1]) and source[1] >= 0):
        raise GraphFormatError(f"{label}: 'source' must be [file name, line], got {_short(source)}")
    file = source[0]
    if (not file or len(file) > MAX_FILE_NAME or any(c in file for c in "/\\\0")
            or file in (".", "..") or ":" in file):
        raise GraphFormatError(f"{label}: 'source' file {_short(file)} must be a file's base name "
                               "(no directories)")
    return (file, source[1])


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _ints(v, allow_none: bool = False) -> bool:
    return isinstance(v, list) and all(_is_int(x) or (allow_none and x is None) for x in v)


def _sizes(v) -> bool:
    """A list of sizes: ints and symbolic ones (``{"dim": "2*batch"}``, version 3)."""
    return isinstance(v, list) and all(_is_int(x) or _dim(x) for x in v)


def _dim(x) -> bool:
    return isinstance(x, dict) and isinstance(x.get("dim"), str) and set(x) <= {"dim", "bounds"}


def _check_attr(type_name: str, v, where: str) -> None:
    """The JSON form of an attribute, checked against its declared type (docs/graph-format.md,
    "Attribute types") before the type converts it."""
    ok = _ATTR_CHECKS.get(type_name)
    if ok is not None and not ok(v):
        raise GraphFormatError(f"{where}: must be {_ATTR_WANT[type_name]}, got {_short(v)}")


_ATTR_CHECKS = {
    "float": lambda v: _is_int(v) or isinstance(v, float),
    "int": _is_int,
    "bool": lambda v: isinstance(v, bool),
    "bool?": lambda v: v is None or isinstance(v, bool),
    "ints": lambda v: _is_int(v) or _sizes(v),
    "ints?": lambda v: v is None or _is_int(v) or _sizes(v),
    "axis": lambda v: v is None or _is_int(v) or _ints(v),
    "dtype": lambda v: isinstance(v, str) and v in _DTYPE_NAMES,
    "device": lambda v: isinstance(v, str) and _DEVICE.fullmatch(v) is not None,
    "key": lambda v: isinstance(v, list) and all(_key_item(k) for k in v),
    "choice": lambda v: isinstance(v, str),
    "sbp": lambda v: isinstance(v, str),
    "pad_width": lambda v: _is_int(v) or (isinstance(v, list) and bool(v) and (
        _ints(v) or all(_ints(r) and bool(r) for r in v))),
}
_ATTR_WANT = {
    "float": "a number", "int": "an integer", "bool": "true or false", "bool?": "true, false or null",
    "ints": "a list of integers (or symbolic sizes {\"dim\": \"2*batch\"})",
    "ints?": "a list of integers or null",
    "axis": "null, an integer or a list of integers",
    "dtype": "one of " + ", ".join(_DTYPE_NAMES), "device": "a device such as 'cpu(0)' or 'gpu(1)'",
    "key": 'a list of integers, null, "..." and {"slice": [start, stop, step]} (integers or null)',
    "choice": "a string",
    "sbp": "an SBP such as 'S(0)', 'B' or 'P(sum)'",
    "pad_width": "an integer, a list of integers, or a list of lists of integers",
}


def _key_item(k) -> bool:
    if k is None or _is_int(k) or k == "...":
        return True
    return (isinstance(k, dict) and len(k) == 1 and isinstance(k.get("slice"), list)
            and len(k["slice"]) == 3 and all(p is None or _is_int(p) or _dim(p) for p in k["slice"]))


def _dtype(v, where: str):
    if not isinstance(v, str) or v not in _DTYPE_NAMES:
        raise GraphFormatError(f"{where}: dtype must be one of {', '.join(_DTYPE_NAMES)}; got {_short(v)}")
    return np.dtype(v)


def _shape(v, where: str, dtype=None, unknown_dims: bool = True) -> tuple:
    """A shape: a list of at most 64 ints in [0, 2**63) (``None`` for unknown dims where allowed)
    whose element count times the itemsize fits the address space."""
    if isinstance(v, list) and unknown_dims and any(isinstance(d, dict) for d in v):  # symbolic dims
        try:
            v = [dim_from_json(d) for d in v]
        except LazyArrayError as exc:
            raise GraphFormatError(f"{where}: {exc}") from None
        if len(v) > MAX_NDIM or not all(d is None or isinstance(d, (int, DimExpr)) and not isinstance(d, bool)
                                        for d in v):
            raise GraphFormatError(f"{where}: shape must be a list of at most {MAX_NDIM} sizes, got {_short(v)}")
        try:
            return check_shape(where, v, dtype, "the")
        except LazyArrayError as exc:
            raise GraphFormatError(str(exc)) from None
    if not _ints(v, allow_none=unknown_dims) or len(v) > MAX_NDIM:
        dims = "non-negative integers or null" if unknown_dims else "non-negative integers"
        raise GraphFormatError(f"{where}: shape must be a list of at most {MAX_NDIM} {dims}, got {_short(v)}")
    try:
        return check_shape(where, v, dtype, "the")
    except LazyArrayError as exc:
        raise GraphFormatError(str(exc)) from None


def _device(v, where: str, remap) -> Device:
    dev = _parse_device(v) if isinstance(v, str) else None
    if dev is None:
        raise GraphFormatError(f"{where}: device must be a string such as 'cpu(0)' or 'gpu(1)', got {_short(v)}")
    return remap(dev) if remap is not None else dev


@functools.lru_cache(maxsize=64)
def _parse_device(text: str) -> Device | None:
    m = _DEVICE.fullmatch(text)
    return None if m is None else Device(m.group(1), int(m.group(2)))


def _aval_from_json(a, where: str, kind: str, remap=None) -> Aval:
    """An aval. Every aval has a dtype, a device and a storage type, except that an op's output
    whose rank is unknown (fed by an input declared without a shape) has neither shape nor dtype;
    a graph input may have no shape; a constant's shape is fully known."""
    if not isinstance(a, dict):
        raise GraphFormatError(f"{where}: an aval must be an object, got {_short(a)}")
    shape, dtype = a.get("shape"), a.get("dtype")
    if not (kind == "op" and shape is None and dtype is None):  # (an op's output of unknown rank)
        dtype = _dtype(dtype, where)
        if shape is not None or kind != "var":  # (a graph input without a shape)
            shape = _shape(shape, where, dtype, unknown_dims=kind != "const")
    device = _device(a.get("device"), where, remap)
    stype = a.get("stype", "default")
    if not isinstance(stype, str) or stype not in STYPES:
        raise GraphFormatError(f"{where}: unknown storage type {_short(stype)}; one of {', '.join(STYPES)}")
    if kind == "const" and stype != "default":
        raise GraphFormatError(f"{where}: a constant is stored dense; its storage type must be 'default'")
    return Aval(shape, dtype, device, stype)


def _value_from_json(v, label: str, aval: Aval):
    """A constant's literal: checked against its aval before any bytes are decoded."""
    if not isinstance(v, dict) or not isinstance(v.get("base64"), str):
        raise GraphFormatError(f"{label}: a constant needs a 'value' object with 'dtype', 'shape', 'base64'")
    where = f"{label}: bad constant value"
    dtype = _dtype(v.get("dtype"), where)
    shape = _shape(v.get("shape"), where, dtype, unknown_dims=False)
    if shape != aval.shape or dtype != aval.dtype:
        raise GraphFormatError(f"{where}: {dtype}{fmt_shape(shape)} disagrees with the node's aval {aval}")
    nbytes = math.prod(shape) * dtype.itemsize
    text = v["base64"]
    if len(text) != 4 * ((nbytes + 2) // 3):  # checked before decoding anything
        raise GraphFormatError(f"{where}: {len(text)} base64 characters, but {dtype}{fmt_shape(shape)} "
                               f"takes {nbytes} bytes ({4 * ((nbytes + 2) // 3)} characters)")
    try:
        data = base64.b64decode(text, validate=True)
    except ValueError as exc:  # binascii.Error
        raise GraphFormatError(f"{where}: not base64 ({exc})") from None
    if len(data) != nbytes:
        raise GraphFormatError(f"{where}: {len(data)} bytes for {dtype}{fmt_shape(shape)}, which takes {nbytes}")
    if dtype == np.bool_:  # any non-zero byte is True (NumPy would keep other bytes as invalid bools)
        arr = np.frombuffer(data, dtype=np.uint8) != 0
    else:
        arr = np.frombuffer(data, dtype=dtype.newbyteorder("<")).astype(dtype)
    arr = arr.reshape(shape)
    device = aval.device
    if device.kind == "gpu":
        try:
            gpu(device.id)
        except DeviceError as exc:
            raise DeviceError(
                f"{label}: this constant is stored on {device}, which this process cannot use ({exc}). "
                f"To load the graph onto the CPU, pass a device map: SymbolBlock.imports(..., "
                f"device_map={{'{device}': 'cpu(0)'}}) (or serialize.load / from_json with the same "
                f"device_map); to run it on the GPU, install the GPU extra: pip install 'lazyarray[gpu]'"
            ) from None
        return to_device(arr, cpu(0), device)
    return arr.copy()
