"""ONNX tensors of narrow number formats (bfloat16, float8, float4, int4, int2) in both directions.

lazyarray computes with NumPy dtypes only, and these formats have none, so an imported model keeps
such a value *in its format* but stores it in a wide dtype holding every value of the format
exactly (float32, or int8/uint8 for the integer formats; ``ops/narrow_format.FORMATS``):

* graph inputs and outputs of a narrow type are that wide dtype in the Symbol (``la.onnx.load``);
  the ``onnx.backend`` converts at the boundary (``widen`` feeds, ``narrow`` results);
* initializers and constant attributes are widened when read;
* after every node whose output ONNX types as narrow, a ``round_to_format`` node rounds the wide
  value into the format, as a runtime computing in that format would (ONNX's reference computes
  each operator in float32 and rounds its result the same way). ``Cast``/``CastLike``/
  ``QuantizeLinear`` to a narrow type round once from their input, with ``saturate``.

Element types come from ONNX's shape inference; a node reading a narrow value whose output type it
cannot tell is refused by name rather than left unrounded. Export writes ``round_to_format`` as
``Cast`` to the format and back.
"""
from __future__ import annotations

import numpy as np

from .. import sym as S
from ..ops.narrow_format import FORMATS, ml_dtype
from .export_base import elem_type, fail, out_dtype

# TensorProto element type -> narrow format (ml_dtypes name)
NARROW = {16: "bfloat16", 17: "float8_e4m3fn", 18: "float8_e4m3fnuz", 19: "float8_e5m2", 20: "float8_e5m2fnuz",
          21: "uint4", 22: "int4", 23: "float4_e2m1fn", 24: "float8_e8m0fnu", 25: "uint2", 26: "int2"}
_ELEM = {f: t for t, f in NARROW.items()}
# the opset that first lets Cast reach the format (and has its saturate attribute)
CAST_OPSET = {"bfloat16": 13, "float8_e4m3fn": 19, "float8_e4m3fnuz": 19, "float8_e5m2": 19, "float8_e5m2fnuz": 19,
              "uint4": 21, "int4": 21, "float4_e2m1fn": 23, "float8_e8m0fnu": 24, "uint2": 25, "int2": 25}


def narrow_format(elem_type: int) -> str | None:
    """The narrow format of an ONNX element type, ``None`` for the others."""
    return NARROW.get(int(elem_type))


def storage_dtype(elem_type: int) -> np.dtype | None:
    """The wide dtype holding values of a narrow element type (``None`` for other types)."""
    f = NARROW.get(int(elem_type))
    return None if f is None else FORMATS[f]


def widen(arr: np.ndarray) -> np.ndarray:
    """An ``ml_dtypes`` array of a narrow format as its wide storage dtype (exact); others unchanged."""
    if arr.dtype.isbuiltin != 2:  # (NumPy's own dtypes: ml_dtypes' are user-defined; ``name`` costs ~6 us)
        return arr
    f = arr.dtype.name  # ml_dtypes' names, which NumPy's own dtypes never have
    return arr.astype(FORMATS[f]) if f in FORMATS else arr


def narrow(arr: np.ndarray, elem_type: int) -> np.ndarray:
    """A wide array as the ``ml_dtypes`` array of ``elem_type``'s narrow format (others unchanged)."""
    f = NARROW.get(int(elem_type))
    return arr if f is None else arr.astype(ml_dtype(f))


_TYPE_ATTRS = ("to", "output_dtype", "dtype", "output_datatype")
_INT, _TENSOR, _GRAPH, _GRAPHS = 2, 4, 5, 10  # (onnx.AttributeProto's INT, TENSOR, GRAPH, GRAPHS)


def has_narrow(model) -> bool:
    """True when a graph of the model declares a narrow value or casts to a narrow type."""
    return graph_has_narrow(model.graph)


def declares_narrow(graph) -> bool:
    """True when ``graph`` itself (not its nodes) has a value or an initializer of a narrow type."""
    for vi in list(graph.input) + list(graph.output) + list(graph.value_info):
        if vi.type.HasField("tensor_type") and vi.type.tensor_type.elem_type in NARROW:
            return True
    return any(t.data_type in NARROW for t in graph.initializer)


def graph_has_narrow(graph) -> bool:
    """``has_narrow`` of one graph and the bodies of its nodes."""
    if declares_narrow(graph):
        return True
    for nd in graph.node:
        for a in nd.attribute:  # (by its declared type: each protobuf field read makes a Python object)
            t = a.type
            if t == _INT:
                if a.i in NARROW and a.name in _TYPE_ATTRS:
                    return True
            elif t == _TENSOR:
                if a.t.data_type in NARROW:
                    return True
            elif t == _GRAPH:
                if graph_has_narrow(a.g):
                    return True
            elif t == _GRAPHS and any(graph_has_narrow(g) for g in a.graphs):
                return True
    return False


class NarrowFound(Exception):
    """A node's attribute names a narrow format in a conversion that assumed none (``load.py``)."""


def narrow_attribute(a, value) -> bool:
    """Whether the node attribute ``a`` (``value``: ``onnx.helper.get_attribute_value``'s) is one
    ``graph_has_narrow`` finds narrow: a loader that reads every attribute anyway asks it of each
    instead of walking the graph first."""
    t = a.type
    if t == _INT:
        return value in NARROW and a.name in _TYPE_ATTRS
    if t == _TENSOR:
        return value.data_type in NARROW
    if t == _GRAPH:
        return graph_has_narrow(value)
    return t == _GRAPHS and any(graph_has_narrow(g) for g in value)


def value_types(model) -> dict[str, int]:
    """Value name -> ONNX element type for every typed value of the model's graphs (ONNX shape
    inference fills the intermediate values; the file's declarations win)."""
    import onnx
    try:
        inferred = onnx.shape_inference.infer_shapes(model, strict_mode=False)
    except Exception:  # noqa: BLE001 (inference is best effort; untyped narrow values are refused later)
        inferred = model
    types: dict[str, int] = {}

    def visit(graph):
        for vi in list(graph.value_info) + list(graph.input) + list(graph.output):
            if vi.type.HasField("tensor_type") and vi.type.tensor_type.elem_type:
                types[vi.name] = vi.type.tensor_type.elem_type
        for t in graph.initializer:
            types[t.name] = t.data_type
        for nd in graph.node:
            for a in nd.attribute:
                if a.HasField("g"):
                    visit(a.g)
                for g in a.graphs:
                    visit(g)
                if nd.op_type == "Constant" and a.HasField("t") and nd.output:
                    types[nd.output[0]] = a.t.data_type

    visit(inferred.graph)
    return types


def round_output(s, format: str):
    """``s`` rounded into ``format`` unless its producer already did (a Cast to the format)."""
    node = s.outputs[0].node
    if node.op is not None and node.op.name == "round_to_format" and node.params.get("format") == format:
        return s
    return S.round_to_format(s, format=format, saturate=False)


def export_round(g, node, ins):
    """``round_to_format`` -> ``Cast`` to the format, then back to the wide dtype."""
    f = node.params.get("format", "bfloat16")
    if g.opset < CAST_OPSET[f]:
        raise fail(g, node, f"Cast to {f} is ONNX opset {CAST_OPSET[f]}: export with opset={CAST_OPSET[f]}")
    attrs = {}
    if g.opset >= 19 and f.startswith("float8"):
        attrs["saturate"] = int(bool(node.params.get("saturate", True)))
    if f == "float8_e8m0fnu":
        attrs["round_mode"] = node.params.get("round_mode", "up")
    y = g.op("Cast", ins, to=_ELEM[f], **attrs)
    return [g.op("Cast", [y], to=elem_type(out_dtype(node)))]
