"""``la.onnx``: ONNX files both ways.

* ``la.onnx.export(obj, path, *, input_shapes=None, dynamic_axes=None, opset=None)`` writes a
  ``Symbol``, a ``CachedOp`` or a ``HybridBlock`` as an ONNX model (``export.py``; one converter
  per registry op in ``export_ops.py``).
* ``la.onnx.load(path) -> Symbol`` reads one back (``load.py``).

The ``onnx`` package (``pip install lazyarray[onnx]``) is imported only when a function runs, so
``import lazyarray`` never needs it.
"""
from __future__ import annotations

from .export import DEFAULT_OPSET, export, supported_ops

__all__ = ["DEFAULT_OPSET", "export", "load", "supported_ops"]


def load(path: str):
    """Read an ONNX model as a ``Symbol`` (``lazyarray/onnx/load.py``)."""
    try:
        from .load import load as _load
    except ImportError as exc:
        if "onnx" in str(exc) and "lazyarray" not in str(exc):
            raise
        raise ImportError("la.onnx.load: the ONNX importer (lazyarray/onnx/load.py) is not part of this "
                          "build yet; la.onnx.export works") from exc
    return _load(path)
