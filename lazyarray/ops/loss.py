"""Per-row softmax cross-entropy by indexing: ``nn.softmax_cross_entropy_rows`` and its gradient
``nn.softmax_cross_entropy_rows_grad``.

``SoftmaxCrossEntropyLoss`` (``blocks/loss.py``) with integer labels wrote the loss as
``sum(log_softmax(pred) * -one_hot(label))``: a one-hot array, a product and a sum forward, and a
backward of five nodes (the sum's broadcast, the product, log_softmax's rule). By hand one picks the
label's log-probability, and the gradient is ``softmax - one_hot`` done by subtracting at the
labels' positions. These two ops are that: one kernel forward, one backward, and the same values
bit for bit as the one-hot formula (the row's log-sum-exp is computed in the same order, and adding
the one-hot's zeros changes nothing).

When a forward and its backward compile together, ``graph/passes/forward_saves.py`` rewrites the
pair: ``softmax_cross_entropy_rows_with_probs`` gives the loss and the probabilities (the forward
has them in hand), and ``softmax_cross_entropy_rows_grad_saved`` scales them and subtracts at the
labels (no second pass over the row maxima, exponentials and sums); the same values bit for bit.

Labels index the last axis of ``logits``; a label outside ``[0, classes)``, negative ones included,
raises ``IndexError`` (named ``OpIndexError`` by the kernel wrapper): a negative label is far more
often a masked row than a class counted from the end.

``nn.class_labels`` checks class labels where a loss reads them (``SoftmaxCrossEntropyLoss`` with
float labels, or with ``axis`` / ``from_logits`` paths that pick by a one-hot array): whole numbers in
``[0, classes)``, refused at run time with the loss, the value and its index (a float 1.9 is an
error, not class 1), handed on as int64.
"""
from __future__ import annotations

import numpy as np

from ..errors import DTypeError, ParamValueError
from .nn import check_label_rows, check_label_values, sce_dtype
from .params import INT, Param, choice
from .registry import OpDef, register


def _rows_shape(shapes):
    lg, lb = shapes[0], shapes[1]
    check_label_rows(lg, lb)
    return tuple(b if b is not None else a for a, b in zip(lg[:-1], lb))


_rows_dtype = sce_dtype  # (the same rule as softmax_cross_entropy: float logits, integer labels)


def _shifted(xp, x2):
    """``(x - max, log(sum(exp(x - max))))`` per row of a matrix: log_softmax's own order of
    operations, so ``s - lse`` is its result bit for bit (NumPy: the reductions called directly,
    as ``ndarray.max`` and ``sum`` call them, without their Python wrappers)."""
    if xp is np:
        s = np.subtract(x2, np.maximum.reduce(x2, axis=1, keepdims=True))
        lse = np.add.reduce(np.exp(s), axis=1, keepdims=True)
    else:
        s = x2 - x2.max(axis=1, keepdims=True)
        lse = xp.exp(s).sum(axis=1, keepdims=True)
    xp.log(lse, out=lse)
    return s, lse


def _label_index(xp, labels, rows: int, classes: int):
    """``(row numbers, labels)``: the labels' places in the (rows, classes) matrix, for NumPy's
    fancy indexing (a label outside ``[0, classes)`` raises IndexError)."""
    check_label_values(labels, classes)
    return xp.arange(rows), labels.reshape(-1)


def _sce_rows(xp, logits, labels, out=None):
    classes = logits.shape[-1]
    x2 = logits.reshape(-1, classes)
    s, lse = _shifted(xp, x2)
    picked = s[_label_index(xp, labels, *x2.shape)]
    res = xp.subtract(lse[:, 0], picked, out=None if out is None else out.reshape(-1))
    return res.reshape(labels.shape) if out is None else out


def _sce_rows_grad(xp, logits, labels, g, out=None):
    """``(softmax(logits) - one_hot(labels)) * g[..., None]``: exp of log_softmax (as its gradient
    rule computes it), scaled by the row's head gradient, minus the head gradient at the label."""
    classes = logits.shape[-1]
    x2 = logits.reshape(-1, classes)
    s, lse = _shifted(xp, x2)
    res = s if out is None else out.reshape(x2.shape)
    xp.subtract(s, lse, out=res)
    xp.exp(res, out=res)
    g1 = g.reshape(-1, 1)
    xp.multiply(res, g1, out=res)
    res[_label_index(xp, labels, *x2.shape)] -= g1[:, 0]  # (one label per row: no repeated places)
    return res.reshape(logits.shape) if out is None else out


register(OpDef(
    "softmax_cross_entropy_rows", ("logits", "labels"), _sce_rows, shape=_rows_shape, dtype=_rows_dtype,
    writes_out=True, namespace="nn",
    grad=lambda F, ins, y, g: [F.softmax_cross_entropy_rows_grad(ins[0], ins[1], g), None],
    doc="per row: -log_softmax(logits)[..., label], labels integer class indices of the last axis"))
def _sce_rows_grad_grad(F, ins, y, gg):
    """The gradient's own gradient (a gradient of a gradient through the loss): with ``p`` the
    softmax and ``t = gg * g[..., None]``, ``p * (t - sum(t * p))`` for the logits and
    ``sum(gg * (p - one_hot))`` for ``g``."""
    z, labels, g = ins
    p = F.softmax(z, axis=-1)
    t = F.multiply(gg, F.expand_dims(g, axis=-1))
    dz = F.multiply(p, F.subtract(t, F.sum(F.multiply(t, p), axis=-1, keepdims=True)))
    dg = F.sum(F.multiply(gg, F.softmax_cross_entropy_rows_grad(z, labels, F.ones_like(g))), axis=-1)
    return [dz, None, dg]


register(OpDef(
    "softmax_cross_entropy_rows_grad", ("logits", "labels", "g"), _sce_rows_grad, grad=_sce_rows_grad_grad,
    shape=lambda shapes: tuple(shapes[0]), dtype=lambda dtypes: dtypes[0], writes_out=True, namespace="nn",
    doc="softmax_cross_entropy_rows' gradient: (softmax(logits) - one_hot(labels)) * g[..., None]"))


def _sce_rows_with_probs(xp, logits, labels, out=None):
    """``(loss per row, softmax(logits))``: the probabilities are ``exp(log_softmax)`` as the
    gradient kernel computes them."""
    classes = logits.shape[-1]
    x2 = logits.reshape(-1, classes)
    s, lse = _shifted(xp, x2)
    loss = xp.empty(labels.shape, logits.dtype) if out is None else out[0]
    probs = xp.empty(logits.shape, logits.dtype) if out is None else out[1]
    xp.subtract(lse[:, 0], s[_label_index(xp, labels, *x2.shape)], out=loss.reshape(-1))
    p2 = probs.reshape(x2.shape)
    xp.subtract(s, lse, out=p2)
    xp.exp(p2, out=p2)
    return loss, probs


def _sce_rows_grad_saved(xp, probs, labels, g, out=None):
    """``(probs - one_hot(labels)) * g[..., None]`` from the saved probabilities."""
    classes = probs.shape[-1]
    p2 = probs.reshape(-1, classes)
    g1 = g.reshape(-1, 1)
    res = xp.multiply(p2, g1, out=None if out is None else out.reshape(p2.shape))
    res[_label_index(xp, labels, *p2.shape)] -= g1[:, 0]
    return res.reshape(probs.shape) if out is None else out


register(OpDef(
    "softmax_cross_entropy_rows_with_probs", ("logits", "labels"), _sce_rows_with_probs, num_outputs=2,
    shape=lambda shapes: [_rows_shape(shapes), tuple(shapes[0])], dtype=lambda dtypes: [_rows_dtype(dtypes)] * 2,
    writes_out=True, namespace="nn",
    doc="softmax_cross_entropy_rows and softmax(logits) at once: the form a compiled training step "
        "uses (graph/passes/forward_saves.py; no gradient of its own)"))
register(OpDef(
    "softmax_cross_entropy_rows_grad_saved", ("probs", "labels", "g"), _sce_rows_grad_saved,
    shape=lambda shapes: tuple(shapes[0]), dtype=lambda dtypes: dtypes[0], writes_out=True, namespace="nn",
    doc="softmax_cross_entropy_rows' gradient from saved probabilities: (probs - one_hot(labels)) * g[..., None]"))


LABEL_READERS = ("SoftmaxCrossEntropyLoss", "CTCLoss", "labels")  # (who reads the labels: named in the error)


def _class_labels(xp, labels, classes, loss="labels", out=None):
    check_label_values(labels, classes, loss)
    return labels.astype(np.int64)


def _class_labels_dtype(dtypes, classes, loss="labels"):
    if dtypes[0].kind not in "iuf":
        raise DTypeError(f"{loss}: class labels must be integers or whole-number floats, got {dtypes[0]}")
    return np.dtype(np.int64)


register(OpDef(
    "class_labels", ("labels",), _class_labels,
    params=(Param("classes", INT, check=lambda v, op: _positive(v, op)),
            Param("loss", choice(*LABEL_READERS), "labels")),
    shape=lambda shapes, classes, loss="labels": tuple(shapes[0]), dtype=_class_labels_dtype, namespace="nn",
    doc="labels checked as class indices in [0, classes) (whole numbers; the loss, value and index named "
        "when not) and cast to int64"))


def _positive(v, op):
    if v < 1:
        raise ParamValueError(f"{op}: classes must be >= 1, got {v}")
