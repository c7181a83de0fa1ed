"""``la.sparse``: sparse arrays (MXNet's storage model) and lazy optimizer updates.

Two storage types besides ``"default"`` (dense):

* ``csr`` (2-D): ``data`` (the stored values), ``indices`` (their columns) and ``indptr``
  (row ``i`` stores ``data[indptr[i]:indptr[i + 1]]``);
* ``row_sparse``: ``data`` (the stored rows) and ``indices`` (their row numbers, sorted); all
  other rows are zero. Gradients of embeddings and of ``dot(csr, W)`` w.r.t. ``W`` take it.

Ops with a sparse kernel keep or produce sparse storage (``relu(csr)`` is csr, ``dot(csr, W)``
is dense, ``la.dot(csr, g, transpose_a=True)`` is row_sparse); every other op densifies its
sparse inputs and warns once (``LAZYARRAY_STORAGE_FALLBACK_WARN=0`` silences it).

``csr.T`` is a csr again (transposed by scipy), so ``la.dot(csr.T, g)`` is *dense*; write
``la.dot(csr, g, transpose_a=True)`` (MXNet's spelling) for the row_sparse product that
touches only the rows of the columns the csr stores.

>>> import numpy as np, lazyarray as la
>>> x = la.sparse.csr_matrix(([1.0, 2.0, 3.0], [0, 2, 1], [0, 2, 2, 3]), shape=(3, 3))
>>> x.stype, x.indptr.asnumpy().tolist()
('csr', [0, 2, 2, 3])
>>> la.relu(x * 2.0).asnumpy()
array([[2., 0., 4.],
       [0., 0., 0.],
       [0., 6., 0.]], dtype=float32)
"""
from __future__ import annotations

import numpy as np

from .args import choice_arg, number_arg
from .aval import STYPES, as_dtype, check_alloc, check_shape
from .creation import checked_shape, creation_device
from .device import Device, current_device, to_device
from .errors import DeviceError, ParamError, ParamValueError, ShapeError, fmt_shape
from .ndarray import NDArray, make_array
from .ops.sparse_kernels import adam_rows, scipy_sparse, sgd_rows
from .ops.sparse_kernels import from_scipy as _csr_from_scipy
from .storage import CSR, RowSparse, densify, index_dtype, stype_of

__all__ = ["adam_update", "csr_matrix", "from_scipy", "row_sparse_array", "sgd_update", "zeros"]

_HOST = Device("cpu", 0)


def _on(device: Device | None, parts):
    dev = current_device() if device is None else device
    if dev.kind == "cpu":
        return dev, parts
    return dev, [to_device(p, _HOST, dev) for p in parts]


def _dtype_of(data, dtype):
    if dtype is not None:
        return as_dtype(dtype, "sparse")
    arr = np.asarray(data)
    # Python floats default to float32 as in la.array; NumPy arrays keep their dtype
    return np.dtype(np.float32) if arr.dtype == np.float64 and not isinstance(data, np.ndarray) else arr.dtype


def csr_matrix(arg1, shape=None, dtype=None, device: Device | None = None) -> NDArray:
    """A csr array from ``(data, indices, indptr)``, a scipy.sparse matrix, or a dense 2-D array.

    The triple is checked (lengths, index ranges) and put in canonical form (sorted columns,
    duplicates summed), as scipy.sparse does.

    >>> import lazyarray as la
    >>> la.sparse.csr_matrix(([5.0], [1], [0, 0, 1]), shape=(2, 3)).asnumpy()
    array([[0., 0., 0.],
           [0., 5., 0.]], dtype=float32)
    """
    if isinstance(arg1, NDArray):
        return arg1.tostype("csr") if dtype is None else arg1.astype(dtype).tostype("csr")
    sp = scipy_sparse(np)  # imported on first use (see ops.sparse_kernels)
    if sp.issparse(arg1):
        m = arg1
    elif isinstance(arg1, tuple) and len(arg1) == 3:
        if shape is None:
            raise ShapeError("csr_matrix((data, indices, indptr)): pass shape=(rows, cols); it cannot be "
                             "read off the indices when trailing rows or columns are empty")
        data, indices, indptr = arg1
        dt = _dtype_of(data, dtype)
        try:
            m = sp.csr_matrix((np.asarray(data, dtype=dt), np.asarray(indices), np.asarray(indptr)),
                               shape=tuple(shape))
            m.check_format(full_check=True)
        except ValueError as exc:
            raise ShapeError(f"csr_matrix: inconsistent (data, indices, indptr) for shape {tuple(shape)}: {exc}; "
                             "indptr needs rows + 1 non-decreasing entries ending at len(data), "
                             "indices one column < cols per value") from None
    else:
        dense = np.asarray(arg1)
        if dense.ndim != 2:
            raise ShapeError(f"csr_matrix: needs a 2-D array, got shape {dense.shape}")
        m = sp.csr_matrix(dense)
        if shape is not None and tuple(shape) != m.shape:
            raise ShapeError(f"csr_matrix: shape {tuple(shape)} does not match the array's {m.shape}")
    if dtype is not None:
        m = m.astype(as_dtype(dtype, "csr_matrix"))
    c = _csr_from_scipy(m)
    dev, (d, i, p) = _on(device, [c.data, c.indices, c.indptr])
    return make_array(CSR(d, i, p, c.shape), None, dev)


def from_scipy(m, device: Device | None = None) -> NDArray:
    """A csr array from any scipy.sparse matrix or array (converted to CSR, canonical form)."""
    if not scipy_sparse(np).issparse(m):
        raise ParamError(f"from_scipy: needs a scipy.sparse matrix, got {type(m).__name__}; for dense data use "
                         "la.array, then la.cast_storage")
    return csr_matrix(m, device=device)


def row_sparse_array(arg1, shape=None, dtype=None, device: Device | None = None) -> NDArray:
    """A row_sparse array from ``(data, indices)`` (row ``indices[k]`` is ``data[k]``) or a dense array.

    >>> import lazyarray as la
    >>> la.sparse.row_sparse_array(([[1.0, 2.0]], [2]), shape=(4, 2)).asnumpy()
    array([[0., 0.],
           [0., 0.],
           [1., 2.],
           [0., 0.]], dtype=float32)
    """
    if isinstance(arg1, NDArray):
        return arg1.tostype("row_sparse")
    if not (isinstance(arg1, tuple) and len(arg1) == 2):
        dense = np.asarray(arg1)
        dt = _dtype_of(arg1, dtype)
        rsp = RowSparse.from_dense(dense.astype(dt, copy=False))
    else:
        data, indices = arg1
        dt = _dtype_of(data, dtype)
        data = np.asarray(data, dtype=dt)
        idx = np.asarray(indices).astype(np.int64).reshape(-1)
        if shape is None:
            raise ShapeError("row_sparse_array((data, indices)): pass shape=(rows, ...)")
        shape = tuple(int(d) for d in shape)
        if data.shape != (idx.shape[0],) + shape[1:]:
            raise ShapeError(f"row_sparse_array: data has shape {data.shape}, expected "
                             f"{(idx.shape[0],) + shape[1:]} (one row of shape {shape[1:]} per index)")
        if idx.size and (idx.min() < 0 or idx.max() >= shape[0]):
            raise ShapeError(f"row_sparse_array: row indices must be in [0, {shape[0]}), got {idx.tolist()}")
        order = np.argsort(idx, kind="stable")
        idx, data = idx[order], data[order]
        if idx.size > 1 and np.any(idx[1:] == idx[:-1]):
            raise ParamValueError("row_sparse_array: row indices must be unique; sum the duplicate rows first")
        rsp = RowSparse(data, idx, shape)
    dev, (d, i) = _on(device, [rsp.data, rsp.indices])
    return make_array(RowSparse(d, i, rsp.shape), None, dev)


def zeros(stype: str, shape, dtype="float32", device: Device | None = None) -> NDArray:
    """An all-zero array of storage ``stype`` (nothing stored)."""
    choice_arg(stype, "la.sparse.zeros", "stype", STYPES)
    shape = checked_shape(shape, "la.sparse.zeros")
    if not all(isinstance(d, int) for d in shape):
        raise ShapeError(f"la.sparse.zeros: shape {fmt_shape(shape)} must be concrete sizes (ints), not la.Dim")
    dt = as_dtype(dtype, "sparse.zeros")
    dev = creation_device(device)
    if stype == "csr":
        if len(shape) != 2:
            raise ShapeError(f"sparse.zeros: csr is 2-D, got shape {shape}")
        it = index_dtype(*shape)
        check_alloc("la.sparse.zeros", (shape[0] + 1,), it, "csr index pointer")
        val = CSR(np.zeros(0, dt), np.zeros(0, it), np.zeros(shape[0] + 1, it), shape)
    elif stype == "row_sparse":
        check_shape("la.sparse.zeros", shape, dt)
        val = RowSparse(np.zeros((0,) + shape[1:], dt), np.zeros(0, np.int64), shape)
    else:
        val = np.zeros(check_alloc("la.sparse.zeros", shape, dt), dt)
    if dev.kind != "cpu":
        return make_array(val, None, _HOST).to(dev)
    return make_array(val, None, dev)


# -- optimizer updates: lazy on row_sparse gradients ----------------------------------------------
def _writable(name: str, *arrays: tuple[str, NDArray | None]):
    """The backend values of ``(argument name, array)`` pairs updated in place (``None`` for an
    optional state not given); the first is the weight, and every other one must match its shape."""
    vals = []
    weight = arrays[0][1]
    for arg, a in arrays:
        if a is None and arg in _OPTIONAL_STATES:
            vals.append(None)
            continue
        if not isinstance(a, NDArray):
            raise ParamError(f"{name}: {arg} must be an array, updated in place, got {type(a).__name__} {a!r}"[:200])
        if a.is_lazy:
            raise ParamValueError(f"{name}: {arg} must be a normal (computed) array, updated in place, not a lazy "
                                  "one; compute it first (outside la.deferred())")
        v = a._materialize()
        if stype_of(v) != "default":
            raise ParamValueError(f"{name}: weights and states must be dense, got {stype_of(v)!r} for {arg}")
        if a is not weight and a.shape != weight.shape:
            raise ShapeError(f"{name}: {arg} has shape {fmt_shape(a.shape)} but weight has {fmt_shape(weight.shape)}; "
                             "states are the weight's shape")
        vals.append(v)
    if weight.ndim == 0:
        raise ShapeError(f"{name}: weight is 0-d; the update works on rows (a weight of 1 or more dims)")
    dev = weight.device
    if any(a is not None and a.device != dev for _, a in arrays):
        raise DeviceError(f"{name}: weight, gradient and states must live on one device")
    return vals


_OPTIONAL_STATES = ("mom",)


def _gradient(name: str, grad, weight: NDArray):
    """``grad``'s backend value, checked against the weight (an array of its shape, on its device)."""
    if not isinstance(grad, NDArray):
        raise ParamError(f"{name}: grad must be an array of the weight's shape {fmt_shape(weight.shape)}, got "
                         f"{type(grad).__name__} {grad!r}"[:200])
    if grad.shape != weight.shape:
        raise ShapeError(f"{name}: grad has shape {fmt_shape(grad.shape)} but weight has {fmt_shape(weight.shape)}")
    if grad.device != weight.device:
        raise DeviceError(f"{name}: grad is on {grad.device} but weight on {weight.device}; move it with "
                          f"grad.to({str(weight.device)!r})")
    return grad._materialize()


def _rates(name: str, clip_gradient, **rates) -> None:
    """Scalar hyper-parameters: finite numbers (``clip_gradient`` may be None: no clipping)."""
    for arg, value in rates.items():
        number_arg(value, name, arg)
    if clip_gradient is not None:
        number_arg(clip_gradient, name, "clip_gradient (or None)")


def sgd_update(weight: NDArray, grad: NDArray, lr: float, wd: float = 0.0, rescale_grad: float = 1.0,
               clip_gradient: float | None = None, momentum: float = 0.0, mom: NDArray | None = None,
               lazy_update: bool = True) -> NDArray:
    """SGD step in place: ``weight -= lr * (rescale_grad * grad + wd * weight)`` (with momentum
    when ``mom`` is given). A row_sparse ``grad`` with ``lazy_update`` touches only its rows
    (weight decay too), as MXNet's ``sgd_update(lazy_update=True)``.

    >>> import lazyarray as la
    >>> w = la.ones((3, 2)); g = la.sparse.row_sparse_array(([[1.0, 1.0]], [1]), shape=(3, 2))
    >>> la.sparse.sgd_update(w, g, lr=0.5, wd=0.1).asnumpy()[:, 0].tolist()
    [1.0, 0.44999998807907104, 1.0]
    """
    _rates("la.sparse.sgd_update", clip_gradient, lr=lr, wd=wd, rescale_grad=rescale_grad, momentum=momentum)
    w, m = _writable("la.sparse.sgd_update", ("weight", weight), ("mom", mom))
    xp = weight.device.xp
    g = _gradient("la.sparse.sgd_update", grad, weight)
    rows, gdata = _rows_of(g, lazy_update, xp)
    sgd_rows(xp, w, rows, gdata, lr, wd, rescale_grad, clip_gradient, momentum, m)
    return weight


def _rows_of(g, lazy_update: bool, xp):
    """(rows to update, their gradient): the stored rows of a row_sparse gradient, or all rows."""
    if isinstance(g, RowSparse) and lazy_update:
        return g.indices, g.data
    return slice(None), densify(g, xp)


def adam_update(weight: NDArray, grad: NDArray, mean: NDArray, var: NDArray, lr: float, beta1: float = 0.9,
                beta2: float = 0.999, epsilon: float = 1e-8, wd: float = 0.0, rescale_grad: float = 1.0,
                clip_gradient: float | None = None, lazy_update: bool = True) -> NDArray:
    """Adam step in place (MXNet ``adam_update``: ``lr`` already bias-corrected). A row_sparse
    ``grad`` with ``lazy_update`` updates ``weight``, ``mean`` and ``var`` only at its rows."""
    _rates("la.sparse.adam_update", clip_gradient, lr=lr, beta1=beta1, beta2=beta2, epsilon=epsilon, wd=wd,
           rescale_grad=rescale_grad)
    w, m, v = _writable("la.sparse.adam_update", ("weight", weight), ("mean", mean), ("var", var))
    xp = weight.device.xp
    g = _gradient("la.sparse.adam_update", grad, weight)
    rows, gdata = _rows_of(g, lazy_update, xp)
    adam_rows(xp, w, rows, gdata, m, v, lr, beta1, beta2, epsilon, wd, rescale_grad, clip_gradient)
    return weight
