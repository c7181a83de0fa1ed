"""``Trainer``: applies an optimizer to a set of parameters after ``backward``.

``step(batch_size)`` rescales gradients by ``1 / batch_size`` (losses return per-sample
values whose sum was differentiated) and updates every parameter with ``grad_req`` other
than ``"null"``, in place on the backend arrays, so compiled graphs that read the
parameters see the new values without rebinding anything. Parameters of one dtype and device
are updated together, one ufunc call per optimizer op and cache-sized chunk (``multi_tensor.py``).
"""
from __future__ import annotations

import copy
import math
import re

import numpy as np

from ..buffer import bump
from ..errors import GraphFormatError, LazyArrayError, ParamError, ParamValueError, ShapeError
from ..storage import RowSparse
from .multi_tensor import FlatGroup, NotFlat, flat_ok
from .optimizer import SGD, Adam, Optimizer, create
from .param_file import load_arrays, write_arrays
from .parameter import Parameter

__all__ = ["SGD", "Adam", "Optimizer", "StaleGradientError", "Trainer"]


class StaleGradientError(LazyArrayError, RuntimeError):
    """``Trainer.step`` found a gradient that no ``backward()`` wrote since the last step."""


class Trainer:
    """Updates ``params`` (a dict from ``collect_params()`` or a list) with an optimizer: an
    ``Optimizer`` or a registered name, any case (``la.blocks.optimizer.OPTIMIZERS``: sgd nag adam
    adamw rmsprop adagrad adadelta adamax nadam lamb lars signum ftrl) made with ``optimizer_params``.
    Each parameter's ``lr_mult`` / ``wd_mult`` multiply the rate and weight decay of its updates.

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
        elif isinstance(params, Parameter):
            params = [params]
        elif not isinstance(params, (list, tuple)):
            raise ParamError(f"Trainer: params must be the parameters to train (e.g. net.collect_params(), or a "
                             f"list of Parameters), got {type(params).__name__}")
        self._params: list[Parameter] = []
        for p in params:
            if not isinstance(p, Parameter):
                raise ParamError(f"Trainer: expected Parameters (e.g. net.collect_params()), got {type(p).__name__}")
            if all(p is not q for q in self._params):
                self._params.append(p)
        if isinstance(optimizer, Optimizer):
            self._optimizer = optimizer
        else:
            if not isinstance(optimizer_params, (dict, type(None))):
                raise ParamError(f"Trainer: optimizer_params must be a dict of settings, got "
                                 f"{type(optimizer_params).__name__}")
            optimizer_params = dict(optimizer_params or {})
            sched = optimizer_params.get("lr_scheduler")
            if sched is not None and "learning_rate" in optimizer_params:
                if getattr(sched, "base_lr", None) != optimizer_params["learning_rate"]:
                    sched.base_lr = optimizer_params["learning_rate"]  # as MXNet: the optimizer's rate wins
            self._optimizer = create(optimizer, **optimizer_params)
        sched = self._optimizer.lr_scheduler
        if sched is not None and not callable(sched):
            raise ParamValueError(f"Trainer: lr_scheduler must be callable as sched(num_update) -> lr (e.g. "
                                  f"la.lr_scheduler.FactorScheduler), got {type(sched).__name__}")
        self._states: dict[int, object] = {}
        self._steps = 0
        # multi-tensor layout (multi_tensor.py): the trainable parameters it was made for, their
        # flat groups (one per dtype and device) and the parameters updated one by one
        self._layout_key: tuple | None = None
        self._groups: list[FlatGroup] = []
        self._single: list[Parameter] = []
        # what a step needs while nothing changed since the last one (``_Plan``), else None
        self._plan: _Plan | None = None
        # mixed precision (``la.amp.init_trainer`` sets it): an object with
        # ``before_update(params, grads, rescale) -> factor | None`` (None: skip this update) and
        # ``after_update(params, skipped)``, called around every step; None: plain steps
        self.amp = None

    @property
    def params(self) -> list[Parameter]:
        """The parameters this trainer updates (a new list)."""
        return list(self._params)

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
        computed here. ``batch_size`` must be a finite positive number.

        With loss scaling (``la.amp.init_trainer``) the gradients are unscaled too, and a step whose
        gradients hold inf or NaN changes nothing (parameters, optimizer states, the update count);
        its gradients count as used, and the loss scale is lowered.
        """
        rescale = _rescale(batch_size)
        amp = self.amp
        if amp is None:
            self._update(rescale, ignore_stale_grad)
            return
        todo = [p for p in self._params if p.grad_req != "null" and p.initialized and p._grad_is_fresh()]
        grads = [p.grad()._materialize() for p in todo]
        factor = amp.before_update(todo, grads, rescale)
        if factor is None:
            for p in todo:
                p._take_grad()  # (used: the next step needs a new backward)
        else:
            self._update(factor, ignore_stale_grad)
        amp.after_update(todo, factor is None)

    def _update(self, rescale: float, ignore_stale_grad: bool) -> None:
        """``step`` once the gradients' factor ``rescale`` is known."""
        plan = self._plan
        if plan is not None:
            grads = plan.gather(self._params)
            if grads is not None:
                self._step_planned(plan, grads, rescale)
                return
            self._plan = None
        todo = [p for p in self._params if p.grad_req != "null" and p.initialized]
        fresh = {id(p) for p in todo if p._grad_is_fresh()}
        if len(fresh) < len(todo) and not ignore_stale_grad:
            stale = [p for p in todo if id(p) not in fresh]
            names = ", ".join(repr(p.name) for p in stale[:5]) + (" ..." if len(stale) > 5 else "")
            raise StaleGradientError(
                f"Trainer.step: the gradient of parameter(s) {names} was not written by a backward() since the "
                "last step (a part of the model not used this iteration, or a missing backward()); call "
                "step(batch_size, ignore_stale_grad=True) to skip such parameters")
        self._steps += 1
        opt = self._optimizer
        if opt.lr_scheduler is not None:
            opt.learning_rate = float(opt.lr_scheduler(self._steps))
        groups, single = self._layout(todo)
        flat = [self._step_group(group, fresh, rescale) for group in groups]
        for p in single:
            if id(p) in fresh:
                self._step_one(p, rescale)
        if groups and all(flat) and not single and len(fresh) == len(todo):
            self._plan = _Plan.make(self._params, groups)

    def _step_planned(self, plan: _Plan, grads: list, rescale: float) -> None:
        """``step`` when ``plan`` still holds (``_Plan.gather`` checked it): the same updates as the
        general path, in the same order, without its per-parameter bookkeeping."""
        self._steps += 1
        opt = self._optimizer
        if opt.lr_scheduler is not None:
            opt.learning_rate = float(opt.lr_scheduler(self._steps))
        at = 0
        for group, prepared in plan.groups:
            n = len(group.params)
            group.step_prepared(opt, prepared, grads[at:at + n], self._steps, rescale)
            at += n
        for leaf, w in plan.taken:
            leaf.fresh = False
            bump(w)

    def _step_one(self, p: Parameter, rescale: float) -> None:
        opt = self._optimizer
        weight, grad = p._take_grad()
        state = self._states.get(id(p))
        if state is None and id(p) not in self._states:
            state = self._states[id(p)] = opt.create_state_multi_precision(weight)
        opt.update(weight, grad, state, self._steps, rescale=rescale, xp=p._data.device.xp, lr_mult=p.lr_mult,
                   wd_mult=p.wd_mult)
        bump(weight)
        if p._copies:  # the same new value on every device
            p._sync_copies()

    def _step_group(self, group: FlatGroup, fresh: set, rescale: float) -> bool:
        """All parameters of ``group`` in a few flat calls; one by one (the same math) when some are
        skipped this step or a gradient is not a dense array of the group's dtype (then False)."""
        params = group.params
        done = params if len(fresh) >= len(params) and all(id(p) in fresh for p in params) else \
            [p for p in params if id(p) in fresh]
        taken = [p._take_grad() for p in done]
        weights = [w for w, _ in taken]
        grads = [g for _, g in taken]
        opt = self._optimizer
        flat = done is params and flat_ok(group, grads, weights)
        if flat:
            group.step(opt, grads, weights, self._steps, rescale)
        else:
            for p, w, g in zip(done, weights, grads):
                opt.update(w, g, self._states[id(p)], self._steps, rescale=rescale, xp=group.xp,
                           lr_mult=p.lr_mult, wd_mult=p.wd_mult)
        for p, w in zip(done, weights):
            bump(w)
            if p._copies:  # the same new value on every device
                flat = False
                p._sync_copies()
        return flat

    def _layout(self, todo: list[Parameter]) -> tuple[list[FlatGroup], list[Parameter]]:
        """The flat groups and the one-by-one parameters for ``todo`` (kept while they still fit)."""
        key = tuple(todo)
        if key == self._layout_key and all(g.matches(g.params) for g in self._groups):
            return self._groups, self._single
        opt = self._optimizer
        by_kind: dict[tuple, list[Parameter]] = {}
        single: list[Parameter] = []
        for p in todo:
            v = p._data._value
            if opt.multi_tensor and p.grad_stype == "default" and v.dtype.kind == "f" \
                    and not opt.uses_master(v):  # (float16 with master weights: one by one)
                by_kind.setdefault((v.dtype, p._data.device, p.lr_mult, p.wd_mult), []).append(p)
            else:
                single.append(p)
        groups = []
        for params in by_kind.values():
            try:
                groups.append(FlatGroup(params, opt, self._states))
            except NotFlat:
                single.extend(params)
        self._layout_key, self._groups, self._single = key, groups, single
        return groups, single

    def zero_grad(self) -> None:
        for p in self._params:
            p.zero_grad()

    # -- optimizer state files ----------------------------------------------------------------
    def save_states(self, path: str) -> None:
        """Write the optimizer state (momenta, Adam moments, the update count, the rate and the
        optimizer's other declared settings, ``Optimizer.hyper_params``) to ``path`` (safetensors,
        atomically; loading never runs code).

        ``load_states`` on a trainer over the same parameters (same order and shapes) continues
        exactly where this one stands. A schedule is not saved: pass the same one again.
        """

        arrays, kinds = {}, {}
        for i, p in enumerate(self._params):
            if id(p) not in self._states:
                continue
            state = self._states[id(p)]
            kinds[str(i)] = _state_kind(state)
            for j, a in enumerate(_state_parts(state)):
                arrays[f"{i}.{j}"] = np.ascontiguousarray(_host(a))
        opt = self._optimizer
        settings = {k: v for k, v in vars(opt).items() if k in opt.hyper_params
                    and (v is None or isinstance(v, (int, float)))}
        record = {"version": 1, "trainer": {
            "optimizer": type(opt).__name__, "num_update": self._steps, "settings": settings,
            "states": kinds, "shapes": [list(p.shape or ()) for p in self._params]}}
        write_arrays(path, arrays, record)

    def load_states(self, path: str) -> None:
        """Restore what ``save_states`` wrote: the parameters must be the same in number, order and
        shape, and the optimizer of the same kind.

        The file is data, checked in full before anything changes: settings must be among the
        optimizer's declared ``hyper_params`` and in their ranges, ``num_update`` a non-negative int,
        and each state of the kind and with the arrays this optimizer makes (``create_state``);
        anything else is a ``GraphFormatError`` naming the file and the field.
        """

        arrays, meta = load_arrays(path)
        rec = meta.get("trainer")
        where = f"Trainer.load_states({path!r})"
        if not isinstance(rec, dict) or not isinstance(rec.get("states"), dict) or \
                not isinstance(rec.get("settings"), dict) or "num_update" not in rec:
            raise GraphFormatError(f"{where}: not a trainer state file (written by Trainer.save_states)")
        unknown = sorted(set(rec) - _RECORD_FIELDS)
        if unknown:
            raise GraphFormatError(f"{where}: unknown field(s) {unknown} in the trainer record; a state file "
                                   f"holds only {sorted(_RECORD_FIELDS)} (write it with Trainer.save_states)")
        opt = self._optimizer
        if rec.get("optimizer") != type(opt).__name__:
            raise ParamValueError(f"{where}: the file holds {rec.get('optimizer')} state but this trainer "
                                  f"uses {type(opt).__name__}; create the trainer with the same optimizer")
        shapes = [list(p.shape or ()) for p in self._params]
        if rec.get("shapes") != shapes:
            raise ShapeError(f"{where}: the file was saved for parameters of shapes {rec.get('shapes')}, "
                             f"this trainer has {shapes}; load it into a trainer over the same parameters")
        steps = rec["num_update"]
        if not isinstance(steps, int) or isinstance(steps, bool) or not 0 <= steps < 2**63:
            raise GraphFormatError(f"{where}: field 'num_update' must be a non-negative int (the number of "
                                   f"updates made), got {steps!r}"[:300])
        settings = _checked_settings(where, opt, rec["settings"])
        probe = copy.copy(opt)  # the optimizer as it will be: its states take the file's settings
        for k, v in settings.items():
            setattr(probe, k, v)
        states = self._checked_states(where, probe, rec["states"], arrays)
        # everything checked: only now does the trainer change
        for k, v in settings.items():
            setattr(opt, k, v)
        self._states = states
        self._steps = steps
        self._layout_key = None  # the flat groups take the loaded states in at the next step
        self._plan = None

    def _checked_states(self, where: str, probe: Optimizer, kinds: dict, arrays: dict) -> dict[int, object]:
        """The file's states as backend arrays, keyed like ``self._states``; each entry must be of the
        kind ``probe.create_state`` makes, with exactly its arrays, of the parameter's shape."""
        states: dict[int, object] = {}
        claimed: set[str] = set()
        expected: dict[tuple, tuple[str, int]] = {}
        for key, kind in kinds.items():
            field = f"field 'states' entry {key!r}"[:200]
            if not isinstance(key, str) or not re.fullmatch(r"0|[1-9][0-9]{0,8}", key) or \
                    int(key) >= len(self._params):
                raise GraphFormatError(f"{where}: {field}: a state is keyed by the index of its parameter "
                                       f"(0 to {len(self._params) - 1})")
            p = self._params[int(key)]
            if p._data is None:
                raise ParamValueError(f"{where}: parameter {p.name!r} is not initialized; call "
                                      "net.initialize() (or load_parameters) before load_states")
            dtype = np.dtype(p.dtype)
            sig = (tuple(p.shape), dtype)
            if sig not in expected:  # what this optimizer makes for such a parameter
                made = probe.create_state_multi_precision(np.broadcast_to(np.zeros((), dtype), p.shape))
                expected[sig] = (_state_kind(made), [np.dtype(a.dtype) for a in _state_parts(made)])
            want_kind, want_dtypes = expected[sig]
            want_n = len(want_dtypes)
            if kind != want_kind:
                raise GraphFormatError(f"{where}: {field} has kind {kind!r}"[:300] + f", but {type(probe).__name__} "
                                       f"with these settings keeps a state of kind {want_kind!r} for parameter "
                                       f"{p.name!r}; write the file with Trainer.save_states")
            names = [f"{key}.{j}" for j in range(want_n)]
            missing = [n for n in names if n not in arrays]
            if missing:
                raise GraphFormatError(f"{where}: {field} of kind {kind!r} needs the arrays {names}; "
                                       f"{missing} are missing")
            parts = []
            xp = p._data.device.xp
            for n, want in zip(names, want_dtypes):
                a = arrays[n]
                if list(a.shape) != list(p.shape):
                    raise ShapeError(f"{where}: state {n} has shape {a.shape}, the parameter "
                                     f"{p.name!r} is {p.shape}")
                if a.dtype.kind != want.kind:
                    raise GraphFormatError(f"{where}: state array {n!r} has dtype {a.dtype}, the parameter "
                                           f"{p.name!r} is {dtype}; a state holds numbers of its parameter's kind")
                parts.append(xp.array(a, dtype=want))
            claimed.update(names)
            states[id(p)] = None if kind == "none" else tuple(parts) if kind == "tuple" else parts[0]
        stray = sorted(set(arrays) - claimed)
        if stray:
            raise GraphFormatError(f"{where}: array(s) {stray[:5]} belong to no state of field 'states'; "
                                   "write the file with Trainer.save_states")
        return states


_RECORD_FIELDS = frozenset({"optimizer", "num_update", "settings", "states", "shapes"})


def _checked_settings(where: str, opt: Optimizer, settings: dict) -> dict:
    """A state file's ``settings``, each one a declared hyper-parameter of ``opt`` within its range."""
    declared = opt.hyper_params
    for k, v in settings.items():
        spec = declared.get(k)
        if spec is None:
            raise GraphFormatError(f"{where}: field 'settings' names {k!r}"[:300] + f", which is not a "
                                   f"setting of {type(opt).__name__} (its settings: {', '.join(declared)}); "
                                   "declare it in the optimizer's hyper_params, or remove it from the file")
        problem = spec.problem(v)
        if problem is not None:
            raise GraphFormatError(f"{where}: field 'settings' entry {k!r} {problem}")
    return settings


def _state_kind(state) -> str:
    return "none" if state is None else "tuple" if isinstance(state, tuple) else "array"


def _state_parts(state) -> list:
    return [] if state is None else list(state) if isinstance(state, tuple) else [state]


def _rescale(batch_size) -> float:
    """``1 / batch_size``, for a finite positive ``batch_size`` (NaN would reach every weight)."""
    if batch_size.__class__ is int and 0 < batch_size < 1 << 62:  # (the common case, first: every step)
        return 1.0 / batch_size
    if isinstance(batch_size, (bool, np.bool_)) or not isinstance(batch_size, (int, float, np.integer, np.floating)):
        raise ParamError(f"Trainer.step: batch_size must be a number (the samples the loss was summed "
                         f"over), got {type(batch_size).__name__} {batch_size!r}"[:300])
    try:
        rescale = 1.0 / batch_size if batch_size > 0 else math.nan
        ok = math.isfinite(batch_size) and batch_size > 0 and math.isfinite(rescale)
    except OverflowError:  # (an int beyond float range)
        ok = False
    if not ok:
        raise ParamValueError(f"Trainer.step: batch_size must be a finite positive number (the samples the "
                              f"loss was summed over, e.g. step(len(labels))), got {batch_size!r}")
    return rescale


class _Plan:
    """A trainer's step while nothing changed since the last one: every trainable parameter in a
    flat group, each updated with a fresh dense gradient of its weight's shape and dtype, on one
    device. It keeps, per parameter, the objects the general path would look up again (its value
    array, its autograd leaf) and each group's weights cut into chunks (``FlatGroup.prepare``).

    ``gather`` checks at every step that it still holds, parameter by parameter, before anything
    is changed: the same value array (not replaced: ``set_data`` of a new array, ``cast``, a
    re-initialization) of the same shape, dtype and layout, the same leaf (``grad_req`` changes
    make a new one), the same ``grad_req`` for every parameter (trainable or not), no copies on
    other devices, and a fresh gradient. Anything else returns None: the trainer drops the plan
    and takes the general path (which raises on stale gradients, regroups, updates one by one).
    The optimizer's settings are not part of it: the learning rate and the rest are read at every
    update as on the general path; ``load_states`` drops the plan.
    """

    __slots__ = ("checks", "rows", "groups", "taken")

    def __init__(self, checks, rows, groups, taken):
        self.checks, self.rows, self.groups, self.taken = checks, rows, groups, taken

    @classmethod
    def make(cls, params: list[Parameter], groups: list[FlatGroup]) -> _Plan:
        checks = tuple((p, p._data, p._grad_req, p.lr_mult, p.wd_mult) for p in params)
        rows, plans, taken = [], [], []
        for group in groups:
            weights = []
            for p in group.params:
                d = p._data
                v = d._value
                rows.append((p, d, v, d._ag, v.shape, v.dtype))
                taken.append((d._ag, v))
                weights.append(v)
            plans.append((group, group.prepare(weights)))
        return cls(checks, tuple(rows), tuple(plans), tuple(taken))

    def gather(self, params: list[Parameter]) -> list | None:
        """This step's gradient arrays (in the groups' order), or None when the plan no longer holds."""
        checks = self.checks
        if len(params) != len(checks):
            return None
        for p, (q, d, req, lr_mult, wd_mult) in zip(params, checks):
            if p is not q or p._data is not d or p._grad_req != req or p.lr_mult != lr_mult or p.wd_mult != wd_mult:
                return None
        grads = []
        for p, d, v, leaf, shape, dtype in self.rows:
            if d._value is not v or d._ag is not leaf or p._copies or not leaf.fresh or v.shape != shape \
                    or v.dtype != dtype or not v.flags.c_contiguous:
                return None
            g = leaf.grad
            g = None if g is None else g._value
            if g is None or isinstance(g, RowSparse) or g.shape != shape or g.dtype != dtype:
                return None  # (a lazy gradient is computed by the general path)
            grads.append(g)
        return grads


def _host(a) -> np.ndarray:
    """A backend array (NumPy or CuPy) as a NumPy array."""
    return a if isinstance(a, np.ndarray) else a.get()
