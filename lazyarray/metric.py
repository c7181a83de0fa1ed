"""``la.metric``: evaluation metrics accumulated over batches, MXNet ``mx.gluon.metric`` semantics.

Each metric takes ``update(labels, preds)`` (two arrays, or two lists of arrays of the same
length; lazyarray or NumPy arrays), reports ``get() -> (name, value)`` over everything seen
since the last ``reset()`` (``nan`` before any update), and computes with NumPy on the host.

>>> import lazyarray as la
>>> acc = la.metric.Accuracy()
>>> acc.update(la.array([0, 1, 1]), la.array([[0.9, 0.1], [0.2, 0.8], [0.6, 0.4]]))
>>> name, value = acc.get()
>>> name, round(value, 4)
('accuracy', 0.6667)
"""
from __future__ import annotations

import math

import numpy as np

from .errors import ParamError, ParamValueError, ShapeError

__all__ = ["Accuracy", "CrossEntropy", "EvalMetric", "Loss", "Perplexity"]


class EvalMetric:
    """Base class: subclasses define ``update_one(label, pred)`` returning ``(sum, count)``.

    >>> import lazyarray as la
    >>> m = la.metric.Accuracy()
    >>> m.get()[0], m.num_inst
    ('accuracy', 0)
    """

    name = "metric"

    def __init__(self):
        self.reset()

    def reset(self) -> None:
        """Forget everything seen."""
        self.sum_metric = 0.0
        self.num_inst = 0

    def update(self, labels, preds) -> None:
        """Add a batch: ``labels`` and ``preds`` are arrays or equally long lists of arrays."""
        labels, preds = _as_list(labels), _as_list(preds)
        if len(labels) != len(preds):
            raise ShapeError(f"{type(self).__name__}.update: {len(labels)} label arrays but {len(preds)} "
                             "prediction arrays; pass one prediction per label")
        for label, pred in zip(labels, preds):
            s, n = self.update_one(_host(label), _host(pred))
            self.sum_metric += float(s)
            self.num_inst += int(n)

    def update_one(self, label: np.ndarray, pred: np.ndarray) -> tuple[float, int]:
        raise NotImplementedError

    def value(self) -> float:
        return self.sum_metric / self.num_inst

    def get(self) -> tuple[str, float]:
        """``(name, value)``; the value is ``nan`` before any update."""
        return self.name, (math.nan if self.num_inst == 0 else self.value())

    def get_name_value(self) -> list[tuple[str, float]]:
        return [self.get()]

    def __repr__(self) -> str:
        name, value = self.get()
        return f"{type(self).__name__}({name}={value})"


class Accuracy(EvalMetric):
    """Fraction of correct predictions; ``preds`` shaped unlike ``labels`` are scores, reduced with
    ``argmax`` over ``axis``.

    >>> import lazyarray as la
    >>> m = la.metric.Accuracy()
    >>> m.update([la.array([1, 0])], [la.array([1, 1])])
    >>> m.get()
    ('accuracy', 0.5)
    """

    name = "accuracy"

    def __init__(self, axis: int = 1):
        self.axis = axis
        super().__init__()

    def update_one(self, label, pred):
        if pred.shape != label.shape:
            pred = pred.argmax(axis=self.axis)
        pred, label = pred.astype(np.int64).ravel(), label.astype(np.int64).ravel()
        if pred.shape != label.shape:
            raise ShapeError(f"Accuracy.update: {label.size} labels but {pred.size} predictions after "
                             f"argmax over axis {self.axis}; pass scores shaped (batch, classes) or class ids")
        return (pred == label).sum(), label.size


class Loss(EvalMetric):
    """The mean of the loss values seen (``preds`` are losses; ``labels`` are ignored), Gluon's
    ``metric.Loss``: what ``la.blocks.Estimator`` reports as ``"loss"``.

    >>> import lazyarray as la
    >>> m = la.metric.Loss()
    >>> m.update(None, la.array([1.0, 2.0])); m.update(None, la.array([6.0]))
    >>> m.get()
    ('loss', 3.0)
    """

    def __init__(self, name: str = "loss"):
        if not isinstance(name, str) or not name:
            raise ParamError(f"Loss: name must be a non-empty str (the name get() reports), got "
                             f"{name!r} ({type(name).__name__})"[:300])
        self.name = name
        super().__init__()

    def update(self, labels, preds) -> None:
        """Add the loss values in ``preds`` (an array or a list of arrays)."""
        for loss in _as_list(preds):
            values = _host(loss)
            self.sum_metric += float(values.sum())
            self.num_inst += int(values.size)


def _picked(metric: str, label, pred, axis: int = -1):
    """``pred[i, label[i]]``: the probability each sample gave its label (class axis ``axis``)."""
    label = label.astype(np.int64)
    pred = np.moveaxis(pred, axis, -1)
    classes = pred.shape[-1]
    pred = pred.reshape(-1, classes)
    label = label.ravel()
    if label.size != pred.shape[0]:
        raise ShapeError(f"{metric}.update: {label.size} labels but {pred.shape[0]} predicted distributions "
                         f"of {classes} classes; pass probabilities shaped (batch, classes)")
    if label.size and (label.min() < 0 or label.max() >= classes):
        raise ParamValueError(f"{metric}.update: labels must lie in [0, {classes}), got "
                              f"[{label.min()}, {label.max()}]")
    return label, pred[np.arange(label.size), label]


class CrossEntropy(EvalMetric):
    """Mean of ``-log(p[label] + eps)`` over samples; ``preds`` are probabilities (after softmax).

    >>> import lazyarray as la
    >>> m = la.metric.CrossEntropy()
    >>> m.update(la.array([0]), la.array([[0.5, 0.5]]))
    >>> round(m.get()[1], 4)
    0.6931
    """

    name = "cross-entropy"

    def __init__(self, eps: float = 1e-12):
        self.eps = eps
        super().__init__()

    def update_one(self, label, pred):
        label, prob = _picked("CrossEntropy", label, pred)
        return -np.log(prob + self.eps).sum(), label.size


class Perplexity(EvalMetric):
    """``exp`` of the mean negative log-probability of the labels; labels equal to ``ignore_label``
    (padding) are left out.

    >>> import lazyarray as la
    >>> m = la.metric.Perplexity(ignore_label=None)
    >>> m.update(la.array([0, 1]), la.array([[0.5, 0.5], [0.5, 0.5]]))
    >>> round(m.get()[1], 4)
    2.0
    """

    name = "perplexity"

    def __init__(self, ignore_label: int | None = None, axis: int = -1):
        self.ignore_label, self.axis = ignore_label, axis
        super().__init__()

    def update_one(self, label, pred):
        label, prob = _picked("Perplexity", label, pred, self.axis)
        keep = np.ones(label.shape, bool) if self.ignore_label is None else label != self.ignore_label
        return -np.log(np.maximum(1e-10, prob[keep])).sum(), int(keep.sum())

    def value(self) -> float:
        return math.exp(self.sum_metric / self.num_inst)


def _as_list(x) -> list:
    return list(x) if isinstance(x, (list, tuple)) else [x]


def _host(x) -> np.ndarray:
    """A NumPy copy of a lazyarray array (computed if lazy), a NumPy array or a list."""
    if hasattr(x, "asnumpy"):
        return x.asnumpy()
    return np.asarray(x)
