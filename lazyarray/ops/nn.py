"""Linear algebra and neural-network ops: ``dot``, ``matmul``, ``nn.dense``, ``nn.softmax``,
``nn.log_softmax``, ``nn.softmax_cross_entropy``, ``nn.one_hot`` / ``nn.one_hot_like`` and
``nn.dropout``.

Gradient rules read static shapes (``aval.shape``) only where every dim they use is known;
a data-dependent dim (``None``, e.g. after a boolean mask in deferred compute) is read from
the array when the graph runs instead (``*_like`` ops, ``size``), never assumed."""
from __future__ import annotations

import math

import numpy as np

from ..device import Device
from ..errors import DTypeError, ParamValueError, ShapeError, fmt_shape
from ..rng import generator
from . import sparse_kernels
from .params import BOOL, DTYPE, FLOAT, INT, OPT_BOOL, Param
from .reduce import element_count
from .registry import OpDef, broadcast_shapes, normalize_axis, register
from .weight_pack import packed_operand


def _mismatch(op, a, b, ka, kb):
    return ShapeError(f"inner dims differ: {fmt_shape(a)} (dim {ka}) vs {fmt_shape(b)} (dim {kb}); "
                      f"the last dim of the first must equal the {'first' if len(b) == 1 else 'second-to-last'} "
                      "dim of the second (transpose one?)")


def _same(d1, d2):
    return d1 is None or d2 is None or d1 == d2


def _reshape_to(F, x, like):
    """``x`` reshaped to ``like``'s shape: a static reshape when it is known, else read at run time."""
    return F.reshape(x, shape=like.aval.shape) if like.aval.known else F.reshape_like(x, like)


def _dot_rule(shapes):
    a, b = shapes
    kb = 0 if len(b) == 1 else len(b) - 2
    if not _same(a[-1], b[kb]):
        raise _mismatch("dot", a, b, len(a) - 1, kb)
    if len(b) == 1:
        return tuple(a[:-1])
    return tuple(a[:-1]) + tuple(b[:-2]) + (b[-1],)


def _dot_shape(shapes, transpose_a=False):
    a, b = shapes
    if transpose_a:
        if len(a) != 2:
            raise ShapeError(f"transpose_a needs a 2-D first operand, got {fmt_shape(a)}; "
                             "use transpose and dot for other ranks")
        a = a[::-1]
    if not a:
        return tuple(b)
    if not b:
        return tuple(a)
    return _dot_rule([a, b])


def _dot_kernel(xp, a, b, transpose_a=False, out=None):
    return xp.dot(a.T if transpose_a else a, b)


def _dot_storage(stypes, shapes, transpose_a=False):
    # csr @ dense -> dense; csr.T @ dense -> row_sparse (only the rows of the columns the csr
    # stores are non-zero): that is the gradient of dot(csr, W) w.r.t. W.
    if list(stypes) != ["csr", "default"] or shapes[1] is None:
        return None
    if not transpose_a:
        return ["default"] if len(shapes[1]) in (1, 2) else None
    return ["row_sparse"] if len(shapes[1]) == 2 else None


def _dot_grad(F, ins, y, g, transpose_a=False):
    a, b = ins
    if transpose_a:  # y = a.T b: da = b g.T, db = a g
        if b.aval.ndim == 1:
            da = F.dot(F.expand_dims(b, axis=1), F.expand_dims(g, axis=0))
        else:
            da = F.dot(b, F.transpose(g))
        return [da, F.dot(a, g)]
    na, nb = a.aval.ndim, b.aval.ndim
    if na == 0 or nb == 0:
        return [F.multiply(g, b) if na else F.sum(F.multiply(g, b)),
                F.multiply(g, a) if nb else F.sum(F.multiply(g, a))]
    if na > 2 or nb > 2:
        raise ShapeError("dot: gradients are defined for 1-D and 2-D inputs; use matmul for batches")
    # Lift 1-D operands to matrices, take the matrix gradients, drop the lifted dims again.
    a2 = a if na == 2 else F.expand_dims(a, axis=0)
    b2 = b if nb == 2 else F.expand_dims(b, axis=1)
    g2 = g
    if na == 1:
        g2 = F.expand_dims(g2, axis=0)
    if nb == 1:
        g2 = F.expand_dims(g2, axis=-1)
    da = F.dot(g2, F.transpose(b2))
    db = F.dot(a2, g2, transpose_a=True)  # row_sparse when a is csr
    return [_reshape_to(F, da, a) if na == 1 else da,
            _reshape_to(F, db, b) if nb == 1 else db]


register(OpDef("dot", ("a", "b"), _dot_kernel, params=(Param("transpose_a", BOOL, False),), shape=_dot_shape,
               dtype=lambda dtypes, transpose_a=False: np.result_type(*dtypes), grad=_dot_grad,
               storage=_dot_storage, sparse_kernel=sparse_kernels.csr_dot,
               doc="NumPy dot: inner product over the last dim of a and the second-to-last of b; "
                   "transpose_a=True (2-D a) computes a.T @ b (csr a: a row_sparse result)"))


def _matmul_rule(shapes):
    a, b = shapes
    if not a or not b:
        raise ShapeError("matmul does not take 0-d arrays; use multiply")
    a2 = (1,) + tuple(a) if len(a) == 1 else tuple(a)
    b2 = tuple(b) + (1,) if len(b) == 1 else tuple(b)
    if not _same(a2[-1], b2[-2]):
        raise _mismatch("matmul", a, b, len(a) - 1, max(len(b) - 2, 0))
    batch = broadcast_shapes(a2[:-2], b2[:-2])
    out = batch + (a2[-2], b2[-1])
    if len(a) == 1:
        out = out[:-2] + out[-1:]
    if len(b) == 1:
        out = out[:-1]
    return out


def _swap(F, x):
    nd = x.aval.ndim
    return F.transpose(x, axes=tuple(range(nd - 2)) + (nd - 1, nd - 2))


def _matmul_grad(F, ins, y, g):
    a, b = ins
    a2 = a if a.aval.ndim > 1 else F.expand_dims(a, axis=0)
    b2 = b if b.aval.ndim > 1 else F.expand_dims(b, axis=-1)
    # Lift g to the shape of a2 @ b2 (1-D @ 1-D gives a 0-d g: both lifted dims come back).
    if a.aval.ndim == 1 and b.aval.ndim == 1:
        g2 = F.reshape(g, shape=(1, 1))
    elif a.aval.ndim == 1:
        g2 = F.expand_dims(g, axis=-2)
    elif b.aval.ndim == 1:
        g2 = F.expand_dims(g, axis=-1)
    else:
        g2 = g
    da = F.matmul(g2, _swap(F, b2))
    db = F.matmul(_swap(F, a2), g2)
    # Batch dims that broadcast are summed back by the gradient pass; lifted dims are dropped here
    # (summed to the lifted operand's shape: read at run time when its length is data-dependent).
    if a.aval.ndim == 1:
        k = a.aval.shape[0]
        da = _reshape_to(F, F.sum_to(da, shape=(1, k)) if k is not None else F.sum_like(da, a2), a)
    if b.aval.ndim == 1:
        k = b.aval.shape[0]
        db = _reshape_to(F, F.sum_to(db, shape=(k, 1)) if k is not None else F.sum_like(db, b2), b)
    return [da, db]


def _matmul(xp, a, b, out=None):
    if a.ndim == 2 and b.ndim == 2 and a.shape[1] == 1:  # an outer product (dense's weight gradient at
        return xp.multiply(a, b, out=out)  # batch 1): NumPy's matmul takes a slow non-BLAS loop for K=1
    if a.ndim > 2 and b.ndim == 2:
        return rows_matmul(xp, a, b, out)
    if a.ndim == 2 and b.ndim == 2 and b.base is not None:  # x @ w.T: a packed copy (weight_pack.py)
        b = packed_operand(b, a.shape[0])
    if xp is np and b.ndim > 2 and b.strides[-2] == b.itemsize and b.shape[-1] > 1 and b.shape[-2] > 1:
        # a stack of column-major matrices (K^T in attention, a transposed view): NumPy's matmul runs
        # it about 1.25x slower than on a C-ordered copy (measured on (32, 2, 64, 64) float32, a copy
        # included); stacked a operands of either order run at full speed
        b = np.ascontiguousarray(b)
    return xp.matmul(a, b, out=out)


def rows_matmul(xp, a, b, out=None):
    """``a @ b`` for a stack ``a`` (..., k) and a matrix ``b``: one (rows, k) @ (k, n) product when ``a``
    is contiguous. NumPy otherwise runs one small product per leading index (a (32, 64, 128) input
    times a weight: 32 products of 64 rows, 1.1-1.5x slower than one of 2048 rows)."""
    if not a.flags.c_contiguous or (out is not None and not out.flags.c_contiguous):
        return xp.matmul(a, b, out=out)
    shape = a.shape[:-1] + (b.shape[1],)
    rows = math.prod(a.shape[:-1])  # (not -1: a reshape cannot infer it when k or n is 0)
    res = xp.matmul(a.reshape(rows, a.shape[-1]), b, out=None if out is None else out.reshape(rows, b.shape[1]))
    return out if out is not None else res.reshape(shape)


def _matmul_storage(stypes, shapes):
    """``csr @ dense`` (a 1-D or 2-D dense operand) runs the sparse product, as ``dot`` does."""
    if list(stypes) != ["csr", "default"] or shapes[1] is None or len(shapes[1]) not in (1, 2):
        return None
    return ["default"]


def _csr_matmul(xp, a, b, out=None):
    y = sparse_kernels.csr_dot(xp, a, b)
    if out is not None:
        out[...] = y
        return out
    return y


register(OpDef("matmul", ("a", "b"), _matmul, writes_out=True,
               shape=_matmul_rule, dtype=lambda dtypes: np.result_type(*dtypes), grad=_matmul_grad,
               storage=_matmul_storage, sparse_kernel=_csr_matmul,
               doc="matrix product with broadcast batch dims (the @ operator); csr @ dense runs the sparse product"))


# -- dense -------------------------------------------------------------------------------------
def _dense(xp, x, weight, bias=None, out=None):
    """The reference kernel: ``x @ weight.T + bias`` as one ``matmul``. The kernels layer
    (``kernels/dense.py``) runs faster ways for the layouts and sizes programs hand it."""
    y = xp.matmul(x, weight.T, out=out)
    if bias is not None:
        y += bias
    return y


def _dense_rule(shapes):
    x, w = shapes[0], shapes[1]
    if len(w) != 2:
        raise ShapeError(f"weight must be 2-D (units, in_units), got {fmt_shape(w)}")
    if not x or not _same(x[-1], w[1]):
        raise ShapeError(f"input {fmt_shape(x)} has {x[-1] if x else 0} features but weight "
                         f"{fmt_shape(w)} expects {w[1]}; the weight is (units, in_units)")
    units = w[0]
    if len(shapes) == 3:
        b = shapes[2]
        if len(b) != 1 or not _same(b[0], w[0]):
            raise ShapeError(f"bias {fmt_shape(b)} must be ({w[0]},) to match weight {fmt_shape(w)}")
        units = w[0] if w[0] is not None else b[0]
    return tuple(x[:-1]) + (units,)


def _rows(F, t, k):
    """``t`` as a matrix (N, k): its leading dims flattened; ``k`` = its last dim, if known."""
    nd = t.aval.ndim
    if nd == 2:
        return t
    k = t.aval.shape[-1] if k is None else k
    if k == 0:  # (a -1 dim cannot be inferred from zero elements: the row count must be given)
        lead = t.aval.shape[:-1]
        if all(type(d) is int or isinstance(d, np.integer) for d in lead):  # (no unknown or symbolic dims)
            return F.reshape(t, shape=(math.prod(lead), 0))
    elif k is not None:
        return F.reshape(t, shape=(-1, k))
    if nd == 1:
        return F.expand_dims(t, axis=0)
    # An unknown last dim: bring it to the front, flatten the rest, and turn back (no static sizes).
    front = F.transpose(t, axes=(nd - 1,) + tuple(range(nd - 1)))
    return F.transpose(F.flatten(front))


def _dense_grad(F, ins, y, g):
    x, w = ins[0], ins[1]
    dx = F.matmul(g, w)
    dw = F.matmul(F.transpose(_rows(F, g, w.aval.shape[0])), _rows(F, x, w.aval.shape[1]))
    grads = [dx, dw]
    if len(ins) == 3:
        grads.append(g)  # summed over the batch dims by the gradient pass
    return grads


register(OpDef("dense", ("x", "weight", "bias?"), _dense, shape=_dense_rule, writes_out=True,
               dtype=lambda dtypes: np.result_type(*dtypes), grad=_dense_grad, namespace="nn",
               doc="fully connected layer: x @ weight.T + bias, weight shaped (units, in_units)"))


# -- softmax family ------------------------------------------------------------------------------
def _axis_shape(shapes, axis=-1):
    normalize_axis(axis, len(shapes[0]), "softmax")
    return shapes[0]


def _float_only(op):
    def rule(dtypes, **params):
        if dtypes[0].kind != "f":
            raise DTypeError(f"needs a floating-point input, got {dtypes[0]}; cast with .astype('float32')")
        return dtypes[0]

    return rule


def _softmax(xp, x, axis=-1, out=None):
    """The reference kernel (the kernels layer's ``softmax.py`` runs large arrays by rows)."""
    if x.size == 0:  # (max has no identity for an empty axis; an empty result has nothing to compute)
        return xp.empty(x.shape, x.dtype)
    e = xp.exp(x - x.max(axis=axis, keepdims=True))
    e /= e.sum(axis=axis, keepdims=True)
    return e


def _log_softmax(xp, x, axis=-1, out=None):
    """The reference kernel (as softmax)."""
    if x.size == 0:  # (as softmax)
        return xp.empty(x.shape, x.dtype)
    s = x - x.max(axis=axis, keepdims=True)
    s -= xp.log(xp.exp(s).sum(axis=axis, keepdims=True))
    return s


register(OpDef(
    "softmax", ("x",), _softmax, params=(Param("axis", INT, -1),), shape=_axis_shape,
    dtype=_float_only("softmax"), namespace="nn",
    grad=lambda F, ins, y, g, axis=-1: [F.multiply(y, F.subtract(g, F.sum(F.multiply(g, y), axis=axis, keepdims=True)))],
    doc="exp(x) / sum(exp(x)) along axis, computed stably",
))
register(OpDef(
    "log_softmax", ("x",), _log_softmax, params=(Param("axis", INT, -1),), shape=_axis_shape,
    dtype=_float_only("log_softmax"), namespace="nn",
    grad=lambda F, ins, y, g, axis=-1: [F.subtract(g, F.multiply(F.exp(y), F.sum(g, axis=axis, keepdims=True)))],
    doc="log(softmax(x)) along axis, computed stably",
))


def _at(labels, flat: int) -> str:
    """``index 3`` (a vector of labels) or ``index (1, 2)``: where the offending label sits."""
    idx = np.unravel_index(flat, labels.shape)
    return f"index {int(idx[0])}" if len(idx) == 1 else f"index {tuple(int(i) for i in idx)}"


def check_label_values(labels, classes: int, loss: str = "SoftmaxCrossEntropyLoss", ignore=None) -> None:
    """Integer class indices in ``[0, classes)``, read by ``loss`` (named in the error with the
    offending value and its index). A float label must hold a whole number: 1.9 is refused
    (``ValueError``, named ``OpValueError``), never truncated to class 1. A negative label is
    refused like one past the end (``IndexError``, named ``OpIndexError``): it is a masked or padded
    row far more often than a class counted from the end. ``ignore``: a boolean mask of the places
    not read (a CTC label sequence's padding). The kernel wrapper names the op, eager and compiled
    alike; the common case costs one min and one max."""
    if not labels.size:
        return
    checked = labels if ignore is None else labels[~ignore]
    if labels.dtype.kind == "f" and checked.size:
        whole = np.isfinite(checked) & (checked == np.trunc(checked))
        if not whole.all():
            flat = np.flatnonzero(~(np.isfinite(labels) & (labels == np.trunc(labels)))
                                  & (True if ignore is None else ~ignore))[0]
            raise ValueError(f"{loss}: label {float(labels.reshape(-1)[flat])} at {_at(labels, flat)} is not a "
                             f"whole number: labels are class indices in [0, {classes}); a float label is "
                             "refused, not truncated (round or cast the labels first if that is meant)")
    if not checked.size:
        return
    low, high = checked.min(), checked.max()
    if low < 0 or high >= classes:
        outside = (labels < 0) | (labels >= classes)
        flat = np.flatnonzero(outside if ignore is None else outside & ~ignore)[0]
        bad = labels.reshape(-1)[flat]
        bad = int(bad) if float(bad).is_integer() else bad
        raise IndexError(f"{loss}: label {bad} is outside [0, {classes}) at {_at(labels, flat)}: labels are "
                         f"class indices of the last axis of logits ({classes} classes); negative labels do "
                         "not count from the end: drop or mask the rows to ignore before the loss")


def _sce(xp, logits, labels, out=None):
    """The reference kernel: ``sce_of`` with the reference log_softmax."""
    return sce_of(xp, logits, labels, _log_softmax)


def sce_of(xp, logits, labels, log_softmax):
    """The mean of ``-log_softmax(xp, logits, -1)`` at the labels (``log_softmax``: a kernel of that op)."""
    check_label_values(labels, logits.shape[-1])
    logp = log_softmax(xp, logits, -1)
    picked = xp.take_along_axis(logp, labels[..., None].astype(np.int64), axis=-1)
    return -picked.mean(dtype=logits.dtype).astype(logits.dtype)


def check_label_rows(lg, lb) -> None:
    """Integer labels ``lb`` for logits ``lg``: one class index per row (logits without the class axis)."""
    if not lg:
        raise ShapeError("logits must have a class axis (last dim)")
    if len(lb) != len(lg) - 1 or not all(_same(a, b) for a, b in zip(lb, lg[:-1])):
        raise ShapeError(f"labels {fmt_shape(lb)} must have the shape of logits {fmt_shape(lg)} "
                         "without its last (class) dim, one integer class index per row")


def _sce_shape(shapes):
    check_label_rows(*shapes)
    return ()


def sce_dtype(dtypes):
    if dtypes[0].kind != "f":
        raise DTypeError(f"logits must be floating point, got {dtypes[0]}")
    if dtypes[1].kind not in "iu":
        raise DTypeError(f"labels must be integer class indices, got {dtypes[1]}; "
                         "cast with labels.astype('int64')")
    return dtypes[0]


def _sce_grad(F, ins, y, g):
    logits, labels = ins
    dtype, depth = logits.aval.dtype, logits.aval.shape[-1]
    # The loss is a mean over the rows: divide by their count, read at run time when a batch
    # dim is data-dependent (e.g. logits[mask] in deferred compute); never count it as 1.
    rows = element_count(F, labels, None, dtype, same_shape=(logits,))
    onehot = (F.one_hot(labels, depth=depth, dtype=dtype) if depth is not None
              else F.one_hot_like(labels, logits))  # the class count known only at run time
    diff = F.subtract(F.softmax(logits, axis=-1), onehot)
    return [F.multiply(diff, F.divide(g, rows)), None]


register(OpDef("softmax_cross_entropy", ("logits", "labels"), _sce, shape=_sce_shape, dtype=sce_dtype,
               grad=_sce_grad, namespace="nn",
               doc="mean over rows of -log softmax(logits)[label]; labels are integer class indices"))


def _one_hot(xp, indices, depth, dtype=np.dtype("float32"), out=None):
    res = xp.zeros(indices.shape + (depth,), dtype=dtype)
    xp.put_along_axis(res, indices[..., None].astype(np.int64), 1, axis=-1)
    return res


register(OpDef("one_hot", ("indices",), _one_hot,
               params=(Param("depth", INT), Param("dtype", DTYPE, np.dtype("float32"))),
               shape=lambda shapes, depth, dtype=None: tuple(shapes[0]) + (depth,),
               dtype=lambda dtypes, depth, dtype=None: dtype, namespace="nn",
               doc="one-hot rows: out[..., indices[...]] = 1"))


def _one_hot_like(xp, indices, like, out=None):
    return _one_hot(xp, indices, like.shape[-1], like.dtype)


def _one_hot_like_shape(shapes):
    ind, like = shapes
    if len(like) != len(ind) + 1 or not all(_same(a, b) for a, b in zip(ind, like)):
        raise ShapeError(f"like {fmt_shape(like)} must have the shape of indices {fmt_shape(ind)} "
                         "plus a last (class) dim")
    return tuple(b if b is not None else a for a, b in zip(ind, like)) + (like[-1],)


register(OpDef("one_hot_like", ("indices", "like"), _one_hot_like, shape=_one_hot_like_shape,
               dtype=lambda dtypes: dtypes[1], namespace="nn",
               grad=lambda F, ins, y, g: [None, None],  # a constant in both inputs
               doc="one-hot rows shaped and typed like `like`: the depth is like's last dim, read when "
                   "it runs (softmax_cross_entropy's gradient over a data-dependent class count)"))


# -- dropout -----------------------------------------------------------------------------------
def _check_p(p, op):
    if not 0.0 <= p < 1.0:
        raise ParamValueError(f"{op}: p must be in [0, 1), got {p}")


def _dropout_mask(xp, x, p, out=None):
    keep = generator_for(xp).random(x.shape) >= p
    return keep.astype(x.dtype) * x.dtype.type(1.0 / (1.0 - p))


def generator_for(xp):
    """The random generator of the array module's first device (dropout masks)."""
    return generator(Device("cpu" if xp is np else "gpu", 0))


register(OpDef("dropout_mask", ("x",), _dropout_mask, params=(Param("p", FLOAT, check=_check_p),),
               dtype=_float_only("dropout"), namespace="nn", random=True,
               grad=lambda F, ins, y, g, p: [None],  # x gives only the shape: dropout's grad is the mask
               doc="a random keep-mask shaped like x, scaled by 1/(1-p) (dropout's noise)"))


def _dropout(F, x, p=0.5, training=None):
    if not training or p == 0.0:
        return x
    return F.multiply(x, F.dropout_mask(x, p=p))


register(OpDef("dropout", ("x",), None,
               params=(Param("p", FLOAT, 0.5, check=_check_p), Param("training", OPT_BOOL, None)),
               compose=_dropout, namespace="nn",
               doc="zero elements with probability p and scale the rest by 1/(1-p) in training mode; "
                   "the identity otherwise (training=None follows la.autograd.is_training())"))
