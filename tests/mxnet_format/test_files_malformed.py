"""Malformed, truncated and hostile MXNet files raise GraphFormatError naming the byte offset or
the node; nothing is allocated from an unchecked size and nothing from a file is executed."""
import json
import struct

import numpy as np
import pytest

import lazyarray as la
from lazyarray.mxnet import params_file
from lazyarray.mxnet.attrs import Attrs, parse_ints

from .mxnet_fixtures import model_files, op_files


def _params(tmp_path, data: bytes) -> str:
    p = tmp_path / "m-0000.params"
    p.write_bytes(data)
    return str(p)


# -- the .params format ------------------------------------------------------------------------------
def test_layout_matches_mxnet_bytes():
    """The bytes mx.nd.save of MXNet 1.9.1 wrote for {'arg:w': arange(6).reshape(2, 3) float32,
    'aux:m': [1, 2] int64} (hexdump of a file written by the fixture venv)."""
    data = bytes.fromhex(
        "1201000000000000" "0000000000000000" "0200000000000000"
        "c9fa93f9" "00000000" "02000000" "0200000000000000" "0300000000000000" "01000000" "00000000" "00000000"
        + np.arange(6, dtype="<f4").tobytes().hex() +
        "c9fa93f9" "00000000" "01000000" "0200000000000000" "01000000" "00000000" "06000000"
        + np.array([1, 2], "<i8").tobytes().hex() +
        "0200000000000000" "0500000000000000" + b"arg:w".hex() + "0500000000000000" + b"aux:m".hex())
    (k1, a1), (k2, a2) = params_file.read_params(data)
    assert (k1, k2) == ("arg:w", "aux:m")
    np.testing.assert_array_equal(a1, np.arange(6, dtype=np.float32).reshape(2, 3))
    assert a2.dtype == np.int64 and a2.tolist() == [1, 2]
    assert params_file.params_bytes({"w": a1, "m": a2}, {"m"}) == data


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "uint8", "int32", "int8", "int64", "bool"])
def test_every_dtype_round_trips(dtype, tmp_path):
    arr = (np.arange(12).reshape(3, 4) % 3).astype(dtype)
    path = str(tmp_path / "a.params")
    params_file.save_params(path, {"a": arr, "s": np.asarray(arr.ravel()[0])})
    arrays, aux = params_file.load_params(path)
    assert aux == set() and arrays["a"].dtype == arr.dtype
    np.testing.assert_array_equal(arrays["a"], arr)
    assert arrays["s"].shape == (1,)  # MXNet 1.x has no 0-d arrays in this format


def test_every_truncation_of_a_real_file_is_refused():
    data = open(op_files("conv_basic")[1], "rb").read()
    for n in range(len(data)):
        with pytest.raises(la.GraphFormatError, match="byte offset"):
            params_file.read_params(data[:n])


def test_trailing_bytes_are_refused():
    data = open(op_files("conv_basic")[1], "rb").read()
    with pytest.raises(la.GraphFormatError, match=f"unexpected bytes after the keys at byte offset {len(data)}"):
        params_file.read_params(data + b"\0")


def _one_array(shape, flag=0, stype=0, magic=params_file.NDARRAY_V2_MAGIC, data=b""):
    head = struct.pack("<QQQ", 0x112, 0, 1) + struct.pack("<Iii", magic, stype, len(shape))
    head += struct.pack(f"<{len(shape)}q", *shape) + struct.pack("<iii", 1, 0, flag)
    return head + data + struct.pack("<Q", 0)


def test_huge_claimed_array_does_not_allocate():
    data = _one_array((10**6, 10**6))  # 10**12 float32 elements claimed, none present
    with pytest.raises(la.GraphFormatError, match=r"array 0 float32\[1000000, 1000000\] needs 4000000000000 "
                                                  r"bytes of data, 8 left at byte offset 64"):
        params_file.read_params(data)


def test_huge_counts_are_refused_before_looping():
    with pytest.raises(la.GraphFormatError, match="claims 1152921504606846976 arrays.*byte offset 16"):
        params_file.read_params(struct.pack("<QQQ", 0x112, 0, 2**60))
    data = _one_array((2,), data=b"\0" * 8)[:-8] + struct.pack("<QQ", 1, 2**40)
    with pytest.raises(la.GraphFormatError, match="key 0 claims 1099511627776 bytes"):
        params_file.read_params(data)


@pytest.mark.parametrize("data,match", [
    (b"\x13\x01" + b"\0" * 22, "not an MXNet NDArray list file .*byte offset 0"),
    (_one_array((2,), magic=0xF993FAC8), "legacy V1 format.*byte offset 24"),
    (_one_array((2,), magic=0xDEADBEEF), "unknown NDArray magic 0xdeadbeef at byte offset 24"),
    (_one_array((2,), stype=2), "sparse csr array; only dense arrays.*byte offset 28"),
    (_one_array((2,), stype=1), "sparse row_sparse"),
    (_one_array((2,), flag=12, data=b"\0" * 4), "unsupported dtype flag 12 .*byte offset 52"),
    (_one_array((-1,)), "negative dim"),
    (struct.pack("<QQQ", 0x112, 0, 1) + struct.pack("<Iii", 0xF993FAC9, 0, 99), "ndim 99 is not in 0..64"),
])
def test_malformed_params(data, match):
    with pytest.raises(la.GraphFormatError, match=match):
        params_file.read_params(data)


def test_key_count_must_match(tmp_path):
    data = _one_array((1,), data=b"\0" * 4)[:-8] + struct.pack("<Q", 2)
    with pytest.raises(la.GraphFormatError, match="2 keys for 1 arrays"):
        params_file.read_params(data)


def test_unnamed_and_repeated_keys(tmp_path):
    with pytest.raises(la.GraphFormatError, match="no names"):
        params_file.load_params(_params(tmp_path, _one_array((1,), data=b"\0" * 4)))
    both = params_file.params_bytes({"a": np.zeros(1, np.float32), "b": np.zeros(1, np.float32)})
    with pytest.raises(la.GraphFormatError, match="repeated"):
        params_file.load_params(_params(tmp_path, both.replace(b"arg:b", b"arg:a")))


def test_params_that_do_not_fit_the_graph(tmp_path):
    sym_file, par_file = model_files("mlp")
    arrays, aux = params_file.load_params(par_file)
    arrays.pop(sorted(arrays)[0])
    path = str(tmp_path / "x.params")
    params_file.save_params(path, arrays, aux)
    with pytest.raises(la.ShapeError, match="no values for the graph inputs"):
        la.blocks.SymbolBlock.imports(sym_file, ["data"], path)


# -- the symbol JSON ----------------------------------------------------------------------------------
def _sym(tmp_path, doc) -> str:
    p = tmp_path / "m-symbol.json"
    p.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    return str(p)


def _doc(nodes, heads=None):
    return {"nodes": nodes, "arg_nodes": [], "node_row_ptr": [], "heads": heads or [[len(nodes) - 1, 0, 0]],
            "attrs": {"mxnet_version": ["int", 10901]}}


X = {"op": "null", "name": "x", "inputs": []}


@pytest.mark.parametrize("doc,match", [
    (_doc([X, {"op": "Activation", "name": "a", "attrs": {"act_type": "relu"}, "inputs": [[2, 0, 0]]},
           {"op": "Activation", "name": "b", "attrs": {"act_type": "relu"}, "inputs": [[1, 0, 0]]}]),
     r"node 1 'a' \(Activation\): input refers to node 2, which does not come before it"),
    (_doc([X, {"op": "Activation", "name": "a", "attrs": {"act_type": "swish"}, "inputs": [[0, 0, 0]]}]),
     r"node 1 'a' \(Activation\): attribute act_type='swish' is not supported"),
    (_doc([X, {"op": "Activation", "name": "a", "inputs": [[0, 0, 0]]}]), r"node 1 'a'.*missing attribute 'act_type'"),
    (_doc([X, {"op": "Pooling", "name": "p", "attrs": {"kernel": "__import__('os').system('x')"},
               "inputs": [[0, 0, 0]]}]), r"node 1 'p' \(Pooling\): attribute kernel=.* is not a tuple of integers"),
    (_doc([X, {"op": "FullyConnected", "name": "fc", "attrs": {"num_hidden": "2"}, "inputs": [[0, 0, 0]]}]),
     r"node 1 'fc' \(FullyConnected\): takes 3 inputs, got 1"),
    (_doc([X, {"op": "BatchNorm", "name": "bn", "inputs": [[0, 0, 0]] * 5},
           {"op": "Activation", "name": "a", "attrs": {"act_type": "relu"}, "inputs": [[1, 1, 0]]}]),
     r"reads output 1 of node 1 'bn' \(BatchNorm\), which only training computes"),
    (_doc([X, {"op": "Activation", "name": "a", "attrs": {"act_type": "relu"}, "inputs": [["0", 0]]}]),
     r"node 1 'a'.*is not a \[node, output, version\] list"),
    (_doc([X, X]), "two variables are named 'x'"),
    (_doc([X, {"op": 3, "name": "a"}]), "node 1 needs a string 'op'"),
    (_doc([X], heads=[[5, 0, 0]]), "heads: input refers to node 5"),
    ({"nodes": [X], "heads": [], "arg_nodes": [0]}, "'heads' must list at least one"),
    ('{"nodes": [{"op": "null", "name": "x", "inputs": []}], "heads": [[0, 0, 0]], "arg_nodes": [0]',
     r"not valid JSON: .* at byte offset"),
    ('{"nodes": [' * 100, "nested deeper than 64 levels"),
])
def test_malformed_symbol(doc, match, tmp_path):
    with pytest.raises(la.GraphFormatError, match=match):
        la.mxnet.load(_sym(tmp_path, doc), None)


def test_unknown_operators_are_listed_in_one_error(tmp_path):
    doc = _doc([X, {"op": "RNN", "name": "lstm0", "inputs": [[0, 0, 0]]},
                {"op": "UpSampling", "name": "up0", "inputs": [[1, 0, 0]]},
                {"op": "RNN", "name": "lstm1", "inputs": [[2, 0, 0]]}])
    with pytest.raises(la.GraphFormatError, match=r"2 MXNet operator\(s\) not supported: RNN "
                                                  r"\(nodes 'lstm0', 'lstm1'\); UpSampling \(node 'up0'\)"):
        la.mxnet.load(_sym(tmp_path, doc), None)


def test_truncated_symbol_files_are_refused(tmp_path):
    text = open(model_files("mlp")[0]).read()
    for n in range(0, len(text), max(1, len(text) // 60)):
        path = _sym(tmp_path, text[:n])
        with pytest.raises(la.GraphFormatError):
            la.mxnet.load(path, model_files("mlp")[1])


@pytest.mark.parametrize("k", range(6))
def test_reshape_codes_load_without_shapes_and_resolve_per_call(k):
    """MXNet binds shapes at the first call; so does reshape_codes, at every new signature."""
    sym, _ = la.mxnet.load(*op_files(f"reshape{k}"))
    node = sym.outputs[0].node
    assert node.op.name == "reshape_codes"
    op = la.CachedOp(sym)
    x = np.load(op_files(f"reshape{k}")[0].replace("-symbol.json", "-in-x.npy"))
    np.testing.assert_array_equal(op(la.array(x)).asnumpy(), np.load(op_files(f"reshape{k}")[0].replace(
        "-symbol.json", "-out.npy")))
    bigger = np.concatenate([x, x])  # another batch: the codes resolve against it
    want = la.reshape_codes(la.array(bigger), codes=node.params["codes"], reverse=node.params["reverse"])
    np.testing.assert_array_equal(op(la.array(bigger)).asnumpy(), want.asnumpy())


def test_reshape_codes_that_do_not_fit_the_call_name_the_codes():
    sym, _ = la.mxnet.load(*op_files("reshape3"))  # (-4, 2, -1, -2): splits axis 0 into 2 x rest
    with pytest.raises(la.ShapeError, match=r"MXNet codes \(-4, 2, -1, -2\)"):
        la.CachedOp(sym)(la.zeros((3, 4)))


# -- attributes --------------------------------------------------------------------------------------
@pytest.mark.parametrize("text,want", [("(3, 3)", (3, 3)), ("[1,2,3]", (1, 2, 3)), ("(3,)", (3,)), ("()", ()),
                                       ("5", (5,)), ("None", None), ("(None, 2)", (None, 2)), ("(2L, 3L)", (2, 3))])
def test_parse_ints(text, want):
    assert parse_ints(text) == want


@pytest.mark.parametrize("text", ["(3, 3", "(a, b)", "1.5", "(" + "1," * 70 + ")", "1" * 30, "(3; 3)"])
def test_parse_ints_refuses(text):
    with pytest.raises(ValueError):
        parse_ints(text)


def test_attrs_by_type():
    a = Attrs({"b": "True", "f": "1e-05", "i": "3", "s": "relu", "bad": "maybe"}, "node 0 'n' (Op)")
    assert a.bool("b") is True and a.float("f") == 1e-5 and a.int("i") == 3 and a.choice("s", None, ("relu",)) == "relu"
    assert a.int("missing", 7) == 7
    with pytest.raises(la.GraphFormatError, match=r"node 0 'n' \(Op\): attribute bad='maybe' is not True or False"):
        a.bool("bad")
    with pytest.raises(la.GraphFormatError, match="is not a number"):
        Attrs({"f": "nan"}, "n").float("f")


def test_random_byte_flips_give_arrays_or_graph_format_error():
    """Seeded fuzzing of a real file: any corruption parses to arrays or raises GraphFormatError."""
    data = bytearray(open(op_files("bn_gamma")[1], "rb").read())
    rng = np.random.default_rng(18)
    outcomes = set()
    for _ in range(400):
        bad = bytearray(data)
        for pos in rng.integers(0, len(bad), rng.integers(1, 4)):
            bad[pos] = int(rng.integers(0, 256))
        try:
            params_file.read_params(bytes(bad))
            outcomes.add("parsed")
        except la.GraphFormatError as exc:
            assert "byte offset" in str(exc)
            outcomes.add("refused")
    assert outcomes == {"parsed", "refused"}  # flips in the data parse; flips in headers are refused


def test_random_symbol_mutations_give_graph_format_error(tmp_path):
    """Seeded mutations of a real symbol (a value replaced by another type or a bad reference)
    load or raise GraphFormatError, never another exception."""
    sym_file, par_file = op_files("conv_groups")
    doc = json.load(open(sym_file))
    rng = np.random.default_rng(7)
    junk = [None, 3, -1, "x", [], {}, [99, 0, 0], "(1, a)", True, 1e300]
    refused = 0
    for _ in range(150):
        d = json.loads(json.dumps(doc))
        node = d["nodes"][int(rng.integers(len(d["nodes"])))]
        field = ["op", "name", "inputs", "attrs"][int(rng.integers(4))]
        if field == "attrs" and node.get("attrs"):
            key = sorted(node["attrs"])[int(rng.integers(len(node["attrs"])))]
            node["attrs"][key] = junk[int(rng.integers(len(junk)))]
        else:
            node[field] = junk[int(rng.integers(len(junk)))]
        try:
            la.mxnet.load(_sym(tmp_path, d), par_file, input_shapes={"x": (2, 4, 7, 7)})
        except la.GraphFormatError:
            refused += 1
    assert refused > 100
