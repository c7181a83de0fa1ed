"""NumPy and DLPack interop: ``np.exp(x)``, ``np.concatenate([x, y])``, ``np.mean(x)`` on lazyarray arrays
give lazyarray arrays (recorded under deferred compute), and ``__dlpack__`` / ``la.from_dlpack`` share
memory with NumPy, CuPy and any DLPack consumer or producer.

The rule for NumPy calls (``NDArray.__array_ufunc__`` / ``__array_function__``), the same for eager and
lazy arrays: a lazyarray result (lazy under ``la.deferred()``) or ``la.NumPyFunctionError`` naming the
function, never NumPy's own result on the computed values (under deferred compute that would compute the
array at once and record a constant in its place):

* a ufunc (``np.add(x, y)``, ``np.exp(x)``, ``np.add.reduce(x)``, ``np.multiply.outer(x, y)``) runs the
  registry op whose kernel it is (``dtype=`` casts the inputs); ``out=``, ``where=``, ``ufunc.at`` and
  ufuncs without an op are refused;
* NumPy functions (``np.sort``, ``np.concatenate``, ``np.linalg.norm``, ``np.fft.fft``, ...) follow
  ``numpy_functions.TABLE``.

``np.asarray(x)`` / ``np.array(x)`` are the explicit conversions: they compute the array (its ``__array__``).

>>> import numpy as np
>>> import lazyarray as la
>>> x = la.asarray([1.0, 2.0])
>>> type(np.exp(x)).__name__, type(np.concatenate([x, x])).__name__, float(np.mean(x))
('NDArray', 'NDArray', 1.5)
"""
from __future__ import annotations

import functools

import numpy as np

from . import array_api, numpy_functions
from .buffer import expose
from .errors import NumPyFunctionError
from .ndarray import NDArray
from .ops import registry

_RENAMED = {"true_divide": "divide", "divide": "divide", "absolute": "abs", "conjugate": "conj", "rint": "round",
            "fabs": "abs", "floor_divide": "floor_divide", "expm1": "expm1", "matmul": "matmul"}
# ufunc.reduce / .accumulate with an la equivalent (NumPy's default axis for both is 0)
_REDUCE = {"add": "sum", "multiply": "prod", "maximum": "max", "minimum": "min", "logical_and": "all",
           "logical_or": "any"}
_ACCUMULATE = {"add": "cumulative_sum", "multiply": "cumulative_prod"}


@functools.lru_cache(maxsize=256)  # one entry per NumPy ufunc (bounded: NumPy has about 110)
def ufunc_function(name: str):
    """The la function that a plain call of NumPy's ufunc ``name`` runs, or None: the op whose kernel is that
    ufunc (a registry op of the top level without parameters), or the renamed equivalent."""
    if name in _RENAMED:
        return numpy_functions.LA[_RENAMED[name]]
    if name == "vecdot":
        return array_api.vecdot
    for op in registry.all_ops():
        if op.kernel == name and op.elementwise and not op.params and op.namespace == "":
            return numpy_functions.LA[op.name]
    return None


def _ufunc_refused(ufunc, method, why):
    where = f"np.{ufunc.__name__}" + ("" if method == "__call__" else f".{method}")
    return NumPyFunctionError(f"{where} on a lazyarray array: {why}")


def _ufunc_call(ufunc, inputs, kwargs):
    fn = ufunc_function(ufunc.__name__)
    if fn is None:
        raise _ufunc_refused(ufunc, "__call__", numpy_functions.NO_LA)
    dtype = kwargs.pop("dtype", None)
    if ufunc.__name__ == "vecdot":
        return fn(*inputs, axis=kwargs.pop("axis", -1))
    if dtype is not None:  # NumPy computes in dtype: cast the inputs to it
        inputs = tuple(array_api.astype(array_api.asarray(a), dtype) for a in inputs)
    return fn(*inputs)


def _ufunc_reduce(ufunc, method, inputs, kwargs):
    names = _REDUCE if method == "reduce" else _ACCUMULATE
    name = names.get(ufunc.__name__)
    if name is None:
        la_names = ", ".join(f"np.{k}.{method}" for k in names)
        raise _ufunc_refused(ufunc, method, f"no la equivalent (lazyarray runs {la_names}): convert explicitly "
                                            "with x.asnumpy() outside deferred compute")
    axis, dtype = kwargs.pop("axis", 0), kwargs.pop("dtype", None)
    (a,) = inputs
    if method == "accumulate":
        return getattr(array_api, name)(a, axis=axis, dtype=dtype)
    keepdims = kwargs.pop("keepdims", False)
    fn = getattr(array_api, name, None)
    if fn is not None and name in ("sum", "prod"):
        return fn(a, axis=axis, keepdims=keepdims, dtype=dtype)
    a = a if dtype is None else array_api.astype(a, dtype)
    return numpy_functions.LA[name](a, axis=axis, keepdims=keepdims)


def _ufunc_outer(ufunc, inputs, kwargs):
    a, b = (x if isinstance(x, NDArray) else array_api.asarray(x) for x in inputs)
    a = array_api.reshape(a, tuple(a.shape) + (1,) * b.ndim)
    return _ufunc_call(ufunc, (a, b), kwargs)


def array_ufunc(self, ufunc, method, *inputs, **kwargs):
    """``NDArray.__array_ufunc__``: the la op (``__call__``, ``reduce``, ``accumulate``, ``outer``) or
    ``la.NumPyFunctionError``; ``out=``, ``where=`` and ``ufunc.at`` (writes in place) are refused."""
    out = kwargs.pop("out", None)
    if out is not None and any(o is not None for o in (out if isinstance(out, tuple) else (out,))):
        raise _ufunc_refused(ufunc, method, "out= is not supported: lazyarray arrays are not written in place "
                                            "by NumPy; use the returned array")
    defaults = {"casting": "same_kind", "order": "K", "subok": True, "where": True}
    bad = sorted(k for k, v in kwargs.items() if k in ("signature", "axes", "initial", "where") and v is not True
                 or k in defaults and k != "where" and not (isinstance(v, (str, bool)) and v == defaults[k]))
    if bad:
        raise _ufunc_refused(ufunc, method, f"{', '.join(k + '=' for k in bad)} is not supported; drop it, or "
                                            "convert explicitly with x.asnumpy() outside deferred compute")
    for k in defaults:
        kwargs.pop(k, None)
    if method == "__call__":
        return _ufunc_call(ufunc, inputs, kwargs)
    if method in ("reduce", "accumulate"):
        return _ufunc_reduce(ufunc, method, inputs, kwargs)
    if method == "outer":
        return _ufunc_outer(ufunc, inputs, kwargs)
    raise _ufunc_refused(ufunc, method, numpy_functions.NO_LA)


def array_function(self, func, types, args, kwargs):
    """``NDArray.__array_function__`` (NEP 18): see ``numpy_functions``."""
    if not all(issubclass(t, (NDArray, np.ndarray)) for t in types):
        return NotImplemented
    return numpy_functions.call(func, args, kwargs)


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
