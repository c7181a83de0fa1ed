"""Batchify functions: a list of samples -> one batch of lazyarray arrays (Gluon's and GluonNLP's).

``default_batchify`` stacks arrays and numbers, and batches tuples (and dicts) field by field;
``Stack``, ``Pad``, ``Tuple`` and ``Dict`` build a batchify function field by field, as
``gluonnlp.data.batchify`` does.

>>> import numpy as np
>>> from lazyarray.data import batchify
>>> b = batchify.default_batchify([(np.zeros(2, np.float32), 1), (np.ones(2, np.float32), 0)])
>>> b[0].shape, b[0].dtype, b[1].asnumpy().tolist()
((2, 2), dtype('float32'), [1, 0])
>>> x, n = batchify.Pad(val=-1, ret_length=True)([[1, 2, 3], [4]])
>>> x.asnumpy().tolist(), n.asnumpy().tolist()
([[1, 2, 3], [4, -1, -1]], [3, 1])
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy as np

from ..creation import array as la_array
from ..device import cpu
from ..errors import ParamError, ShapeError
from ..ndarray import NDArray, make_array

_CPU0 = cpu(0)


def as_batch_array(value: np.ndarray) -> NDArray:
    """A lazyarray array over ``value``, a NumPy array the batchify just made (no one else holds it,
    so it is wrapped without the copy ``la.array`` makes, and without ``la.from_dlpack``'s checks: the
    DataLoader's per-batch cost is a few microseconds, see benchmarks/data_loader.py)."""
    if value.dtype.kind not in "biufc":  # the dtypes lazyarray holds; la.array's check names the problem
        return la_array(value)
    return make_array(np.ascontiguousarray(value), None, _CPU0)


def _stack_numpy(data: Sequence, where: str) -> np.ndarray:
    first = data[0]
    if isinstance(first, NDArray):
        data = [d.asnumpy() if isinstance(d, NDArray) else d for d in data]
    elif isinstance(first, (bool, int, float, complex)) and not isinstance(first, np.generic):
        # Python numbers: la.array's defaults (floats become float32, as la.array([1.0]) does)
        arr = np.asarray(data)
        return arr.astype(np.float32) if arr.dtype == np.float64 else arr
    try:
        return np.stack([np.asarray(d) for d in data])
    except ValueError as exc:
        shapes = sorted({np.shape(d) for d in data})
        raise ShapeError(f"{where}: samples of different shapes {shapes[:4]} cannot be stacked ({exc}); pad "
                         "them with la.data.batchify.Pad, or give the DataLoader a batchify_fn") from None


def default_batchify(data: Sequence):
    """Stack a list of samples into a batch: arrays and numbers become one array with a new first
    axis, tuples and lists are batched field by field (a tuple of arrays), dicts key by key.

    Args:
        data (list): the samples of one batch, all of one structure.

    Returns:
        An ``NDArray``, or a tuple / dict of them.
    """
    if len(data) == 0:
        raise ShapeError("default_batchify: no samples to batch; a batch needs at least one sample")
    first = data[0]
    if isinstance(first, (tuple, list)):
        return tuple(default_batchify(list(field)) for field in zip(*data))
    if isinstance(first, Mapping):
        return {k: default_batchify([d[k] for d in data]) for k in first}
    return as_batch_array(_stack_numpy(data, "default_batchify"))


class Stack:
    """Stack samples of one shape along a new first axis (optionally cast to ``dtype``).

    >>> Stack(dtype="float32")([[1, 2], [3, 4]]).dtype
    dtype('float32')
    """

    def __init__(self, dtype=None):
        self._dtype = None if dtype is None else np.dtype(dtype)

    def __call__(self, data: Sequence) -> NDArray:
        if len(data) == 0:
            raise ShapeError("Stack: no samples to batch; a batch needs at least one sample")
        arr = _stack_numpy(data, "Stack")
        return as_batch_array(arr if self._dtype is None else arr.astype(self._dtype, copy=False))


class Pad:
    """Pad samples of different lengths along ``axis`` to the longest, with ``val``, and stack them.
    ``ret_length=True`` also returns each sample's original length (int64); ``round_to`` rounds the
    padded length up to a multiple.

    >>> Pad(val=0)([np.ones((2, 3)), np.ones((1, 3))]).shape
    (2, 2, 3)
    """

    def __init__(self, axis: int = 0, val=0, dtype=None, ret_length: bool = False, round_to: int | None = None):
        if not isinstance(axis, (int, np.integer)):
            raise ParamError(f"Pad: axis must be an int, got {type(axis).__name__} {axis!r}; pass the axis of a "
                             "sample (not of the batch) to pad along")
        self._axis, self._val, self._ret_length, self._round_to = int(axis), val, bool(ret_length), round_to
        self._dtype = None if dtype is None else np.dtype(dtype)

    def __call__(self, data: Sequence):
        if len(data) == 0:
            raise ShapeError("Pad: no samples to batch; a batch needs at least one sample")
        arrays = [d.asnumpy() if isinstance(d, NDArray) else np.asarray(d) for d in data]
        ndim = arrays[0].ndim
        if any(a.ndim != ndim for a in arrays) or not -ndim <= self._axis < ndim:
            raise ShapeError(f"Pad: samples with ndims {sorted({a.ndim for a in arrays})} cannot be padded along "
                             f"axis {self._axis}; every sample needs the same ndim, with axis in [-ndim, ndim)")
        axis = self._axis % ndim
        lengths = np.array([a.shape[axis] for a in arrays], dtype=np.int64)
        longest = int(lengths.max())
        if self._round_to:
            longest = -(-longest // self._round_to) * self._round_to
        shape = list(arrays[0].shape)
        shape[axis] = longest
        for a in arrays:
            if [s for i, s in enumerate(a.shape) if i != axis] != [s for i, s in enumerate(shape) if i != axis]:
                raise ShapeError(f"Pad: a sample of shape {a.shape} differs from {tuple(arrays[0].shape)} outside "
                                 f"axis {axis}; only the padded axis may vary")
        dtype = self._dtype or np.result_type(*arrays)
        if dtype == np.float64 and not any(a.dtype == np.float64 and isinstance(d, np.ndarray)
                                           for a, d in zip(arrays, data)):
            dtype = np.dtype(np.float32)  # Python floats: la.array's default float
        out = np.full((len(arrays), *shape), self._val, dtype=dtype)
        for k, a in enumerate(arrays):
            out[(k, *[slice(None)] * axis, slice(0, a.shape[axis]))] = a
        batch = as_batch_array(out)
        return (batch, as_batch_array(lengths)) if self._ret_length else batch


class Tuple:
    """One batchify function per field of tuple samples: ``Tuple(Pad(), Stack())``.

    >>> x, y = Tuple(Pad(), Stack())([([1, 2], 0), ([3], 1)])
    >>> x.shape, y.shape
    ((2, 2), (2,))
    """

    def __init__(self, fn, *more: Callable):
        fns = tuple(fn) if isinstance(fn, (list, tuple)) and not more else (fn, *more)
        for k, f in enumerate(fns):
            if not callable(f):
                raise ParamError(f"Tuple: function {k} is a {type(f).__name__}, not callable; pass batchify "
                                 "functions such as Stack() or Pad()")
        self._fns = fns

    def __call__(self, data: Sequence) -> tuple:
        if any(len(d) != len(self._fns) for d in data):
            raise ShapeError(f"Tuple: samples of {sorted({len(d) for d in data})} fields for {len(self._fns)} "
                             "batchify functions; give one function per field")
        return tuple(f([d[k] for d in data]) for k, f in enumerate(self._fns))


class Dict:
    """One batchify function per key of dict samples: ``Dict({"tokens": Pad(), "label": Stack()})``."""

    def __init__(self, fns: Mapping[str, Callable]):
        self._fns = dict(fns)

    def __call__(self, data: Sequence) -> dict:
        return {k: f([d[k] for d in data]) for k, f in self._fns.items()}
