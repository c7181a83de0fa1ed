"""What every ONNX export converter uses: the failure message, dtypes and shapes of a node's inputs
and outputs (shapes as the export sees them, dynamic axes unknown), casting inputs to the dtype
the op computes in, ONNX element types, and which nodes belong to training graphs only.

The converter tables (``export_ops.py`` and the family files ``export_nn.py``, ``export_index.py``,
``export_linalg.py``, ``export_scatter.py``, ``narrow.py``, ``image.py``) and the walk
(``export.py``) import these; this module imports none of them, so imports point one way.
``onnx`` itself is imported only when an element type is asked for (``elem_type``).
"""
from __future__ import annotations

from contextvars import ContextVar

import numpy as np

from ..errors import GraphError

INT64_MAX = np.iinfo(np.int64).max
INT64_MIN = np.iinfo(np.int64).min


def fail(g, node, why: str):
    return GraphError(f"cannot export node {g.label(node)!r} ({node.op.name}) to ONNX: {why}")


def in_dtype(node, i: int) -> np.dtype:
    return node.inputs[i].node.avals[node.inputs[i].index].dtype


def out_dtype(node, i: int = 0) -> np.dtype:
    return node.avals[i].dtype


# the avals of the graph being exported re-inferred with its dynamic axes unknown (export sets it):
# a converter that needs a static size then sees None there and refuses, instead of baking in the
# size the graph was traced with
EXPORT_AVALS: ContextVar[dict | None] = ContextVar("onnx_export_avals", default=None)


def input_shape(node, i: int = 0):
    e = node.inputs[i]
    avals = EXPORT_AVALS.get()
    if avals is not None and id(e.node) in avals:
        return avals[id(e.node)][e.index].shape
    return e.node.avals[e.index].shape


def input_rank(g, node, i: int = 0) -> int:
    s = input_shape(node, i)
    if s is None:
        raise fail(g, node, f"the rank of input {i} is unknown; give la.onnx.export input_shapes")
    return len(s)


def compute(g, node, ins, dtype=None):
    """``ins`` cast to ``dtype`` (default: the output's dtype) where they differ."""
    dtype = out_dtype(node) if dtype is None else dtype
    return [g.cast(t, in_dtype(node, i), dtype) for i, t in enumerate(ins)]


def elem_type(dtype) -> int:
    """The ONNX ``TensorProto`` element type of a NumPy dtype."""
    from onnx import helper  # onnx is an optional dependency: imported only when exporting
    return helper.np_dtype_to_tensor_dtype(np.dtype(dtype))


# -- not in inference graphs ----------------------------------------------------------------------
TRAINING_OPS = ("dropout_mask", "softmax_cross_entropy", "ctc_loss", "random_normal", "random_uniform",
                # forms the compiled training step uses (graph/passes/forward_saves.py), never in a traced symbol
                "layer_norm_with_stats", "layer_norm_grad_saved", "softmax_cross_entropy_rows_with_probs",
                "softmax_cross_entropy_rows_grad_saved")


def is_training_node(node) -> bool:
    name = node.op.name
    return name.endswith("_grad") or name in TRAINING_OPS or (name == "dropout" and bool(node.params.get("training")))


def training_error(label, nodes):
    listed = ", ".join(sorted({f"{n.op.name} (node {label(n)!r})" for n in nodes}))
    return GraphError(f"cannot export to ONNX: {listed} belong to a training graph (gradients, dropout "
                      "masks, random draws, losses); ONNX export covers inference graphs only: export the "
                      "model outside autograd.record() and la.train_mode() (net.export_onnx(path) exports "
                      "the inference graph)")
