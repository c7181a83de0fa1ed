"""Losses as blocks: ``SoftmaxCrossEntropyLoss``, ``L2Loss``, ``L1Loss``.

As in Gluon, a loss returns one value per sample (the mean over every axis but the batch
axis), so ``loss.backward()`` sums over the batch and ``Trainer.step(batch_size)`` divides
by it.

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

from ..ndarray import NDArray
from .block import HybridBlock
from .nn import F


class Loss(HybridBlock):
    """Base class: ``weight`` scales the loss; ``batch_axis`` is kept, other axes are averaged."""

    def __init__(self, weight: float | None = None, batch_axis: int = 0):
        super().__init__()
        self.weight, self.batch_axis = weight, batch_axis
        if type(self).forward.__module__ == __name__:  # the losses of this module compile themselves
            self.hybridize()

    def __setattr__(self, name: str, value) -> None:
        super().__setattr__(name, value)
        if not name.startswith("_") and "_traces" in self.__dict__:
            self._clear_cache(self._traces.size, self._traces.max_bytes)  # a trace baked the old value in

    def _clear_cache(self, cache_size: int | None = None, cache_bytes: int | None = None) -> None:
        super()._clear_cache(cache_size, cache_bytes)
        self._traces.warn_at = float("inf")

    def _finish(self, loss: NDArray) -> NDArray:
        if self.weight is not None:
            loss = loss * float(self.weight)
        axes = tuple(i for i in range(loss.ndim) if i != self.batch_axis % max(loss.ndim, 1))
        return loss.mean(axis=axes) if axes else loss

    def __repr__(self) -> str:
        return f"{type(self).__name__}(weight={self.weight}, batch_axis={self.batch_axis})"


def _like(label: NDArray, pred: NDArray) -> NDArray:
    """Labels shaped like the predictions (Gluon reshapes ``(N,)`` labels to ``(N, 1)`` ...)."""
    return label if label.static_shape == pred.static_shape else F.reshape_like(label, pred)


class SoftmaxCrossEntropyLoss(Loss):
    """``-log softmax(pred)[label]`` per sample.

    ``sparse_label=True``: labels are integer class indices (floats are cast); otherwise a
    distribution over classes shaped like ``pred``. ``from_logits=True``: ``pred`` already
    holds log-probabilities.

    >>> import lazyarray as la
    >>> loss = la.blocks.SoftmaxCrossEntropyLoss()
    >>> loss(la.array([[0.0, 0.0], [0.0, 0.0]]), la.array([0, 1])).asnumpy().round(4)
    array([0.6931, 0.6931], dtype=float32)
    """

    def __init__(self, axis: int = -1, sparse_label: bool = True, from_logits: bool = False,
                 weight: float | None = None, batch_axis: int = 0):
        super().__init__(weight, batch_axis)
        self.axis, self.sparse_label, self.from_logits = axis, sparse_label, from_logits

    def forward(self, pred, label):
        if self.sparse_label and not self.from_logits and self.axis % pred.ndim == pred.ndim - 1 \
                and label.ndim == pred.ndim - 1:
            if label.dtype.kind not in "iu":
                label = label.astype("int64")
            # the label's log-probability picked by index, the gradient softmax - one_hot by an
            # index-subtract (ops/loss.py): the one-hot formula's values, one kernel each way
            return self._finish(F.softmax_cross_entropy_rows(pred, label))
        logp = pred if self.from_logits else F.log_softmax(pred, axis=self.axis)
        if self.sparse_label:
            if label.dtype.kind not in "iu":
                label = label.astype("int64")
            depth = pred.static_shape[self.axis]
            target = F.one_hot(label, depth=depth, dtype=pred.dtype)
            if self.axis % pred.ndim != pred.ndim - 1:
                target = F.transpose(target, _move_last(pred.ndim, self.axis % pred.ndim))
        else:
            target = _like(label, pred)
        # negating the (untracked) target instead of the sum: the same values bit for bit, one
        # recorded op fewer per eager call and one gradient step fewer
        return self._finish((logp * -target).sum(axis=self.axis))


def _move_last(ndim: int, axis: int) -> tuple:
    """Axes that move the last axis of a one-hot array to ``axis``."""
    order = list(range(ndim - 1))
    order.insert(axis, ndim - 1)
    return tuple(order)


class L2Loss(Loss):
    """``0.5 * (pred - label) ** 2``, averaged per sample (Gluon's ``L2Loss``)."""

    def forward(self, pred, label):
        return self._finish(F.square(pred - _like(label, pred)) * 0.5)


class L1Loss(Loss):
    """``|pred - label|``, averaged per sample."""

    def forward(self, pred, label):
        return self._finish(F.abs(pred - _like(label, pred)))
