"""Momentum optimizers: ``SGD`` (torch.optim.SGD's momentum, dampening and Nesterov), ``NAG``,
``Signum`` (Gluon's) and ``LARS`` (Gluon's layer-wise rate, per whole parameter)."""
from __future__ import annotations

import math

import numpy as np

from ...errors import ParamValueError
from ...ops.sparse_kernels import sgd_rows
from .base import BETA, FLAG, RATE, HyperParam, Optimizer, register


@register
class SGD(Optimizer):
    """Stochastic gradient descent with momentum, as ``torch.optim.SGD``: with ``g = grad + wd * w``,
    ``b = momentum * b + (1 - dampening) * g`` (``b = g`` at the first update), then
    ``w -= lr * (g + momentum * b)`` with ``nesterov`` else ``w -= lr * b``; plain
    ``w -= lr * g`` when momentum is 0. (torch's ``weight_decay`` is ``wd`` here.)

    Row-sparse gradients update only their rows (MXNet's lazy update) with the same formulas.
    """

    hyper_params = {**Optimizer.hyper_params, "momentum": BETA, "dampening": HyperParam(0.0, 1.0),
                    "nesterov": FLAG}

    def __init__(self, learning_rate: float = 0.01, momentum: float = 0.0, wd: float = 0.0,
                 clip_gradient: float | None = None, lr_scheduler=None, dampening: float = 0.0,
                 nesterov: bool = False, multi_precision: bool = False):
        super().__init__(learning_rate, wd, clip_gradient, lr_scheduler, multi_precision)
        self.momentum, self.dampening, self.nesterov = momentum, dampening, nesterov
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ParamValueError(f"{type(self).__name__}: nesterov momentum requires momentum > 0 and dampening "
                                  f"0 (as torch.optim.SGD), got momentum={momentum!r}, dampening={dampening!r}")

    def create_state(self, weight):
        return weight * 0 if self.momentum else None

    def scale(self, rescale: float, dtype, lr: float | None = None) -> tuple:
        """Plain SGD (no momentum, weight decay or clipping) with a power-of-two ``rescale`` (a batch
        of 64 or 1024) folds the rate into the rescale: ``g * (rescale * lr)`` is ``(g * rescale) *
        lr`` bit for bit, since scaling by a power of two is exact (for every gradient entry above
        ``2**-126 * batch`` in float32, where ``g * rescale`` would turn subnormal; float16, whose
        normal range ends at 6e-5, never folds), and the update saves one pass over every gradient."""
        lr = self.learning_rate if lr is None else lr
        key = (rescale, lr, self.momentum, self.wd, self.clip_gradient, dtype)
        last = self.__dict__.get("_scale_memo")
        if last is not None and last[0] == key:  # (every step asks again with the same settings)
            return last[1]
        res = self._scale(rescale, dtype, lr)
        self.__dict__["_scale_memo"] = (key, res)
        return res

    def _scale(self, rescale: float, dtype, lr: float) -> tuple:
        t = dtype.type
        r, lr = t(rescale), t(lr)
        if type(self).apply is not SGD.apply or self.momentum or self.wd or self.clip_gradient is not None \
                or dtype.kind != "f" or dtype.itemsize < 4 or not 0 < rescale <= 1 or math.frexp(rescale)[0] != 0.5:
            return r, False
        both = r * lr
        if not np.isfinite(both) or both == 0 or abs(both) < np.finfo(dtype).tiny or both / r != lr:
            return r, False  # (the folded factor itself must be exact and normal)
        return both, True

    def apply(self, target, g, state, step, xp, scratch, lr, wd, folded: bool = False) -> None:
        self._clip_and_decay(target, g, xp, scratch, wd)
        t = target.dtype.type
        if state is None:
            if not folded:  # (folded: ``scale`` multiplied the rate in already)
                g *= t(lr)
            target.isub(g)
            return
        m = t(self.momentum)
        state *= m
        if self.dampening and step > 1:  # (torch starts the buffer at g itself)
            state += xp.multiply(g, t(1 - self.dampening), out=scratch(0))
        else:
            state += g
        if self.nesterov:
            g += xp.multiply(state, m, out=scratch(0))
            g *= t(lr)
            target.isub(g)
        else:
            target.isub(xp.multiply(state, t(lr), out=scratch(0)))

    def update_rows(self, weight, grad, state, step, rescale, xp, lr, wd) -> None:
        # lazy update: only the rows the gradient stores
        if state is None:
            sgd_rows(xp, weight, grad.indices, grad.data, lr, wd, rescale, self.clip_gradient)
            return
        rows = grad.indices
        w = weight[rows]
        g = grad.data * rescale
        self._clip(g, xp)
        g = g + wd * w
        b = state[rows] * self.momentum + (g * (1 - self.dampening) if self.dampening and step > 1 else g)
        state[rows] = b
        weight[rows] = w - lr * (g + self.momentum * b if self.nesterov else b)


@register
class NAG(SGD):
    """Nesterov accelerated gradient (Gluon's ``NAG``): ``SGD`` with ``nesterov=True``."""

    def __init__(self, learning_rate: float = 0.01, momentum: float = 0.9, wd: float = 0.0,
                 clip_gradient: float | None = None, lr_scheduler=None, dampening: float = 0.0,
                 multi_precision: bool = False):
        super().__init__(learning_rate, momentum, wd, clip_gradient, lr_scheduler, dampening, True, multi_precision)


@register
class Signum(Optimizer):
    """signSGD with momentum (Gluon's ``Signum``): with ``g = clip(grad) + wd * w``,
    ``m = momentum * m - (1 - momentum) * g`` and ``w = (1 - lr * wd_lh) * w + lr * sign(m)``;
    without momentum ``w = (1 - lr * wd_lh) * w - lr * sign(g)``."""

    hyper_params = {**Optimizer.hyper_params, "momentum": BETA, "wd_lh": RATE}

    def __init__(self, learning_rate: float = 0.01, momentum: float = 0.9, wd_lh: float = 0.0, wd: float = 0.0,
                 clip_gradient: float | None = None, lr_scheduler=None, multi_precision: bool = False):
        super().__init__(learning_rate, wd, clip_gradient, lr_scheduler, multi_precision)
        self.momentum, self.wd_lh = momentum, wd_lh

    def create_state(self, weight):
        return weight * 0 if self.momentum else None

    def apply(self, target, g, state, step, xp, scratch, lr, wd) -> None:
        self._clip_and_decay(target, g, xp, scratch, wd)
        t = target.dtype.type
        if state is not None:
            state *= t(self.momentum)
            g *= t(1 - self.momentum)
            state -= g
            xp.sign(state, out=g)
        else:
            xp.negative(xp.sign(g, out=g), out=g)
        if self.wd_lh:
            target.imul(t(1 - lr * self.wd_lh))
        g *= t(lr)
        target.iadd(g)


@register
class LARS(Optimizer):
    """Layer-wise adaptive rate scaling (Gluon's ``LARS``, You et al. 2017), per whole parameter:
    ``ratio = eta * |w| / (|g| + wd * |w| + epsilon)`` (1 when a norm is 0), then SGD with the
    rate ``lr * ratio``: ``v = momentum * v - lr * ratio * (g + wd * w); w += v``."""

    hyper_params = {**Optimizer.hyper_params, "momentum": BETA, "eta": RATE, "epsilon": RATE}
    whole_tensor = True

    def __init__(self, learning_rate: float = 0.1, momentum: float = 0.0, eta: float = 0.001,
                 epsilon: float = 1e-8, wd: float = 0.0, clip_gradient: float | None = None, lr_scheduler=None,
                 multi_precision: bool = False):
        super().__init__(learning_rate, wd, clip_gradient, lr_scheduler, multi_precision)
        self.momentum, self.eta, self.epsilon = momentum, eta, epsilon

    def create_state(self, weight):
        return weight * 0 if self.momentum else None

    def apply(self, target, g, state, step, xp, scratch, lr, wd) -> None:
        self._clip(g, xp)
        t = target.dtype.type
        w_norm, g_norm = float(xp.linalg.norm(target.w)), float(xp.linalg.norm(g))
        ratio = self.eta * w_norm / (g_norm + wd * w_norm + self.epsilon) if w_norm > 0 and g_norm > 0 else 1.0
        if wd:
            g += target.times(t(wd), scratch(0))
        g *= t(lr * ratio)
        if state is None:
            target.isub(g)
        else:
            state *= t(self.momentum)
            state -= g
            target.iadd(state)
