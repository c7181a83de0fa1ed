"""The values of ONNX ``TensorProto`` messages as NumPy arrays, read straight from their raw bytes.

``onnx.numpy_helper.to_array`` handles every element type and storage field; for the common case
(a plain numeric type stored as little-endian ``raw_data`` in the model itself) its generic path
costs more than the read: a converted model reads every initializer and every ``Constant`` node's
tensor once (a small transformer, some 200 of them). ``tensor_array`` reads that case with one
``np.frombuffer`` and leaves every other case (strings, narrow and packed formats, typed fields,
external data, big-endian machines) to ``to_array``, so both give the same array.
"""
from __future__ import annotations

import sys

import numpy as np

# TensorProto element types whose raw bytes are the NumPy dtype's (little endian): FLOAT, UINT8, INT8,
# UINT16, INT16, INT32, INT64, FLOAT16, DOUBLE, UINT32, UINT64
_RAW_DTYPES = {1: np.dtype("<f4"), 2: np.dtype("u1"), 3: np.dtype("i1"), 4: np.dtype("<u2"), 5: np.dtype("<i2"),
               6: np.dtype("<i4"), 7: np.dtype("<i8"), 10: np.dtype("<f2"), 11: np.dtype("<f8"),
               12: np.dtype("<u4"), 13: np.dtype("<u8")}
PLAIN_TYPES = frozenset(_RAW_DTYPES)  # (the element types ``tensor_array`` reads itself when stored raw)
_EXTERNAL = 1  # TensorProto.EXTERNAL (data_location)
_LITTLE = sys.byteorder == "little"


def tensor_array(t, numpy_helper) -> np.ndarray:
    """``numpy_helper.to_array(t)``: a read-only view of ``t``'s raw bytes where they are a plain
    numeric array of the right size, else ``to_array``'s answer (and its errors)."""
    dtype = _RAW_DTYPES.get(t.data_type)
    if dtype is None or not _LITTLE or t.data_location == _EXTERNAL or not t.HasField("raw_data") \
            or t.HasField("segment"):
        return numpy_helper.to_array(t)
    raw = t.raw_data
    dims = t.dims[:]  # (a list: a slice of the field is read in one call, a tuple of it per item)
    n = 1
    for d in dims:
        n *= d
    if n * dtype.itemsize != len(raw):  # (malformed: to_array says how)
        return numpy_helper.to_array(t)
    return np.frombuffer(raw, dtype=dtype).reshape(dims)


# AttributeProto kinds read as ``onnx.helper.get_attribute_value`` reads them: FLOAT, INT, STRING as the
# field, FLOATS, INTS, STRINGS as a list of it
_ONE_FIELD = {1: "f", 2: "i", 3: "s"}
_LIST_FIELD = {6: "floats", 7: "ints", 8: "strings"}


def attribute_value(a, helper):
    """``helper.get_attribute_value(a)`` (``helper``: ``onnx.helper``) for an attribute that refers to no
    function attribute: the plain kinds read with one read of ``a.type`` (onnx's reads it once per kind it
    tries), every other kind by ``get_attribute_value`` itself."""
    kind = a.type
    field = _ONE_FIELD.get(kind)
    if field is not None:
        return getattr(a, field)
    field = _LIST_FIELD.get(kind)
    return list(getattr(a, field)) if field is not None else helper.get_attribute_value(a)
