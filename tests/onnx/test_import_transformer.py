"""ONNX RotaryEmbedding and SwiGLU (``onnx/import_transformer.py``) and CenterCropPad
(``onnx/import_crop.py``) beyond ONNX's node cases: 3-D and 4-D inputs, partial and interleaved
rotations, position ids, odd crops and pads on chosen axes. RotaryEmbedding and CenterCropPad
against onnxruntime; SwiGLU (opset 28, which onnxruntime does not run yet) against onnx.reference."""
from __future__ import annotations

import numpy as np
import pytest
from node_check import check_node, node_model, run_lazyarray

from lazyarray.errors import GraphFormatError

RNG = np.random.default_rng(19)


def f32(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize("interleaved", [0, 1])
@pytest.mark.parametrize("rank,dim,positions", [(4, 0, True), (4, 6, False), (3, 0, False), (3, 4, True)])
def test_rotary_embedding_matches_onnxruntime(interleaved, rank, dim, positions):
    batch, heads, seq, head = 2, 3, 5, 10
    rot = dim or head
    x = f32(batch, heads, seq, head) if rank == 4 else f32(batch, seq, heads * head)
    cache = (16,) if positions else (batch, seq)
    ins = {"x": x, "cos": f32(*cache, rot // 2), "sin": f32(*cache, rot // 2),
           "pos": RNG.integers(0, 16, (batch, seq)).astype(np.int64) if positions else None}
    attrs = {"interleaved": interleaved, "rotary_embedding_dim": dim}
    if rank == 3:
        attrs["num_heads"] = heads
    check_node(node_model("RotaryEmbedding", ins, opset=23, **attrs), ins, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("shape,alpha,dtype", [((3, 7), 1.0, np.float32), ((2, 3, 4), 1.702, np.float32),
                                               ((5,), 0.5, np.float64)])
def test_swiglu_matches_reference(shape, alpha, dtype):
    ins = {"a": (RNG.standard_normal(shape) * 3).astype(dtype), "b": RNG.standard_normal(shape).astype(dtype)}
    check_node(node_model("SwiGLU", ins, opset=28, alpha=alpha), ins, runtime="reference", rtol=1e-6, atol=1e-6)


def test_swiglu_refuses_broadcasting():
    ins = {"a": f32(3, 4), "b": f32(1, 4)}
    with pytest.raises(GraphFormatError, match="SwiGLU takes A and B of one shape"):
        run_lazyarray(node_model("SwiGLU", ins, opset=28, infer=False), ins)


@pytest.mark.parametrize("shape,target,axes", [((7, 6, 3), [4, 9, 3], None), ((2, 5, 8), [8, 3], [-2, -1]),
                                               ((9, 4), [2], [0]), ((3, 3, 3, 3), [6, 1], [1, 3])])
def test_center_crop_pad_matches_onnxruntime(shape, target, axes):
    ins = {"x": f32(*shape)}
    consts = {"shape": np.array(target, np.int64)}
    attrs = {} if axes is None else {"axes": axes}
    check_node(node_model("CenterCropPad", ins, opset=18, consts=consts, **attrs), ins)
