"""The optimizer base: declared hyper-parameters, the update protocol and the registry of names.

An optimizer's math lives in ``apply(target, g, state, step, xp, scratch, lr, wd)``: ``g`` is the
rescaled gradient (the optimizer may overwrite it), ``state`` what ``create_state`` made, ``lr`` and
``wd`` the rate and weight decay of these parameters (the optimizer's, times the parameters'
``lr_mult`` / ``wd_mult``), and ``target`` the weights, reached only through their ``dtype`` and a
few operations (``times``, ``isub``, ``iadd``, ``imul``, ``assign``). ``update`` (one parameter)
hands it the weight itself; ``Trainer.step`` hands it a whole group of parameters at once
(``multi_tensor.FlatGroup``): ``g``, the states and the scratch buffers are then one flat array each,
so every step of the update is one large ufunc call instead of one per parameter, and only the
reads and writes of the weights go parameter by parameter. Both run the same ufuncs with the same
scalars in the same order, so the results are bit for bit the same. An optimizer whose update needs
whole parameters (the norms of LAMB and LARS) says ``whole_tensor = True`` and always gets ``One``.

Each optimizer declares its hyper-parameters (``hyper_params``: name -> ``HyperParam``, a range of
real numbers or a flag): assigning one checks it (a ``ParamValueError`` naming the optimizer, the
setting and the value), ``Trainer.save_states`` writes them, and ``Trainer.load_states`` accepts a
state file's settings only when every one is declared and in range.

``multi_precision=True`` keeps a float32 master copy of every float16 weight in the state (first
part): the update runs on the master copy in float32 and the weight receives it rounded to float16.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ...errors import LazyArrayError, ParamError, ParamValueError
from ...storage import RowSparse


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

    def imul(self, c) -> None:
        self.w *= c

    def assign(self, x) -> None:
        self.w[...] = x


class Fresh:
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
    ``high`` (an end excluded when ``low_open`` / ``high_open``), or also ``None`` when ``optional``;
    with ``flag=True`` a bool instead.

    >>> HyperParam(0.0, 1.0, high_open=True).problem(1.0)
    'must be a finite number in [0.0, 1.0), got 1.0'
    >>> HyperParam(flag=True).problem(1)
    'must be a bool (True or False), got 1'
    """

    low: float = -math.inf
    high: float = math.inf
    high_open: bool = False
    optional: bool = False
    low_open: bool = False
    flag: bool = False

    def describe(self) -> str:
        if self.flag:
            return "a bool (True or False)"
        if self.high == math.inf:
            text = "a finite number" if self.low == -math.inf else \
                f"a finite number {'>' if self.low_open else '>='} {self.low}"
        else:
            text = f"a finite number in {'(' if self.low_open else '['}{self.low}, {self.high}" \
                   f"{')' if self.high_open else ']'}"
        return f"None or {text}" if self.optional else text

    def problem(self, value) -> str | None:
        """None when ``value`` fits, else what is wrong with it (for an error message)."""
        if self.flag:
            return None if isinstance(value, bool) else f"must be {self.describe()}, got {value!r}"[:200]
        if value is None and self.optional:
            return None
        try:
            ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) \
                and (self.low < value if self.low_open else self.low <= value) \
                and (value < self.high if self.high_open else value <= self.high)
        except OverflowError:  # (an int beyond float range)
            ok = False
        return None if ok else f"must be {self.describe()}, got {value!r}"[:200]

    def is_type_problem(self, value) -> bool:
        """True when ``value`` is not even of the kind asked for (a string for a number)."""
        if self.flag:
            return not isinstance(value, bool)
        if value is None:
            return not self.optional
        return isinstance(value, bool) or not isinstance(value, (int, float))


RATE = HyperParam(0.0)  # a learning rate, a weight decay, an epsilon: finite, >= 0
BETA = HyperParam(0.0, 1.0, high_open=True)  # a decay of a moving average, a momentum: [0, 1)
FLAG = HyperParam(flag=True)

# Optimizer names (lower case) -> classes: the one piece of module state, filled by ``register``.
OPTIMIZERS: dict[str, type] = {}


def register(cls: type) -> type:
    """Class decorator: ``Trainer(params, "name")`` finds ``cls`` by its lower-case class name."""
    OPTIMIZERS[cls.__name__.lower()] = cls
    return cls


def create(name: str, **params) -> Optimizer:
    """The optimizer registered as ``name`` (any case, as Gluon), made with ``params``.

    >>> type(create("AdamW", learning_rate=0.01)).__name__
    'AdamW'
    """
    cls = OPTIMIZERS.get(name.lower()) if isinstance(name, str) else None
    if cls is None:
        raise ParamValueError(f"unknown optimizer {name!r}"[:200] + f"; one of {', '.join(sorted(OPTIMIZERS))}")
    try:
        return cls(**params)
    except LazyArrayError:  # (a setting checked by the optimizer: its own message)
        raise
    except TypeError as exc:  # (an unknown keyword)
        raise ParamValueError(f"bad optimizer_params for {name!r}: {exc}; {cls.__name__} takes "
                              f"{', '.join(cls.hyper_params)}") from None


class Optimizer:
    """Base class. Subclasses implement ``create_state(weight)`` and ``apply`` (see the module
    docstring); such an optimizer updates all parameters of a ``Trainer`` in a few large calls.
    A subclass may instead override ``update(weight, grad, state, step, rescale, xp, lr_mult,
    wd_mult)`` (in place on backend arrays); the trainer then calls it once per parameter.

    ``hyper_params`` declares the settings (checked when assigned, and what a state file may hold:
    ``Trainer.save_states`` / ``load_states``); a subclass with settings of its own extends it, e.g.
    ``hyper_params = {**SGD.hyper_params, "dampening": HyperParam(0.0, 1.0)}``."""

    hyper_params: dict[str, HyperParam] = {
        "learning_rate": RATE, "wd": RATE, "clip_gradient": HyperParam(0.0, optional=True),
        "multi_precision": FLAG}
    whole_tensor = False  # True: ``apply`` needs whole parameters (``One``), never flat groups

    def __init__(self, learning_rate: float = 0.01, wd: float = 0.0, clip_gradient: float | None = None,
                 lr_scheduler=None, multi_precision: bool = False):
        self.learning_rate, self.wd, self.clip_gradient = learning_rate, wd, clip_gradient
        self.multi_precision = multi_precision
        # a callable num_update -> lr (la.lr_scheduler); when set it decides the rate of every update
        self.lr_scheduler = lr_scheduler

    def __setattr__(self, name: str, value) -> None:
        spec = type(self).hyper_params.get(name)
        if spec is not None:
            if not spec.flag and isinstance(value, (np.floating, np.integer)):
                value = value.item()
            problem = spec.problem(value)
            if problem is not None:
                err = ParamError if spec.is_type_problem(value) else ParamValueError
                raise err(f"{type(self).__name__}: {name} {problem}")
        object.__setattr__(self, name, value)

    def create_state(self, weight):
        return None

    def create_state_multi_precision(self, weight):
        """``create_state``, or with ``multi_precision`` and a float16 weight ``(master, *state)``:
        a float32 copy of the weight, then the parts of the state made for that copy."""
        if not self.uses_master(weight):
            return self.create_state(weight)
        master = weight.astype(np.float32)
        return (master, *_parts(self.create_state(master)))

    def uses_master(self, weight) -> bool:
        return self.multi_precision and weight.dtype == np.float16

    @property
    def multi_tensor(self) -> bool:
        """True when the trainer may update many parameters in one call of ``apply``."""
        cls = type(self)
        return cls.update is Optimizer.update and cls.apply is not Optimizer.apply and not cls.whole_tensor

    def apply(self, target, g, state, step: int, xp, scratch, lr: float, wd: float) -> None:
        raise NotImplementedError(f"{type(self).__name__}: implement apply(...) or update(...)")

    def scale(self, rescale: float, dtype, lr: float | None = None) -> tuple:
        """``(factor, folded)``: the gradient is multiplied by ``factor`` (a ``dtype`` scalar) before
        ``apply``; ``folded=True`` says the factor holds the rate ``lr`` too, and ``apply`` is
        then called with ``folded=True`` (only optimizers that accept it say so)."""
        return dtype.type(rescale), False

    def update(self, weight, grad, state, step: int, rescale: float = 1.0, xp=None, lr_mult: float = 1.0,
               wd_mult: float = 1.0) -> None:
        """One parameter, in place: ``weight`` and ``state`` are backend arrays, ``grad`` one too or a
        ``RowSparse`` (then only its rows are updated)."""
        xp = np if xp is None else xp
        lr, wd = self.learning_rate * lr_mult, self.wd * wd_mult
        if self.uses_master(weight):
            if isinstance(grad, RowSparse):
                raise ParamValueError(f"{type(self).__name__}: multi_precision with row_sparse gradients is "
                                      "not supported; use a dense gradient or multi_precision=False")
            master, inner = state[0], self._inner_state(state[1:])
            self._update_dense(master, grad.astype(np.float32), inner, step, rescale, xp, lr, wd)
            weight[...] = master
            return
        if isinstance(grad, RowSparse):
            self.update_rows(weight, grad, state, step, rescale, xp, lr, wd)
            return
        self._update_dense(weight, grad, state, step, rescale, xp, lr, wd)

    def _update_dense(self, weight, grad, state, step, rescale, xp, lr, wd) -> None:
        factor, folded = self.scale(rescale, weight.dtype, lr)
        g = grad * factor
        if folded:
            self.apply(One(weight, xp), g, state, step, xp, Fresh(g, xp), lr, wd, folded=True)
        else:
            self.apply(One(weight, xp), g, state, step, xp, Fresh(g, xp), lr, wd)

    def _inner_state(self, parts: tuple):
        """The state ``create_state`` makes, from its parts (after the master copy)."""
        made = self.create_state(np.zeros((), np.float32))
        return None if made is None else tuple(parts) if isinstance(made, tuple) else parts[0]

    def update_rows(self, weight, grad: RowSparse, state, step, rescale, xp, lr, wd) -> None:
        raise ParamValueError(f"{type(self).__name__}: row_sparse gradients are not supported; use a dense "
                              "gradient (grad_stype='default') or SGD / Adam")

    def _clip(self, g, xp) -> None:
        if self.clip_gradient is not None:
            xp.clip(g, -self.clip_gradient, self.clip_gradient, out=g)

    def _clip_and_decay(self, target, g, xp, scratch, wd: float) -> None:
        """``g = clip(g) + wd * w`` in place (weight decay as an L2 term of the loss)."""
        self._clip(g, xp)
        if wd:
            g += target.times(target.dtype.type(wd), scratch(0))


def _parts(state) -> tuple:
    return () if state is None else tuple(state) if isinstance(state, tuple) else (state,)
