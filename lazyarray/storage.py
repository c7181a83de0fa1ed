"""Sparse storage containers: ``CSR`` (2-D: data, indices, indptr) and ``RowSparse``.

A sparse value is what an ``NDArray`` of stype ``csr`` / ``row_sparse`` holds instead of a
dense backend array. Ops without a sparse kernel densify these (see the registry's
storage rule); ops with one operate on the stored values only.
"""
from __future__ import annotations

import numpy as np


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
        counts = xp.diff(self.indptr)
        rows = xp.repeat(xp.arange(self.shape[0]), counts.tolist() if xp is np else counts)
        out[rows, self.indices] = self.data
        return out

    @classmethod
    def from_dense(cls, dense, xp=np):
        if dense.ndim != 2:
            from .errors import ShapeError

            raise ShapeError(f"tostype('csr'): csr storage is 2-D only, got a {dense.ndim}-D array")
        rows, cols = xp.nonzero(dense)
        indptr = xp.zeros(dense.shape[0] + 1, dtype=np.int64)
        xp.cumsum(xp.bincount(rows, minlength=dense.shape[0]), out=indptr[1:])
        return cls(dense[rows, cols], cols.astype(np.int64), indptr, dense.shape)


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

    @classmethod
    def from_dense(cls, dense, xp=np):
        flat = dense.reshape(dense.shape[0], -1) if dense.ndim > 1 else dense.reshape(-1, 1)
        idx = xp.nonzero(xp.any(flat != 0, axis=1))[0].astype(np.int64)
        return cls(dense[idx], idx, dense.shape)


SPARSE_TYPES = (CSR, RowSparse)


def stype_of(value) -> str:
    """``"default"`` for dense backend arrays, else the container's stype."""
    return getattr(value, "stype", "default") if isinstance(value, SPARSE_TYPES) else "default"


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
    from .errors import ParamValueError

    raise ParamValueError(f"tostype: unknown storage type {stype!r}; use 'default', 'csr' or 'row_sparse'")
