"""Fuzzers of the MXNet 1.x loaders (``la.mxnet.load``: ``symbol_file.py``, ``params_file.py``,
``attrs.py``), issue #33.

The contract: a mutated ``-symbol.json`` / ``-0000.params`` pair loads (and then the symbol prints,
its ``CachedOp`` compiles for the fixture's input shapes, and the parameters are arrays) or raises
a ``la.LazyArrayError`` (a ``GraphFormatError`` naming the node, attribute or byte offset); never a
bare Python exception, never a hang.

The files to mutate are real MXNet 1.9.1 fixtures (tests/data/mxnet): models and operator cases
with every attribute syntax (tuples, booleans, reshape codes, pooling conventions). Symbol files
get structural JSON mutations (fuzz_support.mutated_json), MXNet-specific ones (attribute strings,
input references, ops, node fields) and byte edits; parameter files get byte edits and truncations.
A few hundred derandomized examples per fuzzer by default (a few seconds); 20,000 with
``python -m pytest -m slow tests/mxnet_format/test_files_fuzz.py``.
"""
from __future__ import annotations

import functools
import json
import math

import numpy as np
import pytest
from fuzz_support import fuzz_settings, mutated_bytes, mutated_json
from hypothesis import given
from hypothesis import strategies as st

import lazyarray as la
from lazyarray.mxnet import params_file

from .mxnet_fixtures import model_files, op_files, op_io

SLOW = 20_000
COUNTS = [300, pytest.param(SLOW, marks=pytest.mark.slow)]  # default run, and -m slow
# small cases covering the attribute syntaxes; the mlp model is the one real model (small files)
CASES = ["mlp", "conv_groups", "reshape3", "reshape5", "bn_gamma", "pool_max_full", "pool_avg_nopadcount",
         "embedding", "concat", "softmax_output", "slice_axis", "transpose", "leaky", "layernorm_axis1",
         "expand_dims", "sum_exclude", "clip", "batch_dot_t"]


@functools.cache
def _case(name: str) -> tuple[str, bytes, dict]:
    """(symbol JSON text, params bytes, input shapes) of a fixture."""
    if name == "mlp":
        sym_file, par_file = model_files("mlp")
        shapes = {"data": (2, 20)}
    else:
        sym_file, par_file = op_files(name)
        shapes = {k: v.shape for k, v in op_io(name)[0].items()}
    with open(sym_file) as f, open(par_file, "rb") as g:
        return f.read(), g.read(), shapes


def _usable(sym, params: dict, shapes: dict) -> None:
    str(sym)
    assert all(isinstance(v, la.NDArray) for v in params.values())
    given = {}
    guessed = False
    for node in sym.input_nodes():
        shape = shapes.get(node.name, node.avals[0].shape)
        if shape is None:
            return  # (an input the fixture does not name: nothing declared to compile for)
        guessed |= not all(isinstance(d, int) for d in shape)
        given[node.name] = tuple(d if isinstance(d, int) else 2 for d in shape)
    if math.prod(math.prod(s) for s in given.values()) > 10**7:
        return
    try:
        la.CachedOp(sym).compiled(**given)
    except la.LazyArrayError:
        if not guessed:
            raise


def _check(name: str, symbol: str | bytes | None, params: bytes | None, tmp_path) -> None:
    text, raw, shapes = _case(name)
    sym_file, par_file = str(tmp_path / "m-symbol.json"), str(tmp_path / "m-0000.params")
    with open(sym_file, "wb") as f:
        f.write((text if symbol is None else symbol).encode("utf-8", "surrogatepass")
                if not isinstance(symbol, bytes) else symbol)
    with open(par_file, "wb") as f:
        f.write(raw if params is None else params)
    try:
        sym, loaded = la.mxnet.load(sym_file, par_file, input_shapes=shapes)
    except la.LazyArrayError:
        pass
    else:
        _usable(sym, loaded, shapes)
    if params is not None:
        try:
            arrays, aux = params_file.load_params(par_file)
        except la.LazyArrayError:
            return
        assert all(isinstance(v, np.ndarray) for v in arrays.values()) and aux <= set(arrays)


# -- MXNet-specific symbol mutations -------------------------------------------------------------------
_ATTR_TEXT = ["", "0", "1", "-1", "-2", "-3", "-4", "2", "3", "7", "None", "True", "False", "true", "maybe", "1.5",
              "1e999", "nan", "inf", "-inf", "(1, a)", "()", "(0,)", "(1,)", "(2, 2)", "(3, 3)", "(-1, 2)",
              "(9223372036854775808,)", "(1, 2, 3, 4, 5, 6, 7, 8, 9)", "[1, 2]", "(" * 100, ")" * 3, "(1,,2)",
              "9" * 400, "relu", "valid", "full", "same", "avg", "max", "sum", "lp", "NCHW", "NHWC",
              "float16", "float32", "int64", "bool", "0x10", "\u0661", "1_0", " 3", "(1 , 2)", "{}", "\x00"]
_OPS = ["Convolution", "FullyConnected", "Activation", "Pooling", "Reshape", "BatchNorm", "Concat", "Flatten",
        "SoftmaxOutput", "softmax", "slice_axis", "transpose", "Embedding", "LeakyReLU", "LayerNorm", "null",
        "_copy", "elemwise_add", "broadcast_add", "_plus_scalar", "expand_dims", "sum", "clip", "batch_dot",
        "Dropout", "NoSuchOp", "_contrib_quantize", ""]


@st.composite
def mxnet_mutation(draw, text: str) -> str:
    doc = json.loads(text)
    nodes = doc.get("nodes", [])
    for _ in range(draw(st.integers(1, 3))):
        if not nodes:
            break
        k = draw(st.integers(0, len(nodes) - 1))
        node = nodes[k]
        how = draw(st.sampled_from(["attr", "attr", "attr", "new_attr", "op", "input", "input", "drop_input",
                                    "add_input", "heads", "arg_nodes", "attr_key", "drop_node"]))
        attrs = node.get("attrs") if isinstance(node.get("attrs"), dict) else None
        if how == "attr" and attrs:
            attrs[draw(st.sampled_from(sorted(attrs)))] = draw(st.sampled_from(_ATTR_TEXT))
        elif how == "new_attr":
            node.setdefault("attrs", {})[draw(st.sampled_from(
                ["__shape__", "__dtype__", "kernel", "stride", "pad", "num_filter", "num_group", "shape", "axis",
                 "axes", "no_bias", "flatten", "num_hidden", "act_type", "pool_type", "global_pool", "eps",
                 "fix_gamma", "input_dim", "output_dim", "begin", "end", "dim", "__init__", "x"]))] = draw(
                st.sampled_from(_ATTR_TEXT))
        elif how == "op":
            node["op"] = draw(st.sampled_from(_OPS))
        elif how == "input" and node.get("inputs"):
            i = draw(st.integers(0, len(node["inputs"]) - 1))
            node["inputs"][i] = draw(st.sampled_from([
                [k, 0, 0], [k + 1, 0, 0], [len(nodes), 0, 0], [-1, 0, 0], [0, 1, 0], [0, 5, 0], [0, 0],
                [0], [], [0, 0, 0, 0], [0.5, 0, 0], ["0", 0, 0], [True, 0, 0], [2**63, 0, 0], None, 0]))
        elif how == "drop_input" and node.get("inputs"):
            node["inputs"].pop(draw(st.integers(0, len(node["inputs"]) - 1)))
        elif how == "add_input" and isinstance(node.get("inputs"), list):
            node["inputs"].append([draw(st.integers(0, max(0, k - 1))), 0, 0])
        elif how == "heads":
            doc["heads"] = draw(st.sampled_from([[], [[len(nodes) - 1, 1, 0]], [[len(nodes), 0, 0]], [[0, 0, 0]],
                                                 [[len(nodes) - 1, 0, 0]] * 2, [[-1, 0, 0]], None, "x"]))
        elif how == "arg_nodes":
            doc["arg_nodes"] = draw(st.sampled_from([[], [len(nodes)], [-1], None, [0, 0], "x"]))
        elif how == "attr_key" and attrs is not None:  # the older keys MXNet wrote attributes under
            node[draw(st.sampled_from(["attr", "param"]))] = node.pop("attrs")
        elif how == "drop_node" and len(nodes) > 1:
            nodes.pop(k)
    return json.dumps(doc)


def _symbols():
    return st.sampled_from(CASES).flatmap(lambda c: st.tuples(st.just(c), st.one_of(
        mxnet_mutation(_case(c)[0]), mutated_json(_case(c)[0]))))


def _symbol_bytes():
    return st.sampled_from(CASES).flatmap(lambda c: st.tuples(st.just(c), mutated_bytes(
        _case(c)[0].encode())))


def _params():
    return st.sampled_from(CASES).flatmap(lambda c: st.tuples(st.just(c), mutated_bytes(_case(c)[1])))


# -- regressions: what the fuzzers found (each raised a bare exception from a converter) ----------------
@pytest.mark.parametrize("case,node,match", [
    ("pool_max_full", {"stride": "0"}, r"Pooling converter failed .*ZeroDivisionError"),
    ("pool_avg_nopadcount", {"kernel": "0", "pad": "(1, 1)"}, r"Pooling converter failed .*TypeError"),
    ("softmax_output", {"inputs": []}, r"SoftmaxOutput converter failed .*IndexError"),
])
def test_converter_failures_are_named_format_errors(case, node, match, tmp_path):
    doc = json.loads(_case(case)[0])
    target = next(n for n in doc["nodes"] if n["op"] != "null")
    for k, v in node.items():
        if k == "inputs":
            target[k] = v
        else:
            target["attrs"][k] = v
    with pytest.raises(la.GraphFormatError, match=match) as info:
        _check_raises(case, json.dumps(doc), tmp_path)
    assert info.value.__cause__ is not None  # the converter's own error stays visible


def _check_raises(name: str, text: str, tmp_path):
    _, raw, shapes = _case(name)
    sym_file, par_file = tmp_path / "r-symbol.json", tmp_path / "r-0000.params"
    sym_file.write_text(text)
    par_file.write_bytes(raw)
    return la.mxnet.load(str(sym_file), str(par_file), input_shapes=shapes)


# -- the fuzzers -----------------------------------------------------------------------------------------
def test_the_fixtures_load_and_compile(tmp_path):
    for name in CASES:
        _check(name, None, None, tmp_path)
        sym, _ = la.mxnet.load(*[str(tmp_path / f) for f in ("m-symbol.json", "m-0000.params")],
                               input_shapes=_case(name)[2])
        assert sym.list_inputs()


@pytest.mark.parametrize("examples", COUNTS)
def test_fuzz_symbol_structure(examples, tmp_path):
    @fuzz_settings(examples)
    @given(case=_symbols())
    def run(case):
        _check(case[0], case[1], None, tmp_path)

    run()


@pytest.mark.parametrize("examples", COUNTS)
def test_fuzz_symbol_bytes(examples, tmp_path):
    @fuzz_settings(examples // 2)
    @given(case=_symbol_bytes())
    def run(case):
        _check(case[0], case[1], None, tmp_path)

    run()


@pytest.mark.parametrize("examples", COUNTS)
def test_fuzz_params_bytes(examples, tmp_path):
    @fuzz_settings(examples)
    @given(case=_params())
    def run(case):
        _check(case[0], None, case[1], tmp_path)

    run()


def test_params_truncated_at_every_offset(tmp_path):
    raw = _case("conv_groups")[1]
    for cut in range(0, len(raw), max(1, len(raw) // 200)):
        _check("conv_groups", None, raw[:cut], tmp_path)


def test_params_entries_swapped_between_cases(tmp_path):
    """A parameter file of another case (names or shapes that do not fit the graph)."""
    for a, b in zip(CASES, CASES[1:] + CASES[:1]):
        _check(a, None, _case(b)[1], tmp_path)
