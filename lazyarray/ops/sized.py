"""Ops whose output size is a parameter that may be symbolic: ``fill`` (ONNX ``ConstantOfShape``,
``la.zeros((b, h))`` under a shape-polymorphic trace), ``iota`` (``arange(s)``, ONNX ``Range``) and
``dim_values`` (the sizes themselves as an int64 tensor: ONNX ``Shape`` of a symbolic shape).

Their parameters hold ``la.Dim`` expressions until the executor binds them to a call's sizes
(``graph/passes/bind_dims.py``); the kernels only ever see ints.
"""
from __future__ import annotations

import numpy as np

from ..aval import check_alloc
from ..device import Device, on_device
from ..dim import floordiv
from ..errors import ParamValueError
from .params import DEVICE, DTYPE, INTS, SCALAR, Param
from .registry import OpDef, register

_CPU0 = Device("cpu", 0)
_I64 = np.dtype("int64")


def _fill(xp, shape, value, dtype=_I64, device=_CPU0, out=None):
    # Checked here again, not only by the rules: they run once per signature (registry.infer keeps
    # their answers), and LAZYARRAY_MAX_ALLOC_BYTES may have been lowered since the graph was built.
    # Only the sized ops pay it: a size taken from a parameter, not from arrays already in memory.
    check_alloc("fill", shape, dtype)
    with on_device(device):
        return xp.full(tuple(shape), value, dtype=dtype)


register(OpDef(
    "fill", (), _fill,
    params=(Param("shape", INTS), Param("value", SCALAR, 0), Param("dtype", DTYPE, _I64),
            Param("device", DEVICE, _CPU0)),
    shape=lambda shapes, shape, **p: tuple(shape), dtype=lambda dtypes, dtype=_I64, **p: dtype,
    device=lambda avals, device=_CPU0, **p: device,
    doc="an array of the given (possibly symbolic) shape filled with value (ONNX ConstantOfShape)"))


def _iota(xp, bounds, dtype=_I64, device=_CPU0, out=None):
    start, stop, step = bounds
    check_alloc("iota", (max(-((start - stop) // step), 0),), dtype)  # (as fill's: the limit read when it runs)
    with on_device(device):
        return xp.arange(start, stop, step, dtype=dtype)


def _iota_shape(shapes, bounds, **p):
    if len(bounds) != 3:
        raise ParamValueError(f"iota: bounds must be (start, stop, step), got {tuple(bounds)}; for 0..n-1 "
                              "pass (0, n, 1) (la.arange(n) takes one number)")
    start, stop, step = bounds
    if step == 0:
        raise ParamValueError("iota: step must not be 0, got bounds (start, stop, 0); use 1 (or -1 to count down)")
    n = stop - start
    if isinstance(step, int) and step > 0:
        n = floordiv(n + step - 1, step)
    elif isinstance(step, int):
        n = floordiv(-n - step - 1, -step)
    if isinstance(n, int):
        return (max(n, 0),)
    lo, hi = n.bounds()
    return (n if lo >= 0 else None,)  # (a count that may be negative is read when the graph runs)


register(OpDef(
    "iota", (), _iota,
    params=(Param("bounds", INTS), Param("dtype", DTYPE, _I64), Param("device", DEVICE, _CPU0)),
    shape=_iota_shape, dtype=lambda dtypes, dtype=_I64, **p: dtype,
    device=lambda avals, device=_CPU0, **p: device,
    doc="integers start, start + step, ... below stop; bounds=(start, stop, step), possibly symbolic "
        "(ONNX Range)"))


def _dim_values(xp, values, shape, device=_CPU0, out=None):
    with on_device(device):
        return xp.asarray(np.array(values, dtype=np.int64).reshape(shape))


register(OpDef(
    "dim_values", (), _dim_values,
    params=(Param("values", INTS), Param("shape", INTS), Param("device", DEVICE, _CPU0)),
    shape=lambda shapes, values, shape, **p: tuple(shape), dtype=lambda dtypes, **p: _I64,
    device=lambda avals, device=_CPU0, **p: device,
    doc="the given (possibly symbolic) sizes as an int64 array of the given shape (ONNX Shape)"))
