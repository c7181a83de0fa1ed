"""``Trainer``: applies an optimizer to a set of parameters after ``backward``.

``step(batch_size)`` rescales gradients by ``1 / batch_size`` (losses return per-sample
values whose sum was differentiated) and updates every parameter with ``grad_req`` other
than ``"null"``, in place on the backend arrays, so compiled graphs that read the
parameters see the new values without rebinding anything.
"""
from __future__ import annotations

import math

import numpy as np

from ..buffer import bump
from ..errors import GraphFormatError, LazyArrayError, ParamValueError, ShapeError
from ..ops.sparse_kernels import adam_rows, sgd_rows
from ..storage import RowSparse
from .parameter import Parameter


class Optimizer:
    """Base class: ``update(index, weight, grad, state)`` works on backend arrays in place."""

    def __init__(self, learning_rate: float = 0.01, wd: float = 0.0, clip_gradient: float | None = None,
                 lr_scheduler=None):
        self.learning_rate, self.wd, self.clip_gradient = learning_rate, wd, clip_gradient
        # a callable num_update -> lr (la.lr_scheduler); when set it decides the rate of every update
        self.lr_scheduler = lr_scheduler

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
                 clip_gradient: float | None = None, lr_scheduler=None):
        super().__init__(learning_rate, wd, clip_gradient, lr_scheduler)
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
                 epsilon: float = 1e-8, wd: float = 0.0, clip_gradient: float | None = None,
                 lr_scheduler=None):
        super().__init__(learning_rate, wd, clip_gradient, lr_scheduler)
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

    Parameters initialized on several devices are updated once with the sum of their copies'
    gradients, and the new value is written into every copy (data parallelism on one host).

    ``optimizer_params`` may hold ``"lr_scheduler"`` (a ``la.lr_scheduler`` schedule): it then
    sets the rate of every update (``sched(num_update)``, counting from 1), and an explicit
    ``"learning_rate"`` becomes the schedule's ``base_lr``.

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
            optimizer_params = dict(optimizer_params or {})
            sched = optimizer_params.get("lr_scheduler")
            if sched is not None and "learning_rate" in optimizer_params:
                if getattr(sched, "base_lr", None) != optimizer_params["learning_rate"]:
                    sched.base_lr = optimizer_params["learning_rate"]  # as MXNet: the optimizer's rate wins
            try:
                self._optimizer = cls(**optimizer_params)
            except TypeError as exc:
                raise ParamValueError(f"Trainer: bad optimizer_params for {optimizer!r}: {exc}") from None
        sched = self._optimizer.lr_scheduler
        if sched is not None and not callable(sched):
            raise ParamValueError(f"Trainer: lr_scheduler must be callable as sched(num_update) -> lr (e.g. "
                                  f"la.lr_scheduler.FactorScheduler), got {type(sched).__name__}")
        self._states: dict[int, object] = {}
        self._steps = 0

    @property
    def optimizer(self) -> Optimizer:
        return self._optimizer

    @property
    def learning_rate(self) -> float:
        """The rate of the last update (with a schedule: ``sched(num_update)``)."""
        sched = self._optimizer.lr_scheduler
        return sched(self._steps) if sched is not None else self._optimizer.learning_rate

    def set_learning_rate(self, lr: float) -> None:
        """Set the rate of the following updates (not allowed when a schedule decides it)."""
        if self._optimizer.lr_scheduler is not None:
            raise ParamValueError(
                "Trainer.set_learning_rate: this trainer has an lr_scheduler, which sets the rate of every "
                "update; change the schedule (e.g. sched.base_lr = lr) instead")
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
        if opt.lr_scheduler is not None:
            opt.learning_rate = float(opt.lr_scheduler(self._steps))
        for p in todo:
            if not p._grad_is_fresh():
                continue
            weight, grad = p._take_grad()
            state = self._states.get(id(p))
            if state is None and id(p) not in self._states:
                state = self._states[id(p)] = opt.create_state(weight)
            opt.update(weight, grad, state, self._steps, rescale=rescale, xp=p._data.device.xp)
            bump(weight)
            if p._copies:  # the same new value on every device
                p._sync_copies()

    def zero_grad(self) -> None:
        for p in self._params:
            p.zero_grad()

    # -- optimizer state files ----------------------------------------------------------------
    def save_states(self, path: str) -> None:
        """Write the optimizer state (momenta, Adam moments, the update count, the rate and the
        optimizer's settings) to ``path`` (safetensors, atomically; loading never runs code).

        ``load_states`` on a trainer over the same parameters (same order and shapes) continues
        exactly where this one stands. A schedule is not saved: pass the same one again.
        """
        from .param_file import write_arrays

        arrays, kinds = {}, {}
        for i, p in enumerate(self._params):
            if id(p) not in self._states:
                continue
            state = self._states[id(p)]
            parts = [] if state is None else list(state) if isinstance(state, tuple) else [state]
            kinds[str(i)] = "none" if state is None else "tuple" if isinstance(state, tuple) else "array"
            for j, a in enumerate(parts):
                arrays[f"{i}.{j}"] = np.ascontiguousarray(_host(a))
        opt = self._optimizer
        settings = {k: v for k, v in vars(opt).items()
                    if k != "lr_scheduler" and (v is None or isinstance(v, (int, float)))}
        record = {"version": 1, "trainer": {
            "optimizer": type(opt).__name__, "num_update": self._steps, "settings": settings,
            "states": kinds, "shapes": [list(p.shape or ()) for p in self._params]}}
        write_arrays(path, arrays, record)

    def load_states(self, path: str) -> None:
        """Restore what ``save_states`` wrote: the parameters must be the same in number, order and
        shape, and the optimizer of the same kind."""
        from .param_file import load_arrays

        arrays, meta = load_arrays(path)
        rec = meta.get("trainer")
        where = f"Trainer.load_states({path!r})"
        if not isinstance(rec, dict) or not isinstance(rec.get("states"), dict) or \
                not isinstance(rec.get("num_update"), int) or not isinstance(rec.get("settings"), dict):
            raise GraphFormatError(f"{where}: not a trainer state file (written by Trainer.save_states)")
        opt = self._optimizer
        if rec.get("optimizer") != type(opt).__name__:
            raise ParamValueError(f"{where}: the file holds {rec.get('optimizer')} state but this trainer "
                                  f"uses {type(opt).__name__}; create the trainer with the same optimizer")
        shapes = [list(p.shape or ()) for p in self._params]
        if rec.get("shapes") != shapes:
            raise ShapeError(f"{where}: the file was saved for parameters of shapes {rec.get('shapes')}, "
                             f"this trainer has {shapes}; load it into a trainer over the same parameters")
        states: dict[int, object] = {}
        for key, kind in rec["states"].items():
            if not key.isdigit() or int(key) >= len(self._params) or kind not in ("none", "tuple", "array"):
                raise GraphFormatError(f"{where}: bad state entry {key!r}: {kind!r}")
            p = self._params[int(key)]
            xp = p._data.device.xp
            parts = []
            while f"{key}.{len(parts)}" in arrays:
                a = arrays[f"{key}.{len(parts)}"]
                if list(a.shape) != list(p.shape):
                    raise ShapeError(f"{where}: state {key}.{len(parts)} has shape {a.shape}, the parameter "
                                     f"{p.name!r} is {p.shape}")
                parts.append(xp.array(a, dtype=p.dtype))
            states[id(p)] = None if kind == "none" else tuple(parts) if kind == "tuple" else parts[0]
        for k, v in rec["settings"].items():
            if hasattr(opt, k) and k != "lr_scheduler":
                setattr(opt, k, v)
        self._states = states
        self._steps = rec["num_update"]


def _host(a) -> np.ndarray:
    """A backend array (NumPy or CuPy) as a NumPy array."""
    return a if isinstance(a, np.ndarray) else a.get()
