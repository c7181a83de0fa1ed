"""ONNX BitCast (opset 26) -> the registry's ``bitcast``: the bits reread as ``to``, of the same width."""
from __future__ import annotations

from .. import sym as S
from .import_ops import Converter, OnnxNode, dtype_of, np_dtype


def bitcast(n: OnnxNode) -> list:
    n.arity(1)
    to = np_dtype(int(n.attr("to", 0)), n.where)
    src = dtype_of(n.inputs[0])
    if src is not None and src.itemsize != to.itemsize:
        n.fail(f"BitCast from {src} to {to}: the widths differ ({src.itemsize * 8} and {to.itemsize * 8} bits)")
    return [S.bitcast(n.inputs[0], dtype=to)]


BITCAST_CONVERTERS: dict[str, Converter] = {"BitCast": bitcast}
