"""Symbol <-> JSON: a versioned, typed, lossless format that loads without running code.

The schema is written down in ``docs/graph-format.md``. Loading uses ``json.loads`` and
the op registry only (no pickle, no eval): untrusted files cannot run code, and every
problem (bad JSON, unknown op, dangling input, cycle, wrong attribute type, future
version) raises ``GraphFormatError`` naming the node.
"""
from __future__ import annotations

import base64
import contextlib
import gc
import json
import os

import numpy as np

from .. import fileio
from ..aval import STYPES, Aval, as_dtype
from ..device import Device
from ..errors import GraphFormatError, LazyArrayError
from ..ops import registry
from .node import Entry, Node, const_node

FORMAT = "lazyarray.symbol"
VERSION = 1


@contextlib.contextmanager
def _gc_paused():
    """Pause the cyclic GC while building many small containers (JSON dicts, nodes).

    Its generation-2 scans grow with the heap, which made a 10,000-node round trip
    superlinear; nothing built here forms a reference cycle that needs collecting meanwhile.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


# -- writing -----------------------------------------------------------------------------
def to_dict(sym) -> dict:
    """The JSON-ready dict of ``sym`` (see docs/graph-format.md)."""
    order = sym.topo()
    ids = {id(n): i for i, n in enumerate(order)}
    names = sym.names()
    nodes = []
    for node in order:
        d: dict = {"id": ids[id(node)], "name": names[id(node)]}
        if node.op is None:
            d["op"] = None
            d["kind"] = node.kind
        else:
            d["op"] = node.op.name
            d["inputs"] = [[ids[id(e.node)], e.index] for e in node.inputs]
            pm = node.op._param_map
            d["attrs"] = {k: pm[k].type.to_json(v) for k, v in node.params.items()}
        d["avals"] = [_aval_to_json(a) for a in node.avals]
        if node.op is None and node.kind == "const":
            d["value"] = _value_to_json(node.value)
        if node.source:
            d["source"] = [os.path.basename(node.source[0]), node.source[1]]
        nodes.append(d)
    return {
        "format": FORMAT,
        "version": VERSION,
        "nodes": nodes,
        "outputs": [[ids[id(e.node)], e.index] for e in sym.outputs],
    }


def to_json(sym, indent: int | None = None) -> str:
    """``sym`` as JSON text (keys in a fixed order, so equal graphs give equal text)."""
    with _gc_paused():
        return json.dumps(to_dict(sym), indent=indent, sort_keys=False, allow_nan=False)


def save(sym, path: str) -> None:
    """Write ``sym`` to ``path`` atomically (a crash never leaves a half-written file)."""
    write_atomic(path, to_json(sym, indent=1).encode())


write_atomic = fileio.write_atomic  # (the one atomic-write helper lives in lazyarray/fileio.py)


def _aval_to_json(a: Aval) -> dict:
    return {
        "shape": None if a.shape is None else list(a.shape),
        "dtype": None if a.dtype is None else str(a.dtype),
        "device": None if a.device is None else str(a.device),
        "stype": a.stype,
    }


def _value_to_json(v) -> dict:
    arr = np.array(v if not hasattr(v, "get") else v.get(), order="C", copy=True)
    data = arr.astype(arr.dtype.newbyteorder("<"), copy=False).tobytes()
    return {"dtype": str(arr.dtype), "shape": list(arr.shape), "base64": base64.b64encode(data).decode("ascii")}


# -- reading -----------------------------------------------------------------------------
def from_json(text: str | bytes) -> list[Entry]:
    """The output entries of the graph in JSON ``text``; ``GraphFormatError`` on anything malformed."""
    with _gc_paused():
        try:
            doc = json.loads(text)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise GraphFormatError(f"not valid JSON: {exc}") from None
        return from_dict(doc)


def load(path: str) -> list[Entry]:
    """The output entries of the graph saved at ``path``."""
    try:
        with open(path, "rb") as f:
            text = f.read()
    except OSError as exc:
        raise GraphFormatError(f"cannot read symbol file {path!r}: {exc.strerror}") from None
    return from_json(text)


def from_dict(doc) -> list[Entry]:
    """The output entries of a graph in dict form, validating everything but graph invariants
    (``Symbol.from_json`` runs ``check()`` on the result)."""
    if not isinstance(doc, dict):
        raise GraphFormatError(f"expected a JSON object at the top level, got {type(doc).__name__}")
    if doc.get("format") != FORMAT:
        raise GraphFormatError(f"not a lazyarray symbol: 'format' is {doc.get('format')!r}, expected {FORMAT!r}")
    version = doc.get("version")
    if not isinstance(version, int) or isinstance(version, bool):
        raise GraphFormatError(f"'version' must be an integer, got {version!r}")
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
            raise GraphFormatError(f"node #{i} ({d.get('name')!r}): 'id' must be an integer, got {nid!r}")
        if nid in raw:
            raise GraphFormatError(f"node #{i} ({d.get('name')!r}): duplicate id {nid}")
        raw[nid] = d
    order = _ordered_ids(raw)
    built: dict[int, Node] = {}
    for nid in order:
        built[nid] = _node_from_json(raw[nid], built, raw)
    outputs = _refs(doc.get("outputs"), built, "outputs", raw)
    if not outputs:
        raise GraphFormatError("'outputs' must list at least one [node id, output index] pair")
    return outputs


def _label(d: dict) -> str:
    return f"node {d.get('id')} ({d.get('name')!r})"


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
                raise GraphFormatError(f"{_label(d)}: input {ref!r} is not a [node id, output index] pair")
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
            raise GraphFormatError(f"{where}: {ref!r} is not a [node id, output index] pair")
        nid, idx = ref
        if nid not in built:
            raise GraphFormatError(f"{where}: dangling reference to node id {nid}")
        node = built[nid]
        n_out = 1 if node.op is None else node.op.num_outputs
        if not 0 <= idx < n_out:
            raise GraphFormatError(f"{where}: reads output {idx} of {_label(raw[nid])}, which has {n_out}")
        out.append(Entry(node, idx))
    return out


def _node_from_json(d: dict, built: dict[int, Node], raw) -> Node:
    label = _label(d)
    name = d.get("name")
    if not isinstance(name, str) or not name:
        raise GraphFormatError(f"{label}: 'name' must be a non-empty string")
    avals_raw = d.get("avals")
    if not isinstance(avals_raw, list) or not avals_raw:
        raise GraphFormatError(f"{label}: 'avals' must be a non-empty list")
    avals = tuple(_aval_from_json(a, label) for a in avals_raw)
    source = d.get("source")
    if source is not None and not (isinstance(source, list) and len(source) == 2
                                   and isinstance(source[0], str) and isinstance(source[1], int)):
        raise GraphFormatError(f"{label}: 'source' must be [file, line]")
    source = tuple(source) if source else None
    opname = d.get("op", "missing")
    if opname is None:
        kind = d.get("kind")
        if kind not in ("var", "const"):
            raise GraphFormatError(f"{label}: a variable's 'kind' must be 'var' or 'const', got {kind!r}")
        if d.get("inputs"):
            raise GraphFormatError(f"{label}: a variable cannot have inputs")
        if kind == "const":
            return const_node(_value_from_json(d.get("value"), label, avals[0]), avals[0], name=name, source=source)
        return Node(None, (), {}, avals, name=name, kind=kind, source=source)
    if not isinstance(opname, str):
        raise GraphFormatError(f"{label}: 'op' must be a string or null, got {opname!r}")
    try:
        op = registry.get(opname)
    except KeyError as exc:
        raise GraphFormatError(f"{label}: unknown op {opname!r} ({exc.args[0]})") from None
    if op.compose is not None:
        raise GraphFormatError(f"{label}: {opname!r} is a composite op and cannot appear as a node")
    attrs = d.get("attrs", {})
    if not isinstance(attrs, dict):
        raise GraphFormatError(f"{label}: 'attrs' must be an object")
    params = {}
    for k, v in attrs.items():
        p = op._param_map.get(k)
        if p is None:
            raise GraphFormatError(f"{label}: op {opname!r} has no attribute {k!r}; known: "
                                   f"{', '.join(op._param_map) or 'none'}")
        try:
            params[k] = p.type.from_json(v, opname, k)
        except LazyArrayError as exc:
            raise GraphFormatError(f"{label}: attribute {k!r}: {exc}") from None
    try:
        params = op.make_params(params)
    except LazyArrayError as exc:
        raise GraphFormatError(f"{label}: {exc}") from None
    inputs = _refs(d.get("inputs", []), built, label, raw)
    if len(avals) != op.num_outputs:
        raise GraphFormatError(f"{label}: {len(avals)} avals for an op with {op.num_outputs} output(s)")
    fixed = sum(1 for n in op.inputs if not n.startswith("*") and not n.endswith("?"))
    variadic = any(n.startswith("*") for n in op.inputs)
    if len(inputs) < fixed or (not variadic and len(inputs) > len(op.inputs)):
        raise GraphFormatError(f"{label}: op {opname!r} takes inputs ({', '.join(op.inputs)}), got {len(inputs)}")
    return Node(op, tuple(inputs), params, avals, name=name, source=source)


def _aval_from_json(a, label: str) -> Aval:
    if not isinstance(a, dict):
        raise GraphFormatError(f"{label}: an aval must be an object")
    shape = a.get("shape")
    if shape is not None:
        if not isinstance(shape, list) or not all(
            d is None or (isinstance(d, int) and not isinstance(d, bool) and d >= 0) for d in shape
        ):
            raise GraphFormatError(f"{label}: aval shape must be a list of non-negative ints or null, got {shape!r}")
        shape = tuple(shape)
    dtype = a.get("dtype")
    if dtype is not None:
        try:
            dtype = as_dtype(dtype, label)
        except LazyArrayError as exc:
            raise GraphFormatError(str(exc)) from None
    try:
        device = None if a.get("device") is None else Device.parse(a["device"])
    except LazyArrayError as exc:
        raise GraphFormatError(f"{label}: {exc}") from None
    stype = a.get("stype", "default")
    if stype not in STYPES:
        raise GraphFormatError(f"{label}: unknown storage type {stype!r}; one of {', '.join(STYPES)}")
    return Aval(shape, dtype, device, stype)


def _value_from_json(v, label: str, aval: Aval):
    if not isinstance(v, dict) or not isinstance(v.get("base64"), str):
        raise GraphFormatError(f"{label}: a constant needs a 'value' object with 'dtype', 'shape', 'base64'")
    try:
        dtype = as_dtype(v.get("dtype"), label)
        shape = tuple(v.get("shape"))
        data = base64.b64decode(v["base64"], validate=True)
        arr = np.frombuffer(data, dtype=dtype.newbyteorder("<")).astype(dtype)
        arr = arr.reshape(shape)
    except (LazyArrayError, ValueError, TypeError) as exc:
        raise GraphFormatError(f"{label}: bad constant value: {exc}") from None
    if aval.device is not None and aval.device.kind == "gpu":
        return aval.device.xp.asarray(arr)
    return arr.copy()
