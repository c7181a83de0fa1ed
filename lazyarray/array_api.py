"""The Python Array API standard (2024.12) face of ``la``: dtype objects, constants, dtype
functions, ``asarray`` and the inspection namespace (``la.__array_namespace_info__()``).

Functions of the standard are registry ops (``la.floor``, ``la.sort``, ...), generated like every
other op by ``functions.py``; where the standard and NumPy spell a function differently, ``la``
has the standard's name and keeps the NumPy spelling we already had (``ALIASES``).

dtype objects are NumPy dtypes, as in ``array_api_strict`` and NumPy itself, so
``x.dtype == la.float32`` holds. ``la.complex64`` / ``la.complex128`` are supported dtypes
(Python complex numbers default to complex64, as Python floats default to float32).

>>> import lazyarray as la
>>> x = la.asarray([1, 2, 3], dtype=la.int32)
>>> x.__array_namespace__() is la, la.isdtype(x.dtype, "integral"), la.result_type(x, la.float32)
(True, True, dtype('float64'))
"""
from __future__ import annotations

import builtins
import math
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
from numpy.typing import DTypeLike

from .args import int_arg
from .array_api_dtypes import (  # noqa: F401  (the standard's dtype functions: re-exported, la imports them here)
    DTYPES,
    FInfo,
    __array_namespace_info__,
    can_cast,
    finfo,
    iinfo,
    isdtype,
    result_type,
)
from .aval import as_dtype, check_alloc, check_shape
from .creation import array, zeros
from .device import Device, cpu, gpu
from .dispatch import apply
from .errors import AxisError, DTypeError, ParamError, ParamValueError, ShapeError, fmt_shape
from .functions import write_out
from .ndarray import NDArray, make_array
from .ops import registry

__array_api_version__ = "2024.12"

# -- constants --------------------------------------------------------------------------------------
e = math.e
pi = math.pi
inf = math.inf
nan = math.nan
newaxis = None

# Standard name -> the NumPy spelling we had before (both stay public; the standard name is primary).
ALIASES = {"concatenate": "concat", "transpose": "permute_dims", "power": "pow"}


def array_in(x, where: str, name: str = "x") -> NDArray:
    """``x`` when it is an array; anything else is a ``ParamError`` (the standard's functions take
    arrays: ``la.asarray`` makes one from a list, a NumPy array or a number)."""
    if not isinstance(x, NDArray):
        raise ParamError(f"{where}: {name} must be an array, got {type(x).__name__} {x!r}"[:200]
                         + f"; make one with la.asarray({name})")
    return x




# -- results of the unique_* functions --------------------------------------------------------------
class UniqueAllResult(NamedTuple):
    values: object
    indices: object
    inverse_indices: object
    counts: object


class UniqueCountsResult(NamedTuple):
    values: object
    counts: object


class UniqueInverseResult(NamedTuple):
    values: object
    inverse_indices: object


def broadcast_shapes(*shapes: Sequence[int]) -> tuple:
    """The shape that broadcasting ``shapes`` together gives (NumPy's rule)."""
    checked = []
    for shape in shapes:
        if isinstance(shape, (int, np.integer)) and not isinstance(shape, (bool, np.bool_)):
            shape = (shape,)
        if not isinstance(shape, (tuple, list)):
            raise ParamError(f"broadcast_shapes: each shape must be a tuple of ints, got {type(shape).__name__} "
                             f"{shape!r}"[:200])
        checked.append(check_shape("broadcast_shapes", shape, what="input"))
    try:
        return tuple(np.broadcast_shapes(*checked))
    except ValueError:
        raise ShapeError(f"broadcast_shapes: shapes {', '.join(fmt_shape(c) for c in checked)} do not broadcast "
                         "(each dim must match or be 1)") from None


# -- creation ------------------------------------------------------------------------------------------
def asarray(obj, /, *, dtype=None, device: Device | None = None, copy: builtins.bool | None = None) -> NDArray:
    """``obj`` as an array: an ``NDArray`` of the asked dtype and device is returned as is (unless
    ``copy=True``); anything else becomes a new array like ``la.array`` (Python floats: float32).
    ``copy=False`` raises ``ValueError`` when a copy cannot be avoided.

    >>> import lazyarray as la
    >>> x = la.asarray([1.0, 2.0])
    >>> la.asarray(x) is x, x.dtype
    (True, dtype('float32'))
    """
    if isinstance(obj, NDArray):
        same = ((dtype is None or as_dtype(dtype, "asarray") == obj.dtype)
                and (device is None or device == obj.device))
        if same and copy is not True:
            return obj
        if copy is False:
            raise ParamValueError("asarray: copy=False, but the dtype or device asked for needs a copy; pass copy=None")
        res = obj if device is None or device == obj.device else obj.to(device)
        if dtype is not None and as_dtype(dtype, "asarray") != res.dtype:
            return res.astype(dtype)
        return res.copy() if res is obj else res
    if copy is False and not isinstance(obj, np.ndarray):
        raise ParamValueError(f"asarray: copy=False, but a {type(obj).__name__} must be copied into an array; "
                              "pass copy=None")
    return array(obj, dtype=dtype, device=device)


def astype(x: NDArray, dtype, /, *, copy: builtins.bool = True, device: Device | None = None) -> NDArray:
    """``x`` converted to ``dtype`` (and moved to ``device``); ``copy=False`` returns ``x`` itself
    when nothing changes."""
    x = array_in(x, "astype")
    if device is not None and device != x.device:
        x = x.to(device)
    if not copy and as_dtype(dtype, "astype") == x.dtype:
        return x
    return x.astype(dtype)


def empty(shape, *, dtype=None, device: Device | None = None) -> NDArray:
    """An array of ``shape`` (lazyarray fills it with zeros: no uninitialized memory is handed out)."""
    return zeros(shape, dtype="float32" if dtype is None else dtype, device=device)


def empty_like(x: NDArray, /, *, dtype=None, device: Device | None = None) -> NDArray:
    """An array shaped like ``x`` (zeros, see ``empty``)."""
    res = apply(registry.get("zeros_like"), (x,), {"dtype": dtype}, make_array)
    return res if device is None else res.to(device)


def eye(n_rows: int, n_cols: int | None = None, /, *, k: int = 0, dtype=None,
        device: Device | None = None) -> NDArray:
    """A 2-D array with ones on the k-th diagonal and zeros elsewhere.

    >>> import lazyarray as la
    >>> la.eye(2, 3, k=1).asnumpy().tolist()
    [[0.0, 1.0, 0.0], [0.0, 0.0, 1.0]]
    """
    dt = as_dtype("float32" if dtype is None else dtype, "eye")
    n_rows = int_arg(n_rows, "eye", "n_rows", lo=0)
    n_cols = None if n_cols is None else int_arg(n_cols, "eye", "n_cols", lo=0)
    k = int_arg(k, "eye", "k")
    check_alloc("eye", (n_rows, n_rows if n_cols is None else n_cols), dt)
    return array(np.eye(n_rows, n_cols, k=k, dtype=dt), device=device)


def linspace(start, stop, /, num: int, *, dtype=None, device: Device | None = None,
             endpoint: builtins.bool = True) -> NDArray:
    """``num`` evenly spaced values from ``start`` to ``stop`` (float32 unless ``dtype``).

    >>> import lazyarray as la
    >>> la.linspace(0, 1, 5).asnumpy().tolist()
    [0.0, 0.25, 0.5, 0.75, 1.0]
    """
    dt = as_dtype("float32" if dtype is None else dtype, "linspace")
    num = int_arg(num, "linspace", "num", lo=0)
    for name, v in (("start", start), ("stop", stop)):
        if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, float, complex, np.number)):
            raise ParamError(f"linspace: {name} must be a number, got {type(v).__name__} {v!r}"[:200])
    check_alloc("linspace", (num,), dt)
    return array(np.linspace(start, stop, num, endpoint=endpoint).astype(dt), device=device)


def from_dlpack(x, /, *, device: Device | None = None, copy: builtins.bool | None = None) -> NDArray:
    """An array sharing memory with any DLPack producer (NumPy, CuPy, PyTorch, ...): zero-copy unless
    ``copy=True`` or ``device`` is another device; a lazyarray array is returned as ``asarray`` would.

    >>> import numpy as np
    >>> import lazyarray as la
    >>> a = np.arange(3.0)
    >>> b = la.from_dlpack(a)
    >>> a[0] = 7.0  # the same memory
    >>> b.asnumpy().tolist()
    [7.0, 1.0, 2.0]
    """
    if isinstance(x, NDArray):
        return asarray(x, device=device, copy=copy)
    if not hasattr(x, "__dlpack__"):
        raise ParamError(f"from_dlpack: {type(x).__name__} {x!r}"[:200] + " is not a DLPack producer (it has no "
                         "__dlpack__ method); pass a NumPy, CuPy or PyTorch array, or use la.asarray(x)")
    kind, dev_id = x.__dlpack_device__() if hasattr(x, "__dlpack_device__") else (1, 0)
    src = gpu(dev_id) if kind == 2 else cpu(0)
    value = src.xp.from_dlpack(x)
    as_dtype(value.dtype, "from_dlpack")
    if copy:
        value = value.copy()
    res = make_array(value, None, src)
    return res if device is None or device == src else res.to(device)


def meshgrid(*arrays: NDArray, indexing: str = "xy") -> list[NDArray]:
    """Coordinate matrices from 1-D coordinate arrays (``indexing="xy"``: the first two axes swapped,
    as NumPy), built from ``reshape`` and ``broadcast_to`` (so it records lazily)."""
    if indexing not in ("xy", "ij"):
        raise ParamValueError(f"meshgrid: indexing must be 'xy' or 'ij', got {indexing!r}"[:200])
    n = len(arrays)
    for i, a in enumerate(arrays):
        if array_in(a, "meshgrid", f"arrays[{i}]").ndim != 1:
            raise ShapeError(f"meshgrid: arrays[{i}] has shape {fmt_shape(a.shape)}; each coordinate array must "
                             "be 1-D (flatten it with la.reshape(a, (-1,)))")
    sizes = [a.shape[0] for a in arrays]
    if indexing == "xy" and n > 1:
        sizes[0], sizes[1] = sizes[1], sizes[0]
    out = []
    for i, a in enumerate(arrays):
        pos = (1 - i if i < 2 else i) if indexing == "xy" and n > 1 else i
        shape = [1] * n
        shape[pos] = -1
        out.append(_apply("broadcast_to", _apply("reshape", a, shape=tuple(shape)), shape=tuple(sizes)))
    return out


def broadcast_arrays(*arrays: NDArray) -> list[NDArray]:
    """The arrays broadcast against each other (views where NumPy would make them)."""
    arrays = [array_in(a, "broadcast_arrays", f"arrays[{i}]") for i, a in enumerate(arrays)]
    shape = broadcast_shapes(*(a.shape for a in arrays))
    return [_apply("broadcast_to", a, shape=shape) for a in arrays]


def moveaxis(x: NDArray, source, destination, /) -> NDArray:
    """``x`` with axes moved from ``source`` to ``destination`` (a ``permute_dims``)."""
    n = array_in(x, "moveaxis").ndim
    src = _moveaxis_axes(source, n, "source")
    dst = _moveaxis_axes(destination, n, "destination")
    if len(src) != len(dst):
        raise AxisError(f"moveaxis: source {source!r} and destination {destination!r} need the same number "
                        "of axes")
    order = [i for i in range(n) if i not in src]
    for d, s in sorted(zip(dst, src)):
        order.insert(d, s)
    return _apply("transpose", x, axes=tuple(order))


def _moveaxis_axes(axes, n: int, name: str) -> list[int]:
    """``moveaxis``'s ``source`` or ``destination`` as axes in ``[0, n)``: each one in ``[-n, n)``, none
    repeated (NumPy's rule; ``% n`` alone would wrap an axis out of range onto another one)."""
    items = (axes,) if isinstance(axes, (int, np.integer)) else axes
    try:
        items = list(items)
    except TypeError:
        items = None
    if items is None or not builtins.all(isinstance(a, (int, np.integer)) and not isinstance(a, (bool, np.bool_))
                                         for a in items):
        raise AxisError(f"moveaxis: {name} must be an int or a sequence of ints, got {axes!r}"[:300])
    bad = [int(a) for a in items if not -n <= a < n]
    if bad:
        raise AxisError(f"moveaxis: {name} axis {bad[0]} is out of range for an array of {n} dims "
                        + (f"(axes go from {-n} to {n - 1})" if n else "(a 0-d array has no axes)"))
    out = [int(a) % n for a in items]
    if len(set(out)) != len(out):
        raise AxisError(f"moveaxis: {name} {axes!r} repeats an axis; give each axis once")
    return out


def matrix_transpose(x: NDArray, /) -> NDArray:
    """The last two axes of ``x`` swapped (``x.mT``)."""
    return array_in(x, "matrix_transpose").mT


def unstack(x: NDArray, /, *, axis: int = 0) -> tuple:
    """The slices of ``x`` along ``axis``, as a tuple of arrays (the inverse of ``stack``)."""
    n = array_in(x, "unstack").ndim
    axis = int_arg(axis, "unstack", "axis")
    if not -n <= axis < n:
        raise AxisError(f"unstack: axis {axis} is out of range for an array of {n} dims"
                        + (f" (axes go from {-n} to {n - 1})" if n else "; a 0-d array has nothing to unstack"))
    ax = axis % n
    return tuple(_apply("getitem", x, key=(slice(None),) * ax + (i,)) for i in range(x.shape[ax]))


def vecdot(x1: NDArray, x2: NDArray, /, *, axis: int = -1) -> NDArray:
    """The dot product of vectors along ``axis`` (broadcasting the other axes); complex ``x1`` is
    conjugated, as the standard says (``sum(conj(x1) * x2)``).

    >>> import lazyarray as la
    >>> la.vecdot(la.asarray([1j, 2.0]), la.asarray([1.0, 1.0])).item()
    (2-1j)
    """
    x1, x2 = array_in(x1, "vecdot", "x1"), array_in(x2, "vecdot", "x2")
    axis = int_arg(axis, "vecdot", "axis")
    n1, n2 = _axis_len(x1, axis), _axis_len(x2, axis)
    if n1 is not None and n2 is not None and n1 != n2:
        raise ShapeError(f"vecdot: the vectors along axis {axis} differ in length: {fmt_shape(x1.shape)} and "
                         f"{fmt_shape(x2.shape)} (they are not broadcast along the contracted axis)")
    if getattr(x1, "dtype", np.dtype("float32")).kind == "c":
        x1 = _apply("conj", x1)
    prod = _apply("multiply", x1, x2)
    res = _apply("sum", prod, axis=axis)  # in the inputs' dtype, as the standard says (sum widens ints)
    return res if res.dtype == prod.dtype else _apply("cast", res, dtype=prod.dtype)


def _axis_len(x, axis):
    shape = getattr(x, "shape", ())
    if not -len(shape) <= axis < len(shape):
        raise AxisError(f"vecdot: axis {axis} is out of range for an array of shape {fmt_shape(shape)}")
    return shape[axis]


def _apply(name: str, *args, **params):
    return apply(registry.get(name), args, params, make_array)


# -- functions of the standard written with registry ops ------------------------------------------------
def clip(x: NDArray, /, min=None, max=None) -> NDArray:  # noqa: A002 (the standard's names)
    """``x`` limited to ``[min, max]`` (each an array or a scalar, or ``None`` for no bound); the
    result keeps ``x``'s dtype. Differentiable in ``x``, ``min`` and ``max``.

    >>> import lazyarray as la
    >>> la.clip(la.asarray([-2.0, 0.5, 3.0]), min=0.0, max=1.0).asnumpy().tolist()
    [0.0, 0.5, 1.0]
    """
    x = array_in(x, "clip")
    if min is None and max is None:
        return _apply("positive", x) if x.dtype.kind != "b" else _apply("logical_and", x, True)
    if min is None:
        min = -math.inf if x.dtype.kind in "fc" else iinfo(x.dtype).min if x.dtype.kind in "iu" else False
    if max is None:
        max = math.inf if x.dtype.kind in "fc" else iinfo(x.dtype).max if x.dtype.kind in "iu" else True
    return _apply("clip", x, min, max)


def diff(x: NDArray, /, *, axis: int = -1, n: int = 1, prepend: NDArray | None = None,
         append: NDArray | None = None) -> NDArray:
    """The n-th discrete difference along ``axis`` (``x[1:] - x[:-1]``, n times), after joining
    ``prepend`` / ``append``; recorded as ``concat``, slices and ``subtract`` (lazy, differentiable).

    >>> import lazyarray as la
    >>> la.diff(la.asarray([1, 4, 9, 16])).asnumpy().tolist()
    [3, 5, 7]
    """
    if array_in(x, "diff").ndim == 0:
        raise ShapeError("diff: needs an array of at least 1 dim, got a 0-d array; use la.reshape(x, (-1,))")
    n = int_arg(n, "diff", "n", lo=0)
    axis = int_arg(axis, "diff", "axis")
    ax = axis % x.ndim if -x.ndim <= axis < x.ndim else None
    if ax is None:
        raise AxisError(f"diff: axis {axis} is out of range for an array of {x.ndim} dims")
    parts = [p for p in (prepend, x, append) if p is not None]
    if len(parts) > 1:
        x = _apply("concatenate", parts, axis=ax)
    lead = (slice(None),) * ax
    length = x.shape[ax]
    # past the axis's length every further difference is of an empty axis: the same empty result
    for _ in range(n if not isinstance(length, int) else builtins.min(n, length + 1)):
        x = _apply("subtract", _apply("getitem", x, key=lead + (slice(1, None),)),
                   _apply("getitem", x, key=lead + (slice(None, -1),)))
    return x


def tensordot(x1: NDArray, x2: NDArray, /, *, axes=2) -> NDArray:
    """Sum of products over ``axes`` (an int: the last ``axes`` of ``x1`` and the first of ``x2``; or two
    sequences of axes), recorded as ``transpose``, ``reshape`` and ``matmul`` (lazy, differentiable).

    >>> import lazyarray as la
    >>> la.tensordot(la.ones((2, 3)), la.ones((3, 4)), axes=1).shape
    (2, 4)
    """
    x1, x2 = array_in(x1, "tensordot", "x1"), array_in(x2, "tensordot", "x2")
    a1, a2 = _tensordot_axes(axes, x1.ndim, x2.ndim)
    if builtins.any(x1.shape[i] != x2.shape[j] for i, j in zip(a1, a2)):
        raise ShapeError(f"tensordot: contracted axes {a1} of {fmt_shape(x1.shape)} and {a2} of "
                         f"{fmt_shape(x2.shape)} differ in size; pick axes of equal length")
    free1 = [i for i in range(x1.ndim) if i not in a1]
    free2 = [j for j in range(x2.ndim) if j not in a2]
    k = math.prod(x1.shape[i] for i in a1)
    m = _apply("reshape", _apply("transpose", x1, axes=tuple(free1 + a1)), shape=(-1, k) if k else
               (math.prod(x1.shape[i] for i in free1), 0))
    r = _apply("reshape", _apply("transpose", x2, axes=tuple(a2 + free2)), shape=(k, -1) if k else
               (0, math.prod(x2.shape[j] for j in free2)))
    dt = np.result_type(x1.dtype, x2.dtype)
    out = _apply("matmul", m if m.dtype == dt else m.astype(dt), r if r.dtype == dt else r.astype(dt))
    return _apply("reshape", out, shape=tuple(x1.shape[i] for i in free1) + tuple(x2.shape[j] for j in free2))


def _tensordot_axes(axes, n1: int, n2: int) -> tuple[list[int], list[int]]:
    """``tensordot``'s ``axes`` as two equally long lists of axes in ``[0, n1)`` and ``[0, n2)``: an int
    ``k`` (the last ``k`` of ``x1``, the first ``k`` of ``x2``), or a pair of ints or of int sequences."""
    def is_int(a) -> bool:
        return isinstance(a, (int, np.integer)) and not isinstance(a, (bool, np.bool_))

    if is_int(axes):
        if axes < 0:
            raise ParamValueError(f"tensordot: axes must be >= 0 (the number of axes to contract), got {axes}")
        if axes > builtins.min(n1, n2):
            raise AxisError(f"tensordot: axes={axes} contracts {axes} axes of each array, but x1 has {n1} dims "
                            f"and x2 {n2}; pass at most {builtins.min(n1, n2)}")
        return list(range(n1 - axes, n1)), list(range(axes))
    pair = list(axes) if isinstance(axes, (tuple, list)) else None
    sides = [[a] if is_int(a) else list(a) if isinstance(a, (tuple, list)) else None
             for a in (pair if pair is not None and len(pair) == 2 else ())]
    if len(sides) != 2 or None in sides or not builtins.all(is_int(a) for side in sides for a in side):
        raise ParamError(f"tensordot: axes must be an int or a pair of axis sequences such as ([1], [0]), "
                         f"got {axes!r}"[:300])
    if len(sides[0]) != len(sides[1]):
        raise AxisError(f"tensordot: axes {axes!r} name {len(sides[0])} axes of x1 but {len(sides[1])} of x2; "
                        "contract as many of each")
    out = []
    for name, side, n in (("x1", sides[0], n1), ("x2", sides[1], n2)):
        bad = [int(a) for a in side if not -n <= a < n]
        if bad:
            raise AxisError(f"tensordot: axis {bad[0]} is out of range for {name} of {n} dims")
        side = [int(a) % n for a in side]
        if len(set(side)) != len(side):
            raise AxisError(f"tensordot: the axes {axes!r} repeat an axis of {name}; give each axis once")
        out.append(side)
    return out[0], out[1]


def unique_all(x: NDArray, /) -> UniqueAllResult:
    """``(values, indices, inverse_indices, counts)`` of ``x`` (the registry op ``unique_all``; lengths
    are data-dependent: unknown dims until computed)."""
    return UniqueAllResult(*_apply("unique_all", x))


def unique_counts(x: NDArray, /) -> UniqueCountsResult:
    """``(values, counts)`` of ``x`` (two outputs of ``unique_all``)."""
    res = _apply("unique_all", x)
    return UniqueCountsResult(res[0], res[3])


def unique_inverse(x: NDArray, /) -> UniqueInverseResult:
    """``(values, inverse_indices)`` of ``x`` (two outputs of ``unique_all``; inverse_indices is shaped like x)."""
    res = _apply("unique_all", x)
    return UniqueInverseResult(res[0], res[2])


def nonzero(x: NDArray, /) -> tuple:
    """The indices of the non-zero elements of ``x``: a tuple of ``x.ndim`` 1-D int64 arrays, one per axis
    (the standard's and NumPy's ``nonzero``), taken from the columns of ``la.argwhere(x)`` (whose
    ``(N, ndim)`` result ``la.nonzero`` gave before; the registry op keeps the name ``nonzero``).

    >>> import lazyarray as la
    >>> [i.asnumpy().tolist() for i in la.nonzero(la.asarray([[0, 1], [2, 0]]))]
    [[0, 1], [1, 0]]
    """
    if array_in(x, "nonzero").ndim == 0:
        raise ShapeError("nonzero: 0-d arrays are not allowed (the standard's rule); use la.nonzero(x[None])")
    rows = _apply("nonzero", x)
    return tuple(_apply("getitem", rows, key=(slice(None), i)) for i in range(x.ndim))


def repeat(x: NDArray, repeats, /, *extra, axis: int | None = None, **old) -> NDArray:
    """The standard's (NumPy's) ``repeat``: each element repeated ``repeats`` times, or
    ``repeats[i]`` times for element ``i`` along ``axis`` (the flattened array when ``axis`` is
    None). PyTorch's tiling ``Tensor.repeat(*sizes)`` is ``x.repeat(*sizes)`` or ``la.tile``.

    >>> import lazyarray as la
    >>> la.repeat(la.asarray([[1, 2], [3, 4]]), 2, axis=1).tolist()
    [[1, 1, 2, 2], [3, 3, 4, 4]]
    >>> la.repeat(la.asarray([1, 2, 3]), [0, 1, 2]).tolist()
    [2, 3, 3]
    """
    if extra or "sizes" in old:
        sizes = (repeats,) + extra if extra else old["sizes"]
        raise ParamError(
            f"la.repeat(x, {', '.join(map(str, sizes)) if isinstance(sizes, tuple) else sizes}) is PyTorch's "
            "tiling Tensor.repeat(*sizes); la.repeat now follows NumPy and the Array API (each element "
            "repeated: la.repeat(x, repeats, axis=None)). For tiling write x.repeat(*sizes) or la.tile(x, sizes)")
    if old:
        raise ParamError(f"repeat() got unexpected keyword argument(s) {', '.join(old)}")
    if isinstance(repeats, NDArray):
        if repeats.dtype.kind not in "iu" or repeats.ndim > 1:
            raise DTypeError(f"repeat: repeats must be an integer or a 1-D integer array, got "
                             f"{repeats.dtype}{list(repeats.shape)}")
        repeats = repeats.asnumpy().tolist()  # the output's length depends on these values
    if isinstance(repeats, np.ndarray) and repeats.dtype.kind in "iu" and repeats.ndim <= 1:
        repeats = repeats.tolist()
    items = [repeats] if not isinstance(repeats, (list, tuple, range)) else list(repeats)
    if not builtins.all(isinstance(r, (int, np.integer)) and not isinstance(r, (bool, np.bool_)) for r in items):
        hint = "; round a float count first, e.g. int(n)" if builtins.any(isinstance(r, float) for r in items) else ""
        raise ParamError(f"repeat: repeats must be an int, a sequence of ints or a 1-D integer array, got "
                         f"{repeats!r}"[:300] + hint)
    return _apply("repeat_elements", x, repeats=tuple(int(r) for r in items), axis=axis)


# -- the standard's signatures over registry ops (dtype=, device=, sorter=, copy=, axis=None) ----------
def accumulate_as(name: str, x, dtype, out, **params) -> NDArray:
    """``name`` over ``x`` accumulated in ``dtype`` (the standard's ``dtype=``): cast in, reduce, and
    cast the result to ``dtype`` (an integer sum that wraps in ``dtype`` wraps the same way)."""
    if dtype is not None:
        dt = as_dtype(dtype, name)
        if getattr(x, "dtype", None) != dt:  # (a Python scalar is cast like an array)
            x = _apply("cast", x, dtype=dt)
        res = _apply(name, x, **params)
        if res.dtype != dt:
            res = _apply("cast", res, dtype=dt)
    else:
        res = _apply(name, x, **params)
    return res if out is None else write_out(name, res, out)


def sum(x: NDArray, /, axis: int | Sequence[int] | None = None, keepdims: builtins.bool = False, *,  # noqa: A001
        dtype: DTypeLike | None = None,
        out: NDArray | None = None) -> NDArray:
    """The sum over ``axis`` (None = all). Without ``dtype``, small integers and bools sum as int64
    (unsigned as uint64), floats keep their dtype; ``dtype=`` accumulates in that dtype.

    >>> import lazyarray as la
    >>> la.sum(la.asarray([1, 2, 3], dtype=la.int8)).dtype, la.sum(la.ones((2, 2)), axis=0).asnumpy().tolist()
    (dtype('int64'), [2.0, 2.0])
    """
    return accumulate_as("sum", x, dtype, out, axis=axis, keepdims=keepdims)


def prod(x: NDArray, /, axis: int | Sequence[int] | None = None, keepdims: builtins.bool = False, *,
         dtype: DTypeLike | None = None,
         out: NDArray | None = None) -> NDArray:
    """The product over ``axis`` (None = all), with ``sum``'s dtype rules.

    >>> import lazyarray as la
    >>> la.prod(la.asarray([1.0, 2.0, 3.0])).item()
    6.0
    """
    return accumulate_as("prod", x, dtype, out, axis=axis, keepdims=keepdims)


def cumulative_sum(x: NDArray, /, axis: int | None = None, include_initial: builtins.bool = False, *,
                   dtype: DTypeLike | None = None,
                   out: NDArray | None = None) -> NDArray:
    """Running sums along ``axis`` (may be None only for 1-d ``x``); ``include_initial`` starts with 0.

    >>> import lazyarray as la
    >>> la.cumulative_sum(la.asarray([1, 2, 3]), include_initial=True).asnumpy().tolist()
    [0, 1, 3, 6]
    """
    return accumulate_as("cumulative_sum", x, dtype, out, axis=axis, include_initial=include_initial)


def cumulative_prod(x: NDArray, /, axis: int | None = None, include_initial: builtins.bool = False, *,
                   dtype: DTypeLike | None = None,
                    out: NDArray | None = None) -> NDArray:
    """Running products along ``axis`` (may be None only for 1-d ``x``); ``include_initial`` starts with 1.

    >>> import lazyarray as la
    >>> la.cumulative_prod(la.asarray([1, 2, 3])).asnumpy().tolist()
    [1, 2, 6]
    """
    return accumulate_as("cumulative_prod", x, dtype, out, axis=axis, include_initial=include_initial)


def _placed(res: NDArray, device) -> NDArray:
    return res if device is None or device == res.device else res.to_device(device)


def zeros_like(x: NDArray, /, dtype: DTypeLike | None = None, *, device: Device | None = None, out: NDArray | None = None) -> NDArray:
    """Zeros shaped like ``x``, of ``x``'s dtype (or ``dtype``), on ``x``'s device (or ``device``).

    >>> import lazyarray as la
    >>> la.zeros_like(la.ones((2,)), dtype=la.int32).asnumpy().tolist()
    [0, 0]
    """
    res = _placed(_apply("zeros_like", x, dtype=dtype), device)
    return res if out is None else write_out("zeros_like", res, out)


def ones_like(x: NDArray, /, dtype: DTypeLike | None = None, *, device: Device | None = None, out: NDArray | None = None) -> NDArray:
    """Ones shaped like ``x``, of ``x``'s dtype (or ``dtype``), on ``x``'s device (or ``device``).

    >>> import lazyarray as la
    >>> la.ones_like(la.zeros((2,))).asnumpy().tolist()
    [1.0, 1.0]
    """
    res = _placed(_apply("ones_like", x, dtype=dtype), device)
    return res if out is None else write_out("ones_like", res, out)


def full_like(x: NDArray, /, fill_value: builtins.bool | int | float | complex,
              dtype: DTypeLike | None = None, *, device: Device | None = None,
              out: NDArray | None = None) -> NDArray:
    """``fill_value`` shaped like ``x``, of ``x``'s dtype (or ``dtype``), on ``x``'s device (or ``device``).
    A complex ``fill_value`` needs a complex dtype.

    >>> import lazyarray as la
    >>> la.full_like(la.zeros((2,), dtype=la.complex64), 1 + 2j).asnumpy().tolist()
    [(1+2j), (1+2j)]
    """
    if isinstance(fill_value, (complex, np.complexfloating)):
        dt = x.dtype if dtype is None else as_dtype(dtype, "full_like")
        if dt.kind != "c":
            raise DTypeError(f"full_like: a complex fill_value {fill_value!r} needs a complex dtype, got {dt}; "
                             "pass dtype=la.complex64")
        res = _apply("add", _apply("zeros_like", x, dtype=dt), fill_value)
    else:
        res = _apply("full_like", x, fill_value=fill_value, dtype=dtype)
    res = _placed(res, device)
    return res if out is None else write_out("full_like", res, out)


def searchsorted(x1: NDArray, x2: NDArray, /, side: str = "left", *, sorter: NDArray | None = None,
                 out: NDArray | None = None) -> NDArray:
    """Indices where ``x2``'s elements go in the sorted 1-d ``x1`` to keep it sorted (``side``: the
    first or last such place); ``sorter``: indices that sort an unsorted ``x1`` (``argsort(x1)``).

    >>> import lazyarray as la
    >>> la.searchsorted(la.asarray([1, 3, 5]), la.asarray([0, 3, 6])).asnumpy().tolist()
    [0, 1, 3]
    """
    if sorter is not None:
        x1 = _apply("take", x1, sorter, axis=0)
    res = _apply("searchsorted", x1, x2, side=side)
    return res if out is None else write_out("searchsorted", res, out)


def reshape(x: NDArray, /, shape: int | Sequence[int], *, copy: builtins.bool | None = None, out: NDArray | None = None) -> NDArray:
    """``x`` with a new ``shape`` (one dim may be -1). ``copy=True`` gives a result that shares no
    memory with ``x``; ``copy=False`` raises ``ValueError`` where the reshape needs a copy.

    >>> import lazyarray as la
    >>> la.reshape(la.arange(6), (2, -1)).shape
    (2, 3)
    """
    res = _apply("reshape", x, shape=shape)
    if copy:
        res = _apply("copy", res)
    elif copy is False and isinstance(x._value, np.ndarray) and isinstance(res._value, np.ndarray) \
            and res.size and not np.shares_memory(res._value, x._value):
        raise ValueError(f"reshape: {x.shape} -> {shape} needs a copy (x is not contiguous) but copy=False; "
                         "pass copy=None or copy=True")
    return res if out is None else write_out("reshape", res, out)


def concat(arrays: Sequence[NDArray], /, axis: int | None = 0, *, out: NDArray | None = None) -> NDArray:
    """The arrays joined along ``axis`` (``axis=None``: each flattened first, then joined).

    >>> import lazyarray as la
    >>> la.concat([la.ones((1, 2)), la.zeros((1, 2))], axis=None).shape
    (4,)
    """
    if not isinstance(arrays, (list, tuple)):
        raise ParamError(f"concat: arrays must be a list or tuple of arrays, got {type(arrays).__name__}; "
                         "write la.concat([a, b], axis=0)")
    if axis is None:
        arrays = [_apply("reshape", a, shape=(-1,)) for a in arrays]
        axis = 0
    res = _apply("concatenate", list(arrays), axis=axis)
    return res if out is None else write_out("concat", res, out)
