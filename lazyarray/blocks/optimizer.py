"""Optimizers: ``SGD`` and ``Adam``, written once for one parameter or many at a time.

An optimizer's math lives in ``apply(target, g, state, step, xp, scratch)``: ``g`` is the
rescaled gradient (the optimizer may overwrite it), ``state`` what ``create_state`` made, and
``target`` the weights, reached only through their ``dtype`` and three operations (``times``,
``isub``, ``iadd``). ``update`` (one parameter) hands it the weight itself; ``Trainer.step`` hands it a
whole group of parameters at once (``multi_tensor.FlatGroup``): ``g``, the states and the
scratch buffers are then one flat array each, so every step of the update is one large ufunc
call instead of one per parameter, and only the reads and writes of the weights go parameter by
parameter. Both run the same ufuncs with the same scalars in the same order, so the results are
bit for bit the same.

Each optimizer declares its hyper-parameters (``hyper_params``: name -> ``HyperParam``, a range of
real numbers): ``Trainer.save_states`` writes those, and ``Trainer.load_states`` accepts a state
file's settings only when every one is declared and in range.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..ops.sparse_kernels import adam_rows, sgd_rows
from ..storage import RowSparse


class One:
    """The weight of one parameter as an update target."""

    __slots__ = ("w", "xp", "dtype")

    def __init__(self, w, xp):
        self.w, self.xp, self.dtype = w, xp, w.dtype

    def times(self, c, out):
        """``out[...] = w * c``."""
        return self.xp.multiply(self.w, c, out=out)

    def isub(self, x) -> None:
        self.w -= x

    def iadd(self, x) -> None:
        self.w += x


class _Fresh:
    """Scratch buffers like ``g`` for one update, allocated when asked for."""

    __slots__ = ("g", "xp", "bufs")

    def __init__(self, g, xp):
        self.g, self.xp, self.bufs = g, xp, []

    def __call__(self, k: int):
        while len(self.bufs) <= k:
            self.bufs.append(self.xp.empty_like(self.g))
        return self.bufs[k]


@dataclass(frozen=True)
class HyperParam:
    """A declared optimizer hyper-parameter: a finite real number (not a bool) from ``low`` to
    ``high`` (``high`` itself excluded when ``high_open``), or also ``None`` when ``optional``.

    >>> HyperParam(0.0, 1.0, high_open=True).problem(1.0)
    'must be a finite number in [0.0, 1.0), got 1.0'
    """

    low: float = -math.inf
    high: float = math.inf
    high_open: bool = False
    optional: bool = False

    def describe(self) -> str:
        if self.high == math.inf:
            text = "a finite number" if self.low == -math.inf else f"a finite number >= {self.low}"
        else:
            text = f"a finite number in [{self.low}, {self.high}{')' if self.high_open else ']'}"
        return f"None or {text}" if self.optional else text

    def problem(self, value) -> str | None:
        """None when ``value`` fits, else what is wrong with it (for an error message)."""
        if value is None and self.optional:
            return None
        try:
            ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) \
                and self.low <= value and (value < self.high if self.high_open else value <= self.high)
        except OverflowError:  # (an int beyond float range)
            ok = False
        return None if ok else f"must be {self.describe()}, got {value!r}"[:200]


_RATE = HyperParam(0.0)  # a learning rate, a weight decay: finite, >= 0


class Optimizer:
    """Base class. Subclasses implement ``create_state(weight)`` and ``apply`` (see the module
    docstring); such an optimizer updates all parameters of a ``Trainer`` in a few large calls.
    A subclass may instead override ``update(weight, grad, state, step, rescale, xp)`` (in place on
    backend arrays); the trainer then calls it once per parameter.

    ``hyper_params`` declares the settings a state file may hold (``Trainer.save_states`` /
    ``load_states``); a subclass with settings of its own extends it, e.g.
    ``hyper_params = {**SGD.hyper_params, "dampening": HyperParam(0.0, 1.0)}``."""

    hyper_params: dict[str, HyperParam] = {
        "learning_rate": _RATE, "wd": _RATE, "clip_gradient": HyperParam(0.0, optional=True)}

    def __init__(self, learning_rate: float = 0.01, wd: float = 0.0, clip_gradient: float | None = None,
                 lr_scheduler=None):
        self.learning_rate, self.wd, self.clip_gradient = learning_rate, wd, clip_gradient
        # a callable num_update -> lr (la.lr_scheduler); when set it decides the rate of every update
        self.lr_scheduler = lr_scheduler

    def create_state(self, weight):
        return None

    @property
    def multi_tensor(self) -> bool:
        """True when the trainer may update many parameters in one call of ``apply``."""
        cls = type(self)
        return cls.update is Optimizer.update and cls.apply is not Optimizer.apply

    def apply(self, target, g, state, step: int, xp, scratch) -> None:
        raise NotImplementedError(f"{type(self).__name__}: implement apply(...) or update(...)")

    def scale(self, rescale: float, dtype) -> tuple:
        """``(factor, folded)``: the gradient is multiplied by ``factor`` (a ``dtype`` scalar) before
        ``apply``; ``folded=True`` says the factor holds the learning rate too, and ``apply`` is
        then called with ``folded=True`` (only optimizers that accept it say so)."""
        return dtype.type(rescale), False

    def update(self, weight, grad, state, step: int, rescale: float = 1.0, xp=None) -> None:
        """One parameter, in place: ``weight`` and ``state`` are backend arrays, ``grad`` one too or a
        ``RowSparse`` (then only its rows are updated)."""
        xp = np if xp is None else xp
        if isinstance(grad, RowSparse):
            self.update_rows(weight, grad, state, step, rescale, xp)
            return
        factor, folded = self.scale(rescale, weight.dtype)
        g = grad * factor
        if folded:
            self.apply(One(weight, xp), g, state, step, xp, _Fresh(g, xp), folded=True)
        else:
            self.apply(One(weight, xp), g, state, step, xp, _Fresh(g, xp))

    def update_rows(self, weight, grad: RowSparse, state, step, rescale, xp) -> None:
        raise NotImplementedError(f"{type(self).__name__}: row_sparse gradients are not supported")

    def _clip_and_decay(self, target, g, xp, scratch) -> None:
        """``g = clip(g) + wd * w`` in place."""
        if self.clip_gradient is not None:
            xp.clip(g, -self.clip_gradient, self.clip_gradient, out=g)
        if self.wd:
            g += target.times(target.dtype.type(self.wd), scratch(0))


class SGD(Optimizer):
    """``v = momentum * v - lr * (g + wd * w); w += v`` (plain SGD when momentum is 0)."""

    hyper_params = {**Optimizer.hyper_params, "momentum": HyperParam(0.0, 1.0, high_open=True)}

    def __init__(self, learning_rate: float = 0.01, momentum: float = 0.0, wd: float = 0.0,
                 clip_gradient: float | None = None, lr_scheduler=None):
        super().__init__(learning_rate, wd, clip_gradient, lr_scheduler)
        self.momentum = momentum

    def create_state(self, weight):
        return weight * 0 if self.momentum else None

    def scale(self, rescale: float, dtype) -> tuple:
        """Plain SGD (no momentum, weight decay or clipping) with a power-of-two ``rescale`` (a batch
        of 64 or 1024) folds the rate into the rescale: ``g * (rescale * lr)`` is ``(g * rescale) *
        lr`` bit for bit, since scaling by a power of two is exact (for every gradient entry above
        ``2**-126 * batch`` in float32, where ``g * rescale`` would turn subnormal; float16, whose
        normal range ends at 6e-5, never folds), and the update saves one pass over every gradient."""
        key = (rescale, self.learning_rate, self.momentum, self.wd, self.clip_gradient, dtype)
        last = self.__dict__.get("_scale_memo")
        if last is not None and last[0] == key:  # (every step asks again with the same settings)
            return last[1]
        res = self._scale(rescale, dtype)
        self.__dict__["_scale_memo"] = (key, res)
        return res

    def _scale(self, rescale: float, dtype) -> tuple:
        t = dtype.type
        r, lr = t(rescale), t(self.learning_rate)
        if type(self).apply is not SGD.apply or self.momentum or self.wd or self.clip_gradient is not None \
                or dtype.kind != "f" or dtype.itemsize < 4 or not 0 < rescale <= 1 or math.frexp(rescale)[0] != 0.5:
            return r, False
        both = r * lr
        if not np.isfinite(both) or both == 0 or abs(both) < np.finfo(dtype).tiny or both / r != lr:
            return r, False  # (the folded factor itself must be exact and normal)
        return both, True

    def apply(self, target, g, state, step, xp, scratch, folded: bool = False) -> None:
        self._clip_and_decay(target, g, xp, scratch)
        t = target.dtype.type
        if not folded:  # (folded: ``scale`` multiplied the rate in already)
            g *= t(self.learning_rate)
        if state is None:
            target.isub(g)
        else:
            state *= t(self.momentum)
            state -= g
            target.iadd(state)

    def update_rows(self, weight, grad, state, step, rescale, xp) -> None:
        # lazy update: only the rows the gradient stores
        sgd_rows(xp, weight, grad.indices, grad.data, self.learning_rate, self.wd, rescale,
                 self.clip_gradient, self.momentum, state)


class Adam(Optimizer):
    """Adam (Kingma & Ba) with bias correction folded into the step size, as in MXNet."""

    hyper_params = {**Optimizer.hyper_params, "beta1": HyperParam(0.0, 1.0, high_open=True),
                    "beta2": HyperParam(0.0, 1.0, high_open=True), "epsilon": HyperParam(0.0)}

    def __init__(self, learning_rate: float = 0.001, beta1: float = 0.9, beta2: float = 0.999,
                 epsilon: float = 1e-8, wd: float = 0.0, clip_gradient: float | None = None,
                 lr_scheduler=None):
        super().__init__(learning_rate, wd, clip_gradient, lr_scheduler)
        self.beta1, self.beta2, self.epsilon = beta1, beta2, epsilon

    def create_state(self, weight):
        return (weight * 0, weight * 0)

    def _rate(self, step: int) -> float:
        return self.learning_rate * math.sqrt(1 - self.beta2 ** step) / (1 - self.beta1 ** step)

    def apply(self, target, g, state, step, xp, scratch) -> None:
        self._clip_and_decay(target, g, xp, scratch)
        mean, var = state
        t = target.dtype.type
        a, b = scratch(0), scratch(1)
        mean *= t(self.beta1)
        mean += xp.multiply(g, t(1 - self.beta1), out=a)
        var *= t(self.beta2)
        xp.multiply(g, t(1 - self.beta2), out=a)
        a *= g
        var += a
        xp.multiply(mean, t(self._rate(step)), out=a)
        xp.sqrt(var, out=b)
        b += t(self.epsilon)
        a /= b
        target.isub(a)

    def update_rows(self, weight, grad, state, step, rescale, xp) -> None:
        # lazy update: weight, mean and var only at the stored rows
        adam_rows(xp, weight, grad.indices, grad.data, state[0], state[1], self._rate(step), self.beta1,
                  self.beta2, self.epsilon, self.wd, rescale, self.clip_gradient)
