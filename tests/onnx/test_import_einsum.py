"""ONNX Einsum import (diagonals, broadcast products and sums) against onnxruntime."""
from __future__ import annotations

import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper  # noqa: E402
from test_load import check, model, x32  # noqa: E402 (the single-node model helpers)

F32 = TensorProto.FLOAT


@pytest.mark.parametrize("eq,shapes", [
    ("ij,jk->ik", [(3, 4), (4, 5)]),
    ("ij,jk", [(3, 4), (4, 5)]),  # implicit output: the labels used once, sorted
    ("ba,ca", [(3, 4), (2, 4)]),  # implicit: "bc"
    ("ii->", [(4, 4)]),
    ("iij->ji", [(3, 3, 2)]),
    ("...ij,...jk->...ik", [(2, 1, 3, 4), (1, 5, 4, 2)]),  # ellipsis dims broadcast
    ("i,j,k->kji", [(2,), (3,), (4,)]),
    ("bij,bkj->bik", [(2, 3, 4), (2, 5, 4)]),
    ("...i->...", [(2, 3, 4)]),
])
def test_einsum_matches_onnxruntime(eq, shapes, tmp_path):
    names = [f"x{i}" for i in range(len(shapes))]
    m = model([helper.make_node("Einsum", names, ["y"], equation=eq)],
              [(nm, F32, s) for nm, s in zip(names, shapes)], [("y", F32, None)], opset=18)
    check(m, tmp_path, {nm: x32(*s) for nm, s in zip(names, shapes)}, rtol=1e-5, atol=1e-5)
