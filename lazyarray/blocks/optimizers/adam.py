"""Adam and its relatives: ``Adam`` (with ``amsgrad``), ``AdamW`` (decoupled weight decay),
``Adamax``, ``Nadam`` (torch's momentum-decay schedule), as torch.optim documents them, and
``LAMB`` (Gluon's, per whole parameter)."""
from __future__ import annotations

import math

from ...errors import ParamValueError
from ...ops.sparse_kernels import adam_rows
from .base import BETA, FLAG, RATE, HyperParam, Optimizer, register


@register
class Adam(Optimizer):
    """Adam (Kingma & Ba) as ``torch.optim.Adam``: with ``g = grad + wd * w``,
    ``m = beta1 * m + (1 - beta1) * g``, ``v = beta2 * v + (1 - beta2) * g**2`` (``amsgrad``: the
    running maximum of ``v`` is used below), then
    ``w -= lr / (1 - beta1**t) * m / (sqrt(v) / sqrt(1 - beta2**t) + epsilon)``.

    Row-sparse gradients take MXNet's lazy update (only the stored rows; epsilon not bias-corrected).
    """

    hyper_params = {**Optimizer.hyper_params, "beta1": BETA, "beta2": BETA, "epsilon": RATE, "amsgrad": FLAG}
    decoupled = False  # AdamW: weight decay multiplies the weight instead of adding to the gradient

    def __init__(self, learning_rate: float = 0.001, beta1: float = 0.9, beta2: float = 0.999,
                 epsilon: float = 1e-8, wd: float = 0.0, clip_gradient: float | None = None,
                 lr_scheduler=None, amsgrad: bool = False, multi_precision: bool = False):
        super().__init__(learning_rate, wd, clip_gradient, lr_scheduler, multi_precision)
        self.beta1, self.beta2, self.epsilon, self.amsgrad = beta1, beta2, epsilon, amsgrad

    def create_state(self, weight):
        return (weight * 0, weight * 0, weight * 0) if self.amsgrad else (weight * 0, weight * 0)

    def apply(self, target, g, state, step, xp, scratch, lr, wd) -> None:
        t = target.dtype.type
        if self.decoupled:
            self._clip(g, xp)
            if wd:
                target.imul(t(1 - lr * wd))
        else:
            self._clip_and_decay(target, g, xp, scratch, wd)
        mean, var = state[0], state[1]
        a, b = scratch(0), scratch(1)
        _moments(xp, t, g, mean, var, self.beta1, self.beta2, a)
        if self.amsgrad:
            var = xp.maximum(state[2], var, out=state[2])
        # torch's lr / c1 * m / (sqrt(v) / c2 + eps) with c2 = sqrt(1 - beta2**t) moved out of the
        # denominator: (lr * c2 / c1) * m / (sqrt(v) + eps * c2), the same number with one pass less
        c2 = math.sqrt(1 - self.beta2 ** step)
        xp.sqrt(var, out=b)
        b += t(self.epsilon * c2)
        xp.divide(mean, b, out=a)
        a *= t(lr * c2 / (1 - self.beta1 ** step))
        target.isub(a)

    def update_rows(self, weight, grad, state, step, rescale, xp, lr, wd) -> None:
        if self.amsgrad or self.decoupled:
            raise ParamValueError(f"{type(self).__name__}: row_sparse gradients take Adam's lazy update, which "
                                  "has no amsgrad or decoupled weight decay; use a dense gradient")
        # lazy update: weight, mean and var only at the stored rows
        rate = lr * math.sqrt(1 - self.beta2 ** step) / (1 - self.beta1 ** step)
        adam_rows(xp, weight, grad.indices, grad.data, state[0], state[1], rate, self.beta1,
                  self.beta2, self.epsilon, wd, rescale, self.clip_gradient)


def _moments(xp, t, g, mean, var, beta1: float, beta2: float, a) -> None:
    """``mean = beta1 * mean + (1 - beta1) * g`` and ``var = beta2 * var + (1 - beta2) * g * g`` in place
    (``t`` the dtype's scalar type; ``a`` a scratch buffer)."""
    mean *= t(beta1)
    mean += xp.multiply(g, t(1 - beta1), out=a)
    var *= t(beta2)
    xp.multiply(g, t(1 - beta2), out=a)
    a *= g
    var += a


@register
class AdamW(Adam):
    """Adam with decoupled weight decay, as ``torch.optim.AdamW``: ``w *= 1 - lr * wd`` before the Adam
    step, whose gradient holds no weight-decay term (torch's default ``weight_decay=0.01``)."""

    decoupled = True

    def __init__(self, learning_rate: float = 0.001, beta1: float = 0.9, beta2: float = 0.999,
                 epsilon: float = 1e-8, wd: float = 0.01, clip_gradient: float | None = None,
                 lr_scheduler=None, amsgrad: bool = False, multi_precision: bool = False):
        super().__init__(learning_rate, beta1, beta2, epsilon, wd, clip_gradient, lr_scheduler, amsgrad,
                         multi_precision)


@register
class Adamax(Optimizer):
    """Adamax (the infinity-norm Adam) as ``torch.optim.Adamax``: with ``g = grad + wd * w``,
    ``m = beta1 * m + (1 - beta1) * g``, ``u = max(beta2 * u, |g| + epsilon)``,
    ``w -= lr / (1 - beta1**t) * m / u``."""

    hyper_params = {**Optimizer.hyper_params, "beta1": BETA, "beta2": BETA, "epsilon": RATE}

    def __init__(self, learning_rate: float = 0.002, beta1: float = 0.9, beta2: float = 0.999,
                 epsilon: float = 1e-8, wd: float = 0.0, clip_gradient: float | None = None, lr_scheduler=None,
                 multi_precision: bool = False):
        super().__init__(learning_rate, wd, clip_gradient, lr_scheduler, multi_precision)
        self.beta1, self.beta2, self.epsilon = beta1, beta2, epsilon

    def create_state(self, weight):
        return (weight * 0, weight * 0)

    def apply(self, target, g, state, step, xp, scratch, lr, wd) -> None:
        self._clip_and_decay(target, g, xp, scratch, wd)
        t = target.dtype.type
        mean, u = state
        a = scratch(0)
        mean *= t(self.beta1)
        mean += xp.multiply(g, t(1 - self.beta1), out=a)
        u *= t(self.beta2)
        xp.abs(g, out=a)
        a += t(self.epsilon)
        xp.maximum(u, a, out=u)
        xp.divide(mean, u, out=a)
        a *= t(lr / (1 - self.beta1 ** step))
        target.isub(a)


@register
class Nadam(Optimizer):
    """NAdam as ``torch.optim.NAdam``: Adam's moments of ``g = grad + wd * w``, momentum
    ``mu_t = beta1 * (1 - 0.5 * 0.96**(t * momentum_decay))``, ``P_t = mu_1 * ... * mu_t``,
    ``d = sqrt(v / (1 - beta2**t)) + epsilon`` and
    ``w -= lr * (1 - mu_t) / (1 - P_t) * g / d + lr * mu_{t+1} / (1 - P_t * mu_{t+1}) * m / d``."""

    hyper_params = {**Optimizer.hyper_params, "beta1": BETA, "beta2": BETA, "epsilon": RATE,
                    "momentum_decay": RATE}

    def __init__(self, learning_rate: float = 0.002, beta1: float = 0.9, beta2: float = 0.999,
                 epsilon: float = 1e-8, momentum_decay: float = 4e-3, wd: float = 0.0,
                 clip_gradient: float | None = None, lr_scheduler=None, multi_precision: bool = False):
        super().__init__(learning_rate, wd, clip_gradient, lr_scheduler, multi_precision)
        self.beta1, self.beta2, self.epsilon, self.momentum_decay = beta1, beta2, epsilon, momentum_decay

    def create_state(self, weight):
        return (weight * 0, weight * 0)

    def _mu(self, step: int) -> float:
        return self.beta1 * (1 - 0.5 * 0.96 ** (step * self.momentum_decay))

    def _mu_product(self, step: int) -> float:
        """``mu_1 * ... * mu_step`` (torch keeps it in the state; it depends on the step alone)."""
        key = (step, self.beta1, self.momentum_decay)
        memo = self.__dict__.get("_mu_memo")
        if memo is None or memo[0] != key:
            p = 1.0
            for k in range(1, step + 1):
                p *= self._mu(k)
            memo = self.__dict__["_mu_memo"] = (key, p)
        return memo[1]

    def apply(self, target, g, state, step, xp, scratch, lr, wd) -> None:
        self._clip_and_decay(target, g, xp, scratch, wd)
        t = target.dtype.type
        mean, var = state
        a, d = scratch(0), scratch(1)
        _moments(xp, t, g, mean, var, self.beta1, self.beta2, a)
        mu, mu_next, prod = self._mu(step), self._mu(step + 1), self._mu_product(step)
        xp.divide(var, t(1 - self.beta2 ** step), out=d)
        xp.sqrt(d, out=d)
        d += t(self.epsilon)
        xp.divide(g, d, out=a)
        a *= t(lr * (1 - mu) / (1 - prod))
        target.isub(a)
        xp.divide(mean, d, out=a)
        a *= t(lr * mu_next / (1 - prod * mu_next))
        target.isub(a)


@register
class LAMB(Optimizer):
    """LAMB (You et al. 2019) as Gluon's ``LAMB``, per whole parameter: Adam's moments of the clipped
    gradient, ``r = m_hat / (sqrt(v_hat) + epsilon) + wd * w`` (``m_hat = m / (1 - beta1**t)`` and
    likewise ``v_hat`` with ``bias_correction``, else ``m`` and ``v``), the trust ratio
    ``|w| / |r|`` (``|w|`` clamped to ``[lower_bound, upper_bound]`` when set; 1 when a norm is 0),
    and ``w -= lr * ratio * r``."""

    hyper_params = {**Optimizer.hyper_params, "beta1": BETA, "beta2": BETA, "epsilon": RATE,
                    "lower_bound": HyperParam(0.0, optional=True), "upper_bound": HyperParam(0.0, optional=True),
                    "bias_correction": FLAG}
    whole_tensor = True

    def __init__(self, learning_rate: float = 0.001, beta1: float = 0.9, beta2: float = 0.999,
                 epsilon: float = 1e-6, lower_bound: float | None = None, upper_bound: float | None = None,
                 bias_correction: bool = True, wd: float = 0.0, clip_gradient: float | None = None,
                 lr_scheduler=None, multi_precision: bool = False):
        super().__init__(learning_rate, wd, clip_gradient, lr_scheduler, multi_precision)
        self.beta1, self.beta2, self.epsilon = beta1, beta2, epsilon
        self.lower_bound, self.upper_bound, self.bias_correction = lower_bound, upper_bound, bias_correction

    def create_state(self, weight):
        return (weight * 0, weight * 0)

    def apply(self, target, g, state, step, xp, scratch, lr, wd) -> None:
        self._clip(g, xp)
        t = target.dtype.type
        mean, var = state
        a, r = scratch(0), scratch(1)
        _moments(xp, t, g, mean, var, self.beta1, self.beta2, a)
        if self.bias_correction:
            xp.divide(var, t(1 - self.beta2 ** step), out=a)
            xp.sqrt(a, out=a)
            xp.divide(mean, t(1 - self.beta1 ** step), out=r)
        else:
            xp.sqrt(var, out=a)
            r[...] = mean
        a += t(self.epsilon)
        r /= a
        if wd:
            r += target.times(t(wd), a)
        r1, r2 = float(xp.linalg.norm(target.w)), float(xp.linalg.norm(r))
        if self.lower_bound is not None:
            r1 = max(r1, self.lower_bound)
        if self.upper_bound is not None:
            r1 = min(r1, self.upper_bound)
        ratio = r1 / r2 if r1 != 0 and r2 != 0 else 1.0
        r *= t(lr * ratio)
        target.isub(r)
