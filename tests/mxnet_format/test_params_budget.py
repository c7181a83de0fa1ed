"""Issue #33 item 2, MXNet files: sizes in a ``.params`` header or a symbol's attributes that no array
can have raise ``GraphFormatError`` naming the array or node, never a bare ``ValueError`` /
``TypeError`` from NumPy or Python."""
from __future__ import annotations

import json
import struct

import numpy as np
import pytest

import lazyarray as la
from lazyarray.mxnet import params_file


def _one_array(shape, flag=0, data=b"", key=b"arg:w"):
    head = struct.pack("<QQQ", params_file.LIST_MAGIC, 0, 1)
    head += struct.pack("<Iii", params_file.NDARRAY_V2_MAGIC, 0, len(shape)) + struct.pack(f"<{len(shape)}q", *shape)
    head += struct.pack("<iii", 1, 0, flag)
    return head + data + struct.pack("<Q", 1) + struct.pack("<Q", len(key)) + key


@pytest.mark.parametrize("shape", [(0, 2**62, 2**62), (2**62, 2**62, 0), (0, 2**63 - 1, 2)])
def test_an_empty_array_of_impossible_size_is_refused(shape, tmp_path):
    data = _one_array(shape)  # no data bytes needed: it has no elements
    with pytest.raises(la.GraphFormatError, match=r"array 0: the shape \[.*more than any array can hold.*"
                                                  r"header is corrupt at byte offset 36"):
        params_file.read_params(data)
    path = tmp_path / "m-0000.params"
    path.write_bytes(data)
    with pytest.raises(la.GraphFormatError, match="m-0000.params"):
        params_file.load_params(str(path))


def test_empty_arrays_of_possible_sizes_still_load():
    ((key, arr),) = params_file.read_params(_one_array((0, 2**40, 3)))
    assert key == "arg:w" and arr.shape == (0, 2**40, 3) and arr.dtype == np.float32
    ((_, arr),) = params_file.read_params(_one_array((2, 3), flag=6, data=np.arange(6, dtype="<i8").tobytes()))
    np.testing.assert_array_equal(arr, np.arange(6).reshape(2, 3))


def _conv_doc(op, attrs):
    nodes = [{"op": "null", "name": "x", "inputs": []}, {"op": "null", "name": "w", "inputs": []},
             {"op": op, "name": "c", "attrs": {"kernel": "(1, 1)", "no_bias": "True", **attrs},
              "inputs": [[0, 0, 0], [1, 0, 0]]}]
    return {"nodes": nodes, "arg_nodes": [0, 1], "node_row_ptr": [], "heads": [[2, 0, 0]],
            "attrs": {"mxnet_version": ["int", 10901]}}


@pytest.mark.parametrize("op,attrs,match", [
    ("Convolution", {"num_filter": "4", "num_group": ""}, r"node 2 'c' \(Convolution\): attribute num_group='' is "
                                                          r"not an integer"),
    ("Convolution", {"num_filter": "4", "num_group": "None"}, "num_group='None' is not an integer"),
    ("Deconvolution", {"num_filter": "4", "num_group": ""}, r"\(Deconvolution\): attribute num_group=''"),
    ("Deconvolution", {"num_filter": "4", "num_group": "0"}, "num_group=0 must divide num_filter 4"),
    ("Deconvolution", {"num_filter": "4", "num_group": "3"}, "num_group=3 must divide num_filter 4"),
])
def test_bad_num_group_is_named(op, attrs, match, tmp_path):
    path = tmp_path / "m-symbol.json"
    path.write_text(json.dumps(_conv_doc(op, attrs)))
    with pytest.raises(la.GraphFormatError, match=match):
        la.mxnet.load(str(path), None, {"x": (1, 4, 3, 3)})


def test_optional_ints_may_still_be_none():
    a = la.mxnet.attrs.Attrs({"end": "None", "num_filter": ""}, "node 0 'n' (Op)")
    assert a.int("end", None) is None and a.int("num_filter", None) is None
