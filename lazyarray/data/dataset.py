"""Datasets: indexable collections of samples, as Gluon's ``gluon.data.Dataset``.

``dataset[i]`` is one sample, ``len(dataset)`` the number of samples. ``transform(fn)`` /
``transform_first(fn)`` apply a function to each sample as it is read; ``take``, ``filter``,
``shard`` and ``sample`` give views that read the same samples in another selection.

>>> import numpy as np
>>> from lazyarray.data import ArrayDataset
>>> ds = ArrayDataset(np.arange(6.0).reshape(3, 2), [0, 1, 0])
>>> len(ds), ds[1]
(3, (array([2., 3.]), 1))
>>> ds.transform_first(lambda x: x * 10)[1]
(array([20., 30.]), 1)
>>> len(ds.filter(lambda s: s[1] == 0)), [s[1] for s in ds.shard(2, 1)]
(2, [0])
"""
from __future__ import annotations

import operator
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..errors import ParamError, ParamValueError, ShapeError
from ..ndarray import NDArray
from .sampler import FilterSampler, Sampler, SequentialSampler, check_count


class Dataset:
    """Base class: subclasses define ``__getitem__(i)`` and ``__len__``."""

    def __getitem__(self, idx):
        raise NotImplementedError

    def __len__(self) -> int:
        raise NotImplementedError

    def gather(self, indices: Sequence[int]):
        """The batch ``default_batchify([self[i] for i in indices])`` would make, as NumPy arrays, when
        this dataset can read it in one step; None otherwise (the loader then reads sample by sample)."""
        return None

    def transform(self, fn: Callable, lazy: bool = True) -> Dataset:
        """A dataset whose samples are ``fn(*sample)`` for tuple samples, ``fn(sample)`` otherwise;
        applied on every read (``lazy=True``) or once now (``lazy=False``)."""
        if not callable(fn):
            raise ParamError(f"{type(self).__name__}.transform: fn must be callable, got {type(fn).__name__}; "
                             "pass a function or a la.data.transforms object")
        out = _TransformDataset(self, fn)
        return out if lazy else SimpleDataset([out[i] for i in range(len(out))])

    def transform_first(self, fn: Callable, lazy: bool = True) -> Dataset:
        """Like ``transform``, applied to the first element of each sample only (the image, not the
        label)."""
        if not callable(fn):
            raise ParamError(f"{type(self).__name__}.transform_first: fn must be callable, got "
                             f"{type(fn).__name__}; pass a function or a la.data.transforms object")
        return self.transform(TransformFirst(fn), lazy)

    def sample(self, sampler: Sampler) -> Dataset:
        """The samples at the indices ``sampler`` yields, in its order."""
        return _SampledDataset(self, sampler)

    def take(self, count: int | None) -> Dataset:
        """The first ``count`` samples (all of them when ``count`` is None or larger)."""
        n = len(self) if count is None else min(check_count(count, "Dataset.take", "count", minimum=0), len(self))
        return _SampledDataset(self, SequentialSampler(n))

    def filter(self, fn: Callable) -> Dataset:
        """The samples where ``fn(sample)`` is true (``fn`` runs once per sample, now)."""
        return _SampledDataset(self, FilterSampler(fn, self))

    def shard(self, num_shards: int, index: int) -> Dataset:
        """Part ``index`` of ``num_shards`` contiguous parts; the first ``len % num_shards`` parts hold
        one sample more (Gluon's split)."""
        num_shards = check_count(num_shards, "Dataset.shard", "num_shards")
        index = check_count(index, "Dataset.shard", "index", minimum=0)
        if index >= num_shards:
            raise ParamValueError(f"Dataset.shard: index={index} is not below num_shards={num_shards}; "
                                  f"pass an index in [0, {num_shards})")
        size, rest = divmod(len(self), num_shards)
        start = size * index + min(index, rest)
        return _SampledDataset(self, SequentialSampler(size + (index < rest), start))


class TransformFirst:
    """``fn`` applied to the first element of a sample (picklable, for worker processes)."""

    def __init__(self, fn: Callable):
        self.fn = fn

    def __call__(self, first, *rest):
        return (self.fn(first), *rest) if rest else self.fn(first)


class SimpleDataset(Dataset):
    """A dataset over any sequence (a list, a NumPy array): ``ds[i] == data[i]``.

    >>> SimpleDataset([3, 4, 5])[2]
    5
    """

    def __init__(self, data: Any) -> None:
        if not hasattr(data, "__getitem__") or not hasattr(data, "__len__"):
            raise ParamError(f"SimpleDataset: data must be a sequence (with len and []), got "
                             f"{type(data).__name__}; pass a list or an array")
        self._data = data

    def __getitem__(self, idx):
        return self._data[idx]

    def __len__(self) -> int:
        return len(self._data)


class ArrayDataset(Dataset):
    """Samples ``(a[i], b[i], ...)`` from equally long arrays or lists (one argument: ``a[i]``).

    lazyarray arrays are read into NumPy once, here: samples are NumPy arrays or scalars (cheap to
    read and to send to worker processes); the loader's batchify makes lazyarray arrays of batches.
    When every field is a NumPy array, a batch is read with one fancy index per field (``gather``).
    """

    def __init__(self, *args: Any) -> None:
        if not args:
            raise ParamError("ArrayDataset: needs at least one array; pass ArrayDataset(data, labels, ...)")
        fields = []
        for k, a in enumerate(args):
            if isinstance(a, NDArray):
                a = a.asnumpy()
            if not hasattr(a, "__getitem__") or not hasattr(a, "__len__"):
                raise ParamError(f"ArrayDataset: argument {k} is a {type(a).__name__}, not an array or a list; "
                                 "pass sequences of samples")
            fields.append(a)
        lengths = [len(a) for a in fields]
        if len(set(lengths)) > 1:
            raise ShapeError(f"ArrayDataset: the arguments have different lengths {lengths}; every argument "
                             "must hold one entry per sample")
        self._fields = tuple(fields)
        self._length = lengths[0]
        self._gatherable = all(isinstance(a, np.ndarray) and a.dtype != object and a.ndim >= 1 for a in fields)

    def __getitem__(self, idx):
        if len(self._fields) == 1:
            return self._fields[0][idx]
        return tuple(a[idx] for a in self._fields)

    def __len__(self) -> int:
        return self._length

    def gather(self, indices: Sequence[int]):
        if not self._gatherable or not indices:
            return None
        first = operator.index(indices[0])
        n = len(indices)
        if indices == list(range(first, first + n)) and 0 <= first and first + n <= self._length:
            batch = tuple(a[first:first + n].copy() for a in self._fields)  # contiguous: one memcpy per field
        else:
            idx = np.asarray(indices, dtype=np.intp)
            batch = tuple(a[idx] for a in self._fields)
        return batch[0] if len(batch) == 1 else batch


class _TransformDataset(Dataset):
    def __init__(self, data: Dataset, fn: Callable):
        self._data, self._fn = data, fn

    def __getitem__(self, idx):
        item = self._data[idx]
        return self._fn(*item) if isinstance(item, tuple) else self._fn(item)

    def __len__(self) -> int:
        return len(self._data)


class _SampledDataset(Dataset):
    def __init__(self, data: Dataset, sampler: Sampler):
        self._data = data
        self._indices = list(sampler)

    def __getitem__(self, idx):
        return self._data[self._indices[idx]]

    def __len__(self) -> int:
        return len(self._indices)

    def gather(self, indices: Sequence[int]):
        if not hasattr(self._data, "gather"):
            return None
        return self._data.gather([self._indices[i] for i in indices])
