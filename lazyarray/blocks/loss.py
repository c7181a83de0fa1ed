"""Losses as blocks: ``SoftmaxCrossEntropyLoss``, ``L2Loss``, ``L1Loss`` and Gluon's others
(``SigmoidBinaryCrossEntropyLoss``, ``HuberLoss``, ``KLDivLoss``, ``HingeLoss``, ``SquaredHingeLoss``,
``LogisticLoss``, ``CosineEmbeddingLoss``, ``TripletLoss``, ``PoissonNLLLoss``, ``CTCLoss``).

As in Gluon, a loss returns one value per sample (the mean over every axis but the batch
axis), so ``loss.backward()`` sums over the batch and ``Trainer.step(batch_size)`` divides
by it. As in Gluon, ``weight`` (a number) scales the loss and ``sample_weight`` (an array given to
the call, broadcast against the element-wise loss, e.g. ``(N, 1)``) weighs samples before the mean;
arguments after the labels may be given by keyword (``loss_fn(pred, label, sample_weight=w)``).
Class labels are checked where they are read (``SoftmaxCrossEntropyLoss``, ``CTCLoss``): a negative
one, one past the classes or a float that is not a whole number is a named error giving the loss,
the value and its index, at run time in compiled graphs too.

The losses defined here compile themselves: they hybridize at construction, so an eager training
step (``loss_fn(net(x), y)`` under ``autograd.record()``) records one call of a compiled graph
instead of one op per step of the formula (each recorded eager op costs about 15 µs of Python;
the MLP step of ``benchmarks/training_loop.py`` spent 0.26 ms in an eager softmax cross-entropy
at batch 64, 0.13 ms compiled). They are pure functions of their inputs; setting an attribute
(``weight``, ``axis``) drops the compiled graphs, a new input shape compiles quietly (no
``RecompileWarning``: varying batch sizes are a loss's normal use), and ``hybridize(False)`` runs
them op by op. Subclasses with their own ``forward`` stay imperative unless hybridized.
"""
from __future__ import annotations

import inspect
import math
from typing import TYPE_CHECKING

from ..args import choice_arg, int_arg, number_arg
from ..errors import ParamError, ShapeError, fmt_shape
from ..ndarray import NDArray
from .block import HybridBlock
from .nn import F


class Loss(HybridBlock):
    """Base class: ``weight`` scales the loss; ``batch_axis`` is kept, other axes are averaged."""

    def __init__(self, weight: float | None = None, batch_axis: int = 0):
        super().__init__()
        where = type(self).__name__
        self.weight = None if weight is None else number_arg(weight, where, "weight")
        self.batch_axis = int_arg(batch_axis, where, "batch_axis", lo=-32, hi=31)
        if type(self).forward.__module__ == __name__:  # the losses of this module compile themselves
            self.hybridize()

    def __setattr__(self, name: str, value) -> None:
        super().__setattr__(name, value)
        if not name.startswith("_") and "_traces" in self.__dict__:
            self._clear_cache(self._traces.size, self._traces.max_bytes)  # a trace baked the old value in

    def _clear_cache(self, cache_size: int | None = None, cache_bytes: int | None = None) -> None:
        super()._clear_cache(cache_size, cache_bytes)
        self._traces.warn_at = float("inf")

    if TYPE_CHECKING:  # typed as Block.__call__: what forward takes (keywords too) and returns
        __call__ = HybridBlock.__call__
    else:
        def __call__(self, *args, **kwargs):
            if kwargs:  # (a block's call is positional: keywords go to their places, None where not given)
                try:
                    bound = inspect.signature(self.forward).bind(*args, **kwargs)
                except TypeError as e:
                    raise ParamError(f"{type(self).__name__}: {e}") from None
                bound.apply_defaults()
                args = tuple(bound.arguments.values())
            return super().__call__(*args)

    def _finish(self, loss: NDArray, sample_weight: NDArray | None = None) -> NDArray:
        """Gluon's ``_apply_weighting`` and mean over every axis but the batch axis."""
        if sample_weight is not None:
            loss = loss * sample_weight
        if self.weight is not None:
            loss = loss * float(self.weight)
        axes = tuple(i for i in range(loss.ndim) if i != self.batch_axis % max(loss.ndim, 1))
        return loss.mean(axis=axes) if axes else loss

    def __repr__(self) -> str:
        return f"{type(self).__name__}(weight={self.weight}, batch_axis={self.batch_axis})"


def _like(label: NDArray, pred: NDArray) -> NDArray:
    """Labels shaped like the predictions (Gluon reshapes ``(N,)`` labels to ``(N, 1)`` ...)."""
    return label if label.static_shape == pred.static_shape else F.reshape_like(label, pred)


def _flag(value, where: str, name: str) -> bool:
    if not isinstance(value, bool):
        raise ParamError(f"{where}: {name} must be True or False, got {value!r} ({type(value).__name__})"[:300])
    return value


def _known(shape) -> bool:
    return None not in shape


class SoftmaxCrossEntropyLoss(Loss):
    """``-log softmax(pred)[label]`` per sample.

    ``sparse_label=True``: labels are class indices shaped like ``pred`` without ``axis`` (or with
    ``axis`` of size 1); integers, or floats holding whole numbers (1.9 is an error, not class 1).
    ``sparse_label=False``: one-hot or soft labels, a distribution over classes shaped like ``pred``.
    ``from_logits=True``: ``pred`` already holds log-probabilities.

    >>> import lazyarray as la
    >>> loss = la.blocks.SoftmaxCrossEntropyLoss()
    >>> loss(la.array([[0.0, 0.0], [0.0, 0.0]]), la.array([0, 1])).asnumpy().round(4)
    array([0.6931, 0.6931], dtype=float32)
    """

    def __init__(self, axis: int = -1, sparse_label: bool = True, from_logits: bool = False,
                 weight: float | None = None, batch_axis: int = 0):
        super().__init__(weight, batch_axis)
        self.axis = int_arg(axis, "SoftmaxCrossEntropyLoss", "axis", lo=-32, hi=31)
        self.sparse_label = _flag(sparse_label, "SoftmaxCrossEntropyLoss", "sparse_label")
        self.from_logits = _flag(from_logits, "SoftmaxCrossEntropyLoss", "from_logits")

    def forward(self, pred, label, sample_weight=None) -> NDArray:
        axis = self.axis % pred.ndim
        if self.sparse_label:
            label = self._sparse(pred, label, axis)
        elif _known(label.static_shape) and _known(pred.static_shape) and label.static_shape != pred.static_shape:
            raise ShapeError(f"SoftmaxCrossEntropyLoss(sparse_label=False): labels {fmt_shape(label.static_shape)} "
                             f"must be one-hot or soft labels shaped like pred {fmt_shape(pred.static_shape)}; "
                             "class indices need sparse_label=True")
        if self.sparse_label and not self.from_logits and axis == pred.ndim - 1:
            # the label's log-probability picked by index, the gradient softmax - one_hot by an
            # index-subtract (ops/loss.py): the one-hot formula's values, one kernel each way
            loss = F.softmax_cross_entropy_rows(pred, label)
        else:
            logp = pred if self.from_logits else F.log_softmax(pred, axis=axis)
            if self.sparse_label:
                target = F.one_hot(label, depth=pred.static_shape[axis], dtype=pred.dtype)
                if axis != pred.ndim - 1:
                    target = F.transpose(target, _move_last(pred.ndim, axis))
            else:
                target = label
            # negating the (untracked) target instead of the sum: the same values bit for bit, one
            # recorded op fewer per eager call and one gradient step fewer
            loss = (logp * -target).sum(axis=axis)
        if sample_weight is not None:  # (Gluon keeps the class axis, so (N, 1) weights broadcast per sample)
            loss = F.expand_dims(loss, axis=axis)
        return self._finish(loss, sample_weight)

    def _sparse(self, pred, label, axis: int):
        """Class-index labels shaped like ``pred`` without ``axis``, integers checked where read."""
        if label.ndim == pred.ndim:
            size = label.static_shape[axis]
            if size != 1:
                raise ShapeError(
                    f"SoftmaxCrossEntropyLoss: labels {fmt_shape(label.static_shape)} have the class axis of pred "
                    f"{fmt_shape(pred.static_shape)}: one-hot or soft labels need sparse_label=False; class "
                    "indices are shaped like pred without that axis")
            label = F.squeeze(label, axis=axis)
        depth = pred.static_shape[axis]
        fast = not self.from_logits and axis == pred.ndim - 1
        if depth is None:  # (a class count known only at run time: the kernels check the range)
            return label if label.dtype.kind in "iu" else label.astype("int64")
        if label.dtype.kind not in "iu" or not fast:  # (the row kernel checks integer labels itself)
            label = F.class_labels(label, classes=depth, loss="SoftmaxCrossEntropyLoss")
        return label


def _move_last(ndim: int, axis: int) -> tuple:
    """Axes that move the last axis of a one-hot array to ``axis``."""
    order = list(range(ndim - 1))
    order.insert(axis, ndim - 1)
    return tuple(order)


class L2Loss(Loss):
    """``0.5 * (pred - label) ** 2``, averaged per sample (Gluon's ``L2Loss``)."""

    def forward(self, pred, label, sample_weight=None) -> NDArray:
        return self._finish(F.square(pred - _like(label, pred)) * 0.5, sample_weight)


class L1Loss(Loss):
    """``|pred - label|``, averaged per sample."""

    def forward(self, pred, label, sample_weight=None) -> NDArray:
        return self._finish(F.abs(pred - _like(label, pred)), sample_weight)


def _softplus_neg_abs(x):
    """``log(1 + exp(-|x|))``: never overflows (the exponent is <= 0)."""
    return F.log1p(F.exp(-F.abs(x)))


class SigmoidBinaryCrossEntropyLoss(Loss):
    """Binary cross-entropy of ``sigmoid(pred)`` against labels in ``[0, 1]`` (Gluon's).

    ``from_sigmoid=False``: the stable form ``max(x, 0) - x * z + log(1 + exp(-|x|))``; with a
    ``pos_weight`` array (broadcast against ``pred``, e.g. ``(1, classes)``) positives weigh
    ``pos_weight``: ``x - x * z + (1 + (pos_weight - 1) * z) * (log(1 + exp(-|x|)) + max(-x, 0))``.
    ``from_sigmoid=True``: ``pred`` holds probabilities, ``-(z log(p + 1e-12) * pos_weight +
    (1 - z) log(1 - p + 1e-12))``.
    """

    def __init__(self, from_sigmoid: bool = False, weight: float | None = None, batch_axis: int = 0):
        super().__init__(weight, batch_axis)
        self.from_sigmoid = _flag(from_sigmoid, "SigmoidBinaryCrossEntropyLoss", "from_sigmoid")

    def forward(self, pred, label, sample_weight=None, pos_weight=None) -> NDArray:
        label = _like(label, pred)
        if not self.from_sigmoid:
            if pos_weight is None:
                loss = F.relu(pred) - pred * label + _softplus_neg_abs(pred)
            else:
                log_weight = (pos_weight - 1.0) * label + 1.0
                loss = pred - pred * label + log_weight * (_softplus_neg_abs(pred) + F.relu(-pred))
        else:
            pos = F.log(pred + 1e-12) * label
            if pos_weight is not None:
                pos = pos * pos_weight
            loss = -(pos + F.log(1.0 - pred + 1e-12) * (1.0 - label))
        return self._finish(loss, sample_weight)


class HuberLoss(Loss):
    """Smoothed L1: ``0.5 / rho * d ** 2`` where ``|d| <= rho``, else ``|d| - 0.5 * rho``."""

    def __init__(self, rho: float = 1.0, weight: float | None = None, batch_axis: int = 0):
        super().__init__(weight, batch_axis)
        self.rho = number_arg(rho, "HuberLoss", "rho", lo=0.0, lo_open=True)

    def forward(self, pred, label, sample_weight=None) -> NDArray:
        d = F.abs(pred - _like(label, pred))
        loss = F.where(d > self.rho, d - 0.5 * self.rho, F.square(d) * (0.5 / self.rho))
        return self._finish(loss, sample_weight)


class KLDivLoss(Loss):
    """``label * (log(label + 1e-12) - pred)``; ``from_logits=False`` takes ``log_softmax(pred, axis)`` first."""

    def __init__(self, from_logits: bool = True, axis: int = -1, weight: float | None = None,
                 batch_axis: int = 0):
        super().__init__(weight, batch_axis)
        self.from_logits = _flag(from_logits, "KLDivLoss", "from_logits")
        self.axis = int_arg(axis, "KLDivLoss", "axis", lo=-32, hi=31)

    def forward(self, pred, label, sample_weight=None) -> NDArray:
        if not self.from_logits:
            pred = F.log_softmax(pred, axis=self.axis % pred.ndim)
        return self._finish(label * (F.log(label + 1e-12) - pred), sample_weight)


class HingeLoss(Loss):
    """``max(0, margin - pred * label)`` for labels -1 / 1."""

    def __init__(self, margin: float = 1.0, weight: float | None = None, batch_axis: int = 0):
        super().__init__(weight, batch_axis)
        self.margin = number_arg(margin, type(self).__name__, "margin")

    def forward(self, pred, label, sample_weight=None) -> NDArray:
        return self._finish(F.relu(self.margin - pred * _like(label, pred)), sample_weight)


class SquaredHingeLoss(HingeLoss):
    """``max(0, margin - pred * label) ** 2`` for labels -1 / 1."""

    def forward(self, pred, label, sample_weight=None) -> NDArray:
        return self._finish(F.square(F.relu(self.margin - pred * _like(label, pred))), sample_weight)


class LogisticLoss(Loss):
    """``log(1 + exp(-pred * label))`` for labels -1 / 1 (``label_format="signed"``) or 0 / 1
    (``"binary"``), in the stable form ``max(x, 0) - x * z + log(1 + exp(-|x|))`` with z in {0, 1}."""

    def __init__(self, weight: float | None = None, batch_axis: int = 0, label_format: str = "signed"):
        super().__init__(weight, batch_axis)
        self.label_format = choice_arg(label_format, "LogisticLoss", "label_format", ("signed", "binary"))

    def forward(self, pred, label, sample_weight=None) -> NDArray:
        label = _like(label, pred)
        if self.label_format == "signed":
            label = (label + 1.0) * 0.5  # -1 / 1 -> 0 / 1
        loss = F.relu(pred) - pred * label + _softplus_neg_abs(pred)
        return self._finish(loss, sample_weight)


class CosineEmbeddingLoss(Loss):
    """``1 - cos(input1, input2)`` for label 1, ``clip(cos - margin, 0, 1 - margin)`` otherwise
    (label -1), the cosine along the last axis (norms' product floored at 1e-12)."""

    def __init__(self, weight: float | None = None, batch_axis: int = 0, margin: float = 0.0):
        super().__init__(weight, batch_axis)
        self.margin = number_arg(margin, "CosineEmbeddingLoss", "margin", lo=-1.0, hi=1.0)

    def forward(self, input1, input2, label, sample_weight=None) -> NDArray:
        input1 = _like(input1, input2)
        dot = (input1 * input2).sum(axis=-1, keepdims=True)
        norms = F.sqrt(F.square(input1).sum(axis=-1, keepdims=True) * F.square(input2).sum(axis=-1, keepdims=True))
        cos = dot / F.maximum(norms, 1e-12)
        label = F.reshape_like(label, cos)
        loss = F.where(label == 1, 1.0 - cos, F.clip(cos - self.margin, 0.0, 1.0 - self.margin))
        return self._finish(loss, sample_weight)


class TripletLoss(Loss):
    """``max(|pred - positive|^2 - |pred - negative|^2 + margin, 0)``, the squared distances summed
    over every axis but the batch axis."""

    def __init__(self, margin: float = 1.0, weight: float | None = None, batch_axis: int = 0):
        super().__init__(weight, batch_axis)
        self.margin = number_arg(margin, "TripletLoss", "margin")

    def forward(self, pred, positive, negative, sample_weight=None) -> NDArray:
        diff = F.square(pred - _like(positive, pred)) - F.square(pred - _like(negative, pred))
        axes = tuple(i for i in range(diff.ndim) if i != self.batch_axis % max(diff.ndim, 1))
        loss = F.relu((diff.sum(axis=axes) if axes else diff) + self.margin)
        return self._finish(loss, sample_weight)


class PoissonNLLLoss(Loss):
    """Poisson negative log-likelihood: ``exp(pred) - target * pred`` (``from_logits=True``: ``pred``
    is the log-rate) or ``pred - target * log(pred + epsilon)``; ``compute_full=True`` adds Stirling's
    ``target * log(target) - target + 0.5 * log(2 pi target)`` where ``target > 1``. One value per
    sample (Gluon 2's ``_batch_mean``); ``epsilon`` is a constructor argument here (a hybridized
    block's call takes arrays only)."""

    def __init__(self, weight: float | None = None, from_logits: bool = True, batch_axis: int = 0,
                 compute_full: bool = False, epsilon: float = 1e-08):
        super().__init__(weight, batch_axis)
        self.from_logits = _flag(from_logits, "PoissonNLLLoss", "from_logits")
        self.compute_full = _flag(compute_full, "PoissonNLLLoss", "compute_full")
        self.epsilon = number_arg(epsilon, "PoissonNLLLoss", "epsilon", lo=0.0)

    def forward(self, pred, target, sample_weight=None) -> NDArray:
        target = _like(target, pred)
        if self.from_logits:
            loss = F.exp(pred) - target * pred
        else:
            loss = pred - target * F.log(pred + self.epsilon)
        if self.compute_full:
            big = F.maximum(target, 1.0)  # (log of 1 where target <= 1: those places are masked out)
            stirling = big * F.log(big) - big + 0.5 * F.log(big * (2 * math.pi))
            loss = loss + F.where(target > 1, stirling, 0.0)
        return self._finish(loss, sample_weight)


class CTCLoss(Loss):
    """Connectionist temporal classification (Gluon's ``CTCLoss``; ``nn.ctc_loss``, ops/ctc.py).

    ``pred``: unnormalized scores, ``(N, T, C)`` (``layout="NTC"``) or ``(T, N, C)``; the last class
    ``C - 1`` is the blank. ``label``: zero-based class indices in ``[0, C - 1)``, ``(N, L)``
    (``label_layout="NT"``) or ``(L, N)``, padded with -1 past each sequence. ``pred_lengths`` /
    ``label_lengths`` ``(N,)``: the time steps and labels to read per sample (defaults: every time
    step; the labels before the first -1). The loss ``(N,)`` is ``-log p(label | pred)``; a label
    sequence no alignment fits in its time steps gives ``inf`` (and a zero gradient).
    """

    def __init__(self, layout: str = "NTC", label_layout: str = "NT", weight: float | None = None):
        choice_arg(label_layout, "CTCLoss", "label_layout", ("NT", "TN"))
        super().__init__(weight, label_layout.find("N"))
        self.layout = choice_arg(layout, "CTCLoss", "layout", ("NTC", "TNC"))
        self.label_layout = label_layout

    def forward(self, pred, label, pred_lengths=None, label_lengths=None, sample_weight=None) -> NDArray:
        if self.layout == "NTC":
            pred = F.transpose(pred, (1, 0, 2))
        if self.label_layout == "TN":
            label = F.transpose(label, (1, 0))
        if pred_lengths is None:  # every time step: T per sample
            pred_lengths = F.ones_like(pred[:, :, 0]).sum(axis=0)
        if label_lengths is None:  # the labels before the first -1
            label_lengths = F.cumulative_prod(F.not_equal(label, -1).astype(pred.dtype), axis=1).sum(axis=1)
        loss = F.ctc_loss(pred, label, pred_lengths, label_lengths)
        if sample_weight is not None:
            loss = loss * _like(sample_weight, loss)
        if self.weight is not None:
            loss = loss * float(self.weight)
        return loss

    def __repr__(self) -> str:
        return f"CTCLoss(layout={self.layout!r}, label_layout={self.label_layout!r}, weight={self.weight})"
