"""``Trainer``: applies an optimizer to a set of parameters after ``backward``.

``step(batch_size)`` rescales gradients by ``1 / batch_size`` (losses return per-sample
values whose sum was differentiated) and updates every parameter with ``grad_req`` other
than ``"null"``, in place on the backend arrays, so compiled graphs that read the
parameters see the new values without rebinding anything.
"""
from __future__ import annotations

import math

from ..buffer import bump
from ..errors import LazyArrayError, ParamValueError
from ..ops.sparse_kernels import adam_rows, sgd_rows
from ..storage import RowSparse
from .parameter import Parameter


class Optimizer:
    """Base class: ``update(index, weight, grad, state)`` works on backend arrays in place."""

    def __init__(self, learning_rate: float = 0.01, wd: float = 0.0, clip_gradient: float | None = None):
        self.learning_rate, self.wd, self.clip_gradient = learning_rate, wd, clip_gradient

    def create_state(self, weight):
        return None

    def update(self, weight, grad, state, step: int) -> None:
        raise NotImplementedError

    def _prepare(self, weight, grad, rescale: float, xp):
        g = grad * weight.dtype.type(rescale)
        if self.clip_gradient is not None:
            g = xp.clip(g, -self.clip_gradient, self.clip_gradient, out=g)
        if self.wd:
            g += weight.dtype.type(self.wd) * weight
        return g


class SGD(Optimizer):
    """``v = momentum * v - lr * (g + wd * w); w += v`` (plain SGD when momentum is 0)."""

    def __init__(self, learning_rate: float = 0.01, momentum: float = 0.0, wd: float = 0.0,
                 clip_gradient: float | None = None):
        super().__init__(learning_rate, wd, clip_gradient)
        self.momentum = momentum

    def create_state(self, weight):
        return weight * 0 if self.momentum else None

    def update(self, weight, grad, state, step, rescale=1.0, xp=None):
        if isinstance(grad, RowSparse):  # lazy update: only the rows the gradient stores
            sgd_rows(xp, weight, grad.indices, grad.data, self.learning_rate, self.wd, rescale,
                     self.clip_gradient, self.momentum, state)
            return
        g = self._prepare(weight, grad, rescale, xp)
        lr = weight.dtype.type(self.learning_rate)
        if state is None:
            g *= lr
            weight -= g
        else:
            state *= weight.dtype.type(self.momentum)
            g *= lr
            state -= g
            weight += state


class Adam(Optimizer):
    """Adam (Kingma & Ba) with bias correction folded into the step size, as in MXNet."""

    def __init__(self, learning_rate: float = 0.001, beta1: float = 0.9, beta2: float = 0.999,
                 epsilon: float = 1e-8, wd: float = 0.0, clip_gradient: float | None = None):
        super().__init__(learning_rate, wd, clip_gradient)
        self.beta1, self.beta2, self.epsilon = beta1, beta2, epsilon

    def create_state(self, weight):
        return (weight * 0, weight * 0)

    def update(self, weight, grad, state, step, rescale=1.0, xp=None):
        if isinstance(grad, RowSparse):  # lazy update: weight, mean and var only at the stored rows
            lr = self.learning_rate * math.sqrt(1 - self.beta2 ** step) / (1 - self.beta1 ** step)
            adam_rows(xp, weight, grad.indices, grad.data, state[0], state[1], lr, self.beta1, self.beta2,
                      self.epsilon, self.wd, rescale, self.clip_gradient)
            return
        g = self._prepare(weight, grad, rescale, xp)
        mean, var = state
        t = weight.dtype.type
        mean *= t(self.beta1)
        mean += t(1 - self.beta1) * g
        var *= t(self.beta2)
        var += t(1 - self.beta2) * g * g
        lr = self.learning_rate * math.sqrt(1 - self.beta2 ** step) / (1 - self.beta1 ** step)
        weight -= t(lr) * mean / (xp.sqrt(var) + t(self.epsilon))


class StaleGradientError(LazyArrayError, RuntimeError):
    """``Trainer.step`` found a gradient that no ``backward()`` wrote since the last step."""


_OPTIMIZERS = {"sgd": SGD, "adam": Adam}


class Trainer:
    """Updates ``params`` (a dict from ``collect_params()`` or a list) with an optimizer.

    >>> import lazyarray as la
    >>> net = la.blocks.Dense(1, in_units=2); net.initialize()
    >>> trainer = la.blocks.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1})
    >>> x = la.ones((4, 2))
    >>> with la.autograd.record():
    ...     loss = la.blocks.L2Loss()(net(x), la.zeros((4, 1)))
    >>> loss.backward(); trainer.step(4)
    """

    def __init__(self, params, optimizer: str | Optimizer = "sgd", optimizer_params: dict | None = None):
        if isinstance(params, dict):
            params = list(params.values())
        self._params: list[Parameter] = []
        for p in params:
            if not isinstance(p, Parameter):
                raise TypeError(f"Trainer: expected Parameters (e.g. net.collect_params()), got {type(p).__name__}")
            if all(p is not q for q in self._params):
                self._params.append(p)
        if isinstance(optimizer, Optimizer):
            self._optimizer = optimizer
        else:
            cls = _OPTIMIZERS.get(str(optimizer).lower())
            if cls is None:
                raise ParamValueError(f"Trainer: unknown optimizer {optimizer!r}; one of {sorted(_OPTIMIZERS)}")
            try:
                self._optimizer = cls(**(optimizer_params or {}))
            except TypeError as exc:
                raise ParamValueError(f"Trainer: bad optimizer_params for {optimizer!r}: {exc}") from None
        self._states: dict[int, object] = {}
        self._steps = 0

    @property
    def learning_rate(self) -> float:
        return self._optimizer.learning_rate

    def set_learning_rate(self, lr: float) -> None:
        self._optimizer.learning_rate = lr

    def step(self, batch_size: int, ignore_stale_grad: bool = False) -> None:
        """One update of every trainable parameter with gradients scaled by ``1 / batch_size``.

        Each gradient is used once: a parameter whose gradient no ``backward()`` has written since
        the last step (stale) raises ``StaleGradientError``, unless ``ignore_stale_grad=True``,
        which skips it (as Gluon does). Lazy gradients (a backward inside deferred compute) are
        computed here.
        """
        todo = [p for p in self._params if p.grad_req != "null" and p.initialized]
        stale = [p for p in todo if not p._grad_is_fresh()]
        if stale and not ignore_stale_grad:
            names = ", ".join(repr(p.name) for p in stale[:5]) + (" ..." if len(stale) > 5 else "")
            raise StaleGradientError(
                f"Trainer.step: the gradient of parameter(s) {names} was not written by a backward() since the "
                "last step (a part of the model not used this iteration, or a missing backward()); call "
                "step(batch_size, ignore_stale_grad=True) to skip such parameters")
        self._steps += 1
        rescale = 1.0 / batch_size
        opt = self._optimizer
        for p in todo:
            if not p._grad_is_fresh():
                continue
            weight, grad = p._take_grad()
            state = self._states.get(id(p))
            if state is None and id(p) not in self._states:
                state = self._states[id(p)] = opt.create_state(weight)
            opt.update(weight, grad, state, self._steps, rescale=rescale, xp=p.data().device.xp)
            bump(weight)

    def zero_grad(self) -> None:
        for p in self._params:
            p.zero_grad()
