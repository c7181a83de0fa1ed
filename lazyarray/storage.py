"""Sparse storage containers: ``CSR`` (2-D: data, indices, indptr) and ``RowSparse``.

A sparse value is what an ``NDArray`` of stype ``csr`` / ``row_sparse`` holds instead of a
dense backend array. Ops without a sparse kernel densify these (see the registry's
storage rule); ops with one operate on the stored values only.
"""
from __future__ import annotations

import numpy as np

from .errors import ParamValueError, ShapeError


class CSR:
    """Compressed sparse rows of a 2-D array: row ``i`` holds ``data[indptr[i]:indptr[i+1]]``
    at columns ``indices[indptr[i]:indptr[i+1]]``."""

    stype = "csr"
    __slots__ = ("data", "indices", "indptr", "shape")

    def __init__(self, data, indices, indptr, shape):
        self.data, self.indices, self.indptr = data, indices, indptr
        self.shape = tuple(int(d) for d in shape)

    @property
    def dtype(self):
        return self.data.dtype

    @property
    def ndim(self):
        return 2

    def todense(self, xp=np):
        out = xp.zeros(self.shape, dtype=self.data.dtype)
        out[self.row_ids(xp), self.indices] = self.data
        return out

    @property
    def nnz(self) -> int:
        return int(self.data.shape[0])

    def row_ids(self, xp=np):
        """The row of every stored value (``indices`` holds the columns)."""
        return runs(xp, xp.diff(self.indptr)).astype(self.indices.dtype, copy=False)

    def with_data(self, data) -> CSR:
        """The same sparsity pattern holding ``data`` (index arrays are shared, never written)."""
        return CSR(data, self.indices, self.indptr, self.shape)

    @classmethod
    def from_dense(cls, dense, xp=np):
        if dense.ndim != 2:
            raise ShapeError(f"tostype('csr'): csr storage is 2-D only, got a {dense.ndim}-D array")
        rows, cols = xp.nonzero(dense)
        itype = index_dtype(dense.shape[0], dense.shape[1], rows.shape[0])
        indptr = xp.zeros(dense.shape[0] + 1, dtype=itype)
        xp.cumsum(xp.bincount(rows, minlength=dense.shape[0]), out=indptr[1:])
        return cls(dense[rows, cols], cols.astype(itype), indptr, dense.shape)


class RowSparse:
    """Rows ``indices`` (sorted, unique) of an array, the other rows all zero."""

    stype = "row_sparse"
    __slots__ = ("data", "indices", "shape")

    def __init__(self, data, indices, shape):
        self.data, self.indices = data, indices
        self.shape = tuple(int(d) for d in shape)

    @property
    def dtype(self):
        return self.data.dtype

    @property
    def ndim(self):
        return len(self.shape)

    def todense(self, xp=np):
        out = xp.zeros(self.shape, dtype=self.data.dtype)
        out[self.indices] = self.data
        return out

    def with_data(self, data) -> RowSparse:
        return RowSparse(data, self.indices, self.shape)

    @classmethod
    def from_dense(cls, dense, xp=np):
        if dense.ndim == 0:
            raise ShapeError("tostype('row_sparse'): a row_sparse array needs at least one dim, got a 0-d array")
        width = int(np.prod(dense.shape[1:], dtype=np.int64))  # not -1: empty arrays have no inferable dim
        flat = dense.reshape(dense.shape[0], width) if dense.ndim > 1 else dense.reshape(-1, 1)
        idx = xp.nonzero(xp.any(flat != 0, axis=1))[0].astype(np.int64)
        return cls(dense[idx], idx, dense.shape)


def runs(xp, counts):
    """``[0]*counts[0] + [1]*counts[1] + ...``: the owner of every stored value."""
    if xp is np:
        return np.repeat(np.arange(counts.shape[0]), counts)
    # CuPy's repeat wants host repeat counts; a search over the run ends stays on the device
    return xp.searchsorted(xp.cumsum(counts), xp.arange(int(counts.sum())), side="right")


SPARSE_TYPES = (CSR, RowSparse)
_INT32_MAX = np.iinfo(np.int32).max


def index_dtype(*sizes) -> np.dtype:
    """int32 when every size fits (what scipy.sparse uses, so conversions share the index
    arrays instead of copying them), else int64."""
    return np.dtype(np.int32) if max(sizes, default=0) < _INT32_MAX else np.dtype(np.int64)


def stype_of(value) -> str:
    """``"default"`` for dense backend arrays, else the container's stype."""
    return getattr(value, "stype", "default") if isinstance(value, SPARSE_TYPES) else "default"


def copy_value(value):
    """A copy owning its memory: a backend array's ``copy()``, or a sparse value with copied parts."""
    if hasattr(value, "copy"):
        return value.copy()
    parts = {k: getattr(value, k).copy() for k in ("data", "indices", "indptr") if hasattr(value, k)}
    return type(value)(**parts, shape=value.shape)


def densify(value, xp=np):
    """The dense backend array of ``value`` (unchanged when already dense)."""
    return value.todense(xp) if isinstance(value, SPARSE_TYPES) else value


def from_dense(dense, stype: str, xp=np):
    """Convert a dense backend array to ``stype``."""
    if stype == "default":
        return dense
    if stype == "csr":
        return CSR.from_dense(dense, xp)
    if stype == "row_sparse":
        return RowSparse.from_dense(dense, xp)
    raise ParamValueError(f"tostype: unknown storage type {stype!r}; use 'default', 'csr' or 'row_sparse'")
