"""``la.onnx``: ONNX models in and out. ``load(path) -> Symbol`` reads a model file (opset 13 and up);
the ``onnx`` package is needed only when a function here is called (``pip install 'lazyarray[onnx]'``).
"""
from __future__ import annotations

from .load import load

__all__ = ["load"]
