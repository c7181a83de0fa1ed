"""``la.onnx``: ONNX files both ways.

* ``la.onnx.export(obj, path, *, input_shapes=None, dynamic_axes=None, opset=None)`` writes a
  ``Symbol``, a ``CachedOp`` or a ``HybridBlock`` as an ONNX model (``export.py``; one converter
  per registry op in ``export_ops.py``).
* ``la.onnx.load(path) -> Symbol`` reads one (opset 13 and up; opset 7-12 upgraded by
  ``opset_upgrade.py``) back (``load.py``; converters per ONNX operator in ``import_ops.py``,
  ``import_nn.py``, ``import_index.py``, ``import_quant.py``, ``import_lrn.py``);
  ``backend.py`` is an ``onnx.backend`` over ``la.CachedOp`` for ONNX's node test cases.

The ``onnx`` package (``pip install 'lazyarray[onnx]'``) is imported only when a function runs, so
``import lazyarray`` never needs it.
"""
from __future__ import annotations

from .export import DEFAULT_OPSET, export, supported_ops
from .load import load

__all__ = ["DEFAULT_OPSET", "export", "load", "supported_ops"]
