"""Kernels over sparse storage (``CSR``, ``RowSparse``) shared by the op entries.

Every kernel works on the stored values only and never builds the dense array: an
elementwise op that maps 0 to 0 touches ``data``; a row slice of a CSR slices ``indptr``;
``csr @ dense`` and ``csr.T @ dense`` run scipy.sparse (cupyx.scipy.sparse on the GPU),
the latter producing only the rows the CSR's columns touch. Index arrays are shared
between inputs and outputs and never written.

The storage rules that decide when these run sit with each op in its ``OpDef``; the
helpers ``*_storage`` below are the rules several ops share.
"""
from __future__ import annotations

import importlib

import numpy as np

from ..errors import MissingDependencyError, ShapeError
from ..storage import CSR, RowSparse, index_dtype, runs, stype_of
from .registry import broadcast_shapes


def _host_sparse():
    """scipy.sparse (the heavy CSR products on the host), imported on first use: only sparse
    arrays need it, and importing it with the package more than doubled the memory and time of
    ``import lazyarray`` (scipy pulls in its array-API layer and much of NumPy's test tooling).
    SciPy is the ``sparse`` extra, not a core dependency: without it this raises a named error."""
    try:
        return importlib.import_module("scipy.sparse")
    except ImportError:
        raise MissingDependencyError(
            "sparse arrays (la.sparse, csr storage) need SciPy, which is not installed: "
            "pip install 'lazyarray[sparse]' (or pip install scipy)") from None


def scipy_sparse(xp):
    """``scipy.sparse`` for NumPy values, ``cupyx.scipy.sparse`` for CuPy ones."""
    if xp is np:
        return _host_sparse()
    import cupyx.scipy.sparse as csp  # only reached with CuPy values, i.e. when CuPy is installed

    return csp


def to_scipy(xp, x: CSR):
    """``x`` as a ``csr_matrix`` sharing its arrays (no copy when the indices are int32/int64
    as scipy picks them)."""
    return scipy_sparse(xp).csr_matrix((x.data, x.indices, x.indptr), shape=x.shape)


def from_scipy(m) -> CSR:
    """A scipy / cupyx sparse matrix as a canonical ``CSR`` (sorted, no duplicates)."""
    m = m.tocsr()
    if not m.has_canonical_format:
        m = m.copy()
        m.sum_duplicates()
    return CSR(m.data, m.indices, m.indptr, m.shape)


# -- storage rules shared by ops -------------------------------------------------------------
def zero_preserving_storage(stypes, shapes, **params):
    """An op with f(0) == 0 keeps the storage of its one sparse input."""
    return [stypes[0]] if stypes[0] != "default" else None


def _fits(dense_shape, sparse_shape) -> bool:
    """A dense operand that broadcasts into the sparse shape without growing it."""
    if dense_shape is None or sparse_shape is None or len(dense_shape) > len(sparse_shape):
        return False
    try:
        return broadcast_shapes(dense_shape, sparse_shape) == tuple(sparse_shape)
    except ShapeError:
        return False


def multiply_storage(stypes, shapes):
    """sparse * dense (a scalar or anything that broadcasts into the sparse shape) keeps the
    sparse storage: zeros stay zeros."""
    a, b = stypes
    if a != "default" and b == "default" and _fits(shapes[1], shapes[0]):
        return [a]
    if b != "default" and a == "default" and _fits(shapes[0], shapes[1]):
        return [b]
    return None


def add_storage(stypes, shapes):
    """Sums of equal-shaped operands: rsp+rsp -> rsp, csr+csr -> csr, sparse+dense -> dense."""
    if shapes[0] is None or shapes[0] != shapes[1] or None in shapes[0]:
        return None
    a, b = stypes
    if a == b and a != "default":
        return [a]
    if "default" in stypes and a != b:
        return ["default"]
    return None


# -- elementwise ---------------------------------------------------------------------------------
def unary(dense_kernel):
    """The sparse kernel of a zero-preserving unary op: the dense kernel on the stored values."""
    def kernel(xp, x, out=None, **params):
        return x.with_data(dense_kernel(xp, x.data, **params) if callable(dense_kernel)
                           else getattr(xp, dense_kernel)(x.data))

    return kernel


def _stored_values_of(xp, dense, x):
    """The elements of a dense operand (broadcast to ``x``'s shape) at ``x``'s stored places."""
    if not hasattr(dense, "ndim"):  # a Python number: NumPy's weak-scalar typing, as dense
        return dense
    if dense.ndim == 0 or dense.size == 1:
        return dense.reshape(())
    full = xp.broadcast_to(dense, x.shape)
    if isinstance(x, CSR):
        return full[x.row_ids(xp), x.indices]
    return full[x.indices]


def multiply(xp, a, b, out=None):
    """sparse * dense (either order): scales the stored values only."""
    if isinstance(a, (CSR, RowSparse)):
        return a.with_data(xp.multiply(a.data, _stored_values_of(xp, b, a)))
    return b.with_data(xp.multiply(_stored_values_of(xp, a, b), b.data))


def _rsp_combine(xp, a: RowSparse, b: RowSparse, sign: int) -> RowSparse:
    idx = xp.union1d(a.indices, b.indices)
    dtype = xp.result_type(a.data, b.data)
    data = xp.zeros((idx.shape[0],) + a.shape[1:], dtype=dtype)
    data[xp.searchsorted(idx, a.indices)] = a.data
    pos = xp.searchsorted(idx, b.indices)
    if sign > 0:
        data[pos] += b.data
    else:
        data[pos] -= b.data
    return RowSparse(data, idx.astype(np.int64), a.shape)


def _into_dense(xp, dense, s, sign: int):
    """dense + sign * s (s sparse), allocating only the dense result."""
    dtype = xp.result_type(dense, s.data)
    out = dense.astype(dtype, copy=True)
    if isinstance(s, RowSparse):
        if sign > 0:
            out[s.indices] += s.data
        else:
            out[s.indices] -= s.data
    elif sign > 0:  # a canonical CSR stores each place once: no duplicate writes
        out[s.row_ids(xp), s.indices] += s.data
    else:
        out[s.row_ids(xp), s.indices] -= s.data
    return out


def combine(sign: int):
    """The sparse kernel of ``add`` (sign 1) / ``subtract`` (sign -1), rules in ``add_storage``."""
    def kernel(xp, a, b, out=None):
        sa, sb = isinstance(a, (CSR, RowSparse)), isinstance(b, (CSR, RowSparse))
        if sa and sb:
            if isinstance(a, RowSparse):
                return _rsp_combine(xp, a, b, sign)
            m = to_scipy(xp, a) + to_scipy(xp, b) if sign > 0 else to_scipy(xp, a) - to_scipy(xp, b)
            return from_scipy(m)
        if sa:
            return _into_dense(xp, b if sign > 0 else -b, a, 1)
        return _into_dense(xp, a, b, sign)

    return kernel


def add_values(xp, a, b):
    """``a + b`` for any mix of dense and sparse values (gradient accumulation)."""
    if stype_of(a) == stype_of(b) == "default":
        return a + b
    if stype_of(a) != "default" and stype_of(b) != "default" and stype_of(a) != stype_of(b):
        a = a.todense(xp)
    return combine(1)(xp, a, b)


def convert(xp, x, stype: str):
    """A sparse value in another storage type without a dense copy of the whole array: csr ->
    row_sparse fills only the rows that store something, row_sparse -> csr compresses the rows."""
    if isinstance(x, CSR) and stype == "row_sparse":
        counts = xp.diff(x.indptr)
        rows = xp.nonzero(counts)[0]
        data = xp.zeros((rows.shape[0], x.shape[1]), dtype=x.dtype)
        pos = runs(xp, counts[rows])
        data[pos, x.indices] = x.data
        return RowSparse(data, rows.astype(np.int64), x.shape)
    if isinstance(x, RowSparse) and stype == "csr":
        part = CSR.from_dense(x.data, xp)  # the stored rows only
        itype = part.indptr.dtype
        counts = xp.zeros(x.shape[0], dtype=itype)
        counts[x.indices] = xp.diff(part.indptr)
        indptr = xp.zeros(x.shape[0] + 1, dtype=itype)
        xp.cumsum(counts, out=indptr[1:])
        return CSR(part.data, part.indices, indptr, x.shape)
    return None


# -- indexing ------------------------------------------------------------------------------------
def row_slice_of(key):
    """The row slice of ``key`` when it selects a step-1 range of rows and every column, else None."""
    if not key or not isinstance(key[0], slice) or key[0].step not in (None, 1):
        return None
    if any(k != slice(None) and k is not Ellipsis for k in key[1:]) or len(key) > 2:
        return None
    return key[0]


def csr_row_slice(xp, x: CSR, key, out=None) -> CSR:
    """Rows ``key[0]`` of a CSR: a slice of ``indptr``, views of ``data`` and ``indices``."""
    start, stop, _ = row_slice_of(key).indices(x.shape[0])
    stop = max(stop, start)
    ptr = x.indptr[start:stop + 1]
    lo, hi = int(ptr[0]), int(ptr[-1])
    return CSR(x.data[lo:hi], x.indices[lo:hi], ptr - ptr[0], (stop - start, x.shape[1]))


# -- products ------------------------------------------------------------------------------------
def csr_dot(xp, a: CSR, b, transpose_a: bool = False, out=None):
    """``a @ b`` (dense result) or ``a.T @ b`` (row_sparse result: only the rows of the
    columns ``a`` stores)."""
    dtype = np.result_type(a.dtype, b.dtype)
    if not transpose_a:
        return xp.asarray(to_scipy(xp, a) @ b).astype(dtype, copy=False)
    n = a.shape[1]
    touched = xp.zeros(n, dtype=bool)
    touched[a.indices] = True
    rows = xp.nonzero(touched)[0]
    # Renumber the stored columns 0..len(rows)-1, so the product has one row per touched column.
    new_col = xp.cumsum(touched, dtype=a.indices.dtype) - 1
    compact = CSR(a.data, new_col[a.indices], a.indptr, (a.shape[0], rows.shape[0]))
    data = xp.asarray(to_scipy(xp, compact).T @ b).astype(dtype, copy=False)
    return RowSparse(data.reshape((rows.shape[0],) + tuple(b.shape[1:])), rows.astype(np.int64),
                     (n,) + tuple(b.shape[1:]))


def csr_transpose(xp, x: CSR, axes=None, out=None) -> CSR:
    return from_scipy(to_scipy(xp, x).T)


# -- reductions ----------------------------------------------------------------------------------
def csr_sum(xp, x: CSR, axis=None, keepdims=False, dtype=None, out=None):
    """Sums over the stored values (scatter-added per row or column): the result is dense."""
    dtype = dtype or np.sum(np.zeros(0, dtype=x.dtype)).dtype
    axes = (0, 1) if axis is None else tuple(a % 2 for a in ((axis,) if isinstance(axis, int) else axis))
    if len(set(axes)) == 2:
        res = xp.sum(x.data, dtype=dtype)
        return res.reshape((1, 1)) if keepdims else xp.asarray(res)
    if not axes:
        return x.todense(xp).astype(dtype, copy=False)
    ax = axes[0]
    where = x.indices if ax == 0 else x.row_ids(xp)
    if np.dtype(dtype).kind == "f":  # bincount accumulates in float64: fast and at least as exact
        res = xp.bincount(where, weights=x.data, minlength=x.shape[1 - ax]).astype(dtype)
    else:
        res = xp.zeros(x.shape[1 - ax], dtype=dtype)
        xp.add.at(res, where, x.data.astype(dtype, copy=False))
    if keepdims:
        res = res.reshape((1, -1) if ax == 0 else (-1, 1))
    return res


# -- gradients -----------------------------------------------------------------------------------
def rows_sum(xp, g, indices, shape) -> RowSparse:
    """``RowSparse`` of ``shape`` holding, per distinct index, the sum of the rows of ``g``
    taken there: the sparse gradient of a row lookup (embedding)."""
    idx = indices.reshape(-1).astype(np.int64, copy=False)
    idx = xp.where(idx < 0, idx + shape[0], idx)
    g = g.reshape((idx.shape[0],) + tuple(shape[1:]))
    if xp is np and idx.size:
        # Sort once; row r of the result sums the runs of equal ids: a CSR "selector" S (one row per
        # distinct id, a one at each position holding it) times g. scipy's S @ g is ~5x faster
        # than add.at and ~2x faster than add.reduceat over the sorted rows.
        order = np.argsort(idx, kind="stable")
        sorted_idx = idx[order]
        starts = np.flatnonzero(np.concatenate(([True], sorted_idx[1:] != sorted_idx[:-1])))
        it = index_dtype(idx.size)
        sel = CSR(np.ones(idx.size, g.dtype), order.astype(it), np.append(starts, idx.size).astype(it),
                  (starts.size, idx.size))
        data = np.asarray(to_scipy(np, sel) @ g.reshape(idx.size, -1)).astype(g.dtype, copy=False)
        return RowSparse(data.reshape((starts.size,) + tuple(shape[1:])), sorted_idx[starts], shape)
    rows, inverse = xp.unique(idx, return_inverse=True)
    data = xp.zeros((rows.shape[0],) + tuple(shape[1:]), dtype=g.dtype)
    xp.add.at(data, inverse.reshape(-1), g)
    return RowSparse(data, rows, shape)


# -- lazy optimizer updates (MXNet lazy_update: only the rows the gradient stores) ------------
def _prepared(xp, grad, rescale_grad, clip_gradient):
    g = grad * rescale_grad if rescale_grad != 1.0 else grad
    if clip_gradient is not None and clip_gradient > 0:
        g = xp.clip(g, -clip_gradient, clip_gradient)
    return g


def sgd_rows(xp, weight, rows, grad, lr, wd=0.0, rescale_grad=1.0, clip_gradient=None,
             momentum=0.0, mom=None) -> None:
    """In place on ``rows`` only (a row_sparse gradient's indices, or ``slice(None)``):
    ``weight[rows] -= lr * (g + wd * weight[rows])``; with momentum
    ``mom[rows] = momentum * mom[rows] - lr * (...)`` and ``weight[rows] += mom[rows]``."""
    w = weight[rows]
    g = _prepared(xp, grad, rescale_grad, clip_gradient) + wd * w
    if mom is not None and momentum:
        m = momentum * mom[rows] - lr * g
        mom[rows] = m
        weight[rows] = w + m
    else:
        weight[rows] = w - lr * g


def adam_rows(xp, weight, rows, grad, mean, var, lr, beta1=0.9, beta2=0.999, epsilon=1e-8,
              wd=0.0, rescale_grad=1.0, clip_gradient=None) -> None:
    """In place on ``rows`` only: MXNet's ``adam_update`` (``lr`` already bias-corrected)."""
    w = weight[rows]
    g = _prepared(xp, grad, rescale_grad, clip_gradient) + wd * w
    m = beta1 * mean[rows] + (1.0 - beta1) * g
    v = beta2 * var[rows] + (1.0 - beta2) * g * g
    mean[rows] = m
    var[rows] = v
    weight[rows] = w - lr * m / (xp.sqrt(v) + epsilon)
