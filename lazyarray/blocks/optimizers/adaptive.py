"""Per-coordinate adaptive rates: ``RMSProp`` (centered, momentum), ``AdaGrad`` (lr_decay,
initial_accumulator_value) and ``AdaDelta`` as torch.optim documents them, and ``Ftrl`` (Gluon's)."""
from __future__ import annotations

from .base import BETA, FLAG, RATE, HyperParam, Optimizer, register

_UNIT = HyperParam(0.0, 1.0)  # a decay that may be 1: [0, 1]


@register
class RMSProp(Optimizer):
    """RMSprop as ``torch.optim.RMSprop`` (its ``alpha`` is ``rho`` here, Gluon's name): with
    ``g = grad + wd * w``, ``v = rho * v + (1 - rho) * g**2``; ``centered`` also keeps
    ``a = rho * a + (1 - rho) * g`` and uses ``v - a**2``; ``d = sqrt(v) + epsilon``; then
    ``b = momentum * b + g / d; w -= lr * b`` with momentum, else ``w -= lr * g / d``.
    The state is a tuple: ``v``, then ``a`` (centered), then ``b`` (momentum)."""

    hyper_params = {**Optimizer.hyper_params, "rho": _UNIT, "epsilon": RATE, "momentum": BETA, "centered": FLAG}

    def __init__(self, learning_rate: float = 0.01, rho: float = 0.99, epsilon: float = 1e-8, momentum: float = 0.0,
                 centered: bool = False, wd: float = 0.0, clip_gradient: float | None = None, lr_scheduler=None,
                 multi_precision: bool = False):
        super().__init__(learning_rate, wd, clip_gradient, lr_scheduler, multi_precision)
        self.rho, self.epsilon, self.momentum, self.centered = rho, epsilon, momentum, centered

    def create_state(self, weight):
        return tuple(weight * 0 for _ in range(1 + bool(self.centered) + bool(self.momentum)))

    def apply(self, target, g, state, step, xp, scratch, lr, wd) -> None:
        self._clip_and_decay(target, g, xp, scratch, wd)
        t = target.dtype.type
        a, d = scratch(0), scratch(1)
        v = state[0]
        v *= t(self.rho)
        xp.multiply(g, t(1 - self.rho), out=a)
        a *= g
        v += a
        if self.centered:
            avg = state[1]
            avg *= t(self.rho)
            avg += xp.multiply(g, t(1 - self.rho), out=a)
            xp.multiply(avg, avg, out=a)
            xp.subtract(v, a, out=d)
            xp.sqrt(d, out=d)
        else:
            xp.sqrt(v, out=d)
        d += t(self.epsilon)
        xp.divide(g, d, out=a)
        if self.momentum:
            buf = state[-1]
            buf *= t(self.momentum)
            buf += a
            xp.multiply(buf, t(lr), out=a)
        else:
            a *= t(lr)
        target.isub(a)


@register
class AdaGrad(Optimizer):
    """AdaGrad as ``torch.optim.Adagrad``: with ``g = grad + wd * w``, ``s += g**2`` (``s`` starts at
    ``initial_accumulator_value``) and ``w -= lr / (1 + (t - 1) * lr_decay) * g / (sqrt(s) + epsilon)``."""

    hyper_params = {**Optimizer.hyper_params, "lr_decay": RATE, "initial_accumulator_value": RATE,
                    "epsilon": RATE}

    def __init__(self, learning_rate: float = 0.01, lr_decay: float = 0.0, initial_accumulator_value: float = 0.0,
                 epsilon: float = 1e-10, wd: float = 0.0, clip_gradient: float | None = None, lr_scheduler=None,
                 multi_precision: bool = False):
        super().__init__(learning_rate, wd, clip_gradient, lr_scheduler, multi_precision)
        self.lr_decay, self.initial_accumulator_value, self.epsilon = lr_decay, initial_accumulator_value, epsilon

    def create_state(self, weight):
        s = weight * 0
        s += weight.dtype.type(self.initial_accumulator_value)
        return s

    def apply(self, target, g, state, step, xp, scratch, lr, wd) -> None:
        self._clip_and_decay(target, g, xp, scratch, wd)
        t = target.dtype.type
        a, d = scratch(0), scratch(1)
        xp.multiply(g, g, out=a)
        state += a
        xp.sqrt(state, out=d)
        d += t(self.epsilon)
        xp.divide(g, d, out=a)
        a *= t(lr / (1 + (step - 1) * self.lr_decay))
        target.isub(a)


@register
class AdaDelta(Optimizer):
    """AdaDelta as ``torch.optim.Adadelta``: with ``g = grad + wd * w``, ``v = rho * v + (1 - rho) * g**2``,
    ``delta = sqrt(u + epsilon) / sqrt(v + epsilon) * g``, ``u = rho * u + (1 - rho) * delta**2`` and
    ``w -= lr * delta`` (torch's default rate 1.0)."""

    hyper_params = {**Optimizer.hyper_params, "rho": _UNIT, "epsilon": RATE}

    def __init__(self, learning_rate: float = 1.0, rho: float = 0.9, epsilon: float = 1e-6, wd: float = 0.0,
                 clip_gradient: float | None = None, lr_scheduler=None, multi_precision: bool = False):
        super().__init__(learning_rate, wd, clip_gradient, lr_scheduler, multi_precision)
        self.rho, self.epsilon = rho, epsilon

    def create_state(self, weight):
        return (weight * 0, weight * 0)

    def apply(self, target, g, state, step, xp, scratch, lr, wd) -> None:
        self._clip_and_decay(target, g, xp, scratch, wd)
        t = target.dtype.type
        v, u = state
        a, d = scratch(0), scratch(1)
        v *= t(self.rho)
        xp.multiply(g, t(1 - self.rho), out=a)
        a *= g
        v += a
        xp.add(v, t(self.epsilon), out=d)
        xp.sqrt(d, out=d)  # std
        xp.add(u, t(self.epsilon), out=a)
        xp.sqrt(a, out=a)
        a /= d
        a *= g  # delta
        u *= t(self.rho)
        xp.multiply(a, t(1 - self.rho), out=d)
        d *= a
        u += d
        a *= t(lr)
        target.isub(a)


@register
class Ftrl(Optimizer):
    """FTRL-proximal (McMahan et al. 2013) as Gluon's ``Ftrl``: with the clipped gradient ``g``,
    ``z += g - (sqrt(n + g**2) - sqrt(n)) * w / lr``, ``n += g**2`` and
    ``w = (sign(z) * lamda1 - z) / ((beta + sqrt(n)) / lr + wd)`` where ``|z| > lamda1``, else 0."""

    hyper_params = {**Optimizer.hyper_params, "learning_rate": HyperParam(0.0, low_open=True), "lamda1": RATE,
                    "beta": RATE}

    def __init__(self, lamda1: float = 0.01, learning_rate: float = 0.1, beta: float = 1.0, wd: float = 0.0,
                 clip_gradient: float | None = None, lr_scheduler=None, multi_precision: bool = False):
        super().__init__(learning_rate, wd, clip_gradient, lr_scheduler, multi_precision)
        self.lamda1, self.beta = lamda1, beta

    def create_state(self, weight):
        return (weight * 0, weight * 0)

    def apply(self, target, g, state, step, xp, scratch, lr, wd) -> None:
        self._clip(g, xp)
        t = target.dtype.type
        z, n = state
        a, d = scratch(0), scratch(1)
        xp.sqrt(n, out=d)
        xp.multiply(g, g, out=a)
        n += a
        xp.sqrt(n, out=a)
        a -= d  # sigma * lr
        a *= target.times(t(1), d)
        a /= t(lr)
        z += g
        z -= a
        # the new weight: (sign(z) * lamda1 - z) / ((beta + sqrt(n)) / lr + wd), 0 where |z| <= lamda1
        xp.sqrt(n, out=d)
        d += t(self.beta)
        d /= t(lr)
        d += t(wd)
        xp.sign(z, out=a)
        a *= t(self.lamda1)
        a -= z
        a /= d
        xp.abs(z, out=d)
        a *= d > t(self.lamda1)
        target.assign(a)
