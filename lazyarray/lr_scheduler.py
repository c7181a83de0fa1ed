"""``la.lr_scheduler``: learning-rate schedules, MXNet ``mx.lr_scheduler`` semantics.

A schedule is a callable ``sched(num_update) -> lr``; ``num_update`` counts optimizer updates
from 1 (the first ``Trainer.step`` asks for ``sched(1)``). Pass one to a trainer with
``Trainer(params, "sgd", {"learning_rate": 0.1, "lr_scheduler": sched})``.

Every schedule takes a warmup: for ``num_update < warmup_steps`` the rate rises linearly from
``warmup_begin_lr`` to ``base_lr`` (``warmup_mode="linear"``) or stays at ``warmup_begin_lr``
(``"constant"``). Unlike MXNet's, these schedules keep no hidden counters: the rate is a pure
function of ``num_update`` and the attributes, so a resumed run (``Trainer.load_states``) and
a run that never stopped get the same rates.

>>> import lazyarray as la
>>> sched = la.lr_scheduler.FactorScheduler(step=2, factor=0.5, base_lr=1.0)
>>> [sched(t) for t in range(1, 7)]
[1.0, 1.0, 0.5, 0.5, 0.25, 0.25]
"""
from __future__ import annotations

import math

from .args import choice_arg, int_arg, number_arg
from .errors import ParamValueError

__all__ = ["CosineScheduler", "FactorScheduler", "LRScheduler", "MultiFactorScheduler", "PolyScheduler"]


class LRScheduler:
    """Base class: ``base_lr`` and the warmup; subclasses define ``after_warmup(num_update)``.

    >>> import lazyarray as la
    >>> s = la.lr_scheduler.LRScheduler(base_lr=0.5, warmup_steps=4, warmup_begin_lr=0.1)
    >>> round(s(2), 6), s(4)
    (0.3, 0.5)
    """

    def __init__(self, base_lr: float = 0.01, warmup_steps: int = 0, warmup_begin_lr: float = 0,
                 warmup_mode: str = "linear"):
        name = type(self).__name__
        base_lr = number_arg(base_lr, name, "base_lr", lo=0)
        warmup_steps = int_arg(warmup_steps, name, "warmup_steps", lo=0)
        warmup_begin_lr = number_arg(warmup_begin_lr, name, "warmup_begin_lr", lo=0)
        choice_arg(warmup_mode, name, "warmup_mode", ("linear", "constant"))
        if warmup_steps and warmup_begin_lr > base_lr:
            raise ParamValueError(f"{name}: warmup_begin_lr ({warmup_begin_lr}) must not exceed base_lr "
                                  f"({base_lr}); the warmup rises to base_lr")
        self.base_lr = base_lr
        self.warmup_steps = int(warmup_steps)
        self.warmup_begin_lr = warmup_begin_lr
        self.warmup_mode = warmup_mode

    def get_warmup_lr(self, num_update: int) -> float:
        """The rate during warmup (``num_update < warmup_steps``)."""
        if self.warmup_mode == "constant":
            return self.warmup_begin_lr
        return self.warmup_begin_lr + (self.base_lr - self.warmup_begin_lr) * num_update / self.warmup_steps

    def __call__(self, num_update: int) -> float:
        if num_update < self.warmup_steps:
            return self.get_warmup_lr(num_update)
        return self.after_warmup(num_update)

    def after_warmup(self, num_update: int) -> float:
        return self.base_lr

    def __repr__(self) -> str:
        fields = ", ".join(f"{k}={v!r}" for k, v in vars(self).items())
        return f"{type(self).__name__}({fields})"


class FactorScheduler(LRScheduler):
    """``base_lr * factor ** k`` after every ``step`` updates (``k = (num_update - 1) // step``),
    never below ``stop_factor_lr``.

    >>> import lazyarray as la
    >>> s = la.lr_scheduler.FactorScheduler(step=10, factor=0.1, base_lr=1.0, stop_factor_lr=0.05)
    >>> s(10), round(s(11), 6), s(25)
    (1.0, 0.1, 0.05)
    """

    def __init__(self, step: int, factor: float = 1, stop_factor_lr: float = 1e-8, base_lr: float = 0.01,
                 warmup_steps: int = 0, warmup_begin_lr: float = 0, warmup_mode: str = "linear"):
        super().__init__(base_lr, warmup_steps, warmup_begin_lr, warmup_mode)
        step = int_arg(step, "FactorScheduler", "step (updates between decays)", lo=1)
        factor = number_arg(factor, "FactorScheduler", "factor (<= 1 decays the rate)", lo=0, hi=1, lo_open=True)
        stop_factor_lr = number_arg(stop_factor_lr, "FactorScheduler", "stop_factor_lr", lo=0)
        self.step, self.factor, self.stop_factor_lr = int(step), factor, stop_factor_lr

    def after_warmup(self, num_update: int) -> float:
        k = max(0, (num_update - 1) // self.step)
        return max(self.base_lr * self.factor ** k, self.stop_factor_lr) if k else self.base_lr


class MultiFactorScheduler(LRScheduler):
    """``base_lr * factor ** k`` where ``k`` counts the entries of ``step`` below ``num_update``.

    >>> import lazyarray as la
    >>> s = la.lr_scheduler.MultiFactorScheduler(step=[2, 5], factor=0.5, base_lr=1.0)
    >>> [s(t) for t in range(1, 8)]
    [1.0, 1.0, 0.5, 0.5, 0.5, 0.25, 0.25]
    """

    def __init__(self, step: list, factor: float = 1, base_lr: float = 0.01, warmup_steps: int = 0,
                 warmup_begin_lr: float = 0, warmup_mode: str = "linear"):
        super().__init__(base_lr, warmup_steps, warmup_begin_lr, warmup_mode)
        step = list(step) if isinstance(step, (list, tuple)) else None
        if step is not None:
            step = [int_arg(s, "MultiFactorScheduler", "each step", lo=1) for s in step]
        if not step or any(s < 1 for s in step) or any(b <= a for a, b in zip(step, step[1:])):
            raise ParamValueError(f"MultiFactorScheduler: step must be a non-empty increasing list of "
                                  f"positive update counts, e.g. [1000, 2000], got {step!r}")
        factor = number_arg(factor, "MultiFactorScheduler", "factor (<= 1 decays the rate)", lo=0, hi=1, lo_open=True)
        self.step, self.factor = [int(s) for s in step], factor

    def after_warmup(self, num_update: int) -> float:
        k = sum(1 for s in self.step if num_update > s)
        return self.base_lr * self.factor ** k


class PolyScheduler(LRScheduler):
    """``final_lr + (base_lr - final_lr) * (1 - t / T) ** pwr`` over ``T = max_update - warmup_steps``.

    >>> import lazyarray as la
    >>> s = la.lr_scheduler.PolyScheduler(max_update=10, base_lr=1.0, pwr=1)
    >>> s(5), s(10), s(20)
    (0.5, 0.0, 0.0)
    """

    def __init__(self, max_update: int, base_lr: float = 0.01, pwr: float = 2, final_lr: float = 0,
                 warmup_steps: int = 0, warmup_begin_lr: float = 0, warmup_mode: str = "linear"):
        super().__init__(base_lr, warmup_steps, warmup_begin_lr, warmup_mode)
        _check_max_update(self, max_update)
        pwr = number_arg(pwr, "PolyScheduler", "pwr", lo=0, lo_open=True)
        final_lr = number_arg(final_lr, "PolyScheduler", "final_lr", lo=0)
        self.max_update, self.power, self.final_lr = int(max_update), pwr, final_lr

    def after_warmup(self, num_update: int) -> float:
        t = min(num_update, self.max_update) - self.warmup_steps
        frac = 1 - t / (self.max_update - self.warmup_steps)
        return self.final_lr + (self.base_lr - self.final_lr) * frac ** self.power


class CosineScheduler(LRScheduler):
    """Half a cosine from ``base_lr`` down to ``final_lr`` over the updates after the warmup, up to
    ``max_update``; ``final_lr`` after that.

    >>> import lazyarray as la
    >>> s = la.lr_scheduler.CosineScheduler(max_update=10, base_lr=1.0, final_lr=0.0)
    >>> s(0), round(s(5), 6), s(10)
    (1.0, 0.5, 0.0)
    """

    def __init__(self, max_update: int, base_lr: float = 0.01, final_lr: float = 0, warmup_steps: int = 0,
                 warmup_begin_lr: float = 0, warmup_mode: str = "linear"):
        super().__init__(base_lr, warmup_steps, warmup_begin_lr, warmup_mode)
        _check_max_update(self, max_update)
        final_lr = number_arg(final_lr, "CosineScheduler", "final_lr", lo=0)
        self.max_update, self.final_lr = int(max_update), final_lr

    def after_warmup(self, num_update: int) -> float:
        t = min(num_update, self.max_update) - self.warmup_steps
        cos = (1 + math.cos(math.pi * t / (self.max_update - self.warmup_steps))) / 2
        return self.final_lr + (self.base_lr - self.final_lr) * cos


def _check_max_update(sched: LRScheduler, max_update) -> None:
    if not isinstance(max_update, int) or max_update < 1 or max_update <= sched.warmup_steps:
        raise ParamValueError(f"{type(sched).__name__}: max_update must be an int >= 1 and greater than "
                              f"warmup_steps ({sched.warmup_steps}), got {max_update!r}")
