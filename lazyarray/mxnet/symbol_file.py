"""MXNet 1.x symbol JSON (``prefix-symbol.json``) -> our ``Symbol``.

The file (NNVM's graph JSON, as ``Symbol.tojson`` writes it)::

    {"nodes": [{"op": "null" | "<MXNet op>", "name": str, "attrs": {str: str}, "inputs": [[node, output, version], ...]}, ...],
     "arg_nodes": [indices of the "null" nodes], "node_row_ptr": [cumulative output counts],
     "heads": [[node, output, version], ...], "attrs": {"mxnet_version": ["int", 10901]}}

Nodes are listed in topological order (inputs point backwards); files older than 0.9 call
``attrs`` ``param`` or ``attr``. The text is parsed with our bounded JSON reader
(``graph/serialize.parse_json``: depth, number and Unicode limits), every field is type-checked,
and every problem raises ``GraphFormatError`` naming the node. ``null`` nodes become graph
inputs: those with an array in the parameter file take its shape and dtype, the others are the
model's inputs (shapes from ``input_shapes``, else a fully known ``__shape__`` attribute, else
unknown). Operators are converted by ``operators.CONVERTERS``; every unknown one is listed in a
single error.
"""
from __future__ import annotations

import importlib
import os
import re

import numpy as np

from .. import sym as S
from ..errors import GraphFormatError, LazyArrayError
from ..fileio import check_regular, read_regular
from ..graph.serialize import parse_json
from ..graph.symbol import Symbol
from . import operators
from .attrs import Attrs, parse_ints
from .params_file import DTYPES

MAX_NODES = 1 << 20
PARAMS_RECORD = "lazyarray_params"  # graph attribute of la.mxnet.export: "<params file name> <sha256>"


def is_mxnet_json(doc) -> bool:
    """Whether a parsed JSON document is an MXNet symbol (``nodes`` + ``heads``, no ``format`` key)."""
    return (isinstance(doc, dict) and "format" not in doc and isinstance(doc.get("nodes"), list)
            and "heads" in doc and ("arg_nodes" in doc or "node_row_ptr" in doc or "attrs" in doc))


def sniff(path: str) -> bool:
    """Whether the file at ``path`` looks like MXNet symbol JSON (reads its start only)."""
    try:
        check_regular(path, "MXNet symbol file")  # (a FIFO would block the open: the loader says what it is)
        with open(path, "rb") as f:
            head = f.read(4096)
    except (OSError, TypeError, ValueError, GraphFormatError):
        return False
    text = head.decode("utf-8", "replace")
    return '"nodes"' in text and '"format"' not in text and text.lstrip().startswith("{") and (
        '"op"' in text or '"heads"' in text)


def read_json(path: str) -> dict:
    """The parsed, bounded JSON of an MXNet symbol file (``GraphFormatError`` when unreadable)."""
    data = read_regular(path, "MXNet symbol file")  # (a device or a FIFO refused before opening)
    what = f"MXNet symbol file {os.path.basename(str(path))!r}"
    doc = parse_json(data, what)
    if not is_mxnet_json(doc):
        raise GraphFormatError(f"{what}: not an MXNet symbol (needs 'nodes' and 'heads' at the top level)")
    return doc


def check_params_file(doc: dict, symbol_file: str, params_file: str | None) -> None:
    """Refuse a parameter file that is not the one ``la.mxnet.export`` wrote with ``symbol_file``.

    The symbol file records the name and SHA-256 of its parameter file (graph attribute
    ``lazyarray_params``); a file of that name with other content is what an interrupted export leaves
    (the new symbol beside the old parameters) or a mix-up: ``GraphFormatError`` naming both files.
    Parameter files of other names (other epochs) and symbol files without the record pass."""
    attrs = doc.get("attrs")
    record = attrs.get(PARAMS_RECORD) if isinstance(attrs, dict) else None
    if record is None or params_file is None:
        return
    text = record[1] if isinstance(record, list) and len(record) == 2 and record[0] == "str" else None
    name, _, digest = text.rpartition(" ") if isinstance(text, str) else ("", "", "")
    if not name or not re.fullmatch(r"[0-9a-f]{64}", digest):
        raise GraphFormatError(f"MXNet symbol file {os.path.basename(str(symbol_file))!r}: graph attribute "
                               f"{PARAMS_RECORD!r} must be [\"str\", \"<parameter file> <sha256>\"], got "
                               f"{record!r}"[:300] + "; export the model again")
    if os.path.basename(str(params_file)) != name:
        return  # another parameter file (another epoch): not the one written with it
    # hashlib loads OpenSSL (3-4 MiB): imported when a model is loaded, not with lazyarray
    actual = importlib.import_module("hashlib").sha256(read_regular(params_file, "MXNet params file")).hexdigest()
    if actual != digest:
        raise GraphFormatError(
            f"MXNet symbol file {str(symbol_file)!r} was exported together with a parameter file {name!r} of sha256 "
            f"{digest[:12]}..., but {str(params_file)!r} holds other parameters (sha256 {actual[:12]}...): an export "
            "was interrupted or the files were mixed up; export the model again, or pass the parameter file "
            "written with this symbol file")


def _ref(ref, n_nodes_before: int, where: str) -> tuple[int, int]:
    if not (isinstance(ref, list) and len(ref) in (2, 3)
            and all(isinstance(v, int) and not isinstance(v, bool) for v in ref)):
        raise GraphFormatError(f"{where}: input {str(ref)[:40]} is not a [node, output, version] list")
    nid, idx = ref[0], ref[1]
    if not 0 <= nid < n_nodes_before:
        raise GraphFormatError(f"{where}: input refers to node {nid}, which does not come before it "
                               "(MXNet lists nodes in topological order)")
    if idx < 0:
        raise GraphFormatError(f"{where}: negative output index {idx}")
    return nid, idx


def to_symbol(doc: dict, params: dict[str, np.ndarray], input_shapes: dict | None = None,
              what: str = "MXNet symbol") -> Symbol:
    """The ``Symbol`` of a parsed MXNet symbol ``doc``; ``params`` gives parameter shapes/dtypes."""
    raw = _read_nodes(doc, what)
    input_shapes = dict(input_shapes or {})
    outs: list[list[Symbol] | None] = []
    seen_vars: set[str] = set()
    for i, (op, name, attrs, ins) in enumerate(raw):
        where = f"{what}: node {i} {name!r} ({op})"
        if op == "null":
            if ins:
                raise GraphFormatError(f"{where}: a variable has inputs")
            if name in seen_vars:
                raise GraphFormatError(f"{where}: two variables are named {name!r}")
            seen_vars.add(name)
            outs.append([_variable(name, attrs, params, input_shapes, where)])
            continue
        outs.append(_convert(op, name, attrs, ins, i, outs, raw, where))
    heads = doc.get("heads")
    if not isinstance(heads, list) or not heads:
        raise GraphFormatError(f"{what}: 'heads' must list at least one [node, output, version]")
    entries = []
    for ref in heads:
        nid, idx = _ref(ref, len(raw), f"{what}: heads")
        entries.append(_output(outs, raw, nid, idx, f"{what}: heads").outputs[0])
    _check_lists(doc, len(raw), what)
    try:
        return Symbol(entries).check()
    except LazyArrayError as exc:
        raise GraphFormatError(f"{what}: inconsistent graph: {exc}") from None


def _read_nodes(doc: dict, what: str) -> list:
    """The file's nodes as ``(op, name, attrs, inputs)``, checked: their fields' types, and every
    operator supported (all the unsupported ones named at once)."""
    nodes = doc.get("nodes")
    if not isinstance(nodes, list) or not nodes:
        raise GraphFormatError(f"{what}: 'nodes' must be a non-empty list")
    if len(nodes) > MAX_NODES:
        raise GraphFormatError(f"{what}: {len(nodes)} nodes, more than {MAX_NODES}")
    raw = []
    unknown: dict[str, list[str]] = {}
    for i, d in enumerate(nodes):
        if not isinstance(d, dict):
            raise GraphFormatError(f"{what}: node {i} must be an object")
        op, name = d.get("op"), d.get("name")
        if not isinstance(op, str) or not isinstance(name, str) or not name:
            raise GraphFormatError(f"{what}: node {i} needs a string 'op' and a non-empty string 'name'")
        attrs = d.get("attrs", d.get("param", d.get("attr", {}))) or {}
        if not isinstance(attrs, dict):
            raise GraphFormatError(f"{what}: node {i} {name!r}: 'attrs' must be an object")
        ins = d.get("inputs", [])
        if not isinstance(ins, list):
            raise GraphFormatError(f"{what}: node {i} {name!r}: 'inputs' must be a list")
        if op != "null" and op not in operators.CONVERTERS:
            unknown.setdefault(op, []).append(name)
        raw.append((op, name, attrs, ins))
    if unknown:
        listed = "; ".join(f"{op} (node{'s' if len(v) > 1 else ''} {', '.join(repr(x) for x in v[:3])}"
                           f"{', ...' if len(v) > 3 else ''})" for op, v in sorted(unknown.items()))
        raise GraphFormatError(f"{what}: {len(unknown)} MXNet operator(s) not supported: {listed}. "
                               "Supported operators are listed in docs/mxnet.md")
    return raw


def _convert(op: str, name: str, attrs: dict, ins: list, i: int, outs: list, raw: list, where: str) -> list:
    """The outputs of node ``i`` (an operator) from its converter; a converter's failure becomes a
    ``GraphFormatError`` naming the node."""
    dropped = operators.DROPPED_INPUTS.get(op, ())
    inputs = []
    for k, ref in enumerate(ins):
        nid, idx = _ref(ref, i, where)
        if k in dropped:
            continue
        inputs.append(_output(outs, raw, nid, idx, where))
    node = operators.MxNode(op, name, inputs, Attrs(attrs, where), where)
    try:
        return operators.CONVERTERS[op](node)
    except GraphFormatError:
        raise
    except LazyArrayError as exc:
        raise GraphFormatError(f"{where}: {exc}") from None
    except Exception as exc:  # a converter that did not foresee this file's value: named, and chained
        # (``from``) so that the converter's bug stays visible, as graph/serialize.py _op_code does
        raise GraphFormatError(f"{where}: the {op} converter failed on this node's attributes or inputs "
                               f"({type(exc).__name__}: {str(exc)[:200]})") from exc


def _output(outs, raw, nid: int, idx: int, where: str) -> Symbol:
    visible = outs[nid]
    if idx >= len(visible):
        op, name = raw[nid][0], raw[nid][1]
        hidden = operators.HIDDEN_OUTPUTS.get(op, 1)
        if idx < hidden:
            raise GraphFormatError(f"{where}: reads output {idx} of node {nid} {name!r} ({op}), which only "
                                   "training computes; only output 0 is supported in inference")
        raise GraphFormatError(f"{where}: reads output {idx} of node {nid} {name!r} ({op}), which has "
                               f"{len(visible)}")
    return visible[idx]


def _variable(name: str, attrs: dict, params: dict, input_shapes: dict, where: str) -> Symbol:
    if name in params:
        arr = params[name]
        return S.var(name, shape=arr.shape, dtype=arr.dtype)
    shape = input_shapes.get(name)
    dtype = np.float32
    a = Attrs(attrs, where)
    flag = a.int("__dtype__", None) if isinstance(attrs.get("__dtype__"), str) else None
    if flag is not None and flag in DTYPES and flag >= 0:
        dtype = DTYPES[flag]
    if shape is None and isinstance(attrs.get("__shape__"), str):
        try:
            guess = parse_ints(attrs["__shape__"])
        except ValueError:
            guess = None
        if guess and None not in guess and all(d > 0 for d in guess):  # 0 = unknown in MXNet 1.x
            shape = guess
    return S.var(name, shape=None if shape is None else tuple(shape), dtype=dtype)


def _check_lists(doc: dict, n: int, what: str) -> None:
    for key in ("arg_nodes", "node_row_ptr"):
        v = doc.get(key)
        if v is not None and not (isinstance(v, list) and all(isinstance(x, int) and not isinstance(x, bool)
                                                               and 0 <= x for x in v)):
            raise GraphFormatError(f"{what}: {key!r} must be a list of non-negative integers")
    for k in doc.get("arg_nodes") or ():
        if k >= n:
            raise GraphFormatError(f"{what}: 'arg_nodes' refers to node {k}; the file has {n}")
