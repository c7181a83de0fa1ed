"""Core ops the rest of the system leans on: fills, casts, copies, device and storage moves."""
from __future__ import annotations

from ..device import Device, to_device
from ..storage import CSR, RowSparse, densify, from_dense, stype_of
from . import sparse_kernels
from .params import DEVICE, DTYPE, OPT_DTYPE, SCALAR, Param, choice
from .registry import OpDef, register


def _like_dtype(dtypes, dtype=None, **params):
    return dtypes[0] if dtype is None else dtype


register(OpDef("zeros_like", ("x",), lambda xp, x, dtype=None, out=None: xp.zeros_like(densify(x, xp), dtype=dtype),
               params=(Param("dtype", OPT_DTYPE, None),), dtype=_like_dtype,
               grad=lambda F, ins, y, g, dtype=None: [None], doc="zeros shaped like x, of x's dtype or dtype"))
register(OpDef("ones_like", ("x",), lambda xp, x, dtype=None, out=None: xp.ones_like(densify(x, xp), dtype=dtype),
               params=(Param("dtype", OPT_DTYPE, None),), dtype=_like_dtype,
               grad=lambda F, ins, y, g, dtype=None: [None], doc="ones shaped like x, of x's dtype or dtype"))


def _full_like(xp, x, fill_value, dtype=None, out=None):
    return xp.full_like(densify(x, xp), fill_value, dtype=dtype)


register(OpDef("full_like", ("x",), _full_like,
               params=(Param("fill_value", SCALAR), Param("dtype", OPT_DTYPE, None)), dtype=_like_dtype,
               grad=lambda F, ins, y, g, fill_value, dtype=None: [None],
               doc="an array shaped like x filled with fill_value, of x's dtype or dtype"))


def _cast(xp, x, dtype, out=None):
    if out is not None:  # (a compiled step's planned buffer: the values astype gives, no allocation)
        xp.copyto(out, x, casting="unsafe")
        return out
    return x.astype(dtype) if hasattr(x, "astype") else xp.asarray(x, dtype=dtype)  # (a Python scalar operand)


register(OpDef(
    "cast", ("x",), _cast, params=(Param("dtype", DTYPE),),
    dtype=lambda dtypes, dtype: dtype, writes_out=True,
    storage=sparse_kernels.zero_preserving_storage, sparse_kernel=sparse_kernels.unary(_cast),
    grad=lambda F, ins, y, g, dtype: [F.cast(g, dtype=ins[0].aval.dtype)] if ins[0].aval.dtype.kind == "f" else [None],
    doc="x converted to dtype (a copy)",
))
register(OpDef("copy", ("x",), lambda xp, x, out=None: x.copy(),
               grad=lambda F, ins, y, g: [g], doc="a copy of x"))
register(OpDef("stop_gradient", ("x",), lambda xp, x, out=None: x,
               grad=lambda F, ins, y, g: [None], view=True,
               doc="x itself, but no gradient flows back through it (detach)"))


def _copy_to(xp, x, device, out=None):
    # The source device is read off the value: CuPy arrays know their GPU, NumPy ones are host.
    src = Device("gpu", x.device.id) if hasattr(x, "__cuda_array_interface__") else _HOST
    return to_device(x, src, device)


_HOST = Device("cpu", 0)


def _copy_to_sparse(xp, x, device, out=None):
    # A sparse value moves as its component arrays; the container is rebuilt around them.
    parts = [_copy_to(xp, a, device) for a in (x.data, x.indices) + ((x.indptr,) if isinstance(x, CSR) else ())]
    return CSR(*parts, x.shape) if isinstance(x, CSR) else RowSparse(*parts, x.shape)


register(OpDef(
    "copy_to", ("x",), _copy_to, params=(Param("device", DEVICE),),
    device=lambda avals, device: device,
    storage=lambda stypes, shapes, device: [stypes[0]] if stypes[0] != "default" else None,
    sparse_kernel=_copy_to_sparse,
    grad=lambda F, ins, y, g, device: [F.copy_to(g, device=ins[0].aval.device)],
    doc="x copied to another device: the explicit copy node of cross-device graphs",
))


def _cast_storage(xp, x, stype, out=None):
    if stype_of(x) == stype:
        return x
    if stype != "default" and stype_of(x) != "default":
        return sparse_kernels.convert(xp, x, stype)
    return from_dense(densify(x, xp), stype, xp)


register(OpDef(
    "cast_storage", ("x",), _cast_storage,
    params=(Param("stype", choice("default", "csr", "row_sparse")),),
    storage=lambda stypes, shapes, stype: [stype], sparse_kernel=_cast_storage, sparse_from_dense=True,
    grad=lambda F, ins, y, g, stype: [F.cast_storage(g, stype="default")],
    doc="x with another storage type (default, csr, row_sparse)",
))
