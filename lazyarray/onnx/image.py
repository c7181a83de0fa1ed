"""ONNX ImageDecoder <-> ``image_decode`` (``ops/image.py``: Pillow's decoding, ONNX's formats only).

Export writes ``ImageDecoder``, an operator of opset 20: at the default opset 18 the export
refuses it by name (``opset=20`` or later fixes it)."""
from __future__ import annotations

from .. import sym as S
from .export_base import fail
from .import_ops import OnnxNode

_FORMATS = ("RGB", "BGR", "Grayscale")


def image_decoder(n: OnnxNode) -> list:
    n.arity(1)
    fmt = n.attr("pixel_format", "RGB")
    if fmt not in _FORMATS:
        n.fail(f"pixel_format must be one of {', '.join(_FORMATS)}, got {fmt!r}")
    return [S.image_decode(n.inputs[0], pixel_format=fmt)]


IMAGE_CONVERTERS = {"ImageDecoder": image_decoder}


def export_image_decode(g, node, ins):
    if g.opset < 20:
        raise fail(g, node, "ONNX decodes images with ImageDecoder from opset 20: export with opset=20")
    return [g.op("ImageDecoder", ins, pixel_format=node.params.get("pixel_format", "RGB"))]
