"""NumPy and DLPack interop: ``np.exp(x)``, ``np.concatenate([x, y])``, ``np.mean(x)`` on lazyarray arrays
give lazyarray arrays (recorded under deferred compute), and ``__dlpack__`` / ``la.from_dlpack`` share
memory with NumPy, CuPy and any DLPack consumer or producer.

The rule for NumPy calls (``NDArray.__array_ufunc__`` / ``__array_function__``):

* a ufunc called plainly (``np.add(x, y)``, ``np.exp(x)``; no ``out=``, ``where=``, ``dtype=``, no
  ``.reduce``/``.accumulate``) whose kernel is a registry op runs that op: a lazyarray result, lazy under
  ``la.deferred()``;
* the NumPy functions in ``FUNCTIONS`` (``concatenate``, ``stack``, ``where``, ``mean``, ``sum``, ``reshape``,
  ...) run their ``la`` counterparts, with the same rule for keywords they do not support;
* anything else runs NumPy itself on the materialized values and returns what NumPy returns (a NumPy
  array), as before these hooks existed: ``np.allclose(x, y)`` and ``np.testing`` keep working. Under
  deferred compute that computes the arrays, as ``np.asarray(x)`` does.

>>> import numpy as np
>>> import lazyarray as la
>>> x = la.asarray([1.0, 2.0])
>>> type(np.exp(x)).__name__, type(np.concatenate([x, x])).__name__, float(np.mean(x))
('NDArray', 'NDArray', 1.5)
"""
from __future__ import annotations

import numpy as np

from . import array_api
from .buffer import expose
from .dispatch import apply
from .functions import namespace
from .ndarray import NDArray, make_array
from .ops import registry

_UFUNC_OPS: dict = {}  # ufunc name -> OpDef (filled on first use: every op whose kernel is that ufunc)
_RENAMED = {"true_divide": "divide", "divide": "divide", "absolute": "abs", "conjugate": "conj"}


def _ufunc_op(ufunc):
    if not _UFUNC_OPS:
        for op in registry.all_ops():
            if isinstance(op.kernel, str) and op.elementwise and not op.params and op.namespace == "":
                _UFUNC_OPS.setdefault(op.kernel, op)
        for k, v in _RENAMED.items():
            _UFUNC_OPS[k] = registry.get(v)
        _UFUNC_OPS["matmul"] = registry.get("matmul")
    return _UFUNC_OPS.get(ufunc.__name__)


def _to_numpy(obj):
    if isinstance(obj, NDArray):
        return np.asarray(obj)
    if isinstance(obj, (list, tuple)):
        return type(obj)(_to_numpy(o) for o in obj)
    if isinstance(obj, dict):
        return {k: _to_numpy(v) for k, v in obj.items()}
    return obj


def array_ufunc(self, ufunc, method, *inputs, **kwargs):
    op = _ufunc_op(ufunc) if method == "__call__" and not kwargs else None
    if op is not None and len(inputs) == len(op.inputs):
        return apply(op, inputs, {}, make_array)
    return getattr(ufunc, method)(*_to_numpy(inputs), **_to_numpy(kwargs))


def _reduction(name):
    fn = getattr(array_api, name, None) or namespace("")[name]

    def call(a, axis=None, dtype=None, out=None, keepdims=False, **kw):
        if dtype is not None or out is not None or kw:
            return NotImplemented
        return fn(a, axis=axis, keepdims=keepdims)
    return call


def _ops():
    la = namespace("")
    return {
        np.concatenate: lambda seq, axis=0, out=None, dtype=None, casting="same_kind": (
            la["concatenate"](list(seq), axis=axis) if out is None and dtype is None else NotImplemented),
        np.stack: lambda arrays, axis=0, out=None, dtype=None, casting="same_kind": (
            la["stack"](list(arrays), axis=axis) if out is None and dtype is None else NotImplemented),
        np.where: lambda cond, *xy: la["where"](cond, *xy) if len(xy) == 2 else NotImplemented,
        np.sum: _reduction("sum"), np.mean: _reduction("mean"), np.max: _reduction("max"),
        np.min: _reduction("min"), np.prod: _reduction("prod"), np.any: _reduction("any"),
        np.all: _reduction("all"), np.amax: _reduction("max"), np.amin: _reduction("min"),
        np.reshape: lambda a, shape=None, order="C", **kw: (
            la["reshape"](a, shape if shape is not None else kw.get("newshape")) if order == "C" else NotImplemented),
        np.transpose: lambda a, axes=None: la["transpose"](a, axes),
        np.clip: lambda a, a_min=None, a_max=None, out=None, **kw: (
            array_api.clip(a, kw.get("min", a_min), kw.get("max", a_max)) if out is None else NotImplemented),
        np.dot: lambda a, b, out=None: la["dot"](a, b) if out is None else NotImplemented,
        np.expand_dims: lambda a, axis: la["expand_dims"](a, axis=axis),
        np.squeeze: lambda a, axis=None: la["squeeze"](a, axis=axis),
        np.tensordot: lambda a, b, axes=2: array_api.tensordot(a, b, axes=axes),
        np.diff: lambda a, n=1, axis=-1, prepend=None, append=None: array_api.diff(
            a, n=n, axis=axis, prepend=prepend, append=append),
    }


FUNCTIONS: dict = {}


def array_function(self, func, types, args, kwargs):
    if not FUNCTIONS:
        FUNCTIONS.update(_ops())
    impl = FUNCTIONS.get(func)
    if impl is not None and all(issubclass(t, (NDArray, np.ndarray)) for t in types):
        res = impl(*args, **kwargs)
        if res is not NotImplemented:
            return res
    return func(*_to_numpy(args), **_to_numpy(kwargs))


# -- DLPack ---------------------------------------------------------------------------------------------------
def dlpack(self, *, stream=None, max_version=None, dl_device=None, copy=None):
    """The DLPack capsule of the computed value (a lazy array is computed first); zero-copy unless
    ``copy=True`` or ``dl_device`` asks for another device."""
    if self.stype != "default":
        raise BufferError(f"__dlpack__: a {self.stype} array has no dense buffer to share; call x.tostype('default')")
    v = self._materialize()
    kw = {}
    if max_version is not None:
        kw["max_version"] = max_version
    if dl_device is not None:
        kw["dl_device"] = dl_device
    if copy is not None:
        kw["copy"] = copy
    if stream is not None:
        kw["stream"] = stream
    if not copy:  # the consumer shares the live buffer and may write it: versions cannot see that
        expose(v)
    return v.__dlpack__(**kw)


def dlpack_device(self):
    """``(device type, device id)`` in DLPack's numbering: (1, 0) for host memory, (2, id) for CUDA."""
    if self._device.kind == "gpu":
        return (2, self._device.id)
    return (1, 0)


NDArray.__array_ufunc__ = array_ufunc
NDArray.__array_function__ = array_function
NDArray.__dlpack__ = dlpack
NDArray.__dlpack_device__ = dlpack_device
