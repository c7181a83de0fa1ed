"""What a NumPy function does with lazyarray arrays (NEP 18, ``NDArray.__array_function__``).

The rule, the same for eager and lazy arrays: a NumPy function called with a lazyarray array either runs its
``la`` equivalent and returns lazyarray arrays (recorded under ``la.deferred()``, so ``np.sort(x)`` stays in
the graph), or raises ``la.NumPyFunctionError`` (a ``TypeError``) naming the function and the ``la``
equivalent, or saying to convert explicitly with ``x.asnumpy()``. It never hands the values to NumPy
silently: under deferred compute that computed the array at once and recorded the result as a constant.

``TABLE`` maps each NumPy function to its ``la`` equivalent, written with NumPy's signature (argument
mapping: ``axis=None`` flattening, ``ddof`` -> ``correction``, ...). Keywords the equivalent cannot honour
(``out=``, ``order=``, ``where=``, ...) raise the named error. ``METADATA`` answers questions about dtype and
shape (``np.shape``, ``np.ndim``, ``np.result_type``) without computing; the value queries ``np.allclose``,
``np.array_equal`` and ``np.array_equiv`` give a Python bool for eager arrays (computed with la ops) and raise
for lazy ones, as their answer is a value.

>>> import numpy as np
>>> import lazyarray as la
>>> x = la.asarray([3.0, 1.0, 2.0])
>>> np.sort(x)
array([1., 2., 3.], dtype=float32, device=cpu(0))
>>> np.percentile(x, 50)
Traceback (most recent call last):
  ...
lazyarray.errors.NumPyFunctionError: np.percentile on a lazyarray array: no la equivalent: ...
"""
from __future__ import annotations

import numpy as np

from . import array_api, fft, linalg
from .deferred import is_deferred
from .errors import LazyArrayError, NumPyFunctionError
from .functions import namespace
from .ndarray import NDArray

LA = namespace("")  # the op functions of la, by name (a constant table)
NO_LA = "no la equivalent: convert explicitly with x.asnumpy() outside deferred compute"


def numpy_name(func) -> str:
    """``np.sort``, ``np.linalg.norm``, ``np.fft.fft``: how messages name a NumPy function."""
    mod = getattr(func, "__module__", None) or "numpy"
    prefix = "np" + mod[len("numpy"):] if mod.startswith("numpy") else mod
    return f"{prefix.replace('._core', '').replace('.lib', '')}.{func.__name__}"


def refuse(func, why: str) -> NumPyFunctionError:
    return NumPyFunctionError(f"{numpy_name(func)} on a lazyarray array: {why}")


def unsupported(func, la_name: str, kw: dict) -> None:
    """Raise for keywords given a value the ``la`` equivalent cannot honour (``None`` / ``False`` pass)."""
    bad = sorted(k for k, v in kw.items() if v is not None and v is not False)
    if bad:
        raise refuse(func, f"{', '.join(k + '=' for k in bad)} is not supported (la equivalent: {la_name}, "
                           f"which has no such argument); drop it, or convert explicitly with x.asnumpy() "
                           "outside deferred compute")


def is_lazy(*objs) -> bool:
    """Whether an answer that is a Python value would have to compute a lazy array."""
    if is_deferred():
        return True
    stack = list(objs)
    while stack:
        o = stack.pop()
        if isinstance(o, NDArray) and o.is_lazy:
            return True
        if isinstance(o, (list, tuple)):
            stack.extend(o)
    return False


def ravel(a):
    return array_api.reshape(a, (-1,))


def _axis_none_flat(a, axis):
    return (ravel(a), 0) if axis is None else (a, axis)


def _cast(a, dtype):
    return a if dtype is None else array_api.astype(a, dtype)


# -- reductions and sorting --------------------------------------------------------------------------------------
def _reduction(name, func, has_dtype):
    def call(a, axis=None, dtype=None, out=None, keepdims=False, **kw):
        unsupported(func, f"la.{name}", kw)
        if has_dtype:
            return getattr(array_api, name)(a, axis=axis, keepdims=keepdims, dtype=dtype)
        return LA[name](_cast(a, dtype), axis=axis, keepdims=keepdims)
    return call


def _moments(name, func):
    def call(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, correction=None, **kw):
        unsupported(func, f"la.{name}", kw)
        return LA[name](_cast(a, dtype), axis=axis, keepdims=keepdims,
                        correction=ddof if correction is None else correction)
    return call


def _arg(name, func):
    def call(a, axis=None, out=None, *, keepdims=False):
        return LA[name](a, axis=axis, keepdims=keepdims)
    return call


def _sorting(name, func):
    def call(a, axis=-1, kind=None, order=None, *, stable=None):
        unsupported(func, f"la.{name}", {"order": order})
        a, axis = _axis_none_flat(a, axis)
        return LA[name](a, axis=axis)
    return call


def _cumulative(name, func):
    def call(a, axis=None, dtype=None, out=None):
        a, axis = _axis_none_flat(a, axis)
        return getattr(array_api, name)(a, axis=axis, dtype=dtype)
    return call


def _cumulative_std(name):
    def call(x, /, *, axis=None, dtype=None, out=None, include_initial=False):
        return getattr(array_api, name)(x, axis=axis, dtype=dtype, include_initial=include_initial)
    return call


def _round(a, decimals=0, out=None):
    if decimals == 0:
        return LA["round"](a)
    if np.dtype(a.dtype).kind in "iub":
        if decimals > 0:
            return LA["copy"](a)
        raise refuse(np.round, "negative decimals= on an integer array is not supported (la equivalent: "
                               "la.round); convert explicitly with x.asnumpy() outside deferred compute")
    scale = 10.0 ** abs(decimals)
    if decimals > 0:  # as NumPy does: scale, round half to even, unscale
        return LA["round"](a * scale) / scale
    return LA["round"](a / scale) * scale


def _ptp(a, axis=None, out=None, keepdims=False):
    return LA["max"](a, axis=axis, keepdims=keepdims) - LA["min"](a, axis=axis, keepdims=keepdims)


def _average(a, axis=None, weights=None, returned=False, *, keepdims=False):
    unsupported(np.average, "la.mean", {"weights": weights, "returned": returned})
    return LA["mean"](a, axis=axis, keepdims=keepdims)


# -- joining, splitting, shapes ------------------------------------------------------------------------------------
def _concatenate(arrays, axis=0, out=None, *, dtype=None, casting="same_kind"):
    arrays = [_cast(a, dtype) for a in arrays]
    if axis is None:
        arrays, axis = [ravel(a) for a in arrays], 0
    return LA["concatenate"](arrays, axis=axis)


def _stack(arrays, axis=0, out=None, *, dtype=None, casting="same_kind"):
    return LA["stack"]([_cast(a, dtype) for a in arrays], axis=axis)


def _atleast(n):
    def one(a):
        a = a if isinstance(a, NDArray) else array_api.asarray(a)
        if a.ndim >= n:
            return a
        if n == 1 or a.ndim == 0:
            return array_api.reshape(a, (1,) * n)
        if n == 2:
            return array_api.reshape(a, (1,) + tuple(a.shape))
        return array_api.reshape(a, (1, a.shape[0], 1) if a.ndim == 1 else tuple(a.shape) + (1,))

    def call(*arys):
        res = tuple(one(a) for a in arys)
        return res[0] if len(res) == 1 else res
    return call


_ATLEAST = {n: _atleast(n) for n in (1, 2, 3)}


def _hstack(tup, *, dtype=None, casting="same_kind"):
    arrays = [_ATLEAST[1](a) for a in tup]
    return _concatenate(arrays, axis=0 if arrays[0].ndim == 1 else 1, dtype=dtype)


def _vstack(tup, *, dtype=None, casting="same_kind"):
    return _concatenate([_ATLEAST[2](a) for a in tup], axis=0, dtype=dtype)


def _dstack(tup):
    return _concatenate([_ATLEAST[3](a) for a in tup], axis=2)


def _column_stack(tup):
    return _concatenate([array_api.reshape(a, (-1, 1)) if a.ndim < 2 else a for a in tup], axis=1)


def _split(name, axis_of=None):
    def call(ary, indices_or_sections, axis=0):
        if axis_of is not None:
            axis = axis_of(ary)
        return list(LA[name](ary, indices_or_sections, axis=axis))
    return call


def _tile(A, reps):
    reps = (reps,) if isinstance(reps, int) else tuple(reps)
    return LA["repeat"](A, (1,) * (A.ndim - len(reps)) + reps)  # the registry op repeat is la.tile


def _reshape(a, /, shape=None, order="C", *, newshape=None, copy=None):
    unsupported(np.reshape, "la.reshape", {"order": None if order in ("C", "A") else order})
    return array_api.reshape(a, shape if shape is not None else newshape)


def _swapaxes(a, axis1, axis2):
    perm = list(range(a.ndim))
    perm[axis1], perm[axis2] = perm[axis2], perm[axis1]
    return LA["transpose"](a, tuple(perm))


def _take(a, indices, axis=None, out=None, mode="raise"):
    unsupported(np.take, "la.take", {"mode": None if mode == "raise" else mode})
    a, axis = _axis_none_flat(a, axis)
    return LA["take"](a, indices if isinstance(indices, NDArray) else array_api.asarray(indices), axis=axis)


def _take_along_axis(arr, indices, axis=-1):
    arr, axis = _axis_none_flat(arr, axis)
    return LA["take_along_axis"](arr, indices, axis=axis)


def _pad(array, pad_width, mode="constant", **kw):
    values = kw.pop("constant_values", 0)
    unsupported(np.pad, "la.pad", kw)
    if mode not in ("constant", "edge", "reflect"):
        raise refuse(np.pad, f"mode={mode!r} is not supported (la.pad has 'constant', 'edge', 'reflect'); "
                             "convert explicitly with x.asnumpy() outside deferred compute")
    return LA["pad"](array, pad_width, mode=mode, constant_values=values)


def _like(name, func):
    def call(a, dtype=None, order="K", subok=True, shape=None, *, device=None):
        unsupported(func, f"la.{name}", {"shape": shape, "device": device})
        return getattr(array_api, name)(a, dtype=dtype)
    return call


def _full_like(a, fill_value, dtype=None, order="K", subok=True, shape=None, *, device=None):
    unsupported(np.full_like, "la.full_like", {"shape": shape, "device": device})
    return array_api.full_like(a, fill_value, dtype=dtype)


def _unique(ar, return_index=False, return_inverse=False, return_counts=False, axis=None, *, equal_nan=True,
            sorted=True):
    unsupported(np.unique, "la.unique_values / la.unique_all",
                {"return_index": return_index, "return_inverse": return_inverse, "return_counts": return_counts,
                 "axis": axis})
    return LA["unique_values"](ar)


def _where(condition, *xy):
    if len(xy) == 2:
        return LA["where"](condition, *xy)
    if not xy:
        return array_api.nonzero(condition)
    raise refuse(np.where, "give both x and y or neither (la.where / la.nonzero)")


def _meshgrid(*xi, copy=True, sparse=False, indexing="xy"):
    unsupported(np.meshgrid, "la.meshgrid", {"sparse": sparse})
    return tuple(array_api.meshgrid(*xi, indexing=indexing))


# -- linear algebra ------------------------------------------------------------------------------------------------
def _last_two(a, axis1, axis2):
    return array_api.moveaxis(a, (axis1, axis2), (-2, -1))


def _trace(a, offset=0, axis1=0, axis2=1, dtype=None, out=None):
    return linalg.trace(_last_two(a, axis1, axis2), offset=offset, dtype=dtype)


def _diagonal(a, offset=0, axis1=0, axis2=1):
    return linalg.diagonal(_last_two(a, axis1, axis2), offset=offset)


def _norm(x, ord=None, axis=None, keepdims=False):
    if axis is None and (ord is None or x.ndim == 1):
        return linalg.vector_norm(x, keepdims=keepdims, ord=2 if ord is None else ord)
    if axis is None and x.ndim == 2:
        return linalg.matrix_norm(x, keepdims=keepdims, ord=ord)
    if isinstance(axis, int) or (isinstance(axis, tuple) and len(axis) == 1):
        return linalg.vector_norm(x, axis=axis, keepdims=keepdims, ord=2 if ord is None else ord)
    if isinstance(axis, tuple) and len(axis) == 2:
        res = linalg.matrix_norm(_last_two(x, *axis), ord="fro" if ord is None else ord)
        return LA["expand_dims"](res, axis=tuple(sorted(a % x.ndim for a in axis))) if keepdims else res
    raise refuse(np.linalg.norm, f"axis={axis!r} with ord={ord!r} is not supported (la.linalg.vector_norm, "
                                 "la.linalg.matrix_norm)")


def _multi_dot(arrays, *, out=None):
    res = arrays[0]
    for a in arrays[1:]:
        res = LA["matmul"](res, a)
    return res


def _svd(a, full_matrices=True, compute_uv=True, hermitian=False):
    unsupported(np.linalg.svd, "la.linalg.svd", {"hermitian": hermitian})
    return linalg.svd(a, full_matrices=full_matrices) if compute_uv else linalg.svdvals(a)


def _uplo(name, func):
    def call(a, UPLO="L"):
        unsupported(func, f"la.linalg.{name}", {"UPLO": None if UPLO == "L" else UPLO})
        return getattr(linalg, name)(a)
    return call


def _pinv(a, rcond=None, hermitian=False, *, rtol=None):
    unsupported(np.linalg.pinv, "la.linalg.pinv", {"rcond": rcond, "hermitian": hermitian})
    return linalg.pinv(a, rtol=rtol)


def _matrix_rank(A, tol=None, hermitian=False, *, rtol=None):
    unsupported(np.linalg.matrix_rank, "la.linalg.matrix_rank", {"tol": tol, "hermitian": hermitian})
    return linalg.matrix_rank(A, rtol=rtol)


def _inner(a, b):
    if a.ndim == 0 or b.ndim == 0:
        return a * b
    return array_api.tensordot(a, b, axes=([-1], [-1]))


def _outer(a, b, out=None):
    return linalg.outer(ravel(a), ravel(b))


# -- fft -----------------------------------------------------------------------------------------------------------
def _fft1(name):
    def call(a, n=None, axis=-1, norm=None, out=None):
        return getattr(fft, name)(a, n=n, axis=axis, norm=norm or "backward")
    return call


def _fftn(name, two=False):
    def call(a, s=None, axes=(-2, -1) if two else None, norm=None, out=None):
        return getattr(fft, name)(a, s=s, axes=axes, norm=norm or "backward")
    return call


def _shift(name):
    def call(x, axes=None):
        return getattr(fft, name)(x, axes=axes)
    return call


# -- comparisons of values -----------------------------------------------------------------------------------------
def _isclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    a, b = (v if isinstance(v, NDArray) else array_api.asarray(v) for v in (a, b))
    close = LA["less_equal"](LA["abs"](a - b), atol + rtol * LA["abs"](b))
    finite = LA["logical_and"](LA["isfinite"](a), LA["isfinite"](b))
    res = LA["where"](finite, close, LA["equal"](a, b))
    if equal_nan:
        res = LA["logical_or"](res, LA["logical_and"](LA["isnan"](a), LA["isnan"](b)))
    return res


def _value(func, *arrays):
    if is_lazy(*arrays):
        raise refuse(func, "its answer is a Python bool, which needs the values; record la.all(...) of the "
                           "elementwise test instead, or compute outside deferred compute")


def _allclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    _value(np.allclose, a, b)
    return bool(LA["all"](_isclose(a, b, rtol, atol, equal_nan)))


def _array_equal(a1, a2, equal_nan=False):
    _value(np.array_equal, a1, a2)
    if tuple(np.shape(a1)) != tuple(np.shape(a2)):
        return False
    return bool(LA["all"](_isclose(a1, a2, 0.0, 0.0, equal_nan)))


def _array_equiv(a1, a2):
    _value(np.array_equiv, a1, a2)
    try:
        np.broadcast_shapes(np.shape(a1), np.shape(a2))
    except ValueError:
        return False
    return bool(LA["all"](LA["equal"](a1, a2)))


# -- metadata: dtype and shape, never computed ---------------------------------------------------------------------
def _dtype_of(a):
    return a.dtype if isinstance(a, NDArray) else a


METADATA = {
    np.shape: lambda a: tuple(a.shape),
    np.ndim: lambda a: a.ndim,
    np.size: lambda a, axis=None: a.size if axis is None else a.shape[axis],
    np.result_type: lambda *arrays_and_dtypes: np.result_type(*map(_dtype_of, arrays_and_dtypes)),
    np.can_cast: lambda from_, to, casting="safe": np.can_cast(_dtype_of(from_), to, casting=casting),
    np.iscomplexobj: lambda x: np.dtype(x.dtype).kind == "c",
    np.isrealobj: lambda x: np.dtype(x.dtype).kind != "c",
}


# NumPy function -> its la equivalent, written with NumPy's signature (a constant table)
TABLE = {
    # reductions, statistics, sorting
    np.sum: _reduction("sum", np.sum, True), np.prod: _reduction("prod", np.prod, True),
    np.mean: _reduction("mean", np.mean, False), np.max: _reduction("max", np.max, False),
    np.min: _reduction("min", np.min, False), np.amax: _reduction("max", np.amax, False),
    np.amin: _reduction("min", np.amin, False), np.any: _reduction("any", np.any, False),
    np.all: _reduction("all", np.all, False),
    np.var: _moments("var", np.var), np.std: _moments("std", np.std),
    np.argmax: _arg("argmax", np.argmax), np.argmin: _arg("argmin", np.argmin),
    np.sort: _sorting("sort", np.sort), np.argsort: _sorting("argsort", np.argsort),
    np.cumsum: _cumulative("cumulative_sum", np.cumsum), np.cumprod: _cumulative("cumulative_prod", np.cumprod),
    np.cumulative_sum: _cumulative_std("cumulative_sum"), np.cumulative_prod: _cumulative_std("cumulative_prod"),
    np.round: _round, np.around: _round, np.ptp: _ptp, np.average: _average,
    np.count_nonzero: lambda a, axis=None, *, keepdims=False: LA["count_nonzero"](a, axis=axis, keepdims=keepdims),
    np.diff: lambda a, n=1, axis=-1, prepend=None, append=None: array_api.diff(
        a, n=n, axis=axis, prepend=prepend, append=append),
    np.clip: lambda a, a_min=None, a_max=None, out=None, *, min=None, max=None, **kw: array_api.clip(
        a, a_min if min is None else min, a_max if max is None else max),
    np.searchsorted: lambda a, v, side="left", sorter=None: array_api.searchsorted(a, v, side=side, sorter=sorter),
    # joining, splitting, shapes
    np.concatenate: _concatenate, np.stack: _stack, np.hstack: _hstack, np.vstack: _vstack,
    np.dstack: _dstack, np.column_stack: _column_stack,
    np.atleast_1d: _ATLEAST[1], np.atleast_2d: _ATLEAST[2], np.atleast_3d: _ATLEAST[3],
    np.split: _split("split"), np.array_split: _split("array_split"),
    np.hsplit: _split("split", lambda a: 1 if a.ndim > 1 else 0), np.vsplit: _split("split", lambda a: 0),
    np.dsplit: _split("split", lambda a: 2),
    np.unstack: lambda x, /, *, axis=0: array_api.unstack(x, axis=axis),
    np.reshape: _reshape, np.ravel: lambda a, order="C": ravel(a),
    np.transpose: lambda a, axes=None: LA["transpose"](a, axes),
    np.permute_dims: lambda a, axes=None: LA["transpose"](a, axes),
    np.matrix_transpose: lambda x, /: array_api.matrix_transpose(x),
    np.swapaxes: _swapaxes, np.moveaxis: lambda a, source, destination: array_api.moveaxis(a, source, destination),
    np.expand_dims: lambda a, axis: LA["expand_dims"](a, axis=axis),
    np.squeeze: lambda a, axis=None: LA["squeeze"](a, axis=axis),
    np.broadcast_to: lambda array, shape, subok=False: LA["broadcast_to"](array, shape),
    np.broadcast_arrays: lambda *args, subok=False: tuple(array_api.broadcast_arrays(*args)),
    np.tile: _tile, np.repeat: lambda a, repeats, axis=None: array_api.repeat(
        a, repeats, axis=axis),
    np.flip: lambda m, axis=None: LA["flip"](m, axis=axis), np.fliplr: lambda m: LA["flip"](m, axis=1),
    np.flipud: lambda m: LA["flip"](m, axis=0), np.roll: lambda a, shift, axis=None: LA["roll"](a, shift, axis=axis),
    np.take: _take, np.take_along_axis: _take_along_axis, np.pad: _pad,
    np.tril: lambda m, k=0: LA["tril"](m, k=k), np.triu: lambda m, k=0: LA["triu"](m, k=k),
    np.where: _where, np.nonzero: lambda a: array_api.nonzero(a),
    np.argwhere: lambda a: LA["nonzero"](a),  # the registry op nonzero is NumPy's argwhere
    np.flatnonzero: lambda a: array_api.nonzero(ravel(a))[0],
    np.meshgrid: _meshgrid, np.unique: _unique, np.unique_values: lambda x: LA["unique_values"](x),
    np.unique_counts: lambda x: array_api.unique_counts(x), np.unique_inverse: lambda x: array_api.unique_inverse(x),
    np.unique_all: lambda x: array_api.unique_all(x),
    np.isin: lambda element, test_elements, assume_unique=False, invert=False, *, kind=None: LA["isin"](
        element, test_elements, invert=invert),
    # creation from an array, conversions
    np.zeros_like: _like("zeros_like", np.zeros_like), np.ones_like: _like("ones_like", np.ones_like),
    np.empty_like: _like("empty_like", np.empty_like), np.full_like: _full_like,
    np.copy: lambda a, order="K", subok=False: LA["copy"](a), np.real: lambda val: LA["real"](val),
    np.imag: lambda val: LA["imag"](val), np.astype: lambda x, dtype, /, *, copy=True, device=None: (
        array_api.astype(x, dtype, copy=copy)),
    # products, linear algebra
    np.dot: lambda a, b, out=None: LA["dot"](a, b),
    np.tensordot: lambda a, b, axes=2: array_api.tensordot(a, b, axes=axes),
    np.inner: _inner, np.outer: _outer, np.trace: _trace, np.diagonal: _diagonal,
    np.linalg.norm: _norm, np.linalg.multi_dot: _multi_dot, np.linalg.svd: _svd,
    np.linalg.eigh: _uplo("eigh", np.linalg.eigh), np.linalg.eigvalsh: _uplo("eigvalsh", np.linalg.eigvalsh),
    np.linalg.pinv: _pinv, np.linalg.matrix_rank: _matrix_rank,
    np.linalg.inv: lambda a: linalg.inv(a), np.linalg.det: lambda a: linalg.det(a),
    np.linalg.slogdet: lambda a: linalg.slogdet(a), np.linalg.solve: lambda a, b: linalg.solve(a, b),
    np.linalg.cholesky: lambda a, /, *, upper=False: linalg.cholesky(a, upper=upper),
    np.linalg.qr: lambda a, mode="reduced": linalg.qr(a, mode=mode),
    np.linalg.matrix_power: lambda a, n: linalg.matrix_power(a, n),
    np.linalg.svdvals: lambda x, /: linalg.svdvals(x),
    np.linalg.trace: lambda x, /, *, offset=0, dtype=None: linalg.trace(x, offset=offset, dtype=dtype),
    np.linalg.diagonal: lambda x, /, *, offset=0: linalg.diagonal(x, offset=offset),
    np.linalg.cross: lambda x1, x2, /, *, axis=-1: linalg.cross(x1, x2, axis=axis),
    np.linalg.outer: lambda x1, x2, /: linalg.outer(x1, x2),
    np.linalg.tensordot: lambda x1, x2, /, *, axes=2: array_api.tensordot(x1, x2, axes=axes),
    np.linalg.matmul: lambda x1, x2, /: LA["matmul"](x1, x2),
    np.linalg.matrix_transpose: lambda x, /: array_api.matrix_transpose(x),
    np.linalg.matrix_norm: lambda x, /, *, keepdims=False, ord="fro": linalg.matrix_norm(
        x, keepdims=keepdims, ord=ord),
    np.linalg.vector_norm: lambda x, /, *, axis=None, keepdims=False, ord=2: linalg.vector_norm(
        x, axis=axis, keepdims=keepdims, ord=ord),
    np.linalg.vecdot: lambda x1, x2, /, *, axis=-1: array_api.vecdot(x1, x2, axis=axis),
    # fft
    **{getattr(np.fft, n): _fft1(n) for n in ("fft", "ifft", "rfft", "irfft", "hfft", "ihfft")},
    **{getattr(np.fft, n): _fftn(n) for n in ("fftn", "ifftn", "rfftn", "irfftn")},
    **{getattr(np.fft, n + "2"): _fftn(n + "n", two=True) for n in ("fft", "ifft", "rfft", "irfft")},
    np.fft.fftshift: _shift("fftshift"), np.fft.ifftshift: _shift("ifftshift"),
    # comparisons of values
    np.isclose: _isclose, np.allclose: _allclose, np.array_equal: _array_equal, np.array_equiv: _array_equiv,
}


def call(func, args: tuple, kwargs: dict):
    """Run NumPy function ``func`` on arguments holding lazyarray arrays: its ``la`` equivalent, a
    metadata answer, or ``la.NumPyFunctionError``."""
    if func in METADATA:
        return METADATA[func](*args, **kwargs)
    impl = TABLE.get(func)
    if impl is None:
        raise refuse(func, NO_LA)
    if kwargs.get("out") is not None:
        raise refuse(func, "out= is not supported: lazyarray arrays are not written in place by NumPy "
                           "functions; use the returned array")
    try:
        return impl(*args, **kwargs)
    except TypeError as e:
        if isinstance(e, LazyArrayError) or "argument" not in str(e):
            raise
        raise refuse(func, f"{e} (its la equivalent takes NumPy's arguments it can honour)") from e
